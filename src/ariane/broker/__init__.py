"""The broker: serves the RocketMQ 5 gRPC protocol for its own queues (DESIGN.md §6).

Layout (its layers are contracts in ``.importlinter``), top to bottom:

* ``server`` (``BrokerServer``, the composition root) and ``__main__``;
* ``grpc`` (thin gRPC adapters), ``services`` (background loops), ``metrics_view``;
* ``runtime`` (the store and tables one broker process serves from);
* ``processors`` (protocol-neutral send, consume, routes, long polling);
* ``pop`` (POP consumption state, its journal, ``PopService``);
* ``tables`` (topics, groups, offsets, clients) and ``filters`` (tag and SQL92);
* ``config`` and ``settings``.

The pure packages are imported here; import modules, not their names.
"""

from ariane.broker import filters, pop, settings, tables

__all__ = ["filters", "pop", "settings", "tables"]
