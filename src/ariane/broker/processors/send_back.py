"""A classic consumer's failed message back to the broker: retry later, or dead-letter it.

Mirrors RocketMQ's ``AbstractSendMessageProcessor.consumerSendMsgBack`` (the classic
``CONSUMER_SEND_MSG_BACK``, what a push consumer's ``RECONSUME_LATER`` sends): the message is
read back from the CommitLog by its offset; ``RETRY_TOPIC`` is set to its topic if absent and
``ORIGIN_MESSAGE_ID`` to the origin id; then

* with ``reconsumeTimes >= maxReconsumeTimes`` (the request's, else the group's
  ``retry_max_times``) or a negative delay level, a copy goes to ``%DLQ%<group>`` (1 queue,
  created on demand and registered with the name servers);
* otherwise a copy with ``reconsumeTimes + 1`` goes to ``%RETRY%<group>`` through the delay
  schedule at the given level, or at ``3 + reconsumeTimes`` when the level is 0 (10 s, 30 s,
  1 m ... 2 h, clamped to the last level).

The copy keeps the body, FLAG, SYSFLAG, born time and host, UNIQ_KEY and every property (a
classic consumer restores the topic from ``RETRY_TOPIC``). Group offsets are not touched.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from typing import Protocol

from ariane.broker.processors import classic_send, long_polling
from ariane.broker.tables import subscriptions, topic_config
from ariane.common import errors, ids, message, topics
from ariane.store import commit_log
from ariane.store import message_store as message_store_mod

_log = logging.getLogger(__name__)

P = message.Property

DELAY_LEVEL_BASE = 3
"""A level-0 send-back retries at ``DELAY_LEVEL_BASE + reconsumeTimes`` (RocketMQ: 10 s first)."""


@dataclasses.dataclass(frozen=True, slots=True)
class SendBackRequest:
    """A ``CONSUMER_SEND_MSG_BACK``.

    Attributes:
        group: the consumer group.
        commit_log_offset: the message's CommitLog offset (the pulled record's physicalOffset).
        delay_level: 0 = the broker decides, below 0 = dead-letter now, else the level.
        origin_message_id: the id of the first delivery (``originMsgId``), or "".
        max_reconsume_times: the consumer's limit, or below 0 for the group's.
    """

    group: str
    commit_log_offset: int
    delay_level: int = 0
    origin_message_id: str = ""
    max_reconsume_times: int = -1


class SendBackCounters(Protocol):
    """The total a send-back adds to (``runtime.Counters``)."""

    sent_to_dlq: int


class SendBackProcessor:
    """Retries or dead-letters messages classic consumers failed to consume.

    Args:
        store: the message store.
        topic_table: creates ``%RETRY%`` and ``%DLQ%`` topics.
        group_table: the group's ``retry_max_times``.
        schedule: parks retries at their delay level.
        polling: long polling, notified when a dead letter is stored.
        counters: ``sent_to_dlq``.
        route_changed: set when a new retry or DLQ topic must be registered.
    """

    def __init__(
        self,
        *,
        store: message_store_mod.MessageStore,
        topic_table: topic_config.TopicConfigManager,
        group_table: subscriptions.SubscriptionGroupManager,
        schedule: classic_send.ClassicScheduleHook,
        polling: long_polling.LongPolling,
        counters: SendBackCounters,
        route_changed: asyncio.Event,
    ) -> None:
        self._store = store
        self._topics = topic_table
        self._groups = group_table
        self._schedule = schedule
        self._polling = polling
        self._counters = counters
        self._route_changed = route_changed

    async def send_back(self, request: SendBackRequest) -> ids.TopicName:
        """Store the retry or dead-letter copy of the message; returns the topic it went to.

        Raises:
            IllegalConsumerGroupError, ConsumerGroupNotFoundError: a bad or unknown group.
            MessageNotFoundError: no readable message at the offset.
            ServiceUnavailableError: the store refused the copy.
        """
        group = self._groups.require(request.group)
        found = self._store.get_message(ids.CommitLogOffset(request.commit_log_offset))
        stored = found.message
        if stored is None:
            raise errors.MessageNotFoundError(
                f"no message at CommitLog offset {request.commit_log_offset} to send back"
            )
        limit = request.max_reconsume_times
        if limit < 0:
            limit = group.retry_max_times
        props = dict(stored.properties)
        props.setdefault(P.RETRY_TOPIC, stored.topic)
        props.setdefault(
            P.ORIGIN_MESSAGE_ID, request.origin_message_id or message.message_id_of(stored)
        )
        dead = request.delay_level < 0 or stored.reconsume_times >= limit
        target = self._target_topic(group.group, dead=dead)
        copy = commit_log.AppendRequest(
            message=message.Message(target, stored.body, props, stored.message.flag),
            queue_id=ids.QueueId(0),
            sys_flag=int(stored.sys_flag),
            born_timestamp_ms=stored.born_timestamp_ms,
            born_host=stored.born_host,
            reconsume_times=stored.reconsume_times + 1,
        )
        if not dead:
            level = request.delay_level or DELAY_LEVEL_BASE + stored.reconsume_times
            copy = self._schedule.park_level(copy, level)
        (result,) = await self._store.put_messages([copy])
        if not result.status.is_stored:
            raise errors.ServiceUnavailableError(
                f"could not store the message in {target}: {result.status.value}"
            )
        if dead:
            self._counters.sent_to_dlq += 1
            self._polling.notify(target)
            _log.info(
                "message %s of %s moved to %s", props[P.ORIGIN_MESSAGE_ID], stored.topic, target
            )
        return target

    def _target_topic(self, group: ids.GroupName, *, dead: bool) -> ids.TopicName:
        """``%DLQ%<group>`` or ``%RETRY%<group>``, created (and registered) when missing."""
        name = topics.dlq_topic(group) if dead else topics.retry_topic(group)
        if self._topics.get(name) is None:
            if dead:
                self._topics.ensure_dlq_topic(group)
            else:
                self._topics.ensure_retry_topic(group)
            self._route_changed.set()
        return name
