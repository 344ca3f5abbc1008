"""Replication settings of one broker (RocketMQ ``MessageStoreConfig`` HA fields), validated once.

One frozen dataclass the broker's settings tree includes as ``[ha]``; every limit names its unit
last and gives the RocketMQ field and default it mirrors.
"""

from __future__ import annotations

import dataclasses
import enum

from ariane.common import limits

DEFAULT_HA_PORT = 10912
"""RocketMQ ``haListenPort`` (the Remoting port 10911 + 1)."""


class BrokerRole(enum.Enum):
    """A broker's role in its group (RocketMQ ``BrokerRole``)."""

    ASYNC_MASTER = "ASYNC_MASTER"
    """Acknowledges after the local write (and flush, per ``flush_disk_type``)."""
    SYNC_MASTER = "SYNC_MASTER"
    """Acknowledges only once ``min_in_sync_replicas`` replicas hold the bytes; refuses an
    append before storing it while fewer are in sync."""
    SLAVE = "SLAVE"
    """Replicates from the master and refuses writes."""

    @property
    def is_master(self) -> bool:
        """Whether this role accepts writes."""
        return self is not BrokerRole.SLAVE


@dataclasses.dataclass(frozen=True, slots=True)
class HASettings:
    """Roles and the HA stream."""

    broker_role: BrokerRole | None = None
    """This broker's role at start (``brokerRole``); ``None`` (the default) = an ASYNC_MASTER
    without an HA port, a lone broker. Any role given opens the HA port."""

    ha_listen: str = f"127.0.0.1:{DEFAULT_HA_PORT}"
    """``HOST:PORT`` the HA port binds (``haListenPort`` = 10912); port 0 picks a free one;
    empty = no HA port (a lone broker)."""

    ha_advertise: str = ""
    """``HOST:PORT`` registered with the name servers as this broker's HA address, the one its
    slaves dial (RocketMQ ``brokerIP2``, with a port here: a proxy or NAT in front of the HA
    port); empty = derived from ``ha_listen`` and the bound port."""

    master_ha: str = ""
    """A slave's master HA address ``HOST:PORT``; empty = the one the name server reports
    (RocketMQ ``haMasterAddress`` / the registration's ``haServerAddr``)."""

    transfer_batch_bytes: int = 32 * 1024
    """Most CommitLog bytes in one TRANSFER frame (``haTransferBatchSize`` = 32 KiB)."""

    heartbeat_interval_ms: int = 5_000
    """Longest silence on an idle HA connection before a REPORT or an empty TRANSFER
    (``haSendHeartbeatInterval`` = 5 s)."""

    housekeeping_interval_ms: int = 20_000
    """A connection silent this long is dropped (``haHousekeepingInterval`` = 20 s)."""

    max_gap_not_in_sync_bytes: int = 256 * 1024 * 1024
    """A slave further behind than this does not count as in sync (``haMaxGapNotInSync``)."""

    min_in_sync_replicas: int = 2
    """SYNC_MASTER: how many replicas, this master counted, must be in sync for an append to
    be accepted, and so how many must hold its bytes before it is acked (RocketMQ
    ``minInSyncReplicas``, counted with the master as RocketMQ does). Checked BEFORE the
    append: with fewer connected in-sync replicas the send is refused with
    IN_SYNC_REPLICAS_NOT_ENOUGH (v2 ``HA_NOT_AVAILABLE``, Remoting ``SYSTEM_ERROR``) and
    nothing is stored, so a client's retries make no copies. Default 2 (RocketMQ's is 1):
    a SYNC_MASTER needs an in-sync slave, as ``SYNC_MASTER`` has always meant here, so a
    slave promoted with no slave left refuses writes until one is in sync. 1 lets a lone
    SYNC_MASTER take writes, acked after its own write (and flush) while no slave is in
    sync, and after one in-sync slave's report while one is. ASYNC_MASTER ignores it."""

    sync_waiters_max: int = 65_536
    """SYNC_MASTER: most appends waiting for a slave at once; beyond → OS_PAGE_CACHE_BUSY."""

    reconnect_interval_ms: int = 1_000
    """A slave's wait before connecting again after the connection dropped."""

    lease_ms: int = 10_000
    """How long a master may acknowledge writes after a renewal a majority of its name servers
    answered, ms, counted from when the renewal was sent (``store.ha.lease``; renewals go every
    ``lease_ms / 3`` at most, with the 1 s heartbeat). Applies to a master started with a
    ``broker_role`` and at least one name server; a lone broker (no role) keeps no lease and
    keeps acknowledging through a name-server outage. A promotion waits this long after the
    name servers last heard the old master, so failover takes at least ``lease_ms``. 10 s:
    three missed renewals, well below RocketMQ's 120 s broker expiry. 0 = no lease (unsafe: a
    paused old master acknowledges writes after a failover until it meets the newer epoch)."""

    rejoin_as_slave: bool = True
    """A master that a name server refuses for a stale epoch (a failover promoted another broker
    while it was down or paused) demotes itself to a slave of the group's current master, with
    the broker id the refusal names, and cuts its diverged tail on connect (RocketMQ 5's
    controller mode, where a restarted old master is told to become a slave of the new one).
    Never while its lease is held, never to a master it is not told of, and never a promotion.
    False: it only fences itself and waits for ``ChangeRole`` (the behaviour before)."""

    @property
    def role(self) -> BrokerRole:
        """The role at start, ASYNC_MASTER when none is configured."""
        return self.broker_role or BrokerRole.ASYNC_MASTER

    @property
    def keeps_lease(self) -> bool:
        """Whether a master keeps a lease (a role is configured and ``lease_ms`` > 0)."""
        return self.replicates and self.lease_ms > 0

    @property
    def replicates(self) -> bool:
        """Whether the broker runs the HA port (a role was configured)."""
        return self.broker_role is not None

    def __post_init__(self) -> None:
        limits.check_range("transfer_batch_bytes", self.transfer_batch_bytes, 1024, 64 << 20)
        limits.check_range("heartbeat_interval_ms", self.heartbeat_interval_ms, 10, 60_000)
        limits.check_range(
            "housekeeping_interval_ms",
            self.housekeeping_interval_ms,
            2 * self.heartbeat_interval_ms,
            600_000,
        )
        limits.check_range("max_gap_not_in_sync_bytes", self.max_gap_not_in_sync_bytes, 1, 1 << 50)
        limits.check_range("min_in_sync_replicas", self.min_in_sync_replicas, 1, 16)
        limits.check_range("sync_waiters_max", self.sync_waiters_max, 1, 10_000_000)
        limits.check_range("reconnect_interval_ms", self.reconnect_interval_ms, 10, 60_000)
        if self.lease_ms:
            limits.check_range("lease_ms", self.lease_ms, 300, 600_000)
        for address in (self.ha_listen, self.ha_advertise, self.master_ha):
            if address:
                split_address(address)


def split_address(address: str) -> tuple[str, int]:
    """``HOST:PORT`` → (host, port).

    Raises:
        ValueError: not ``HOST:PORT`` with a port in 0..65535.
    """
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(f"{address!r} is not HOST:PORT")
    return host, int(port)
