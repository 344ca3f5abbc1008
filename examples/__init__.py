"""Runnable examples: the flights pipeline of `make run`, sample manifests."""
