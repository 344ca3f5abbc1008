"""Settings of a slave's metadata sync from its master (``SlaveSyncSettings``, ``[slave_sync]``).

One frozen dataclass, a docstring per field naming the RocketMQ setting it mirrors; bounds are
checked once, at load time, with ``ValueError``.
"""

from __future__ import annotations

import dataclasses

from ariane.common import limits


@dataclasses.dataclass(frozen=True, slots=True)
class SlaveSyncSettings:
    """How often a slave copies topics, subscription groups and consumer offsets from its
    master (RocketMQ ``SlaveSynchronize.syncAll``, scheduled every 10 s by ``BrokerController``)."""

    interval_ms: int = 10_000
    """Period of one sync round, ms (RocketMQ: 10 s); a promoted slave serves what the last
    round copied."""

    call_timeout_ms: int = 5_000
    """Deadline of each call to the name server or the master, ms."""

    def __post_init__(self) -> None:
        limits.check_range("interval_ms", self.interval_ms, 100, 3_600_000)
        limits.check_range("call_timeout_ms", self.call_timeout_ms, 100, 60_000)
