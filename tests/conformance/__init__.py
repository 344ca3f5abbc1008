"""Conformance tests: official RocketMQ clients in subprocesses against real Ariane processes."""
