"""What ReceiveMessage adds around the consume path for the official push consumers:
``attempt_id`` replays (``processors.receive_attempts``) and server-side renewal of
``auto_renew`` receipt handles (``processors.renewal``, the proxy's
``DefaultReceiptHandleManager``).

``receive_request`` validates a ReceiveMessageRequest into a ``consume.ReceiveRequest``
(invisible time, polling time within the call's deadline, grpc-v2.md §6.4).
``ReceiveSessions`` is used by ``messaging.MessagingService``: ``receive`` replays or pops,
remembers the answer by attempt and tracks ``auto_renew`` handles; ``take`` turns the handle
a client acks, nacks or dead-letters with into the delivery's current one. Invariant: used
from the broker's event loop only.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable

from ariane.broker import filters
from ariane.broker import runtime as runtime_mod
from ariane.broker import settings as broker_settings
from ariane.broker.pop import receipt
from ariane.broker.processors import client_settings, consume, receive_attempts, renewal, retry
from ariane.broker.tables import clients
from ariane.common import errors, ids, limits, message, topics
from ariane.grpcwire import guard, messages, pb

_log = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True, slots=True)
class _Delivered:
    """What the attempt table keeps of one delivered message: where it is, and its delivery
    (handle, attempt); the message is read again on a replay."""

    queue_id: ids.QueueId
    queue_offset: ids.QueueOffset
    delivery: message.Delivery


class ReceiveSessions:
    """Receive replays by attempt and the renewal table of one broker.

    Args:
        consumer: the consume path.
        renewals: the auto-renewed receipt handles (renewed by the server's
            ``ReceiptRenewalService``).
        runtime: ``settings.renewal.attempt_ids_max`` and the clock.
    """

    def __init__(
        self,
        consumer: consume.ConsumeProcessor,
        renewals: renewal.ReceiptRenewals,
        runtime: runtime_mod.BrokerRuntime,
    ) -> None:
        self._consumer = consumer
        self.renewals = renewals
        self._attempts: receive_attempts.ReceiveAttempts[_Delivered] = (
            receive_attempts.ReceiveAttempts(
                entries_max=runtime.settings.renewal.attempt_ids_max, time=runtime.clock
            )
        )

    async def receive(
        self,
        client_id: ids.ClientId,
        wanted: consume.ReceiveRequest,
        request: pb.v2_service.ReceiveMessageRequest,
    ) -> list[consume.Received]:
        """The receive's messages: the replay of an earlier answer to the same attempt, or a
        new pop (remembered by attempt, tracked for renewal with ``auto_renew``).

        Raises:
            ArianeError: as ``ConsumeProcessor.receive``.
        """
        attempt = request.attempt_id if request.HasField("attempt_id") else ""
        key = (client_id, wanted.group, wanted.topic, attempt)
        handle_key = (client_id, wanted.group)

        def still_held(item: _Delivered) -> bool:
            text = self.renewals.current(handle_key, item.delivery.receipt_handle)
            return self._consumer.holds(wanted.group, wanted.topic, text)

        if attempt:
            replayed = self._replay(key, still_held)
            if replayed:
                _log.info("receive attempt %s of %s replayed", attempt, client_id)
                return replayed
        received = await self._consumer.receive(wanted)
        if attempt:
            answer = [
                _Delivered(r.stored.queue_id, r.stored.queue_offset, r.delivery) for r in received
            ]
            self._attempts.remember(key, answer, ttl_ms=wanted.invisible_ms)
        if request.auto_renew:
            for item in received:
                self.renewals.track(
                    handle_key,
                    topic=wanted.topic,
                    message_id=message.message_id_of(item.stored),
                    receipt_text=item.delivery.receipt_handle,
                    invisible_ms=item.delivery.invisible_ms,
                    attempt=item.delivery.attempt,
                )
        return received

    def _replay(
        self, key: receive_attempts.AttemptKey, still_held: Callable[[_Delivered], bool]
    ) -> list[consume.Received]:
        """The earlier answer of ``key`` read again from the store (only where each message
        is: the table keeps no bodies), without what is no longer held. A retry copy is read
        from the retry topic its receipt handle names and answered under its origin topic."""
        replayed: list[consume.Received] = []
        for item in self._attempts.replay(key, still_held) or ():
            topic = receipt.decode(item.delivery.receipt_handle).topic
            stored = self._consumer.reread(topic, item.queue_id, item.queue_offset)
            if stored is not None:
                replayed.append(consume.Received(retry.as_consumed(stored), item.delivery))
        return replayed

    def take(self, client_id: ids.ClientId, group: ids.GroupName, receipt_text: str) -> str:
        """The current handle of the delivery ``client_id`` holds as ``receipt_text``; its
        renewal stops (Ack, ChangeInvisibleDuration, ForwardMessageToDeadLetterQueue)."""
        return self.renewals.take((client_id, group), receipt_text)


def new_renewals(
    runtime: runtime_mod.BrokerRuntime,
    consumer: consume.ConsumeProcessor,
    client_registry: clients.ClientRegistry,
) -> renewal.ReceiptRenewals:
    """The renewal table of one broker: renews through ``consumer``, a client is online
    while it has a session, and renewal stops with the group's retry backoff."""

    def retry_delay_ms(group: ids.GroupName, attempt: int) -> int:
        config = runtime.groups.get(group)
        if config is None:
            return runtime.settings.renewal.clear_invisible_ms
        return config.effective_retry_policy().next_delay_ms(attempt)

    return renewal.ReceiptRenewals(
        change_invisible=consumer.change_invisible,
        is_online=lambda client_id: client_registry.get(client_id) is not None,
        retry_delay_ms=retry_delay_ms,
        settings=runtime.settings.renewal,
        time=runtime.clock,
    )


def receive_request(
    request: pb.v2_service.ReceiveMessageRequest,
    context: guard.CallContext,
    compile_filter: Callable[[pb.v2.FilterExpression], filters.MessageFilter],
    settings: broker_settings.ReceiveSettings,
) -> consume.ReceiveRequest:
    """The validated receive of ``request``: an explicit invisible duration (10 s..12 h), or
    ``auto_renew_invisible_ms`` with ``auto_renew``; at most ``RECEIVE_BATCH_SIZE`` messages.

    Raises:
        IllegalTopicError, IllegalConsumerGroupError, BadRequestError,
        IllegalInvisibleTimeError, IllegalPollingTimeError: as the checks say.
    """
    group = topics.validate_group(request.group.name)
    topic = topics.validate_topic(request.message_queue.topic.name, allow_system=False)
    message_filter = compile_filter(request.filter_expression)
    if request.batch_size <= 0:
        raise errors.BadRequestError(f"batch_size must be >= 1, not {request.batch_size}")
    if request.HasField("invisible_duration"):
        invisible_ms = consume.check_invisible_ms(
            messages.duration_ms(request.invisible_duration),
            minimum_ms=limits.INVISIBLE_DURATION_MS_MIN,
        )
    elif request.auto_renew:
        invisible_ms = settings.auto_renew_invisible_ms
    else:
        raise errors.IllegalInvisibleTimeError(
            "invisible_duration is required unless auto_renew is set"
        )
    return consume.ReceiveRequest(
        group=group,
        topic=topic,
        queue_id=request.message_queue.id,
        message_filter=message_filter,
        batch_size=min(request.batch_size, client_settings.RECEIVE_BATCH_SIZE),
        invisible_ms=invisible_ms,
        poll_s=polling_s(request, context, settings),
    )


def polling_s(
    request: pb.v2_service.ReceiveMessageRequest,
    context: guard.CallContext,
    settings: broker_settings.ReceiveSettings,
) -> float:
    """Long-polling time of a receive, s: the requested one clamped to the proxy's 5..20 s,
    ending ``deadline_reserve_ms`` before the call's deadline.

    Raises:
        IllegalPollingTimeError: the deadline leaves less than the 5 s minimum.
    """
    requested_ms = (
        messages.duration_ms(request.long_polling_timeout)
        if request.HasField("long_polling_timeout")
        else limits.LONG_POLLING_MS_MAX
    )
    polling_ms = min(max(requested_ms, limits.LONG_POLLING_MS_MIN), limits.LONG_POLLING_MS_MAX)
    remaining_s = context.time_remaining()
    if remaining_s is not None:
        usable_ms = remaining_s * 1000 - settings.deadline_reserve_ms
        if usable_ms < limits.LONG_POLLING_MS_MIN:
            raise errors.IllegalPollingTimeError(
                f"the call's deadline leaves {usable_ms:.0f} ms; long polling needs at least "
                f"{limits.LONG_POLLING_MS_MIN} ms: raise the client's timeout"
            )
        polling_ms = min(polling_ms, int(usable_ms))
    return polling_ms / 1000
