"""Settings of lite topics (RocketMQ 5.5, RIP-83): quotas, name length and TTL expiry.

One frozen dataclass, included in ``settings.BrokerSettings`` as ``lite`` (TOML table
``[lite]``). RocketMQ keeps lite topics in RocksDB and publishes no broker-wide count; Ariane's
quota of lite topics per broker is sized for the memory each one costs here (``tables.
lite_topics``: a few hundred bytes when idle). Every value has a bound, refused with
``ValueError`` at load time.
"""

from __future__ import annotations

import dataclasses

from ariane.common import limits, topics


@dataclasses.dataclass(frozen=True, slots=True)
class LiteSettings:
    """How many lite topics a broker keeps, how many one consumer subscribes, and when an idle
    one expires."""

    lite_topics_max: int = 200_000
    """Most lite topics on this broker over all LITE parents, a count; a send that would create
    one more answers LITE_TOPIC_QUOTA_EXCEEDED (twice the 10^5 the design is measured at)."""

    subscription_quota: int = 1_200
    """Most lite topics one consumer client subscribes at once, a count; announced to lite
    consumers as ``lite_subscription_quota`` (the Java client's default, 1200) and enforced by
    SyncLiteSubscription with LITE_SUBSCRIPTION_QUOTA_EXCEEDED."""

    name_bytes_max: int = topics.LITE_TOPIC_BYTES_MAX
    """Longest lite topic name, UTF-8 bytes (announced as ``max_lite_topic_size``; the proxy's
    ``maxLiteTopicSize``, 64)."""

    ttl_ms: int = 3_600_000
    """A lite topic with no send for this long expires (its subscribers are told to drop it),
    unless a subscribed group still has unconsumed messages of it, ms (1 h)."""

    expiry_interval_ms: int = 10_000
    """Pause between two passes of the expiry loop, ms."""

    expiry_scan_max: int = 10_000
    """Most lite topics one expiry pass looks at, a count (the next pass goes on from there)."""

    rebuild_units_max: int = 1_000_000
    """Most ConsumeQueue units of one LITE parent queue read back from its end when the table
    is rebuilt at start and at a promotion (``tables.lite_rebuild``), a count: the bound of
    that work, with the TTL (older units are not read)."""

    def __post_init__(self) -> None:
        limits.check_range("lite_topics_max", self.lite_topics_max, 1, 10_000_000)
        limits.check_range("subscription_quota", self.subscription_quota, 1, 1_000_000)
        limits.check_range("name_bytes_max", self.name_bytes_max, 1, topics.TOPIC_NAME_CHARS_MAX)
        limits.check_range("ttl_ms", self.ttl_ms, 100, 30 * 86_400_000)
        limits.check_range("expiry_interval_ms", self.expiry_interval_ms, 10, 3_600_000)
        limits.check_range("expiry_scan_max", self.expiry_scan_max, 1, 10_000_000)
        limits.check_range("rebuild_units_max", self.rebuild_units_max, 1, 1_000_000_000)
