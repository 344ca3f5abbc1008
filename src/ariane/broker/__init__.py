"""The broker: serves the RocketMQ 5 gRPC protocol for its own queues (DESIGN.md §6).

Pure, I/O-free core (this package so far): ``topic_config`` (topic table), ``subscriptions``
(consumer-group configs and retry policies), ``offsets`` (committed consumer offsets),
``receipt`` (receipt-handle codec), ``pop`` (invisible-time bookkeeping), ``fifo`` (FIFO
delivery order), ``filters`` (tag and SQL92 filters), ``long_polling`` (parking of receive
requests), ``persistence`` (atomic JSON metadata files) and ``settings``. Import the modules,
not their names.
"""

from ariane.broker import (
    fifo,
    filters,
    long_polling,
    offsets,
    persistence,
    pop,
    receipt,
    settings,
    subscriptions,
    topic_config,
)

__all__ = [
    "fifo",
    "filters",
    "long_polling",
    "offsets",
    "persistence",
    "pop",
    "receipt",
    "settings",
    "subscriptions",
    "topic_config",
]
