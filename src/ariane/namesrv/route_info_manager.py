"""The name server's route tables (RocketMQ ``RouteInfoManager``): pure, no I/O, injected clock.

Tables, all bounded by ``RouteSettings``:

* topic queue table: topic → broker name → ``QueueData`` (read/write queue counts, perm, and the
  topic's message type);
* broker addr table: broker name → cluster and members by broker id (id 0 = master) with their
  client endpoint and HA address;
* cluster addr table: cluster → broker names;
* broker live table: (broker name, broker id) → last update (monotonic ms for expiry, wall ms for
  display) and data version;
* group epoch table: broker name → the highest epoch any member of the group registered or
  heartbeated with (DESIGN.md §7); it outlives the group's members, so a stale master that comes
  back after its group expired here is still refused (bounded by ``group_epochs_max``).

Invariants:

* Only a master (broker id 0) registration changes topic routes, and it replaces its group's
  topic configs as a whole: a topic missing from the registration loses that broker group, and a
  topic left with no broker group disappears (RocketMQ 5 ``registerBroker``).
* A broker silent for ``broker_channel_expired_ms`` (120 s) or longer is removed by
  ``scan_not_active_brokers``; removing a group's last member removes the group from every topic.
* Every answer lists broker groups sorted by name, so every name server answers identically for
  the same registrations.
* Epochs (the fence of a stale master): a master (broker id 0) registering or heartbeating with an
  epoch older than its group's is refused with ``StaleEpochError`` (PRECONDITION_FAILED, carrying
  the group's epoch and current master) and changes nothing; the stale master fences itself
  (``broker.services.registration``) and rejoins the group as a slave with the id the refusal
  names (``rejoin_broker_id``: the lowest id above 0 no member holds). When a group's epoch
  grows, an id-0 entry of an older epoch is dropped at once (a newer master replaces it, or a
  slave showed the newer epoch first), so routes and cluster info only ever list the master of
  the highest epoch seen. RocketMQ 5's
  name server has no epochs: its controller mode keeps them in the controller instead, and a
  paused old master re-registering as id 0 takes its group's route back until the next
  registration of the new one.
* In-sync reports (issue 25): a master's registration or heartbeat may carry its
  ``promotion.InSyncReport``; the group keeps the latest one of its master with the monotonic
  time it arrived and lists it (with ``heard_ago_ms``) only while its epoch is the group's; a
  slave's ``ha_link_address`` is kept per member. A failover matches the two
  (``client.failover``). Both are bounded: ``promotion.REPLICAS_MAX`` entries per report.
* When a bound would be exceeded the request is refused with TOO_MANY_REQUESTS and no table
  changes (registrations are validated fully before anything is written).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from ariane.common import clock as clock_module
from ariane.common import errors, ids, message, promotion, route, topics

PERM_BITS_MAX = int(route.Perm.PRIORITY | route.Perm.READ | route.Perm.WRITE | route.Perm.INHERIT)
"""Highest valid perm value (all four RocketMQ ``PermName`` bits)."""


@dataclasses.dataclass(frozen=True, slots=True)
class RouteSettings:
    """Bounds and timing of the route tables."""

    broker_channel_expired_ms: int = 120_000
    """Silence after which a broker is dropped (``DEFAULT_BROKER_CHANNEL_EXPIRED_TIME``)."""

    topics_max: int = 100_000
    """Topics the name server holds; a registration adding more is refused."""

    broker_groups_max: int = 1_024
    """Broker groups (broker names) the name server holds."""

    members_per_group_max: int = 16
    """Brokers (master plus slaves) per broker group."""

    topic_configs_per_registration_max: int = 100_000
    """Topic configs one registration may carry."""

    queue_nums_max: int = 1_024
    """Largest read or write queue count of one topic on one broker group."""

    group_epochs_max: int = 4_096
    """Broker groups whose epoch is remembered (present ones and ones whose members all
    expired); beyond it the epochs of groups no longer present are forgotten, oldest first."""

    def __post_init__(self) -> None:
        for name in (
            "broker_channel_expired_ms",
            "topics_max",
            "broker_groups_max",
            "members_per_group_max",
            "topic_configs_per_registration_max",
            "queue_nums_max",
            "group_epochs_max",
        ):
            value = getattr(self, name)
            if not 1 <= value <= 10_000_000:
                raise ValueError(f"{name} must be 1..10000000, not {value}")


@dataclasses.dataclass(frozen=True, slots=True)
class RegisteredTopic:
    """A topic as one broker group registers it: the fields of RocketMQ ``TopicConfig`` that
    routes use (the broker's full config is ``broker.tables.topic_config.TopicConfig``).

    Attributes:
        topic: topic name.
        read_queue_nums: queues consumers read.
        write_queue_nums: queues producers write.
        perm: RocketMQ perm bits (READ 4, WRITE 2, INHERIT 1).
        message_type: what the topic accepts.
    """

    topic: ids.TopicName
    read_queue_nums: int
    write_queue_nums: int
    perm: int
    message_type: message.MessageType


@dataclasses.dataclass(frozen=True, slots=True)
class BrokerRegistration:
    """One broker's registration (RocketMQ ``REGISTER_BROKER``).

    Attributes:
        cluster: cluster name.
        broker_name: broker group name.
        broker_id: 0 for the master, above 0 for slaves.
        client_address: ``host:port`` of the gRPC endpoint clients dial.
        ha_address: ``host:port`` of the HA port.
        data_version: grows whenever the broker's topic configs change.
        topic_configs: the group's complete topic configs (used from masters only).
        remoting_address: ``host:port`` of its Remoting endpoint (classic clients), or "" while
            it serves none: Remoting routes leave such a broker out.
        epoch: the newest epoch of the broker's CommitLog (0: a broker without replication).
        lease_ms: the master lease the broker keeps through the name servers, ms (0: none).
        in_sync_report: a master's in-sync set (``None``: none sent).
        ha_link_address: a slave's HA connection's local ``host:port`` ("" when none).
    """

    cluster: ids.ClusterName
    broker_name: ids.BrokerName
    broker_id: ids.BrokerId
    client_address: str
    ha_address: str
    data_version: int
    topic_configs: tuple[RegisteredTopic, ...]
    remoting_address: str = ""
    epoch: int = 0
    lease_ms: int = 0
    in_sync_report: promotion.InSyncReport | None = None
    ha_link_address: str = ""


@dataclasses.dataclass(frozen=True, slots=True)
class QueueData:
    """A topic's queues on one broker group (RocketMQ ``QueueData`` plus the message type)."""

    broker_name: ids.BrokerName
    read_queue_nums: int
    write_queue_nums: int
    perm: int
    message_type: message.MessageType


@dataclasses.dataclass(frozen=True, slots=True)
class BrokerMember:
    """One live broker of a group.

    Attributes:
        broker_id: 0 = master.
        client_address: ``host:port`` of its gRPC endpoint.
        ha_address: ``host:port`` of its HA port.
        data_version: the data version it last sent.
        last_update_ms: wall time of its last registration or heartbeat, ms since the epoch.
        remoting_address: ``host:port`` of its Remoting endpoint, or "" if it serves none.
        epoch: the epoch it registered with.
        lease_ms: the master lease it keeps, ms (0: none).
        heard_ago_ms: monotonic time since its last registration or heartbeat here, ms.
        ha_link_address: a slave's HA connection's local ``host:port`` ("" when none).
    """

    broker_id: ids.BrokerId
    client_address: str
    ha_address: str
    data_version: int
    last_update_ms: ids.TimestampMs
    remoting_address: str = ""
    epoch: int = 0
    lease_ms: int = 0
    heard_ago_ms: int = 0
    ha_link_address: str = ""


@dataclasses.dataclass(frozen=True, slots=True)
class BrokerGroup:
    """A broker group (RocketMQ ``BrokerData``): its cluster and members sorted by broker id,
    and its master's latest in-sync report at the group's epoch (``None``: none heard)."""

    cluster: ids.ClusterName
    broker_name: ids.BrokerName
    members: tuple[BrokerMember, ...]
    in_sync_report: promotion.InSyncReport | None = None

    def master(self) -> BrokerMember | None:
        """The member with broker id 0, or ``None`` while the group has no master."""
        return next((m for m in self.members if m.broker_id == ids.MASTER_BROKER_ID), None)

    def as_broker_data(self) -> route.BrokerData:
        """The ``ariane.common.route.BrokerData`` of this group."""
        addrs = {m.broker_id: m.client_address for m in self.members}
        return route.BrokerData(self.cluster, self.broker_name, addrs)


class StaleEpochError(errors.PreconditionFailedError):
    """A master (broker id 0) registered or heartbeated with an epoch older than its group's.

    Attributes:
        group_epoch: the highest epoch the name server has seen in the group.
        master: the group's current master, if one is registered.
        rejoin_broker_id: the slave id the stale master rejoins as (``rejoin_broker_id``).
    """

    def __init__(
        self,
        message: str,
        *,
        group_epoch: int,
        master: BrokerMember | None,
        rejoin_broker_id: int = 1,
    ) -> None:
        super().__init__(message)
        self.group_epoch = group_epoch
        self.master = master
        self.rejoin_broker_id = rejoin_broker_id


def rejoin_broker_id(held: Iterable[int]) -> int:
    """The lowest broker id above 0 not in ``held`` (the ids of a group's members): the id a
    stale master takes when it rejoins as a slave. A promotion frees the promoted slave's id, so
    this is the id ``client.failover.promote`` gives a demoted master (the promoted broker's)
    and, on Kubernetes, the one the old master's pod gets from the roles ConfigMap at its next
    start (``broker.__main__.role_by_ordinal``) whenever slave ids are dense."""
    taken = set(held)
    return next(broker_id for broker_id in range(1, len(taken) + 2) if broker_id not in taken)


@dataclasses.dataclass(frozen=True, slots=True)
class TopicRoute:
    """Where a topic lives (RocketMQ ``TopicRouteData``); both lists sorted by broker name."""

    topic: ids.TopicName
    queue_datas: tuple[QueueData, ...]
    broker_groups: tuple[BrokerGroup, ...]


@dataclasses.dataclass(slots=True)
class _Live:
    last_update_monotonic_ms: int
    last_update_ms: ids.TimestampMs
    data_version: int


@dataclasses.dataclass(frozen=True, slots=True)
class _Addresses:
    client: str
    ha: str
    remoting: str
    epoch: int = 0
    lease_ms: int = 0
    ha_link: str = ""


@dataclasses.dataclass(slots=True)
class _Group:
    cluster: ids.ClusterName
    addrs: dict[ids.BrokerId, _Addresses]
    report: tuple[promotion.InSyncReport, int] | None = None
    """The master's latest in-sync report and the monotonic ms it arrived."""


class RouteInfoManager:
    """The route tables of one name server; every method runs in O(table size) without I/O.

    Args:
        settings: bounds and the expiry interval.
        clock: time source (``ManualClock`` in tests).
    """

    def __init__(self, *, settings: RouteSettings, clock: clock_module.Clock) -> None:
        self._settings = settings
        self._clock = clock
        self._topic_queue_table: dict[ids.TopicName, dict[ids.BrokerName, QueueData]] = {}
        self._broker_addr_table: dict[ids.BrokerName, _Group] = {}
        self._cluster_addr_table: dict[ids.ClusterName, set[ids.BrokerName]] = {}
        self._broker_live_table: dict[tuple[ids.BrokerName, ids.BrokerId], _Live] = {}
        self._group_epochs: dict[ids.BrokerName, int] = {}

    def register_broker(self, registration: BrokerRegistration) -> BrokerGroup:
        """Record a broker and, for a master, replace its group's topic configs.

        Mirrors ``RouteInfoManager.registerBroker``: a broker registering the client address
        another id of its group held (a slave promoted to master) replaces that entry. The
        group's epoch grows to the registration's; an id-0 entry of an older epoch is dropped.

        Returns:
            The broker's group after the registration (its master tells a slave where to
            replicate from).

        Raises:
            BadRequestError: for an empty cluster or broker name, a negative broker id, a
                negative epoch or lease, an illegal topic name or queue counts outside
                0..``queue_nums_max``.
            TooManyRequestsError: if a table bound would be exceeded; nothing is changed.
            StaleEpochError: a master with an epoch older than its group's; nothing is changed.
        """
        self._validate(registration)
        self._check_bounds(registration)
        name, broker_id = registration.broker_name, registration.broker_id
        self._check_epoch(name, broker_id, registration.epoch)
        self._raise_group_epoch(name, registration.epoch)
        group = self._broker_addr_table.get(name)
        if group is None:
            group = self._broker_addr_table[name] = _Group(registration.cluster, {})
        elif group.cluster != registration.cluster:
            self._cluster_addr_table.get(group.cluster, set()).discard(name)
            group.cluster = registration.cluster
        self._cluster_addr_table.setdefault(registration.cluster, set()).add(name)
        for other_id, addresses in list(group.addrs.items()):
            if other_id != broker_id and addresses.client == registration.client_address:
                del group.addrs[other_id]
                self._broker_live_table.pop((name, other_id), None)
        group.addrs[broker_id] = _Addresses(
            registration.client_address,
            registration.ha_address,
            registration.remoting_address,
            registration.epoch,
            registration.lease_ms,
            registration.ha_link_address,
        )
        self._record_in_sync(name, broker_id, registration.in_sync_report)
        self._touch(name, broker_id, registration.data_version)
        if broker_id == ids.MASTER_BROKER_ID:
            self._replace_topic_configs(name, registration.topic_configs)
        return self._group_view(name)

    def unregister_broker(
        self,
        *,
        cluster: ids.ClusterName,
        broker_name: ids.BrokerName,
        broker_id: ids.BrokerId,
        epoch: int = 0,
    ) -> bool:
        """Remove one broker at once (RocketMQ ``unregisterBroker``); ``False`` if unknown.

        The cluster name is checked so that a stale request for another cluster's group of the
        same name removes nothing, and the epoch so that a stale master leaving does not remove
        the id-0 entry of its successor (registered with a newer epoch).
        """
        group = self._broker_addr_table.get(broker_name)
        if group is None or group.cluster != cluster or broker_id not in group.addrs:
            return False
        if epoch < group.addrs[broker_id].epoch:
            return False
        self._remove_member(broker_name, broker_id)
        return True

    def heartbeat(
        self,
        *,
        cluster: ids.ClusterName,
        broker_name: ids.BrokerName,
        broker_id: ids.BrokerId,
        data_version: int,
        epoch: int = 0,
        in_sync_report: promotion.InSyncReport | None = None,
        ha_link_address: str = "",
    ) -> bool:
        """Refresh a registered broker's liveness (RocketMQ ``BROKER_HEARTBEAT``), and a
        master's in-sync report or a slave's HA link address when sent.

        A heartbeat with another epoch than the broker registered with refreshes nothing (the
        entry may be another broker's: a promoted slave heartbeating as id 0 before its
        registration arrived) and asks for a registration.

        Returns:
            ``True`` when the broker should register again because the name server holds a
            different data version or epoch.

        Raises:
            StaleEpochError: a master (id 0) with an epoch older than its group's (checked
                first, so a stale master learns it even after its entry was dropped).
            NotFoundError: if the broker is not registered here (it must register).
        """
        self._check_epoch(broker_name, broker_id, epoch)
        group = self._broker_addr_table.get(broker_name)
        live = self._broker_live_table.get((broker_name, broker_id))
        if group is None or group.cluster != cluster or live is None:
            raise errors.NotFoundError(
                f"broker {broker_name}/{broker_id} of cluster {cluster} is not registered"
            )
        if group.addrs[broker_id].epoch != epoch:
            return True
        held = live.data_version
        if ha_link_address:
            addresses = group.addrs[broker_id]
            group.addrs[broker_id] = dataclasses.replace(addresses, ha_link=ha_link_address)
        self._record_in_sync(broker_name, broker_id, in_sync_report)
        self._touch(broker_name, broker_id, held)
        return held != data_version

    def group_epoch(self, broker_name: ids.BrokerName) -> int:
        """The highest epoch seen in the group (0 when none is known)."""
        return self._group_epochs.get(broker_name, 0)

    def pickup_topic_route(self, topic: ids.TopicName) -> TopicRoute:
        """The route of a topic (RocketMQ ``pickupTopicRouteData``).

        Raises:
            TopicNotFoundError: if no broker group serves the topic.
        """
        by_broker = self._topic_queue_table.get(topic)
        if not by_broker:
            raise errors.TopicNotFoundError(f"topic {topic!r} is not served by any broker group")
        names = sorted(by_broker)
        groups = tuple(self._group_view(n) for n in names if n in self._broker_addr_table)
        return TopicRoute(topic, tuple(by_broker[n] for n in names), groups)

    def delete_topic(self, topic: ids.TopicName, cluster: ids.ClusterName | None = None) -> int:
        """Forget ``topic`` on the groups of ``cluster`` (every group when ``None``); returns
        how many groups served it (RocketMQ ``RouteInfoManager.deleteTopic``). A master that
        still has the topic lists it again at its next registration."""
        by_broker = self._topic_queue_table.get(topic)
        if not by_broker:
            return 0
        gone = [
            name
            for name in by_broker
            if cluster is None
            or (group := self._broker_addr_table.get(name)) is None
            or group.cluster == cluster
        ]
        for name in gone:
            self._remove_topic_broker(topic, name)
        return len(gone)

    def broker_group(self, broker_name: ids.BrokerName) -> BrokerGroup | None:
        """The group named ``broker_name``, or ``None`` if no member of it is registered."""
        if broker_name not in self._broker_addr_table:
            return None
        return self._group_view(broker_name)

    def cluster_info(self) -> tuple[BrokerGroup, ...]:
        """Every broker group, sorted by cluster then broker name."""
        views = [self._group_view(name) for name in self._broker_addr_table]
        return tuple(sorted(views, key=lambda g: (g.cluster, g.broker_name)))

    def topic_names(self) -> tuple[ids.TopicName, ...]:
        """Every topic some broker group serves, sorted."""
        return tuple(sorted(self._topic_queue_table))

    def scan_not_active_brokers(self) -> list[tuple[ids.BrokerName, ids.BrokerId]]:
        """Drop brokers silent for ``broker_channel_expired_ms`` or longer.

        Mirrors ``RouteInfoManager.scanNotActiveBroker`` (run every 5 s by the server).

        Returns:
            The (broker name, broker id) pairs removed, sorted.
        """
        now_ms = self._clock.monotonic_ms()
        expired = sorted(
            key
            for key, live in self._broker_live_table.items()
            if now_ms - live.last_update_monotonic_ms >= self._settings.broker_channel_expired_ms
        )
        for broker_name, broker_id in expired:
            self._remove_member(broker_name, broker_id)
        return expired

    def _touch(self, broker_name: ids.BrokerName, broker_id: ids.BrokerId, version: int) -> None:
        self._broker_live_table[(broker_name, broker_id)] = _Live(
            self._clock.monotonic_ms(), self._clock.now_ms(), version
        )

    def _check_epoch(self, name: ids.BrokerName, broker_id: ids.BrokerId, epoch: int) -> None:
        """Refuse a master whose epoch is older than its group's (nothing changes)."""
        group_epoch = self._group_epochs.get(name, 0)
        if broker_id != ids.MASTER_BROKER_ID or epoch >= group_epoch:
            return
        master = None
        group = self._broker_addr_table.get(name)
        if group is not None:
            master = self._group_view(name).master()
        where = f" at {master.client_address}" if master is not None else ""
        raise StaleEpochError(
            f"broker group {name} is at epoch {group_epoch} (master{where}); a master at epoch "
            f"{epoch} is stale and must not accept writes",
            group_epoch=group_epoch,
            master=master,
            rejoin_broker_id=rejoin_broker_id(group.addrs if group is not None else ()),
        )

    def _raise_group_epoch(self, name: ids.BrokerName, epoch: int) -> None:
        """Record a newer epoch and drop an id-0 entry of an older one."""
        if epoch <= self._group_epochs.get(name, 0):
            return
        self._group_epochs.pop(name, None)  # re-insert: the dict stays ordered by last change
        self._group_epochs[name] = epoch
        group = self._broker_addr_table.get(name)
        master = None if group is None else group.addrs.get(ids.MASTER_BROKER_ID)
        if master is not None and master.epoch < epoch:
            self._remove_member(name, ids.MASTER_BROKER_ID)
        excess = len(self._group_epochs) - self._settings.group_epochs_max
        for stale in [n for n in self._group_epochs if n not in self._broker_addr_table]:
            if excess <= 0:
                break
            if stale != name:
                del self._group_epochs[stale]
                excess -= 1

    def _record_in_sync(
        self, name: ids.BrokerName, broker_id: ids.BrokerId, report: promotion.InSyncReport | None
    ) -> None:
        """Keep a master's report (its epoch was checked: never older than the group's)."""
        if broker_id == ids.MASTER_BROKER_ID and report is not None:
            self._broker_addr_table[name].report = (report, self._clock.monotonic_ms())

    def _group_view(self, broker_name: ids.BrokerName) -> BrokerGroup:
        group = self._broker_addr_table[broker_name]
        now_ms = self._clock.monotonic_ms()
        members = []
        for broker_id in sorted(group.addrs):
            addresses = group.addrs[broker_id]
            live = self._broker_live_table[(broker_name, broker_id)]
            members.append(
                BrokerMember(
                    broker_id,
                    addresses.client,
                    addresses.ha,
                    live.data_version,
                    live.last_update_ms,
                    addresses.remoting,
                    addresses.epoch,
                    addresses.lease_ms,
                    max(0, now_ms - live.last_update_monotonic_ms),
                    addresses.ha_link,
                )
            )
        report = None
        if group.report is not None and group.report[0].epoch >= self.group_epoch(broker_name):
            heard_ago_ms = max(0, now_ms - group.report[1])
            report = dataclasses.replace(group.report[0], heard_ago_ms=heard_ago_ms)
        return BrokerGroup(group.cluster, broker_name, tuple(members), report)

    def _replace_topic_configs(
        self, broker_name: ids.BrokerName, configs: tuple[RegisteredTopic, ...]
    ) -> None:
        wanted = {c.topic: c for c in configs}
        for topic in [t for t, by in self._topic_queue_table.items() if broker_name in by]:
            if topic not in wanted:
                self._remove_topic_broker(topic, broker_name)
        for config in wanted.values():
            self._topic_queue_table.setdefault(config.topic, {})[broker_name] = QueueData(
                broker_name,
                config.read_queue_nums,
                config.write_queue_nums,
                config.perm,
                config.message_type,
            )

    def _remove_topic_broker(self, topic: ids.TopicName, broker_name: ids.BrokerName) -> None:
        by_broker = self._topic_queue_table[topic]
        by_broker.pop(broker_name, None)
        if not by_broker:
            del self._topic_queue_table[topic]

    def _remove_member(self, broker_name: ids.BrokerName, broker_id: ids.BrokerId) -> None:
        self._broker_live_table.pop((broker_name, broker_id), None)
        group = self._broker_addr_table[broker_name]
        group.addrs.pop(broker_id, None)
        if group.addrs:
            return
        del self._broker_addr_table[broker_name]
        names = self._cluster_addr_table.get(group.cluster, set())
        names.discard(broker_name)
        if not names:
            self._cluster_addr_table.pop(group.cluster, None)
        for topic in [t for t, by in self._topic_queue_table.items() if broker_name in by]:
            self._remove_topic_broker(topic, broker_name)

    def _validate(self, registration: BrokerRegistration) -> None:
        if not registration.cluster or not registration.broker_name.strip():
            raise errors.BadRequestError("cluster name and broker name must not be empty")
        if registration.broker_name.split() != [registration.broker_name]:
            raise errors.BadRequestError("broker name must not contain whitespace")
        if registration.broker_id < 0:
            raise errors.BadRequestError(f"broker id {registration.broker_id} is negative")
        if registration.epoch < 0 or registration.lease_ms < 0:
            raise errors.BadRequestError("epoch and lease_ms must not be negative")
        if not registration.client_address:
            raise errors.BadRequestError("a broker must advertise its client endpoint")
        limit = self._settings.queue_nums_max
        for config in registration.topic_configs:
            topics.validate_topic(config.topic, allow_system=True)
            if not (0 <= config.read_queue_nums <= limit and 0 <= config.write_queue_nums <= limit):
                raise errors.BadRequestError(
                    f"topic {config.topic!r}: queue counts must be 0..{limit}, not "
                    f"{config.read_queue_nums}/{config.write_queue_nums}"
                )
            if not 0 <= config.perm <= PERM_BITS_MAX:
                raise errors.BadRequestError(f"topic {config.topic!r}: perm {config.perm} unknown")

    def _check_bounds(self, registration: BrokerRegistration) -> None:
        settings = self._settings
        configs = registration.topic_configs
        if len(configs) > settings.topic_configs_per_registration_max:
            raise errors.TooManyRequestsError(
                f"{len(configs)} topic configs in one registration; the limit is "
                f"{settings.topic_configs_per_registration_max}"
            )
        group = self._broker_addr_table.get(registration.broker_name)
        if group is None and len(self._broker_addr_table) >= settings.broker_groups_max:
            raise errors.TooManyRequestsError(
                f"the name server already holds {settings.broker_groups_max} broker groups"
            )
        members = {} if group is None else group.addrs
        if registration.broker_id not in members and len(members) >= settings.members_per_group_max:
            raise errors.TooManyRequestsError(
                f"broker group {registration.broker_name} already has "
                f"{settings.members_per_group_max} members"
            )
        if registration.broker_id == ids.MASTER_BROKER_ID:
            new_topics = {c.topic for c in configs} - self._topic_queue_table.keys()
            if len(self._topic_queue_table) + len(new_topics) > settings.topics_max:
                raise errors.TooManyRequestsError(
                    f"registering {len(new_topics)} new topics would exceed "
                    f"topics_max={settings.topics_max}"
                )
