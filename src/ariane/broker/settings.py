"""The broker's one settings tree: identity, network, name servers, store, index and core.

``BrokerSettings`` is the root; every group below it is a frozen slotted dataclass with a
docstring per field giving its unit and the RocketMQ setting (and default) it mirrors; every
count, size and interval has a bound, and ``__post_init__`` refuses values outside it with
``ValueError``. The tree is loaded and validated once in the composition root (``__main__``)
from a TOML file (``--config``) and/or command-line flags (``load_toml``/``from_mapping``), and
passed down explicitly: the tables, filters and POP state take their own group
(``CoreSettings``), nothing reads a global. A concept's own group lives beside it and, as
this module, imports no other broker module: ``schedule.settings``, ``transaction.settings``,
``tables.lite_settings``, ``processors.renewal_settings``, ``services.slave_sync_settings``.

TOML layout (every key optional; a table per nested group, keys are the field names)::

    cluster = "DefaultCluster"
    broker_name = "broker-a"
    broker_id = 0
    listen = "127.0.0.1:8081"
    workers = 2        # front-end worker processes; absent = the CPU count (1 CPU: none)
    advertised_endpoint = "broker-a-0.broker-a:8081"
    metrics_listen = "0.0.0.0:5557"
    namesrv = ["127.0.0.1:9876"]     # or one string
    store_dir = ".ariane/store"
    register_interval_ms = 30000
    offset_persist_interval_ms = 5000   # same as [core.offsets] persist_interval_ms
    [store]            # StoreSettings, e.g. flush_disk_type = "SYNC_FLUSH"
    [index]            # IndexSettings
    [retention]        # RetentionSettings
    [receive]          # ReceiveSettings, e.g. consume_from_where = "LAST_OFFSET"
    [schedule]         # ScheduleSettings (delay levels, timer)
    broker_role = "SYNC_MASTER"   # or ASYNC_MASTER / SLAVE (opens the HA port): [ha] broker_role
    [ha]               # HASettings, e.g. ha_listen, master_ha
    [transaction]      # TransactionSettings, e.g. transaction_check_interval_ms = 30000
    [slave_sync]       # SlaveSyncSettings, e.g. interval_ms = 10000
    [server]           # gRPC ServerSettings
    [auth]             # security AuthSettings (ACL 2.0), e.g. authentication_enabled = true
    [tls]              # common.tls TlsSettings, e.g. server_mode = "enforcing", cert_path = ...
    [core.topics]      # TopicSettings, e.g. auto_create_topic_enable = true
    [core.subscriptions]  [core.offsets]  [core.pop]  [core.filters]  [core.long_polling]
    [core.consumers]   # ConsumerSettings, e.g. channel_expired_ms = 120000

Unknown keys, values of the wrong type and values out of bounds are refused with the key's
dotted path in the message. Enum fields take their value's name (``"SYNC_FLUSH"``).
"""

from __future__ import annotations

import dataclasses
import enum
import pathlib
import tomllib
import types
import typing
from collections.abc import Mapping
from typing import Any

from ariane.broker.processors import renewal_settings
from ariane.broker.schedule import settings as schedule_settings
from ariane.broker.services import slave_sync_settings
from ariane.broker.tables import lite_settings
from ariane.broker.transaction import settings as transaction_settings
from ariane.common import ids, limits, process, tls, topics
from ariane.grpcwire import server as grpc_server
from ariane.security import settings as auth_settings
from ariane.store import index_file, retention
from ariane.store import settings as store_settings
from ariane.store.ha import settings as ha_settings


@dataclasses.dataclass(frozen=True, slots=True)
class TopicSettings:
    """Topic table limits and auto-create (RocketMQ ``BrokerConfig``/``TopicValidator``)."""

    queue_nums_max: int = 1024
    """Most read or write queues one topic may have on this broker, a count (RocketMQ has no
    hard limit; 1024 keeps the per-queue tables small)."""

    topic_count_max: int = 10_000
    """Most topics (including ``%RETRY%``/``%DLQ%`` topics) the table holds, a count."""

    auto_create_topic_enable: bool = False
    """Create an unknown topic when a producer sends to it (RocketMQ ``autoCreateTopicEnable``,
    default true there; off in Ariane so a typo is a TOPIC_NOT_FOUND, not a new topic)."""

    default_queue_nums: int = limits.DEFAULT_TOPIC_QUEUE_NUMS
    """Read and write queues of an auto-created topic (``defaultTopicQueueNums`` = 8)."""

    def __post_init__(self) -> None:
        limits.check_range("queue_nums_max", self.queue_nums_max, 1, 65_536)
        limits.check_range("topic_count_max", self.topic_count_max, 1, 1_000_000)
        limits.check_range("default_queue_nums", self.default_queue_nums, 1, self.queue_nums_max)


@dataclasses.dataclass(frozen=True, slots=True)
class SubscriptionSettings:
    """Subscription-group table limits (RocketMQ ``SubscriptionGroupManager``)."""

    auto_create_subscription_group: bool = True
    """Create a group's config with defaults on its first use (RocketMQ
    ``autoCreateSubscriptionGroup``, default true)."""

    group_count_max: int = 10_000
    """Most subscription groups the table holds, a count."""

    def __post_init__(self) -> None:
        limits.check_range("group_count_max", self.group_count_max, 1, 1_000_000)


@dataclasses.dataclass(frozen=True, slots=True)
class OffsetSettings:
    """Consumer-offset table (RocketMQ ``ConsumerOffsetManager``)."""

    offset_entries_max: int = 1_000_000
    """Most (group, topic, queue id) entries in the table, a count."""

    persist_interval_ms: int = 5_000
    """How often the server calls ``persist()``, in ms (``flushConsumerOffsetInterval`` = 5 s)."""

    def __post_init__(self) -> None:
        limits.check_range("offset_entries_max", self.offset_entries_max, 1, 100_000_000)
        limits.check_range("persist_interval_ms", self.persist_interval_ms, 100, 3_600_000)


@dataclasses.dataclass(frozen=True, slots=True)
class PopSettings:
    """Per-group bounds of invisible-time bookkeeping (RocketMQ 5 POP consumption)."""

    inflight_messages_max: int = 100_000
    """Most messages of one group that are in flight or held back (FIFO) at once, a count;
    above it a receive answers TOO_MANY_REQUESTS (RocketMQ bounds pop by
    ``popThresholdForQueue`` = 96 per client queue; this is the broker-side table bound)."""

    pop_span_max: int = 1_000_000
    """Most queue offsets between a queue's committed offset and its scan cursor, a count
    (the analogue of ``consumeConcurrentlyMaxSpan`` = 2000 of the 4.x push consumer): one slow
    message may hold the committed offset back by at most this many messages."""

    journal_bytes_max: int = 32 * 1024 * 1024
    """Size of the POP journal (``<store>/pop/popJournal``) at which it is compacted inline,
    bytes; the background revive loop compacts it at half this. The live state it is
    rewritten to is bounded by ``inflight_messages_max`` records per group (RocketMQ bounds its
    revive topic by retention instead)."""

    def __post_init__(self) -> None:
        limits.check_range("inflight_messages_max", self.inflight_messages_max, 1, 10_000_000)
        limits.check_range("pop_span_max", self.pop_span_max, 1, 100_000_000)
        limits.check_range("journal_bytes_max", self.journal_bytes_max, 64 * 1024, 64 * 1024 * 1024)


@dataclasses.dataclass(frozen=True, slots=True)
class FilterSettings:
    """Bounds of subscription filter expressions (tag and SQL92)."""

    expression_chars_max: int = 4_096
    """Longest filter expression accepted, in characters."""

    expression_depth_max: int = 32
    """Deepest nesting of parentheses/NOT/AND/OR in an SQL92 expression, a count."""

    in_list_items_max: int = 256
    """Most literals in one ``IN (...)`` list, a count."""

    tags_max: int = 256
    """Most tags in one ``a || b || c`` expression, a count."""

    def __post_init__(self) -> None:
        limits.check_range("expression_chars_max", self.expression_chars_max, 1, 1_000_000)
        limits.check_range("expression_depth_max", self.expression_depth_max, 1, 256)
        limits.check_range("in_list_items_max", self.in_list_items_max, 1, 100_000)
        limits.check_range("tags_max", self.tags_max, 1, 100_000)


@dataclasses.dataclass(frozen=True, slots=True)
class LongPollingSettings:
    """Parking of receive requests that found nothing (RocketMQ ``PopLongPollingService``)."""

    parked_requests_max: int = 10_000
    """Most receive requests parked at once, a count; one more answers TOO_MANY_REQUESTS
    (RocketMQ ``maxPopPollingSize`` = 100000 per broker)."""

    notify_keys_max: int = 100_000
    """Most keys whose last-notify stamp is remembered, a count; older stamps fold into one
    floor stamp, which can only cause a spurious wake-up, never a lost one."""

    def __post_init__(self) -> None:
        limits.check_range("parked_requests_max", self.parked_requests_max, 1, 10_000_000)
        limits.check_range("notify_keys_max", self.notify_keys_max, 1, 10_000_000)


@dataclasses.dataclass(frozen=True, slots=True)
class ConsumerSettings:
    """Live consumers and queue locks (RocketMQ ``ConsumerManager``, ``RebalanceLockManager``,
    ``ClientHousekeepingService``)."""

    channel_expired_ms: int = 120_000
    """Silence after which a client (and its group memberships and queue locks) is dropped, ms
    (RocketMQ ``channelExpiredTimeout`` = 120 s); every call or heartbeat of the client counts."""

    expiry_scan_interval_ms: int = 10_000
    """How often silent clients are looked for, ms (``ClientHousekeepingService`` scans every
    10 s): a client goes between ``channel_expired_ms`` and that plus this after its last call."""

    lock_expiry_ms: int = 60_000
    """Life of a queue lock since it was last taken or renewed, ms
    (``rocketmq.broker.rebalance.lockMaxLiveTime`` = 60 s)."""

    groups_max: int = 10_000
    """Most consumer groups with live members at once, a count."""

    members_per_group_max: int = 10_000
    """Most live members of one group, a count."""

    subscriptions_per_member_max: int = 1_024
    """Most topics one member may subscribe to, a count."""

    locks_max: int = 1_000_000
    """Most queue locks held at once over all groups, a count; a lock beyond it is not
    granted (expired locks are purged first)."""

    def __post_init__(self) -> None:
        limits.check_range("channel_expired_ms", self.channel_expired_ms, 1_000, 3_600_000)
        limits.check_range("expiry_scan_interval_ms", self.expiry_scan_interval_ms, 100, 3_600_000)
        limits.check_range("lock_expiry_ms", self.lock_expiry_ms, 1_000, 3_600_000)
        limits.check_range("groups_max", self.groups_max, 1, 1_000_000)
        limits.check_range("members_per_group_max", self.members_per_group_max, 1, 1_000_000)
        limits.check_range(
            "subscriptions_per_member_max", self.subscriptions_per_member_max, 1, 100_000
        )
        limits.check_range("locks_max", self.locks_max, 1, 100_000_000)


@dataclasses.dataclass(frozen=True, slots=True)
class CoreSettings:
    """All settings of the broker's pure core, grouped by concern."""

    topics: TopicSettings = dataclasses.field(default_factory=TopicSettings)
    """Topic table."""

    subscriptions: SubscriptionSettings = dataclasses.field(default_factory=SubscriptionSettings)
    """Subscription-group table."""

    offsets: OffsetSettings = dataclasses.field(default_factory=OffsetSettings)
    """Consumer-offset table."""

    pop: PopSettings = dataclasses.field(default_factory=PopSettings)
    """Invisible-time bookkeeping."""

    filters: FilterSettings = dataclasses.field(default_factory=FilterSettings)
    """Filter expressions."""

    long_polling: LongPollingSettings = dataclasses.field(default_factory=LongPollingSettings)
    """Receive parking."""

    consumers: ConsumerSettings = dataclasses.field(default_factory=ConsumerSettings)
    """Live consumer groups, client expiry and queue locks."""


DEFAULT_LISTEN = "127.0.0.1:8081"
DEFAULT_REMOTING_LISTEN = "127.0.0.1:10911"
"""Where the classic protocol is served by default: RocketMQ's broker ``listenPort``."""
WORKERS_MAX = 64
"""Most front-end worker processes one broker runs."""
WORKERS_AUTO_MAX = 8
"""Most workers the default picks (a pod without a CPU limit sees every core of its node;
the operator sets ``workers`` from the pod's CPU limit or request instead)."""
DEFAULT_CLUSTER = ids.ClusterName("DefaultCluster")
DEFAULT_BROKER_NAME = ids.BrokerName("broker-a")
"""Dev default: loopback only; RocketMQ 5's proxy gRPC port is 8081. In a pod use 0.0.0.0."""


class ConsumeFromWhere(enum.Enum):
    """Where a group that never consumed a queue starts (RocketMQ ``ConsumeFromWhere``)."""

    FIRST_OFFSET = "FIRST_OFFSET"
    """From the queue's min offset: a new group sees what is still retained."""
    LAST_OFFSET = "LAST_OFFSET"
    """From the queue's max offset: a new group sees only what is sent from now on."""


@dataclasses.dataclass(frozen=True, slots=True)
class ReceiveSettings:
    """Receive (pop) behaviour of the v2 ``ReceiveMessage`` RPC."""

    auto_renew_invisible_ms: int = 60_000
    """Invisible duration of a push consumer's receive (``auto_renew``, no duration given);
    the proxy's ``defaultInvisibleTimeMills`` is 60 s."""

    long_polling_ms_default: int = 20_000
    """Long-polling timeout announced in the consumer settings reply (proxy max 20 s)."""

    poll_slice_ms: int = 1_000
    """Longest single park while long polling, so invisible-time expiries are picked up."""

    deadline_reserve_ms: int = 500
    """How long before the client's gRPC deadline a receive answers anyway."""

    consume_from_where: ConsumeFromWhere = ConsumeFromWhere.FIRST_OFFSET
    """Start of a new group on a queue (RocketMQ starts fresh queues at 0; see the enum)."""

    message_bytes_max: int = 64 * 1024 * 1024
    """Most body bytes one receive returns (at least one message is always returned)."""

    access_message_in_memory_max_ratio_percent: int = 40
    """Share of physical memory, %, behind the CommitLog's end within which a classic pull
    counts as "in memory"; a pull reading further back is "cold" and, with
    ``slave_read_enable``, the master suggests the slave (RocketMQ
    ``accessMessageInMemoryMaxRatio``, 40)."""

    physical_memory_bytes: int = 0
    """The memory that ratio is taken of, bytes; 0: the machine's physical memory (RocketMQ
    ``TOTAL_PHYSICAL_MEMORY_SIZE``). Tests set a small value to make backlogs cold."""

    priority_aging_ms: int = 10_000
    """Longest a consumer group's receive passes over a PRIORITY topic may skip its lower
    levels (each filling its batch first) before one pass reads the levels round-robin, so low
    priorities cannot starve (``pop.priority``; RocketMQ has no such bound)."""

    def __post_init__(self) -> None:
        limits.check_range(
            "auto_renew_invisible_ms", self.auto_renew_invisible_ms, 1_000, 12 * 3600_000
        )
        limits.check_range("long_polling_ms_default", self.long_polling_ms_default, 1_000, 60_000)
        limits.check_range("poll_slice_ms", self.poll_slice_ms, 10, 60_000)
        limits.check_range("deadline_reserve_ms", self.deadline_reserve_ms, 0, 10_000)
        limits.check_range("message_bytes_max", self.message_bytes_max, 1, 1 << 30)
        limits.check_range("priority_aging_ms", self.priority_aging_ms, 100, 3_600_000)
        limits.check_range(
            "access_message_in_memory_max_ratio_percent",
            self.access_message_in_memory_max_ratio_percent,
            0,
            100,
        )
        limits.check_range("physical_memory_bytes", self.physical_memory_bytes, 0, 1 << 50)


@dataclasses.dataclass(frozen=True, slots=True)
class BrokerSettings:
    """Everything one broker process needs to know."""

    store_dir: pathlib.Path
    """Root of the store (CommitLog, ConsumeQueues, index, config files)."""

    cluster: ids.ClusterName = DEFAULT_CLUSTER
    """Cluster name (RocketMQ ``brokerClusterName``)."""

    broker_name: ids.BrokerName = DEFAULT_BROKER_NAME
    """Broker group name (``brokerName``); receipt handles carry it."""

    broker_id: ids.BrokerId = ids.MASTER_BROKER_ID
    """0 for the master, above 0 for slaves (``brokerId``)."""

    listen: str = DEFAULT_LISTEN
    """``HOST:PORT`` the gRPC server binds; port 0 picks a free one."""

    advertised_endpoint: str = ""
    """``HOST:PORT`` clients are told to dial (routes); empty = the listen address."""

    remoting_listen: str = DEFAULT_REMOTING_LISTEN
    """``HOST:PORT`` serving the classic protocol (Remoting: the classic Java and Go clients,
    mqadmin); port 0 picks a free one; empty = not served. When it is served, offset message
    ids (STOREHOST) name this address, because classic clients dial them. The default
    address is skipped with a warning when it is taken (another broker on the host); an
    address set explicitly must bind."""

    remoting_listen_explicit: bool = False
    """Whether ``remoting_listen`` was set by the operator (then a bind failure is fatal)."""

    metrics_listen: str = ""
    """``HOST:PORT`` serving Prometheus ``/metrics`` (RocketMQ's port is 5557); empty = none.
    Served by the store-owning process, whatever ``workers`` is."""

    workers: int | None = None
    """Front-end worker processes serving gRPC on ``listen`` (``broker.frontend``), a count;
    0 = the store-owning process serves gRPC itself; ``None`` = the CPU count the process may
    use (affinity and cgroup quota, ``process.available_cpus``) up to ``WORKERS_AUTO_MAX``,
    except that one CPU means 0 (a relay hop on one core only adds cost). RocketMQ 5 scales
    its gRPC front end with Proxy threads; a Python process needs processes for that."""

    namesrv_addrs: tuple[str, ...] = ("127.0.0.1:9876",)
    """Name servers to register with, each ``HOST:PORT`` (``namesrvAddr``)."""

    namesrv_resolve_all: bool = False
    """Resolve each name-server host to every address it has, again before each registration
    round, and register with each (a Kubernetes headless Service lists every name-server pod);
    False: dial each ``namesrv_addrs`` entry as given. RocketMQ users ask for DNS-based,
    hot-reloadable name-server lists (rocketmq-operator #54/#140)."""

    register_interval_ms: int = 30_000
    """Registration period (``registerNameServerPeriod``, clamped 10-60 s there)."""

    store: store_settings.StoreSettings = dataclasses.field(
        default_factory=store_settings.StoreSettings
    )
    """CommitLog/ConsumeQueue/flush settings."""

    index: index_file.IndexSettings = dataclasses.field(default_factory=index_file.IndexSettings)
    """IndexFile geometry (query by key / id)."""

    retention: retention.RetentionSettings = dataclasses.field(
        default_factory=retention.RetentionSettings
    )
    """File retention and disk watermarks."""

    core: CoreSettings = dataclasses.field(default_factory=CoreSettings)
    """Topic/group/offset tables, pop, filters, long polling."""

    receive: ReceiveSettings = dataclasses.field(default_factory=ReceiveSettings)
    """ReceiveMessage behaviour."""

    schedule: schedule_settings.ScheduleSettings = dataclasses.field(
        default_factory=schedule_settings.ScheduleSettings
    )
    """Delay levels and timer messages (``[schedule]`` in TOML)."""

    ha: ha_settings.HASettings = dataclasses.field(default_factory=ha_settings.HASettings)
    """Role and replication (``[ha]``; ``broker_role`` may also be a top-level key)."""

    transaction: transaction_settings.TransactionSettings = dataclasses.field(
        default_factory=transaction_settings.TransactionSettings
    )
    """Half messages and their check-back schedule (``[transaction]``)."""

    renewal: renewal_settings.RenewalSettings = dataclasses.field(
        default_factory=renewal_settings.RenewalSettings
    )
    """Server-side renewal of push consumers' invisible time, ``attempt_id`` (``[renewal]``)."""

    lite: lite_settings.LiteSettings = dataclasses.field(default_factory=lite_settings.LiteSettings)
    """Lite topics (RocketMQ 5.5): quotas, name length, TTL expiry (``[lite]``)."""

    idempotency_window_ms: int = 24 * 3_600_000
    """How far back (store time, ms) a send with an idempotency key finds an earlier try and
    stores nothing (``processors.idempotency``; RocketMQ has no idempotent producer)."""

    slave_read_enable: bool = False
    """Classic consumers may read from this group's slaves (RocketMQ ``slaveReadEnable``,
    default false): a master suggests its slave (``suggestWhichBrokerId`` 1) for cold pulls, and
    a slave serves pulls; without it a slave refuses them with SYSTEM_BUSY, as RocketMQ's
    ``PullMessageProcessor.rejectRequest`` does (``processors.slave_read``)."""

    slave_sync: slave_sync_settings.SlaveSyncSettings = dataclasses.field(
        default_factory=slave_sync_settings.SlaveSyncSettings
    )
    """A slave's copy of its master's topics, groups and offsets (``[slave_sync]``)."""

    server: grpc_server.ServerSettings = dataclasses.field(
        default_factory=grpc_server.ServerSettings
    )
    """gRPC server options."""

    auth: auth_settings.AuthSettings = dataclasses.field(default_factory=auth_settings.AuthSettings)
    """Authentication and ACLs (``[auth]``), checked on the gRPC and Remoting ports before any
    processor runs; users and ACLs live in ``<store_dir>/config/auth/auth.json``."""

    tls: tls.TlsSettings = dataclasses.field(default_factory=tls.TlsSettings)
    """TLS of every listener — gRPC, Remoting, HA — and of the connections this broker dials
    (``[tls]``: mode, PEM paths, client certificates; ``common.tls``)."""

    def __post_init__(self) -> None:
        grpc_server.parse_listen(self.listen)
        if self.advertised_endpoint:
            grpc_server.parse_listen(self.advertised_endpoint)
        if self.metrics_listen:
            grpc_server.parse_listen(self.metrics_listen)
        if self.remoting_listen:
            grpc_server.parse_listen(self.remoting_listen)
        for addr in self.namesrv_addrs:
            grpc_server.parse_listen(addr)
        if not self.namesrv_addrs:
            raise ValueError("at least one name server is needed (--namesrv HOST:PORT)")
        if len(self.namesrv_addrs) > 64:
            raise ValueError("at most 64 name servers")
        topics.validate_group(self.broker_name)  # same character rules as groups
        limits.check_range("broker_id", self.broker_id, 0, 1_000)
        if self.workers is not None:
            if not isinstance(self.workers, int) or isinstance(self.workers, bool):
                raise ValueError(f"workers must be a whole number, not {self.workers!r}")
            limits.check_range("workers", self.workers, 0, WORKERS_MAX)
        limits.check_range("register_interval_ms", self.register_interval_ms, 1_000, 60_000)
        window_ms = self.idempotency_window_ms
        limits.check_range("idempotency_window_ms", window_ms, 1_000, 30 * 86_400_000)

    def effective_workers(self) -> int:
        """How many front-end workers to run (``workers`` with ``None`` resolved)."""
        if self.workers is not None:
            return self.workers
        cpus = min(process.available_cpus(), WORKERS_AUTO_MAX)
        return cpus if cpus >= 2 else 0

    def client_endpoint(self, bound_port: int) -> str:
        """The endpoint to advertise, given the port the server actually bound."""
        if self.advertised_endpoint:
            return self.advertised_endpoint
        host, _ = grpc_server.parse_listen(self.listen)
        if host in ("0.0.0.0", "", "::", "[::]"):
            host = "127.0.0.1"
        return f"{host}:{bound_port}"


_TOP_LEVEL_ALIASES = {"namesrv": "namesrv_addrs"}
"""TOML keys whose field has another name."""

_SCALARS: tuple[type, ...] = (bool, int, float, str)


def load_toml(path: pathlib.Path, **overrides: Any) -> BrokerSettings:
    """Read a TOML config file and apply command-line overrides (non-``None`` values win).

    Raises:
        ValueError: unknown keys, wrong types or values out of bounds, with the key named.
        OSError: if the file cannot be read.
    """
    raw = tomllib.loads(path.read_text()) if path else {}
    return from_mapping(raw, **overrides)


def from_mapping(raw: Mapping[str, Any], **overrides: Any) -> BrokerSettings:
    """Build settings from a parsed TOML mapping plus overrides (see ``load_toml``).

    ``overrides`` are top-level ``BrokerSettings`` fields (the flags); ``None`` means unset.

    Raises:
        ValueError: unknown keys, wrong types or values out of bounds (the key's path named).
    """
    values = dict(raw)
    for alias, name in _TOP_LEVEL_ALIASES.items():
        if alias in values:
            values[name] = values.pop(alias)
    if "namesrv_addrs" in values and isinstance(values["namesrv_addrs"], str):
        values["namesrv_addrs"] = [values["namesrv_addrs"]]
    top_role = values.pop("broker_role", None)  # RocketMQ's brokerRole is a top-level key
    if top_role is not None:
        values["ha"] = {**dict(values.get("ha", {})), "broker_role": top_role}
    legacy_persist = values.pop("offset_persist_interval_ms", None)
    if legacy_persist is not None:
        core = dict(values.get("core", {}))
        offsets = dict(core.get("offsets", {}))
        offsets.setdefault("persist_interval_ms", legacy_persist)
        values["core"] = {**core, "offsets": offsets}
    values.update({k: v for k, v in overrides.items() if v is not None})
    if "remoting_listen" in values:  # set in the file or by a flag: it must bind
        values["remoting_listen_explicit"] = True
    if "store_dir" not in values:
        raise ValueError("store_dir is required (--store-dir DIR or store_dir in the config)")
    settings = _build(BrokerSettings, values, "")
    assert isinstance(settings, BrokerSettings)
    return settings


def _build(cls: type[Any], raw: object, path: str) -> Any:
    """One dataclass of the tree from its mapping, recursing into nested groups."""
    if not isinstance(raw, Mapping):
        raise ValueError(f"[{path}] must be a table")
    hints = typing.get_type_hints(cls)
    known = {f.name for f in dataclasses.fields(cls)}
    values: dict[str, Any] = {}
    for key, value in raw.items():
        where = f"{path}.{key}" if path else key
        if key not in known:
            raise ValueError(f"unknown broker setting {where!r}; known here: {sorted(known)}")
        values[key] = _convert(hints[key], value, where)
    return cls(**values)


def _convert(hint: Any, value: object, where: str) -> object:
    """``value`` as the field type ``hint`` wants it (``ValueError`` naming ``where``)."""
    target = getattr(hint, "__supertype__", hint)  # NewType -> its base
    origin = typing.get_origin(target)
    if origin in (typing.Union, types.UnionType):
        if value is None:
            return None
        target = next(a for a in typing.get_args(target) if a is not type(None))
        origin = typing.get_origin(target)
    if dataclasses.is_dataclass(target) and isinstance(target, type):
        return _build(target, value, where)
    if isinstance(target, type) and issubclass(target, enum.Enum):
        try:
            return target(value)
        except ValueError:
            names = [m.value for m in target]
            raise ValueError(f"{where}={value!r} is not one of {names}") from None
    if target is pathlib.Path:
        if not isinstance(value, (str, pathlib.Path)):
            raise ValueError(f"{where} must be a path string, not {value!r}")
        return pathlib.Path(value)
    if origin is tuple:
        if not isinstance(value, (list, tuple)):
            raise ValueError(f"{where} must be a list, not {value!r}")
        return tuple(value)
    if target in _SCALARS and not _is_instance(value, target):
        raise ValueError(f"{where} must be a {target.__name__}, not {value!r}")
    return value


def _is_instance(value: object, target: type) -> bool:
    if target is bool or isinstance(value, bool):
        return isinstance(value, bool) and target is bool
    if target is float:
        return isinstance(value, (int, float))
    return isinstance(value, target)
