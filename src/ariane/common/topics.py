"""Topic and group names: validation rules, system topics, retry and DLQ names.

Mirrors RocketMQ's ``TopicValidator`` and ``MixAll``: a topic name is 1..127 characters of
``[%a-zA-Z0-9_-]``; retry and DLQ topics (``%RETRY%<group>``, a POP consumer's
``%RETRY%<group>_<topic>``, ``%DLQ%<group>``) may be up to 255; system topics are reserved and
cannot be sent to by clients. Group names follow the same character rule with the
255-character limit of RocketMQ's ``checkGroup``.
"""

from __future__ import annotations

import re
import zlib

from ariane.common import errors, ids

TOPIC_NAME_CHARS_MAX = 127
"""TopicValidator.TOPIC_MAX_LENGTH: longest ordinary topic name, in characters."""

RETRY_OR_DLQ_TOPIC_CHARS_MAX = 255
"""Longest ``%RETRY%``/``%DLQ%`` topic name, in characters."""

GROUP_NAME_CHARS_MAX = 255
"""Longest consumer/producer group name, in characters (RocketMQ ``CHARACTER_MAX_LENGTH``)."""

TAG_CHARS_MAX = 255
"""Longest tag, in characters."""

RETRY_GROUP_TOPIC_PREFIX = "%RETRY%"
POP_RETRY_SEPARATOR = "_"
"""Between group and topic in a POP retry topic (``KeyBuilder`` ``POP_RETRY_SEPARATOR_V1``)."""
DLQ_GROUP_TOPIC_PREFIX = "%DLQ%"

SCHEDULE_TOPIC = ids.TopicName("SCHEDULE_TOPIC_XXXX")
"""Where delay-level messages wait until due (queue id = level - 1)."""
TIMER_TOPIC = ids.TopicName("rmq_sys_wheel_timer")
"""Where timer messages wait until their delivery time."""
SCHEDULE_PROGRESS_TOPIC = ids.TopicName("rmq_sys_schedule_progress")
"""Where the schedule records what each delivery batch finished (``broker.schedule.progress``)."""
TRANS_HALF_TOPIC = ids.TopicName("RMQ_SYS_TRANS_HALF_TOPIC")
"""Where transactional half messages wait for COMMIT/ROLLBACK."""
TRANS_OP_HALF_TOPIC = ids.TopicName("RMQ_SYS_TRANS_OP_HALF_TOPIC")
"""Where COMMIT/ROLLBACK op records of half messages go."""
TRANS_CHECK_MAX_TIME_TOPIC = ids.TopicName("TRANS_CHECK_MAX_TIME_TOPIC")
"""Where half messages go after too many unresolved checks."""
AUTO_CREATE_TOPIC_TEMPLATE = ids.TopicName("TBW102")
"""The template topic of RocketMQ's auto-create."""

SYSTEM_TOPICS: frozenset[str] = frozenset(
    {
        SCHEDULE_TOPIC,
        TIMER_TOPIC,
        SCHEDULE_PROGRESS_TOPIC,
        TRANS_HALF_TOPIC,
        TRANS_OP_HALF_TOPIC,
        TRANS_CHECK_MAX_TIME_TOPIC,
        AUTO_CREATE_TOPIC_TEMPLATE,
        "BenchmarkTest",
        "OFFSET_MOVED_EVENT",
        "RMQ_SYS_TRACE_TOPIC",
        "SELF_TEST_TOPIC",
        "rmq_sys_SYNC_BROKER_MEMBER",
    }
)
"""Reserved topic names (TopicValidator.SYSTEM_TOPIC_SET); clients may not send to them."""

SYSTEM_TOPIC_PREFIXES: tuple[str, ...] = ("rmq_sys_", "RMQ_SYS_")
"""Prefixes reserved for system topics."""

_NAME_PATTERN = re.compile(r"^[%a-zA-Z0-9_-]+$")


def is_system_topic(name: str) -> bool:
    """Whether ``name`` is a reserved system topic (by name or by reserved prefix)."""
    return name in SYSTEM_TOPICS or name.startswith(SYSTEM_TOPIC_PREFIXES)


def is_retry_topic(name: str) -> bool:
    """Whether ``name`` is a retry topic (``%RETRY%<group>`` or ``%RETRY%<group>_<topic>``)."""
    return name.startswith(RETRY_GROUP_TOPIC_PREFIX)


def is_dlq_topic(name: str) -> bool:
    """Whether ``name`` is a ``%DLQ%<group>`` topic."""
    return name.startswith(DLQ_GROUP_TOPIC_PREFIX)


def validate_topic(name: str, *, allow_system: bool = False) -> ids.TopicName:
    """Check a topic name with RocketMQ's TopicValidator rules.

    Args:
        name: the candidate name.
        allow_system: accept reserved system topics (internal callers only).

    Returns:
        ``name`` as a ``TopicName``.

    Raises:
        IllegalTopicError: empty, too long (127, or 255 for retry/DLQ topics), characters
            outside ``[%a-zA-Z0-9_-]``, or a reserved system topic.
    """
    if not name:
        raise errors.IllegalTopicError("topic name is empty; give a name like 'orders'")
    limit = (
        RETRY_OR_DLQ_TOPIC_CHARS_MAX
        if is_retry_topic(name) or is_dlq_topic(name)
        else TOPIC_NAME_CHARS_MAX
    )
    if len(name) > limit:
        raise errors.IllegalTopicError(
            f"topic name is {len(name)} characters long; the limit is {limit}"
        )
    if not _NAME_PATTERN.match(name):
        raise errors.IllegalTopicError(f"topic name {name!r} has characters outside [%a-zA-Z0-9_-]")
    if not allow_system and is_system_topic(name):
        raise errors.IllegalTopicError(f"topic {name!r} is a reserved system topic")
    return ids.TopicName(name)


def validate_group(name: str) -> ids.GroupName:
    """Check a consumer or producer group name (RocketMQ ``Validators.checkGroup``).

    Raises:
        IllegalConsumerGroupError: empty, over 255 characters, or characters outside
            ``[%a-zA-Z0-9_-]``.
    """
    if not name:
        raise errors.IllegalConsumerGroupError("group name is empty; give a name like 'billing'")
    if len(name) > GROUP_NAME_CHARS_MAX:
        raise errors.IllegalConsumerGroupError(
            f"group name is {len(name)} characters long; the limit is {GROUP_NAME_CHARS_MAX}"
        )
    if not _NAME_PATTERN.match(name):
        raise errors.IllegalConsumerGroupError(
            f"group name {name!r} has characters outside [%a-zA-Z0-9_-]"
        )
    return ids.GroupName(name)


def validate_tag(tag: str) -> str:
    """Check a message tag: non-blank, no ``|`` (it separates tags in expressions), ≤ 255 chars.

    Raises:
        IllegalMessageTagError: if the tag breaks one of those rules.
    """
    if not tag.strip():
        raise errors.IllegalMessageTagError("tag is blank; omit it or give a word like 'TagA'")
    if "|" in tag:
        raise errors.IllegalMessageTagError(f"tag {tag!r} contains '|', which separates tags")
    if len(tag) > TAG_CHARS_MAX:
        raise errors.IllegalMessageTagError(
            f"tag is {len(tag)} characters long; the limit is {TAG_CHARS_MAX}"
        )
    return tag


LITE_TOPIC_BYTES_MAX = 64
"""Longest lite topic name, UTF-8 bytes (RocketMQ 5.5 proxy ``maxLiteTopicSize``; the official
clients' default ``max_lite_topic_size``, announced to lite consumers)."""

_LITE_NAME_PATTERN = re.compile(r"^[a-zA-Z0-9_-]+$")


def validate_lite_topic(name: str, *, bytes_max: int = LITE_TOPIC_BYTES_MAX) -> str:
    """Check a lite topic name as RocketMQ 5.5's ``GrpcValidator.validateLiteTopic``: not
    blank, at most ``bytes_max`` UTF-8 bytes, only ``[a-zA-Z0-9_-]``.

    Raises:
        IllegalLiteTopicError: if the name breaks one of those rules.
    """
    if not name.strip():
        raise errors.IllegalLiteTopicError("lite topic is blank")
    size = len(name.encode())
    if size > bytes_max:
        raise errors.IllegalLiteTopicError(
            f"lite topic is {size} bytes long; the limit is {bytes_max}"
        )
    if not _LITE_NAME_PATTERN.match(name):
        raise errors.IllegalLiteTopicError(
            f"lite topic {name!r} may only hold letters, digits, '-' and '_'"
        )
    return name


def retry_topic(group: ids.GroupName) -> ids.TopicName:
    """The retry topic of a consumer group: ``%RETRY%<group>`` (MixAll.getRetryTopic)."""
    return ids.TopicName(RETRY_GROUP_TOPIC_PREFIX + group)


def pop_retry_topic(group: ids.GroupName, topic: ids.TopicName) -> ids.TopicName:
    """The retry topic of a RocketMQ 5 (POP/gRPC) consumer group for one topic:
    ``%RETRY%<group>_<topic>`` (``KeyBuilder.buildPopRetryTopicV1``, RocketMQ's default while
    ``enableRetryTopicV2`` is off; V2's ``+`` separator is outside the topic alphabet here).

    A name over ``RETRY_OR_DLQ_TOPIC_CHARS_MAX`` (a group name longer than about 120
    characters) keeps its first characters and ends in ``-`` and the CRC32 of the full name in
    hex, so it stays a valid topic (and a valid directory name); RocketMQ does not shorten it
    and cannot store such a topic either. The copies carry their origin in ``RETRY_TOPIC``.
    """
    name = RETRY_GROUP_TOPIC_PREFIX + group + POP_RETRY_SEPARATOR + topic
    if len(name) <= RETRY_OR_DLQ_TOPIC_CHARS_MAX:
        return ids.TopicName(name)
    digest = f"-{zlib.crc32(name.encode()):08x}"
    return ids.TopicName(name[: RETRY_OR_DLQ_TOPIC_CHARS_MAX - len(digest)] + digest)


def dlq_topic(group: ids.GroupName) -> ids.TopicName:
    """The dead-letter topic of a consumer group: ``%DLQ%<group>`` (MixAll.getDLQTopic)."""
    return ids.TopicName(DLQ_GROUP_TOPIC_PREFIX + group)


def group_of_retry_or_dlq(topic: str) -> ids.GroupName | None:
    """The group a ``%RETRY%``/``%DLQ%`` topic belongs to, or ``None`` for other topics."""
    for prefix in (RETRY_GROUP_TOPIC_PREFIX, DLQ_GROUP_TOPIC_PREFIX):
        if topic.startswith(prefix):
            return ids.GroupName(topic[len(prefix) :])
    return None
