"""RecallMessage's v2 adapter: recall handles for parked DELAY messages, and their cancellation.

``recall_handle`` makes the handle a SendMessage entry carries for a parked DELAY message (the
broker name, the topic, the delivery time and the message id: ``grpcwire.recall``, so a name
server can route RecallMessage to this broker); ``recall_message`` checks a handle and asks the
schedule service to cancel the message (grpc-v2.md §6.9, RocketMQ 5's ``RecallMessageActivity``).
Kept apart from ``messaging`` so that adapter stays one readable module.
"""

from __future__ import annotations

from typing import Protocol

from ariane.common import errors, ids, topics
from ariane.grpcwire import codes, pb, recall


class Recaller(Protocol):
    """What RecallMessage needs of the schedule service (``schedule.service.ScheduleService``)."""

    def recall(self, message_id: str, delivery_ms: int) -> None:
        """Cancel a parked message (``NotFoundError`` when it is not waiting)."""
        ...


def recall_handle(
    broker_name: ids.BrokerName, topic: str, delivery_ms: int | None, message_id: str
) -> str:
    """The recall handle of a parked DELAY message, or "" for any other message."""
    if delivery_ms is None:
        return ""
    handle = recall.RecallHandle(
        ids.TopicName(topic),
        broker_name,
        ids.TimestampMs(delivery_ms),
        ids.MessageId(message_id),
    )
    return recall.encode(handle)


def recall_message(
    schedule: Recaller, broker_name: ids.BrokerName, request: pb.v2_service.RecallMessageRequest
) -> pb.v2_service.RecallMessageResponse:
    """Cancel the timer message ``request`` names, if it is this broker's and still waiting.

    Raises:
        BadRequestError: a malformed handle, or one for another topic or broker.
        NotFoundError: the message is not waiting (delivered, recalled or unknown).
    """
    topic = topics.validate_topic(request.topic.name)
    handle = recall.decode(request.recall_handle)
    if handle.topic != topic or handle.broker_name != broker_name:
        raise errors.BadRequestError(
            f"the recall handle is for {handle.topic!r} on {handle.broker_name!r}, not "
            f"{topic!r} on {broker_name!r}"
        )
    schedule.recall(handle.message_id, handle.delivery_timestamp_ms)
    return pb.v2_service.RecallMessageResponse(status=codes.ok(), message_id=handle.message_id)
