"""Classic pulls and offsets over ``PullProcessor``.

Codes: ``PULL_MESSAGE`` (11) and ``LITE_PULL_MESSAGE`` (361) with long polling;
``QUERY_CONSUMER_OFFSET`` (14), ``UPDATE_CONSUMER_OFFSET`` (15, oneway),
``SEARCH_OFFSET_BY_TIMESTAMP`` (29), ``GET_MAX_OFFSET`` (30), ``GET_MIN_OFFSET`` (31),
``GET_EARLIEST_MSG_STORETIME`` (32). Group offsets are the broker's one
``ConsumerOffsetManager`` table, so a classic consumer and a gRPC consumer of the same group
share them.

A pull mirrors RocketMQ's ``PullMessageProcessor``: ``sysFlag`` 0x1 commits ``commitOffset``
first, 0x2 lets the request wait up to ``suspendTimeoutMillis`` (at most
``PULL_SUSPEND_MS_MAX``) for a message, 0x4 says the subscription is in the header (lite pull);
otherwise it is the group's from its heartbeats (``clients.ClassicClientTable``), and a pull
with neither answers ``SUBSCRIPTION_NOT_EXIST`` (24). Replies: FOUND 0 with the stored records
as the body (the CommitLog's bytes, never decoded and re-encoded:
``message_codec.stored_records_body``), ``PULL_NOT_FOUND`` 19, ``PULL_RETRY_IMMEDIATELY`` 20
(every message filtered out; ``nextBeginOffset`` moved past them), ``PULL_OFFSET_MOVED`` 21
(the corrected offset); every reply carries ``nextBeginOffset``, ``minOffset``, ``maxOffset``
and ``suggestWhichBrokerId``, which Java unboxes without null checks.

``suggestWhichBrokerId`` follows ``processors.slave_read``: 0 (the master) unless
``slave_read_enable`` is on and the pull read cold data (then the slave, 1); a slave whose
master is online sends caught-up consumers back (0, and ``PULL_RETRY_IMMEDIATELY`` instead of
an answer without messages). On a slave every code here is served from its own replicated
ConsumeQueues and its offset table (``UPDATE_CONSUMER_OFFSET`` is kept locally, as RocketMQ's
slave does, until the next metadata sync copies the master's offsets over it); pulls only with
``slave_read_enable`` (``service.RemotingService`` refuses them before they get here).
"""

from __future__ import annotations

import logging

from ariane.broker import filters
from ariane.broker.processors import pull as pull_mod
from ariane.broker.processors import slave_read
from ariane.broker.remoting import clients, replies
from ariane.common import errors, ids
from ariane.remoting import codes, command, message_codec

_log = logging.getLogger(__name__)

RC = codes.ResponseCode

COMMIT_OFFSET_FLAG = 0x1
SUSPEND_FLAG = 0x2
SUBSCRIPTION_FLAG = 0x4

PULL_SUSPEND_MS_MAX = 25_000
"""Longest a pull waits for a message, ms: below the clients' 30 s call timeout (a timed-out
Java call closes the whole channel), whatever ``suspendTimeoutMillis`` asks."""

PULL_MESSAGES_MAX = 32
"""Most messages one pull returns (Java's ``maxTransferCountOnMessageInMemory``)."""

_PULL_CODES = {
    pull_mod.PullStatus.FOUND: RC.SUCCESS,
    pull_mod.PullStatus.NO_NEW_MESSAGE: RC.PULL_NOT_FOUND,
    pull_mod.PullStatus.OFFSET_ILLEGAL: RC.PULL_OFFSET_MOVED,
}


class PullHandler:
    """Serves pulls and offset requests.

    Args:
        puller: the pull processor.
        client_table: the classic clients (heartbeat subscriptions).
        role: this broker's role in its group (``suggestWhichBrokerId``).
    """

    def __init__(
        self,
        puller: pull_mod.PullProcessor,
        client_table: clients.ClassicClientTable,
        role: slave_read.ReadRole,
    ) -> None:
        self._puller = puller
        self._clients = client_table
        self._role = role

    async def pull(self, request: command.RemotingCommand) -> command.RemotingCommand:
        """Answer a 11 or 361 request (module docstring)."""
        try:
            header = replies.Header(request.ext_fields)
            pull_request = self._pull_request(header)
            sys_flag = header.integer("sysFlag", 0)
            if sys_flag & COMMIT_OFFSET_FLAG:
                self._commit(pull_request, header.integer("commitOffset", -1))
            result = await self._puller.pull(pull_request)
        except errors.ArianeError as exc:
            return replies.error(request, exc)
        code = _PULL_CODES[result.status]
        if result.status is pull_mod.PullStatus.NO_NEW_MESSAGE and (
            result.next_offset > pull_request.offset
        ):
            code = RC.PULL_RETRY_IMMEDIATELY  # all filtered out: move on at once
        suggestion = self._role.suggest(cold=result.cold)
        if suggestion.retry_immediately and result.status is not pull_mod.PullStatus.FOUND:
            code = RC.PULL_RETRY_IMMEDIATELY  # a slave sends the consumer back to its master
        ext = {
            "nextBeginOffset": str(result.next_offset),
            "minOffset": str(result.min_offset),
            "maxOffset": str(result.max_offset),
            "suggestWhichBrokerId": str(suggestion.broker_id),
        }
        body = message_codec.stored_records_body(result.records)
        return command.response(request, code, ext_fields=ext, body=body)

    def _pull_request(self, header: replies.Header) -> pull_mod.PullRequest:
        group = ids.GroupName(header.text("consumerGroup"))
        topic = ids.TopicName(header.text("topic"))
        sys_flag = header.integer("sysFlag", 0)
        if sys_flag & SUBSCRIPTION_FLAG:
            expression = header.text("subscription", "*")
            kind = header.text("expressionType", "TAG")
        else:
            found = self._clients.subscription(group, topic)
            if found is None:
                raise replies.SubscriptionNotExistError(
                    f"consumer group {group!r} has no subscription to {topic!r}: "
                    "no heartbeat named it"
                )
            expression, kind = found.expression, found.expression_type
        suspend_ms = header.integer("suspendTimeoutMillis", 0) if sys_flag & SUSPEND_FLAG else 0
        return pull_mod.PullRequest(
            group=group,
            topic=topic,
            queue_id=ids.QueueId(header.integer("queueId")),
            offset=ids.QueueOffset(header.integer("queueOffset")),
            message_filter=message_filter(kind, expression),
            batch_size=max(
                1, min(header.integer("maxMsgNums", PULL_MESSAGES_MAX), PULL_MESSAGES_MAX)
            ),
            poll_s=max(0, min(suspend_ms, PULL_SUSPEND_MS_MAX)) / 1000,
        )

    def _commit(self, pull_request: pull_mod.PullRequest, offset: int) -> None:
        assert pull_request.group is not None
        if offset < 0:
            return
        try:
            self._puller.update_offset(
                pull_request.group,
                pull_request.topic,
                pull_request.queue_id,
                ids.QueueOffset(offset),
            )
        except errors.ArianeError as exc:  # Java commits on a best-effort basis too
            _log.debug("commit offset with pull refused: %s", exc.message)

    async def query_consumer_offset(
        self, request: command.RemotingCommand
    ) -> command.RemotingCommand:
        """14: the group's committed offset, or ``QUERY_NOT_FOUND`` (22)."""
        try:
            header = replies.Header(request.ext_fields)
            offset = self._puller.get_offset(
                ids.GroupName(header.text("consumerGroup")),
                ids.TopicName(header.text("topic")),
                ids.QueueId(header.integer("queueId")),
            )
        except errors.ArianeError as exc:
            return replies.error(request, exc)
        return replies.ok(request, {"offset": str(offset)})

    async def update_consumer_offset(
        self, request: command.RemotingCommand
    ) -> command.RemotingCommand | None:
        """15 (oneway from the clients): commit the group's offset on one queue."""
        try:
            header = replies.Header(request.ext_fields)
            self._puller.update_offset(
                ids.GroupName(header.text("consumerGroup")),
                ids.TopicName(header.text("topic")),
                ids.QueueId(header.integer("queueId")),
                ids.QueueOffset(header.integer("commitOffset")),
            )
            response = replies.ok(request)
        except errors.ArianeError as exc:
            response = replies.error(request, exc)
        if request.is_oneway:
            if response.code != RC.SUCCESS:
                _log.info("offset update refused (%d): %s", response.code, response.remark)
            return None
        return response

    async def queue_offset(self, request: command.RemotingCommand) -> command.RemotingCommand:
        """29, 30, 31: an offset of one queue; 32: the store time of its first message."""
        try:
            header = replies.Header(request.ext_fields)
            topic = ids.TopicName(header.text("topic"))
            queue_id = ids.QueueId(header.integer("queueId"))
            code = request.code
            if code == codes.RequestCode.GET_EARLIEST_MSG_STORETIME:
                earliest = self._puller.queue_range(topic, queue_id).earliest_store_timestamp_ms
                return replies.ok(request, {"timestamp": str(-1 if earliest is None else earliest)})
            if code == codes.RequestCode.SEARCH_OFFSET_BY_TIMESTAMP:
                offset = self._puller.query_offset(
                    topic, queue_id, pull_mod.OffsetPolicy.TIMESTAMP, header.integer("timestamp")
                )
            else:
                policy = (
                    pull_mod.OffsetPolicy.END
                    if code == codes.RequestCode.GET_MAX_OFFSET
                    else pull_mod.OffsetPolicy.BEGINNING
                )
                offset = self._puller.query_offset(topic, queue_id, policy)
        except errors.ArianeError as exc:
            return replies.error(request, exc)
        return replies.ok(request, {"offset": str(offset)})


def message_filter(kind: str, expression: str) -> filters.MessageFilter:
    """The filter of a classic subscription (``TAG`` or ``SQL92``).

    Raises:
        IllegalFilterExpressionError: the expression does not parse, or an unknown kind.
    """
    if kind not in ("TAG", "SQL92"):
        raise errors.IllegalFilterExpressionError(f"expression type {kind[:20]!r} is unknown")
    return filters.compile_filter(filters.FilterKind(kind), expression or "*")
