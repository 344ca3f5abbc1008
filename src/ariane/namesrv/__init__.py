"""The name server: RocketMQ's route registry, serving routes over the v2 protocol.

Modules: ``route_info_manager`` (the pure route tables), ``service`` (the gRPC servicers),
``server`` (``NameServer``, the composition root), ``__main__`` (``ariane namesrv``).
Brokers register with every name server every 30 s; a broker silent for 120 s is dropped; clients
use the name server as their access point for ``QueryRoute`` and ``RecallMessage``.
"""

from ariane.namesrv import route_info_manager, server, service

__all__ = ["route_info_manager", "server", "service"]
