"""Benchmark drivers (not tests): each prints a table and records results in bench/results/."""
