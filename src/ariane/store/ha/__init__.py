"""Replication of a broker group's CommitLog from master to slaves (RocketMQ ``store.ha``).

Standard library only. ``frames`` is the wire format (pure), ``epochs`` the epoch history and the
truncation rule, ``service.HAService`` the master side and the ack rule of roles,
``client.HAClient`` the slave side, ``lease.MasterLease`` the master's write lease (renewed
through the name servers), ``settings`` the ``[ha]`` table. The pure failover decision
is ``ariane.common.promotion`` (the operator calls it, and may not import the store).
"""

from ariane.store.ha import client, epochs, frames, lease, service, settings
from ariane.store.ha.settings import BrokerRole, HASettings

__all__ = [
    "BrokerRole",
    "HASettings",
    "client",
    "epochs",
    "frames",
    "lease",
    "service",
    "settings",
]
