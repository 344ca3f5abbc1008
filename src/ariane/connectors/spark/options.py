"""Options of the ``rocketmq`` Spark data source: parsing and validation (no pyspark, no I/O).

Spark hands a data source its options as a case-insensitive dict of strings. ``read_options``
and ``write_options`` turn that dict into frozen values or raise ``OptionError`` naming the
option and the fix, before any broker is asked. The names mirror Spark's Kafka source
(``startingOffsets``, ``maxOffsetsPerTrigger``, ``minPartitions``, ...) and Apache
rocketmq-spark (``subExpression``, ``pullBatchSize``); see ``specs/spark.md`` §3.2.

Offsets JSON (``startingOffsets``/``endingOffsets``) is ``{"<topic>": {"<broker>:<queue>": n}}``
with ``-2`` for earliest and ``-1`` for latest, as Kafka's; queues it leaves out start at
earliest and end at latest. Timestamps JSON (``startingOffsetsByTimestamp`` /
``endingOffsetsByTimestamp``) has the same shape with a store time in ms per queue; queues it
leaves out follow ``startingOffsets``/``endingOffsets``. As Kafka's, ``startingTimestamp``
wins over ``startingOffsetsByTimestamp``, which wins over ``startingOffsets`` (the same for
the ending options).

Invariants: every option Spark passed is known (else ``OptionError``); exactly one of
``topics`` and ``assign`` is given; numbers are in their documented ranges.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping

from ariane.client import credentials as credentials_mod
from ariane.grpcwire import tls as grpc_tls

EARLIEST = -2
"""Offset JSON value meaning a queue's min offset (as Kafka's)."""

LATEST = -1
"""Offset JSON value meaning a queue's max offset, the next to be written (as Kafka's)."""

PULL_BATCH_SIZE_DEFAULT = 256
"""Messages one pull asks for (``pullBatchSize``)."""

PULL_BATCH_SIZE_MAX = 1_024
"""Most messages one pull may ask for (the brokers' cap)."""

PULL_TIMEOUT_MS_DEFAULT = 10_000
"""Deadline of one broker call, ms (``pullTimeoutMs``)."""

FETCH_RETRIES_DEFAULT = 10
"""Retries of a read or offset lookup that got no answer (``fetchOffset.numRetries``). Kafka's
source retries 3 times at 10 ms, but each try of its consumer waits up to a minute
(``default.api.timeout.ms``); ours fail fast when a broker refuses connections, so more
retries with a backoff (below) give the same tolerance: about 35 s, a broker restart on a
loaded machine."""

FETCH_RETRY_INTERVAL_MS_DEFAULT = 1_000
"""Wait before the first retry, ms (``fetchOffset.retryIntervalMs``), doubled before each
further one up to 4 s (``broker_io.RETRY_INTERVAL_MS_MAX``)."""

MAX_TRIGGER_DELAY_MS_DEFAULT = 15 * 60 * 1000
"""Longest wait for ``minOffsetsPerTrigger`` messages before a batch runs anyway, ms (Kafka's
15 minutes)."""

OffsetSpec = str | dict[str, dict[str, int]]
"""``"earliest"``, ``"latest"`` or the parsed offsets JSON."""

TimestampSpec = dict[str, dict[str, int]]
"""Parsed timestamps JSON: ``{"<topic>": {"<broker>:<queue>": ms since the epoch}}``."""

STRATEGY_ERROR = "error"
"""``startingOffsetsByTimestampStrategy``: a start time after a queue's last message fails
the query (Kafka's default)."""

STRATEGY_LATEST = "latest"
"""``startingOffsetsByTimestampStrategy``: such a queue starts at its max offset."""

_READ_KEYS = {
    k.lower(): k
    for k in (
        "endpoints",
        "topics",
        "topicPattern",
        "assign",
        "subExpression",
        "startingOffsets",
        "endingOffsets",
        "startingTimestamp",
        "endingTimestamp",
        "startingOffsetsByTimestamp",
        "endingOffsetsByTimestamp",
        "startingOffsetsByTimestampStrategy",
        "includeHeaders",
        "minPartitions",
        "maxRecordsPerPartition",
        "failOnDataLoss",
        "maxOffsetsPerTrigger",
        "minOffsetsPerTrigger",
        "maxTriggerDelay",
        "consumerGroup",
        "commitOffsetsToBroker",
        "initialOffsetsPath",
        "pullBatchSize",
        "pullTimeoutMs",
        "fetchOffset.numRetries",
        "fetchOffset.retryIntervalMs",
        "accessKey",
        "secretKey",
        "tls",
        "caFile",
    )
}
_WRITE_KEYS = {
    k.lower(): k
    for k in (
        "endpoints",
        "topic",
        "exactlyOnce",
        "pullTimeoutMs",
        "accessKey",
        "secretKey",
        "tls",
        "caFile",
        "checkpointLocation",
    )
}
"""Write options; ``checkpointLocation`` is Spark's own (``writeStream`` passes it on to the
sink), accepted and not used."""


class OptionError(ValueError):
    """An option of the ``rocketmq`` data source is missing, unknown or malformed; the message
    names the option and how to fix it."""


@dataclasses.dataclass(frozen=True, slots=True)
class ReadOptions:
    """What a ``rocketmq`` read (batch or streaming) was asked for.

    Attributes:
        endpoints: the name servers, ``host:port[;host:port]``.
        topics: the topics read (``topics``, or the keys of ``assign``).
        assign: per topic, the queue ids to read; ``None`` reads every queue.
        sub_expression: the tag expression (``*``, ``a``, ``a||b``).
        starting: where reads start.
        ending: where a batch read ends.
        starting_timestamp_ms / ending_timestamp_ms: a store time, ms since the epoch, that
            overrides ``starting``/``ending`` (the first offset stored at or after it).
        starting_by_timestamp / ending_by_timestamp: such a time per queue
            (``startingOffsetsByTimestamp``/``endingOffsetsByTimestamp``), or ``None``; it
            overrides ``starting``/``ending`` for the queues it names.
        starting_timestamp_strategy: ``STRATEGY_ERROR`` or ``STRATEGY_LATEST``, for a start
            time after a queue's last message (an end time there always means latest, as
            Kafka's).
        include_headers: add a ``headers`` column (``includeHeaders``).
        min_partitions: Spark partitions at least (ranges are split), or ``None``.
        max_records_per_partition: most offsets in one Spark partition, or ``None``.
        fail_on_data_loss: a start below a queue's min offset fails the query (else it is
            moved to the min offset).
        max_offsets_per_trigger / min_offsets_per_trigger: a micro-batch's most / fewest
            offsets, over all queues (``None``: no bound).
        max_trigger_delay_ms: how long ``min_offsets_per_trigger`` may hold a batch back, ms.
        consumer_group: the group ``commit`` reports progress to, or ``None``.
        commit_offsets_to_broker: whether ``commit`` reports progress (best effort).
        initial_offsets_path: a file where a stream's resolved initial offsets are kept so a
            restart before the first commit starts at the same offsets, or ``None``.
        pull_batch_size: messages one pull asks for.
        pull_timeout_ms: deadline of one broker call, ms.
        fetch_retries: retries of a read or offset lookup that got no answer in time.
        fetch_retry_interval_ms: wait before the first of them, ms (then doubled).
        credentials: ``accessKey``/``secretKey`` every call is signed with (ACL 2.0), or
            ``None``.
        tls: ``tls=true`` (+ ``caFile``, a PEM CA path readable on the driver and every
            executor; none: the system's roots), or ``None`` for plaintext.
    """

    endpoints: str
    topics: tuple[str, ...]
    assign: Mapping[str, tuple[int, ...]] | None
    sub_expression: str
    starting: OffsetSpec
    ending: OffsetSpec
    starting_timestamp_ms: int | None
    ending_timestamp_ms: int | None
    min_partitions: int | None
    max_records_per_partition: int | None
    fail_on_data_loss: bool
    max_offsets_per_trigger: int | None
    min_offsets_per_trigger: int | None
    max_trigger_delay_ms: int
    consumer_group: str | None
    commit_offsets_to_broker: bool
    initial_offsets_path: str | None
    pull_batch_size: int
    pull_timeout_ms: int
    fetch_retries: int
    fetch_retry_interval_ms: int
    credentials: credentials_mod.Credentials | None = None
    tls: grpc_tls.ClientTls | None = None
    starting_by_timestamp: TimestampSpec | None = None
    ending_by_timestamp: TimestampSpec | None = None
    starting_timestamp_strategy: str = STRATEGY_ERROR
    include_headers: bool = False


@dataclasses.dataclass(frozen=True, slots=True)
class WriteOptions:
    """What a ``rocketmq`` write was asked for.

    Attributes:
        endpoints: the name servers.
        topic: the topic for rows without a ``topic`` column value, or ``None``.
        exactly_once: send each row with an idempotency key made of its place in the write
            (query, batch, partition, row, content), so a task retry or a replayed batch
            stores nothing twice (``exactlyOnce``, default true); false sends at least once.
        pull_timeout_ms: deadline of one broker call, ms.
        credentials: ``accessKey``/``secretKey`` every call is signed with, or ``None``.
        tls: as ``ReadOptions.tls``.
    """

    endpoints: str
    topic: str | None
    pull_timeout_ms: int
    credentials: credentials_mod.Credentials | None = None
    tls: grpc_tls.ClientTls | None = None
    exactly_once: bool = True


def _tls(found: Mapping[str, str]) -> grpc_tls.ClientTls | None:
    """The ``tls`` / ``caFile`` options: TLS verified against ``caFile`` (none: the system's
    roots), or ``None`` for plaintext.

    Raises:
        OptionError: ``caFile`` without ``tls=true``, or a malformed ``tls``.
    """
    ca_file = found.get("caFile", "")
    if not _bool(found, "tls", False):
        if ca_file:
            raise OptionError("option caFile needs tls=true (the cluster serves TLS)")
        return None
    return grpc_tls.ClientTls(ca_file=ca_file)


def _credentials(found: Mapping[str, str]) -> credentials_mod.Credentials | None:
    """The ``accessKey``/``secretKey`` options (both or neither), like the RocketMQ clients'
    ``SessionCredentials``.

    Raises:
        OptionError: only one of the two, or an invalid key.
    """
    access_key = found.get("accessKey", "")
    secret_key = found.get("secretKey", "")
    if not access_key and not secret_key:
        return None
    if not access_key or not secret_key:
        raise OptionError("options accessKey and secretKey go together: give both or neither")
    try:
        return credentials_mod.Credentials(access_key, secret_key)
    except ValueError as exc:
        raise OptionError(f"options accessKey/secretKey: {exc}") from None


def _known(options: Mapping[str, str], keys: Mapping[str, str]) -> dict[str, str]:
    """The options keyed by their canonical names; unknown ones raise ``OptionError``."""
    out: dict[str, str] = {}
    for key, value in options.items():
        name = keys.get(key.lower())
        if name is None:
            known = ", ".join(sorted(keys.values()))
            raise OptionError(f"unknown option {key!r} for format rocketmq; known: {known}")
        out[name] = str(value)
    return out


def _int(found: Mapping[str, str], name: str, low: int, high: int | None = None) -> int | None:
    raw = found.get(name)
    if raw is None:
        return None
    try:
        value = int(raw.strip())
    except ValueError:
        raise OptionError(f"option {name}: {raw!r} is not an integer") from None
    if value < low or (high is not None and value > high):
        bound = f"{low}..{high}" if high is not None else f">= {low}"
        raise OptionError(f"option {name}: {value} is out of range; give {bound}")
    return value


_DURATION_UNITS_MS = {"ms": 1, "s": 1_000, "m": 60_000, "min": 60_000, "h": 3_600_000}
_DURATION_UNITS_MS["d"] = 24 * _DURATION_UNITS_MS["h"]


def _duration_ms(found: Mapping[str, str], name: str, default: int) -> int:
    """A duration option in ms: a number of ms, or with a unit (``500ms``, ``5s``, ``15m``,
    ``1h``, ``1d``), as Spark's ``timeStringAsMs`` reads Kafka's ``maxTriggerDelay``."""
    raw = found.get(name)
    if raw is None:
        return default
    text = raw.strip().lower()
    digits = len(text) - len(text.lstrip("0123456789"))
    unit = text[digits:].strip() or "ms"
    if not digits or unit not in _DURATION_UNITS_MS:
        raise OptionError(f"option {name}: {raw!r} is not a duration; give e.g. 500ms, 5s, 15m")
    return int(text[:digits]) * _DURATION_UNITS_MS[unit]


def _bool(found: Mapping[str, str], name: str, default: bool) -> bool:
    raw = found.get(name)
    if raw is None:
        return default
    lowered = raw.strip().lower()
    if lowered not in ("true", "false"):
        raise OptionError(f"option {name}: {raw!r} is not a boolean; give true or false")
    return lowered == "true"


def _offsets(found: Mapping[str, str], name: str, default: str, *, ending: bool) -> OffsetSpec:
    raw = found.get(name, default).strip()
    if raw.lower() in ("earliest", "latest"):
        if ending and raw.lower() == "earliest":
            raise OptionError(f"option {name}: earliest cannot end a read; give latest or JSON")
        return raw.lower()
    example = '{"topic": {"broker-a:0": 42, "broker-a:1": -2}}'
    try:
        parsed = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise OptionError(
            f"option {name}: {raw!r} is not earliest, latest or offsets JSON ({exc.msg}); "
            f"give e.g. {example}"
        ) from None
    if not isinstance(parsed, dict) or not all(isinstance(v, dict) for v in parsed.values()):
        raise OptionError(
            f"option {name}: give JSON topic -> {{broker:queue -> offset}}, {example}"
        )
    out: dict[str, dict[str, int]] = {}
    for topic, queues in parsed.items():
        out[topic] = {}
        for key, offset in queues.items():
            broker, _, queue = str(key).rpartition(":")
            if not broker or not queue.isdigit():
                raise OptionError(f"option {name}: queue key {key!r} is not <broker>:<queueId>")
            if not isinstance(offset, int) or isinstance(offset, bool) or offset < EARLIEST:
                raise OptionError(
                    f"option {name}: offset {offset!r} of {topic}/{key} is not an offset, "
                    f"-2 (earliest) or -1 (latest)"
                )
            if ending and offset == EARLIEST:
                raise OptionError(f"option {name}: -2 (earliest) cannot end a read at {key}")
            out[topic][key] = offset
    return out


def _timestamps(found: Mapping[str, str], name: str) -> TimestampSpec | None:
    """A timestamps JSON option, ``{"topic": {"<broker>:<queue>": ms}}``, or ``None``."""
    raw = found.get(name)
    if raw is None:
        return None
    example = '{"topic": {"broker-a:0": 1700000000000}}'
    try:
        parsed = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise OptionError(
            f"option {name}: {raw!r} is not JSON ({exc.msg}); give e.g. {example}"
        ) from None
    if not isinstance(parsed, dict) or not all(isinstance(v, dict) for v in parsed.values()):
        raise OptionError(f"option {name}: give JSON topic -> {{broker:queue -> ms}}, {example}")
    out: TimestampSpec = {}
    for topic, queues in parsed.items():
        out[topic] = {}
        for key, stamp in queues.items():
            broker, _, queue = str(key).rpartition(":")
            if not broker or not queue.isdigit():
                raise OptionError(f"option {name}: queue key {key!r} is not <broker>:<queueId>")
            if not isinstance(stamp, int) or isinstance(stamp, bool) or stamp < 0:
                raise OptionError(
                    f"option {name}: {stamp!r} of {topic}/{key} is not ms since the epoch"
                )
            out[topic][key] = stamp
    return out


def _strategy(found: Mapping[str, str]) -> str:
    raw = found.get("startingOffsetsByTimestampStrategy", STRATEGY_ERROR).strip().lower()
    if raw not in (STRATEGY_ERROR, STRATEGY_LATEST):
        raise OptionError(
            f"option startingOffsetsByTimestampStrategy: {raw!r}; give error or latest"
        )
    return raw


def include_headers(options: Mapping[str, str]) -> bool:
    """The ``includeHeaders`` option of a read (the schema depends on it).

    Raises:
        OptionError: not true or false.
    """
    found = {_READ_KEYS[k.lower()]: str(v) for k, v in options.items() if k.lower() in _READ_KEYS}
    return _bool(found, "includeHeaders", False)


def _subscription(
    found: Mapping[str, str],
) -> tuple[tuple[str, ...], dict[str, tuple[int, ...]] | None]:
    given = [k for k in ("topics", "topicPattern", "assign") if k in found]
    if len(given) != 1:
        raise OptionError(
            "give exactly one of the options topics, topicPattern or assign, not "
            + (" and ".join(given) or "none")
        )
    if "topicPattern" in found:
        raise OptionError("option topicPattern is not supported yet; list the topics in topics")
    if "topics" in found:
        topics = tuple(t.strip() for t in found["topics"].split(",") if t.strip())
        if not topics:
            raise OptionError("option topics is empty; give a comma-separated list of topics")
        return topics, None
    try:
        parsed = json.loads(found["assign"])
    except json.JSONDecodeError:
        parsed = None
    ok = isinstance(parsed, dict) and all(
        isinstance(v, list) and all(isinstance(q, int) and q >= 0 for q in v)
        for v in parsed.values()
    )
    if not ok or not parsed:
        raise OptionError(
            'option assign: give JSON topic -> [queueId, ...], e.g. {"orders": [0, 1]}'
        )
    return tuple(parsed), {t: tuple(sorted(set(q))) for t, q in parsed.items()}


def read_options(options: Mapping[str, str], *, streaming: bool) -> ReadOptions:
    """Validate the options of a read (``streaming`` changes the default start to latest, as
    Kafka's, and refuses ``endingOffsets``/``endingTimestamp``).

    Raises:
        OptionError: an unknown, missing, conflicting or malformed option.
    """
    found = _known(options, _READ_KEYS)
    endpoints = found.get("endpoints", "").strip()
    if not endpoints:
        raise OptionError("option endpoints is required: the name servers, host:port")
    topics, assign = _subscription(found)
    ending = ("endingOffsets", "endingTimestamp", "endingOffsetsByTimestamp")
    if streaming and any(name in found for name in ending):
        raise OptionError(
            "options endingOffsets/endingTimestamp/endingOffsetsByTimestamp are for batch "
            "reads only"
        )
    group = found.get("consumerGroup")
    commit = _bool(found, "commitOffsetsToBroker", False)
    if commit and not group:
        raise OptionError("option commitOffsetsToBroker needs option consumerGroup")
    max_rows = _int(found, "maxOffsetsPerTrigger", 1)
    min_rows = _int(found, "minOffsetsPerTrigger", 1)
    if max_rows is not None and min_rows is not None and min_rows > max_rows:
        raise OptionError("option minOffsetsPerTrigger is above maxOffsetsPerTrigger")
    return ReadOptions(
        endpoints=endpoints,
        topics=topics,
        assign=assign,
        sub_expression=found.get("subExpression", "*").strip() or "*",
        starting=_offsets(
            found, "startingOffsets", "latest" if streaming else "earliest", ending=False
        ),
        ending=_offsets(found, "endingOffsets", "latest", ending=True),
        starting_timestamp_ms=_int(found, "startingTimestamp", 0),
        ending_timestamp_ms=_int(found, "endingTimestamp", 0),
        min_partitions=_int(found, "minPartitions", 1),
        max_records_per_partition=_int(found, "maxRecordsPerPartition", 1),
        fail_on_data_loss=_bool(found, "failOnDataLoss", True),
        max_offsets_per_trigger=max_rows,
        min_offsets_per_trigger=min_rows,
        max_trigger_delay_ms=_duration_ms(found, "maxTriggerDelay", MAX_TRIGGER_DELAY_MS_DEFAULT),
        consumer_group=group,
        commit_offsets_to_broker=commit,
        initial_offsets_path=found.get("initialOffsetsPath"),
        pull_batch_size=_int(found, "pullBatchSize", 1, PULL_BATCH_SIZE_MAX)
        or PULL_BATCH_SIZE_DEFAULT,
        pull_timeout_ms=_int(found, "pullTimeoutMs", 1) or PULL_TIMEOUT_MS_DEFAULT,
        fetch_retries=_default(
            _int(found, "fetchOffset.numRetries", 0, 100), FETCH_RETRIES_DEFAULT
        ),
        fetch_retry_interval_ms=_int(found, "fetchOffset.retryIntervalMs", 1, 600_000)
        or FETCH_RETRY_INTERVAL_MS_DEFAULT,
        credentials=_credentials(found),
        tls=_tls(found),
        starting_by_timestamp=_timestamps(found, "startingOffsetsByTimestamp"),
        ending_by_timestamp=_timestamps(found, "endingOffsetsByTimestamp"),
        starting_timestamp_strategy=_strategy(found),
        include_headers=_bool(found, "includeHeaders", False),
    )


def _default(value: int | None, default: int) -> int:
    """``value``, or ``default`` when the option was not given (0 is a value)."""
    return default if value is None else value


def write_options(options: Mapping[str, str]) -> WriteOptions:
    """Validate the options of a write.

    Raises:
        OptionError: an unknown or missing option.
    """
    found = _known(options, _WRITE_KEYS)
    endpoints = found.get("endpoints", "").strip()
    if not endpoints:
        raise OptionError("option endpoints is required: the name servers, host:port")
    return WriteOptions(
        endpoints=endpoints,
        topic=found.get("topic"),
        pull_timeout_ms=_int(found, "pullTimeoutMs", 1) or PULL_TIMEOUT_MS_DEFAULT,
        credentials=_credentials(found),
        tls=_tls(found),
        exactly_once=_bool(found, "exactlyOnce", True),
    )
