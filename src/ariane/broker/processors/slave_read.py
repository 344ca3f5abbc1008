"""Reading from a slave: which broker of the group a classic consumer should pull from next.

Mirrors RocketMQ 5's ``PullMessageProcessor`` (``rejectRequest`` and the end of
``composeResponseHeader``) and ``DefaultMessageStore.getMessage``:

* **the in-memory rule** (``getMessage``): a pull reads "cold" data when the CommitLog's max
  offset is more than ``accessMessageInMemoryMaxRatio`` (40) % of the machine's physical memory
  past the CommitLog offset of the last message it read; the store then sets
  ``suggestPullingFromSlave``;
* **the master's suggestion**: with ``slaveReadEnable`` (default false) a cold pull answers
  ``suggestWhichBrokerId`` = ``whichBrokerWhenConsumeSlowly`` (1), any other pull the group's
  ``brokerId`` (0); without it, always 0 (``MixAll.MASTER_ID``);
* **the slave's suggestion back**: a slave answering a pull that is not cold while the master is
  online (RocketMQ's ``minBrokerIdInGroup == MASTER_ID``; here: its HA stream from the master is
  up) suggests 0, and turns an answer without messages into ``PULL_RETRY_IMMEDIATELY`` so the
  consumer goes back to the master at once; with the master away it answers as a master would;
* **a slave without ``slaveReadEnable`` refuses pulls** (``rejectRequest``: the transport then
  answers SYSTEM_BUSY before the processor runs), as it refuses sends
  (``SendMessageProcessor.rejectRequest``).

The Java client follows the suggestion (``PullAPIWrapper.recalculatePullFromWhichNode``): it
pulls from the suggested id when the route lists it, else from any member of the group, which is
how a consumer reads from the slave while the name server no longer lists the master.

gRPC clients never read from a slave: RocketMQ 5's proxy serves POP (``ReceiveMessage``) from
masters only, and Ariane's gRPC routes list only the master of each group
(``grpcwire.convert.query_route_queues``; a group without a live master is left out). A gRPC
consumer therefore waits, while its group has no master, for the master to come back or for a
slave to be promoted (``ChangeRole``, the operator's failover), and follows the new route at its
next refresh. There is no POP on slaves.

The rules are pure functions; ``ReadRole`` reads the broker's role through callables.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from ariane.common import ids

ACCESS_MESSAGE_IN_MEMORY_MAX_RATIO_PERCENT = 40
"""Share of physical memory, %, within which a pull counts as "in memory" (RocketMQ
``MessageStoreConfig.accessMessageInMemoryMaxRatio``)."""

WHICH_BROKER_WHEN_CONSUME_SLOWLY = ids.BrokerId(1)
"""The slave a master suggests for cold pulls (RocketMQ ``SubscriptionGroupConfig
.whichBrokerWhenConsumeSlowly``, default 1)."""


def in_memory_window_bytes(physical_memory_bytes: int, ratio_percent: int) -> int:
    """How far behind the CommitLog's end a pull may read and still count as in memory, bytes
    (RocketMQ ``TOTAL_PHYSICAL_MEMORY_SIZE * accessMessageInMemoryMaxRatio / 100``)."""
    assert physical_memory_bytes >= 0 and 0 <= ratio_percent <= 100, "checked by the settings"
    return physical_memory_bytes * ratio_percent // 100


def suggest_pulling_from_slave(
    *, commit_log_max_offset: int, pulled_commit_log_offset: int | None, window_bytes: int
) -> bool:
    """RocketMQ's in-memory rule: the pull read data more than ``window_bytes`` behind the
    CommitLog's end (``diff > memory`` in ``DefaultMessageStore.getMessage``).

    Args:
        commit_log_max_offset: the CommitLog's max offset when the pull was served, bytes.
        pulled_commit_log_offset: CommitLog offset of the last message the pull returned;
            ``None`` when it returned none (RocketMQ then reports no suggestion either).
        window_bytes: ``in_memory_window_bytes``.
    """
    if pulled_commit_log_offset is None:
        return False
    return commit_log_max_offset - pulled_commit_log_offset > window_bytes


@dataclasses.dataclass(frozen=True, slots=True)
class Suggestion:
    """What a pull reply tells the consumer about where to pull next.

    Attributes:
        broker_id: ``suggestWhichBrokerId`` (0 = the master).
        retry_immediately: a slave sends the consumer back to its online master: a reply
            without messages becomes ``PULL_RETRY_IMMEDIATELY``.
    """

    broker_id: ids.BrokerId
    retry_immediately: bool = False


def suggest(
    *, slave_read_enable: bool, broker_id: int, cold: bool, master_online: bool
) -> Suggestion:
    """``suggestWhichBrokerId`` of a pull reply (the module docstring's rules).

    Args:
        slave_read_enable: the broker's ``slave_read_enable``.
        broker_id: this broker's id now (0 = master).
        cold: ``suggest_pulling_from_slave`` for this pull.
        master_online: on a slave, whether its master is reachable (ignored on a master).
    """
    suggested = ids.MASTER_BROKER_ID
    if slave_read_enable and cold:
        suggested = WHICH_BROKER_WHEN_CONSUME_SLOWLY
    if broker_id != ids.MASTER_BROKER_ID and not cold and master_online:
        return Suggestion(ids.MASTER_BROKER_ID, retry_immediately=True)
    return Suggestion(suggested)


def rejects_pull(*, slave_read_enable: bool, broker_id: int) -> bool:
    """A slave without ``slave_read_enable`` refuses pulls (``PullMessageProcessor
    .rejectRequest``)."""
    return broker_id != ids.MASTER_BROKER_ID and not slave_read_enable


@dataclasses.dataclass(frozen=True, slots=True)
class ReadRole:
    """What the pull adapters need to know about this broker's place in its group.

    Attributes:
        slave_read_enable: the broker's ``slave_read_enable`` setting.
        broker_id: this broker's id now (a promotion or demotion changes it).
        master_online: on a slave, whether its HA stream from the master is up.
    """

    slave_read_enable: bool
    broker_id: Callable[[], int]
    master_online: Callable[[], bool]

    def suggest(self, *, cold: bool) -> Suggestion:
        """``suggest`` for this broker now."""
        return suggest(
            slave_read_enable=self.slave_read_enable,
            broker_id=self.broker_id(),
            cold=cold,
            master_online=self.master_online(),
        )

    def rejects_pull(self) -> bool:
        """``rejects_pull`` for this broker now."""
        return rejects_pull(slave_read_enable=self.slave_read_enable, broker_id=self.broker_id())

    def rejects_send(self) -> bool:
        """A slave refuses sends (``SendMessageProcessor.rejectRequest``)."""
        return self.broker_id() != ids.MASTER_BROKER_ID
