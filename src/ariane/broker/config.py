"""The broker's full settings: identity, network, name servers, store, index and core.

``BrokerSettings`` is loaded and validated once in the composition root (``__main__``), from a
TOML file (``--config``) and/or command-line flags, and passed down explicitly. Field names
follow RocketMQ's ``BrokerConfig`` where one exists, with units last.

TOML layout (every key optional)::

    cluster = "DefaultCluster"
    broker_name = "broker-a"
    broker_id = 0
    listen = "127.0.0.1:8081"
    workers = 2        # front-end worker processes; absent = the CPU count (1 CPU: none)
    advertised_endpoint = "broker-a-0.broker-a:8081"
    namesrv = ["127.0.0.1:9876"]
    store_dir = ".ariane/store"
    [store]            # any StoreSettings field, e.g. flush_disk_type = "SYNC_FLUSH"
    [index]            # any IndexSettings field
    broker_role = "SYNC_MASTER"   # or ASYNC_MASTER / SLAVE (opens the HA port)
    [ha]               # any HASettings field, e.g. ha_listen, master_ha
"""

from __future__ import annotations

import dataclasses
import enum
import pathlib
import tomllib
from collections.abc import Mapping
from typing import Any

from ariane.broker import settings as core_settings
from ariane.common import ids, process, topics
from ariane.remoting import server as grpc_server
from ariane.store import index_file, retention
from ariane.store import settings as store_settings
from ariane.store.ha import settings as ha_settings

DEFAULT_LISTEN = "127.0.0.1:8081"
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

    def __post_init__(self) -> None:
        _check("auto_renew_invisible_ms", self.auto_renew_invisible_ms, 1_000, 12 * 3600_000)
        _check("long_polling_ms_default", self.long_polling_ms_default, 1_000, 60_000)
        _check("poll_slice_ms", self.poll_slice_ms, 10, 60_000)
        _check("deadline_reserve_ms", self.deadline_reserve_ms, 0, 10_000)
        _check("message_bytes_max", self.message_bytes_max, 1, 1 << 30)


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

    register_interval_ms: int = 30_000
    """Registration period (``registerNameServerPeriod``, clamped 10-60 s there)."""

    offset_persist_interval_ms: int = 5_000
    """How often consumer offsets are written (``flushConsumerOffsetInterval``)."""

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

    core: core_settings.CoreSettings = dataclasses.field(default_factory=core_settings.CoreSettings)
    """Topic/group/offset tables, pop, filters, long polling."""

    receive: ReceiveSettings = dataclasses.field(default_factory=ReceiveSettings)
    """ReceiveMessage behaviour."""

    ha: ha_settings.HASettings = dataclasses.field(default_factory=ha_settings.HASettings)
    """Role and replication (``[ha]``; ``broker_role`` may also be a top-level key)."""

    server: grpc_server.ServerSettings = dataclasses.field(
        default_factory=grpc_server.ServerSettings
    )
    """gRPC server options."""

    def __post_init__(self) -> None:
        grpc_server.parse_listen(self.listen)
        if self.advertised_endpoint:
            grpc_server.parse_listen(self.advertised_endpoint)
        if self.metrics_listen:
            grpc_server.parse_listen(self.metrics_listen)
        for addr in self.namesrv_addrs:
            grpc_server.parse_listen(addr)
        if not self.namesrv_addrs:
            raise ValueError("at least one name server is needed (--namesrv HOST:PORT)")
        if len(self.namesrv_addrs) > 64:
            raise ValueError("at most 64 name servers")
        topics.validate_group(self.broker_name)  # same character rules as groups
        _check("broker_id", self.broker_id, 0, 1_000)
        if self.workers is not None:
            if not isinstance(self.workers, int) or isinstance(self.workers, bool):
                raise ValueError(f"workers must be a whole number, not {self.workers!r}")
            _check("workers", self.workers, 0, WORKERS_MAX)
        _check("register_interval_ms", self.register_interval_ms, 1_000, 60_000)
        _check("offset_persist_interval_ms", self.offset_persist_interval_ms, 100, 60_000)

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


def _check(name: str, value: int, low: int, high: int) -> None:
    if not low <= value <= high:
        raise ValueError(f"{name}={value} is outside {low}..{high}")


def _sub_settings(cls: type[Any], raw: object, section: str) -> Any:
    if not isinstance(raw, Mapping):
        raise ValueError(f"[{section}] must be a table")
    known = {f.name: f for f in dataclasses.fields(cls)}
    values: dict[str, Any] = {}
    for key, value in raw.items():
        if key not in known:
            raise ValueError(f"[{section}] has no setting {key!r}; known: {sorted(known)}")
        if key == "flush_disk_type":
            value = store_settings.FlushDiskType(value)
        if key == "broker_role":
            value = ha_settings.BrokerRole(value)
        values[key] = value
    return cls(**values)


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

    Raises:
        ValueError: unknown keys or values out of bounds.
    """
    values: dict[str, Any] = {}
    top_role: ha_settings.BrokerRole | None = None
    tables = {
        "store": store_settings.StoreSettings,
        "index": index_file.IndexSettings,
        "retention": retention.RetentionSettings,
        "receive": ReceiveSettings,
        "ha": ha_settings.HASettings,
    }
    simple = {
        "cluster",
        "broker_name",
        "broker_id",
        "listen",
        "workers",
        "advertised_endpoint",
        "metrics_listen",
        "register_interval_ms",
        "offset_persist_interval_ms",
    }
    for key, value in raw.items():
        if key in tables:
            values[key] = _sub_settings(tables[key], value, key)
        elif key == "namesrv":
            values["namesrv_addrs"] = tuple([value] if isinstance(value, str) else value)
        elif key == "broker_role":
            top_role = ha_settings.BrokerRole(value)
        elif key == "store_dir":
            values["store_dir"] = pathlib.Path(value)
        elif key in simple:
            values[key] = value
        else:
            raise ValueError(f"unknown broker setting {key!r}")
    if top_role is not None:
        ha = values.get("ha", ha_settings.HASettings())
        values["ha"] = dataclasses.replace(ha, broker_role=top_role)
    values.update({k: v for k, v in overrides.items() if v is not None})
    if "store_dir" not in values:
        raise ValueError("store_dir is required (--store-dir DIR or store_dir in the config)")
    return BrokerSettings(**values)
