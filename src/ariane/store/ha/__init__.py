"""Replication of a broker group's CommitLog from master to slaves (RocketMQ ``store.ha``).

Standard library only. ``frames`` is the wire format (pure), ``epochs`` the epoch history and the
truncation rule, ``promotion`` the pure failover decision, ``service.HAService`` the master side
and the ack rule of roles, ``client.HAClient`` the slave side, ``settings`` the ``[ha]`` table.
"""

from ariane.store.ha import client, epochs, frames, promotion, service, settings
from ariane.store.ha.settings import BrokerRole, HASettings

__all__ = [
    "BrokerRole",
    "HASettings",
    "client",
    "epochs",
    "frames",
    "promotion",
    "service",
    "settings",
]
