"""The broker's ``apache.rocketmq.v2.MessagingService``: thin handlers over the processors.

Each handler checks the request's shape (client id, names, ranges) and answers with the right
RocketMQ ``Code`` (grpc-v2.md §6); the work happens in ``send.SendProcessor``,
``consume.ConsumeProcessor`` and ``routes.RouteLookup``. ``ariane.grpcwire.guard`` guarantees a
status on every answer: an ``ArianeError`` raised here becomes its code, anything else
INTERNAL_ERROR, an RPC not defined here NOT_IMPLEMENTED. The pull RPCs (PullMessage, GetOffset,
UpdateOffset, QueryOffset) are served by ``pull.PullProcessor``. A parked DELAY message's entry
carries a recall handle (``grpcwire.recall``) that RecallMessage, here or at a name server,
resolves. EndTransaction goes to ``transaction.TransactionalMessageService``; Telemetry streams
are kept open in ``producer_streams`` so transaction checks can be pushed to producers.
Lite topics (RocketMQ 5.5): SyncLiteSubscription is ``lite_rpc.sync_lite_subscription``, and a
LITE_PUSH_CONSUMER's or LITE_SIMPLE_CONSUMER's receive filters by its group's lite
subscriptions (``lite_rpc.receive_filter``); settings replies are ``settings_reply``'s.

``IngestService`` serves ``ariane.ingest.v1.Ingest/SendStream`` (Ariane's own producer streams
batches) from the same ``answer_send`` as SendMessage, so both answer a request identically.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import AsyncIterator

from ariane.broker import filters
from ariane.broker import runtime as runtime_mod
from ariane.broker.grpc import (
    assignment_rpc,
    lite_rpc,
    producer_streams,
    recall_rpc,
    receive_rpc,
    routes,
    settings_reply,
    transaction_rpc,
)
from ariane.broker.processors import (
    assignment,
    client_settings,
    consume,
    pull,
    renewal,
    send,
    send_draft,
)
from ariane.broker.tables import clients, consumers
from ariane.broker.transaction import processor as transaction
from ariane.common import errors, ids, limits, message, topics
from ariane.grpcwire import codes, convert, guard, messages, metadata, pb

_log = logging.getLogger(__name__)

Context = guard.CallContext
"""A call's context: the gRPC servicer context, or a front-end relay's (``guard.CallContext``)."""

RECEIVE_BATCH_SIZE = client_settings.RECEIVE_BATCH_SIZE
"""``receive_batch_size`` announced to consumers; also the most one receive returns."""

_PUSH_TYPES = frozenset(
    {
        client_settings.ClientKind.PUSH_CONSUMER.value,
        client_settings.ClientKind.LITE_PUSH_CONSUMER.value,
    }
)
"""Client types whose receive reads the queue assigned to them."""

_LITE_TYPES = frozenset(
    {
        client_settings.ClientKind.LITE_PUSH_CONSUMER.value,
        client_settings.ClientKind.LITE_SIMPLE_CONSUMER.value,
    }
)
"""Client types whose receive filters by their group's lite subscriptions (``lite_rpc``)."""


class MessagingService:
    """Serves v2 MessagingService for this broker's queues.

    Args:
        runtime: the broker's state.
        sender: the send path.
        consumer: the consume path.
        route_lookup: QueryRoute/QueryAssignment routes.
        client_registry: live client sessions.
        puller: the pull-by-offset path.
        transactions: EndTransaction's service (``None``: EndTransaction NOT_IMPLEMENTED).
        streams: the open Telemetry streams (a new registry when ``None``).
        consumer_registry: live members of each consumer group (a new one over
            ``client_registry`` when ``None``).
        renewals: the auto-renewed receipt handles (a new table when ``None``; the server
            runs its ``run`` loop).
    """

    def __init__(
        self,
        runtime: runtime_mod.BrokerRuntime,
        sender: send.SendProcessor,
        consumer: consume.ConsumeProcessor,
        route_lookup: routes.RouteLookup,
        client_registry: clients.ClientRegistry,
        puller: pull.PullProcessor,
        *,
        transactions: transaction.TransactionalMessageService | None = None,
        streams: producer_streams.ProducerStreams | None = None,
        consumer_registry: consumers.ConsumerRegistry | None = None,
        renewals: renewal.ReceiptRenewals | None = None,
    ) -> None:
        self._transactions = transactions
        if consumer_registry is None:
            consumer_registry = consumers.ConsumerRegistry(client_registry)
        if streams is None:
            streams = producer_streams.ProducerStreams(client_registry)
        self.streams = streams
        self._runtime = runtime
        self._sender = sender
        self._consumer = consumer
        self._routes = route_lookup
        self._clients = client_registry
        self._settings = client_settings.ClientSettingsProcessor(
            group_table=runtime.groups,
            client_registry=client_registry,
            consumer_registry=consumer_registry,
            receive=runtime.settings.receive,
            message_size_bytes_max=runtime.settings.store.message_size_bytes_max,
            retry_topics=client_settings.retry_topic_creator(runtime.topics, runtime.route_changed),
        )
        self._assignments = assignment.AssignmentProcessor(consumer_registry=consumer_registry)
        self._puller = puller
        if renewals is None:
            renewals = receive_rpc.new_renewals(runtime, consumer, client_registry)
        self.receives = receive_rpc.ReceiveSessions(consumer, renewals, runtime)

    def _client(self, context: Context) -> clients.ClientSession:
        return self._clients.touch(metadata.require_client_id(context))

    # -- routes and sessions -----------------------------------------------------------------

    async def query_route(
        self, request: pb.v2_service.QueryRouteRequest, context: Context
    ) -> pb.v2_service.QueryRouteResponse:
        """QueryRoute (§6.1): the name servers' answer, converted like theirs."""
        self._client(context)
        topic = topics.validate_topic(request.topic.name)
        found = await self._routes.topic_route(topic)
        return convert.query_route_response(found, request.topic)

    async def heartbeat(
        self, request: pb.v2_service.HeartbeatRequest, context: Context
    ) -> pb.v2_service.HeartbeatResponse:
        """Heartbeat (§6.7): refresh the client's session."""
        self._client(context)
        return pb.v2_service.HeartbeatResponse(status=codes.ok())

    async def notify_client_termination(
        self, request: pb.v2_service.NotifyClientTerminationRequest, context: Context
    ) -> pb.v2_service.NotifyClientTerminationResponse:
        """NotifyClientTermination (§6.7): drop the client's session, memberships and locks."""
        self._clients.remove(metadata.require_client_id(context))
        return pb.v2_service.NotifyClientTerminationResponse(status=codes.ok())

    async def telemetry(
        self, requests: AsyncIterator[pb.v2_service.TelemetryCommand], context: Context
    ) -> AsyncIterator[pb.v2_service.TelemetryCommand]:
        """Telemetry (§6.2): answer every settings report at once with the merged settings;
        while open, the stream also carries the transaction checks pushed to the client."""
        client_id = metadata.require_client_id(context)
        outbox = self.streams.open(client_id)
        self._clients.touch(client_id).channel = outbox  # the stream is the client's channel

        async def answer(
            command: pb.v2_service.TelemetryCommand,
        ) -> pb.v2_service.TelemetryCommand | None:
            if command.WhichOneof("command") != "settings":
                return None
            reply = await settings_reply.merged_settings(
                self._settings, self._runtime.lite_topics, client_id, command.settings, context
            )
            return pb.v2_service.TelemetryCommand(status=codes.ok(), settings=reply)

        try:
            async for command in producer_streams.serve(requests, outbox, answer):
                yield command
        finally:
            self.streams.close(client_id, outbox)
            self._clients.close_channel(outbox)  # not if the client moved to a newer stream

    # -- send ----------------------------------------------------------------------------------

    async def send_message(
        self, request: pb.v2_service.SendMessageRequest, context: Context
    ) -> pb.v2_service.SendMessageResponse:
        """SendMessage (§6.3): one entry per message; MULTIPLE_RESULTS when codes differ."""
        return await self.answer_send(request, context)

    async def answer_send(
        self, request: pb.v2_service.SendMessageRequest, context: Context
    ) -> pb.v2_service.SendMessageResponse:
        """The answer to one SendMessageRequest, for unary SendMessage and each request of
        ``ariane.ingest.v1.Ingest/SendStream`` alike; never raises.

        A refusal of the whole request (no client id, no message, too many clients, any
        invalid message: a request is all-or-nothing) is the answer's status with no entries,
        as ``ariane.grpcwire.guard`` makes of an ``ArianeError``;
        an unexpected exception is logged and answers INTERNAL_ERROR.
        """
        try:
            session = self._client(context)
            if not request.messages:
                raise errors.BadRequestError("SendMessage carries no message")
            incoming = _decode_messages(request)
            transaction_rpc.learn_transaction_topics(session, incoming)
            outcomes = await self._sender.send(incoming, born_ip=peer_ip(context))
        except errors.ArianeError as exc:
            return pb.v2_service.SendMessageResponse(status=codes.from_error(exc))
        except Exception as exc:  # a producer must get a status, never a crash
            _log.exception("SendMessage failed with an unexpected error")
            return pb.v2_service.SendMessageResponse(
                status=codes.internal_error(f"SendMessage failed: {type(exc).__name__}")
            )
        # One Status per distinct (code, text), not per message (each entry copies it); the
        # distinct statuses in first-seen order combine exactly as every entry's would.
        statuses: dict[tuple[errors.Code, str], pb.v2.Status] = {}
        response = pb.v2_service.SendMessageResponse()
        add_entry = response.entries.add
        for sent, outcome in zip(request.messages, outcomes, strict=True):
            key = (outcome.code, outcome.text)
            entry_status = statuses.get(key)
            if entry_status is None:
                entry_status = statuses[key] = codes.status(outcome.code, outcome.text)
            add_entry(
                status=entry_status,
                message_id=outcome.message_id,
                offset=max(outcome.queue_offset, 0),
                recall_handle=self._recall_handle(sent.topic.name, outcome),
                transaction_id=outcome.transaction_id,
            )
        response.status.CopyFrom(codes.combine(statuses.values()))
        return response

    def _recall_handle(self, topic: str, outcome: send.SendOutcome) -> str:
        """The recall handle of a parked DELAY message ("" for any other)."""
        return recall_rpc.recall_handle(
            self._runtime.broker_name, topic, outcome.delivery_ms, outcome.message_id
        )

    async def recall_message(
        self, request: pb.v2_service.RecallMessageRequest, context: Context
    ) -> pb.v2_service.RecallMessageResponse:
        """RecallMessage (§6.9): ``recall_rpc.recall_message``."""
        self._client(context)
        return recall_rpc.recall_message(self._runtime.schedule, self._runtime.broker_name, request)

    async def end_transaction(
        self, request: pb.v2_service.EndTransactionRequest, context: Context
    ) -> pb.v2_service.EndTransactionResponse:
        """EndTransaction (§6.8): ``transaction_rpc.end_transaction``."""
        self._client(context)
        if self._transactions is None:
            return pb.v2_service.EndTransactionResponse(
                status=codes.not_implemented("EndTransaction")
            )
        return await transaction_rpc.end_transaction(self._transactions, request)

    # -- consume -------------------------------------------------------------------------------

    async def receive_message(
        self, request: pb.v2_service.ReceiveMessageRequest, context: Context
    ) -> AsyncIterator[pb.v2_service.ReceiveMessageResponse]:
        """ReceiveMessage (§6.4): one status, the messages, then a delivery timestamp.

        A push consumer receives only from the queue it names (its assignment). A retry with
        the ``attempt_id`` of an earlier receive that answered with messages answers with the
        same messages and handles; with ``auto_renew`` the delivered handles are renewed until
        acked (``receive_rpc``).
        """
        client = self._client(context)
        push = client.client_type in _PUSH_TYPES
        wanted = receive_rpc.receive_request(
            request, context, self._message_filter, self._runtime.settings.receive
        )
        wanted = dataclasses.replace(wanted, assigned_queue=push)
        if client.client_type in _LITE_TYPES:  # a lite consumer reads its lite topics only
            lite = lite_rpc.receive_filter(self._runtime.lite_topics, wanted.group, wanted.topic)
            wanted = dataclasses.replace(wanted, message_filter=lite)
        received = await self.receives.receive(client.client_id, wanted, request)
        namespace = request.group.resource_namespace
        text = "OK" if received else "no new message"
        code = errors.Code.OK if received else errors.Code.MESSAGE_NOT_FOUND
        yield pb.v2_service.ReceiveMessageResponse(status=codes.status(code, text))
        for item in received:
            response = pb.v2_service.ReceiveMessageResponse()
            messages.outgoing_into(response.message, item.stored, item.delivery, namespace)
            yield response
        now_ms = self._runtime.clock.now_ms()
        yield pb.v2_service.ReceiveMessageResponse(delivery_timestamp=messages.timestamp(now_ms))

    def _message_filter(self, expression: pb.v2.FilterExpression) -> filters.MessageFilter:
        """The compiled tag (``*``, ``a||b``) or SQL92 filter of a request."""
        kind = (
            filters.FilterKind.SQL92
            if expression.type == pb.v2.FilterType.SQL
            else (filters.FilterKind.TAG)
        )
        return filters.compile_filter(
            kind, expression.expression, limits=self._runtime.settings.core.filters
        )

    async def ack_message(
        self, request: pb.v2_service.AckMessageRequest, context: Context
    ) -> pb.v2_service.AckMessageResponse:
        """AckMessage (§6.5): per-entry statuses, INVALID_RECEIPT_HANDLE for stale ones."""
        client_id = self._client(context).client_id
        group = topics.validate_group(request.group.name)
        entries = []
        with self._consumer.ack_batch():  # one POP journal write for every entry
            for entry in request.entries:
                try:
                    handle = self.receives.take(client_id, group, entry.receipt_handle)
                    self._consumer.ack(group, request.topic.name, handle)
                    status = codes.ok()
                except errors.ArianeError as exc:
                    status = codes.from_error(exc)
                entries.append(
                    pb.v2_service.AckMessageResultEntry(
                        message_id=entry.message_id,
                        receipt_handle=entry.receipt_handle,
                        status=status,
                    )
                )
        if not entries:
            raise errors.BadRequestError("AckMessage carries no entry")
        failure = await self._consumer.journal_replicated()  # SYNC_MASTER: on the slave
        if failure is not None:
            for result in entries:
                if result.status.code == int(errors.Code.OK):
                    result.status.CopyFrom(codes.from_error(failure))
        return pb.v2_service.AckMessageResponse(
            status=codes.combine(e.status for e in entries), entries=entries
        )

    async def change_invisible_duration(
        self, request: pb.v2_service.ChangeInvisibleDurationRequest, context: Context
    ) -> pb.v2_service.ChangeInvisibleDurationResponse:
        """ChangeInvisibleDuration (§6.5): new deadline, new receipt handle (old one stale);
        a push consumer's is the nack of a failed attempt (``ConsumeProcessor.nack``)."""
        client = self._client(context)
        push = client.client_type in _PUSH_TYPES
        group = topics.validate_group(request.group.name)
        invisible_ms = consume.check_invisible_ms(
            messages.duration_ms(request.invisible_duration), minimum_ms=0
        )
        current = self.receives.take(client.client_id, group, request.receipt_handle)
        handle = await self._consumer.nack(
            group, request.topic.name, current, invisible_ms, push=push
        )
        await self._consumer.journal_replicated()  # the new handle known to the slave
        return pb.v2_service.ChangeInvisibleDurationResponse(
            status=codes.ok(), receipt_handle=handle
        )

    async def forward_message_to_dead_letter_queue(
        self, request: pb.v2_service.ForwardMessageToDeadLetterQueueRequest, context: Context
    ) -> pb.v2_service.ForwardMessageToDeadLetterQueueResponse:
        """ForwardMessageToDeadLetterQueue (§6.5): copy to ``%DLQ%<group>``, ack the original."""
        client_id = self._client(context).client_id
        group = topics.validate_group(request.group.name)
        current = self.receives.take(client_id, group, request.receipt_handle)
        await self._consumer.forward_to_dlq(group, request.topic.name, current)
        await self._consumer.journal_replicated()
        return pb.v2_service.ForwardMessageToDeadLetterQueueResponse(status=codes.ok())

    async def sync_lite_subscription(
        self, request: pb.v2_service.SyncLiteSubscriptionRequest, context: Context
    ) -> pb.v2_service.SyncLiteSubscriptionResponse:
        """SyncLiteSubscription (RocketMQ 5.5): ``lite_rpc.sync_lite_subscription``."""
        client_id = self._client(context).client_id
        table = self._runtime.lite_topics
        return lite_rpc.sync_lite_subscription(table, self._runtime.topics, client_id, request)

    async def query_assignment(
        self, request: pb.v2_service.QueryAssignmentRequest, context: Context
    ) -> pb.v2_service.QueryAssignmentResponse:
        """QueryAssignment (§6.6): ``assignment_rpc.query_assignment``."""
        client_id = self._client(context).client_id
        topic = topics.validate_topic(request.topic.name)
        group = self._runtime.groups.require(topics.validate_group(request.group.name))
        found = await self._routes.topic_route(topic)
        return assignment_rpc.query_assignment(
            self._assignments, group, topic, client_id, found, request.topic
        )

    # -- pull by offset ------------------------------------------------------------------------

    async def pull_message(
        self, request: pb.v2_service.PullMessageRequest, context: Context
    ) -> AsyncIterator[pb.v2_service.PullMessageResponse]:
        """PullMessage: one status, the messages of ``[offset, next_offset)``, then the next
        offset (RocketMQ ``PullMessageProcessor``).

        The status is OK with messages, MESSAGE_NOT_FOUND when nothing matched before the
        long-polling time ended, ILLEGAL_OFFSET when the offset is outside the queue's
        [min, max] (the next offset is then the corrected one). A refusal (unknown topic or
        queue, bad filter, bad batch size) is a status alone.
        """
        self._client(context)
        found = await self._puller.pull(self._pull_request(request, context))
        if found.status is pull.PullStatus.OFFSET_ILLEGAL:
            text = (
                f"offset {request.offset} is outside {found.min_offset}..{found.max_offset}; "
                f"next offset {found.next_offset}"
            )
            status = codes.status(errors.Code.ILLEGAL_OFFSET, text)
        elif found.messages:
            status = codes.ok()
        else:
            status = codes.status(errors.Code.MESSAGE_NOT_FOUND, "no new message")
        yield pb.v2_service.PullMessageResponse(status=status)
        namespace = request.group.resource_namespace
        for stored in found.messages:
            response = pb.v2_service.PullMessageResponse()
            delivery = message.Delivery("", 0, stored.reconsume_times + 1)
            messages.outgoing_into(response.message, stored, delivery, namespace)
            yield response
        yield pb.v2_service.PullMessageResponse(next_offset=found.next_offset)

    def _pull_request(
        self, request: pb.v2_service.PullMessageRequest, context: Context
    ) -> pull.PullRequest:
        group = topics.validate_group(request.group.name) if request.group.name else None
        topic = topics.validate_topic(request.message_queue.topic.name)
        if request.offset < 0:
            raise errors.IllegalOffsetError(f"offset must be >= 0, not {request.offset}")
        if request.batch_size <= 0:
            raise errors.BadRequestError(f"batch_size must be >= 1, not {request.batch_size}")
        polling_ms = 0
        if request.HasField("long_polling_timeout"):
            requested_ms = messages.duration_ms(request.long_polling_timeout)
            polling_ms = min(max(requested_ms, 0), limits.LONG_POLLING_MS_MAX)
        remaining_s = context.time_remaining()
        if remaining_s is not None:
            usable_ms = remaining_s * 1000 - self._runtime.settings.receive.deadline_reserve_ms
            polling_ms = max(0, min(polling_ms, int(usable_ms)))
        return pull.PullRequest(
            group=group,
            topic=topic,
            queue_id=ids.QueueId(request.message_queue.id),
            offset=ids.QueueOffset(request.offset),
            message_filter=self._message_filter(request.filter_expression),
            batch_size=min(request.batch_size, pull.PULL_BATCH_SIZE_MAX),
            poll_s=polling_ms / 1000,
        )

    async def get_offset(
        self, request: pb.v2_service.GetOffsetRequest, context: Context
    ) -> pb.v2_service.GetOffsetResponse:
        """GetOffset: the group's committed offset on one queue; OFFSET_NOT_FOUND when it
        never committed there (RocketMQ ``QUERY_CONSUMER_OFFSET``)."""
        self._client(context)
        group = topics.validate_group(request.group.name)
        queue = request.message_queue
        topic = topics.validate_topic(queue.topic.name)
        offset = self._puller.get_offset(group, topic, ids.QueueId(queue.id))
        return pb.v2_service.GetOffsetResponse(status=codes.ok(), offset=offset)

    async def update_offset(
        self, request: pb.v2_service.UpdateOffsetRequest, context: Context
    ) -> pb.v2_service.UpdateOffsetResponse:
        """UpdateOffset: commit the group's offset on one queue; ILLEGAL_OFFSET outside the
        queue's [min, max] (RocketMQ ``UPDATE_CONSUMER_OFFSET``)."""
        self._client(context)
        group = topics.validate_group(request.group.name)
        queue = request.message_queue
        topic = topics.validate_topic(queue.topic.name)
        self._puller.update_offset(
            group, topic, ids.QueueId(queue.id), ids.QueueOffset(request.offset)
        )
        return pb.v2_service.UpdateOffsetResponse(status=codes.ok())

    async def query_offset(
        self, request: pb.v2_service.QueryOffsetRequest, context: Context
    ) -> pb.v2_service.QueryOffsetResponse:
        """QueryOffset: BEGINNING (min offset), END (max offset) or TIMESTAMP (first offset
        stored at or after the time; RocketMQ ``getOffsetInQueueByTime``)."""
        self._client(context)
        queue = request.message_queue
        topic = topics.validate_topic(queue.topic.name)
        policy = _OFFSET_POLICIES.get(request.query_offset_policy)
        if policy is None:
            raise errors.BadRequestError(
                f"query_offset_policy {int(request.query_offset_policy)} is not one of "
                "BEGINNING, END, TIMESTAMP"
            )
        stamp_ms = (
            messages.timestamp_ms(request.timestamp) if request.HasField("timestamp") else None
        )
        offset = self._puller.query_offset(topic, ids.QueueId(queue.id), policy, stamp_ms)
        return pb.v2_service.QueryOffsetResponse(status=codes.ok(), offset=offset)


_OFFSET_POLICIES = {
    pb.v2.QueryOffsetPolicy.BEGINNING: pull.OffsetPolicy.BEGINNING,
    pb.v2.QueryOffsetPolicy.END: pull.OffsetPolicy.END,
    pb.v2.QueryOffsetPolicy.TIMESTAMP: pull.OffsetPolicy.TIMESTAMP,
}
"""v2 ``QueryOffsetPolicy`` → the processor's ``OffsetPolicy``."""


class IngestService:
    """Serves ``ariane.ingest.v1.Ingest`` (Ariane's own producer) from the SendMessage path.

    ``SendStream`` answers each request with exactly what ``SendMessage`` would answer
    (``MessagingService.answer_send``), in request order, one request after another: a stream
    never has more than one request being stored, and the next request is read only once the
    previous one is answered (HTTP/2 flow control bounds what waits unread). A request's failure
    is a status in its own response; the stream stays usable.

    Args:
        messaging: the broker's MessagingService, whose send path this shares.
    """

    def __init__(self, messaging: MessagingService) -> None:
        self._messaging = messaging

    async def send_stream(
        self, requests: AsyncIterator[pb.v2_service.SendMessageRequest], context: Context
    ) -> AsyncIterator[pb.v2_service.SendMessageResponse]:
        """SendStream: a SendMessage answer per request, in order, until the client half-closes."""
        async for request in requests:
            yield await self._messaging.answer_send(request, context)


def peer_ip(context: Context) -> str:
    """The caller's IP from ``context.peer()`` (``ipv4:1.2.3.4:5``, ``ipv6:[::1]:5``)."""
    peer = context.peer() or ""
    kind, _, rest = peer.partition(":")
    if kind == "ipv4":
        return rest.rpartition(":")[0] or "127.0.0.1"
    if kind == "ipv6":
        return rest.rpartition(":")[0].strip("[]") or "::1"
    return "127.0.0.1"


def _decode_messages(
    request: pb.v2_service.SendMessageRequest,
) -> list[message.IncomingMessage]:
    """The request's messages decoded; the first that does not convert refuses the request."""
    decoded: list[message.IncomingMessage] = []
    count = len(request.messages)
    for position, raw in enumerate(request.messages):
        try:
            decoded.append(messages.incoming(raw))
        except errors.ArianeError as exc:
            raise send_draft.refuse_request(exc, position, count) from None
    return decoded
