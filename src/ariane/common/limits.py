"""Protocol-wide limits and defaults shared by broker, client and store.

Each constant names its unit last and the RocketMQ setting it mirrors.
"""

from __future__ import annotations

MESSAGE_SIZE_BYTES_MAX = 4 * 1024 * 1024
"""Largest body accepted (RocketMQ ``maxMessageSize`` = 4 MiB)."""

PROPERTIES_SIZE_BYTES_MAX = 32_767
"""Largest encoded properties string the store accepts (``Short.MAX_VALUE``)."""

USER_PROPERTIES_SIZE_BYTES_MAX = 16 * 1024
"""Largest total size of user properties over gRPC (proxy ``userPropertyMaxSize``, 16 KiB)."""

USER_PROPERTIES_COUNT_MAX = 128
"""Most user properties per message over gRPC (proxy ``userPropertyMaxNum``)."""

MESSAGE_GROUP_CHARS_MAX = 64
"""Longest FIFO message group (proxy ``maxMessageGroupSize``)."""

INVISIBLE_DURATION_MS_MIN = 10_000
"""Shortest invisible duration the proxy accepts (``minInvisibleTimeMillsForRecv``)."""

INVISIBLE_DURATION_MS_MAX = 12 * 3600 * 1000
"""Longest invisible duration (``maxInvisibleTimeMills``, 12 h)."""

INVISIBLE_DURATION_MS_DEFAULT = 60_000
"""Default invisible duration (``defaultInvisibleTimeMills``)."""

LONG_POLLING_MS_MIN = 5_000
"""Shortest long-polling timeout (proxy ``minLongPollingTimeoutMillis``)."""

LONG_POLLING_MS_MAX = 20_000
"""Longest long-polling timeout (proxy ``maxLongPollingTimeoutMillis``)."""

MAX_DELIVERY_ATTEMPTS_DEFAULT = 17
"""Deliveries before a message goes to the DLQ: the first one plus 16 retries."""

RECEIVE_BATCH_SIZE_MAX = 32
"""Most messages returned by one ReceiveMessage/pop (``popBatchNums``)."""

DEFAULT_TOPIC_QUEUE_NUMS = 8
"""Queues of an auto-created topic (``defaultTopicQueueNums``)."""


def check_range(name: str, value: int, low: int, high: int) -> None:
    """Refuse a setting or argument outside ``low..high`` (inclusive), naming it.

    Args:
        name: the setting's or argument's name, as the user wrote it.
        value: its value.
        low: the smallest allowed value.
        high: the largest allowed value.

    Raises:
        ValueError: ``value`` is outside ``low..high`` (the message says which bounds).
    """
    if not low <= value <= high:
        raise ValueError(f"{name}={value} is outside {low}..{high}")
