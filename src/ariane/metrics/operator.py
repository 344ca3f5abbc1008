"""The operator's own metrics: reconciliations run, failed, and how long they took.

Unlike the broker's, these are counted where they happen (a reconciliation is rare and slow, so
a labelled counter costs nothing that matters). They live in one private registry per
``OperatorMetrics``, served by ``serve``; the operator's handlers hold the one instance.
"""

from __future__ import annotations

import prometheus_client
from prometheus_client import registry


class OperatorMetrics:
    """``ariane_operator_reconciliations_total{kind}``, ``…_failed_total{kind}`` and the
    ``ariane_operator_reconciliation_duration_seconds{kind}`` histogram (kind = the CR kind)."""

    def __init__(self) -> None:
        self.registry = registry.CollectorRegistry(auto_describe=True)
        self.reconciles = prometheus_client.Counter(
            "ariane_operator_reconciliations",
            "Reconciliations run",
            ["kind"],
            registry=self.registry,
        )
        self.failures = prometheus_client.Counter(
            "ariane_operator_reconciliations_failed",
            "Reconciliations that failed",
            ["kind"],
            registry=self.registry,
        )
        self.duration = prometheus_client.Histogram(
            "ariane_operator_reconciliation_duration_seconds",
            "Reconciliation duration",
            ["kind"],
            registry=self.registry,
        )

    def serve(self, port: int, host: str = "0.0.0.0") -> None:
        """Serve ``/metrics`` on ``host:port`` in a daemon thread for the process's life.

        Raises:
            OSError: the port cannot be bound.
        """
        prometheus_client.start_http_server(port, addr=host, registry=self.registry)
