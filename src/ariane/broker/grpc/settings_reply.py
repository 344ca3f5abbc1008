"""The settings a client's Telemetry report gets back (grpc-v2.md §6.2), over
``client_settings.ClientSettingsProcessor``.

A producer gets the publishing policy and the send backoff; a push, simple or pull consumer
its subscription policy and the group's retry backoff; a lite push or lite simple consumer
(RocketMQ 5.5) is a push or simple consumer that also gets ``lite_subscription_quota`` and
``max_lite_topic_size`` (the official clients refuse every lite subscription until they have
them). Anything else is aborted with gRPC INVALID_ARGUMENT, as the Java proxy does.
"""

from __future__ import annotations

import grpc

from ariane.broker.grpc import assignment_rpc
from ariane.broker.processors import client_settings
from ariane.broker.tables import lite_topics, subscriptions
from ariane.common import ids
from ariane.grpcwire import guard, messages, pb

CONSUMER_KINDS = {
    pb.v2.ClientType.PUSH_CONSUMER: client_settings.ClientKind.PUSH_CONSUMER,
    pb.v2.ClientType.SIMPLE_CONSUMER: client_settings.ClientKind.SIMPLE_CONSUMER,
    pb.v2.ClientType.PULL_CONSUMER: client_settings.ClientKind.PULL_CONSUMER,
    pb.v2.ClientType.LITE_PUSH_CONSUMER: client_settings.ClientKind.LITE_PUSH_CONSUMER,
    pb.v2.ClientType.LITE_SIMPLE_CONSUMER: client_settings.ClientKind.LITE_SIMPLE_CONSUMER,
}
"""The v2 consumer client types and what the settings processor calls them."""

_LITE_KINDS = frozenset(
    {client_settings.ClientKind.LITE_PUSH_CONSUMER, client_settings.ClientKind.LITE_SIMPLE_CONSUMER}
)


async def merged_settings(
    processor: client_settings.ClientSettingsProcessor,
    lite: lite_topics.LiteTopicTable,
    client_id: ids.ClientId,
    reported: pb.v2.Settings,
    context: guard.CallContext,
) -> pb.v2.Settings:
    """The reply to one settings report: the report with the broker's policy merged in.

    Raises:
        ArianeError: as ``ClientSettingsProcessor.consumer`` (the call's status).
    """
    merged = pb.v2.Settings()
    merged.CopyFrom(reported)
    merged.metric.CopyFrom(pb.v2.Metric(on=False))
    kind = reported.WhichOneof("pub_sub")
    if kind == "publishing" and reported.client_type == pb.v2.ClientType.PRODUCER:
        published = (t.name for t in reported.publishing.topics)
        producer = processor.producer(client_id, published)
        merged.publishing.max_body_size = producer.max_body_size_bytes
        merged.publishing.validate_message_type = producer.validate_message_type
        merged.backoff_policy.CopyFrom(exponential(producer.backoff))
        return merged
    consumer_kind = CONSUMER_KINDS.get(reported.client_type)
    if kind == "subscription" and consumer_kind is not None:
        policy = processor.consumer(
            client_id,
            consumer_kind,
            reported.subscription.group.name,
            map(assignment_rpc.subscription, reported.subscription.subscriptions),
        )
        consumer_settings(merged, policy)
        if consumer_kind in _LITE_KINDS:
            merged.subscription.lite_subscription_quota = lite.subscription_quota
            merged.subscription.max_lite_topic_size = lite.name_bytes_max
        return merged
    await context.abort(
        grpc.StatusCode.INVALID_ARGUMENT,
        "settings need a known client_type with publishing (producer) or subscription "
        "(push/simple/pull/lite consumer)",
    )
    raise AssertionError("unreachable: abort raises")


def exponential(backoff: client_settings.Backoff) -> pb.v2.RetryPolicy:
    """A producer's send backoff as a v2 ``RetryPolicy``."""
    return pb.v2.RetryPolicy(
        max_attempts=backoff.max_attempts,
        exponential_backoff=pb.v2.ExponentialBackoff(
            initial=messages.duration(backoff.initial_ms),
            max=messages.duration(backoff.max_ms),
            multiplier=backoff.multiplier,
        ),
    )


def consumer_settings(merged: pb.v2.Settings, policy: client_settings.ConsumerPolicy) -> None:
    """Fill the subscription part of a consumer's settings reply from its policy."""
    merged.subscription.receive_batch_size = policy.receive_batch_size
    merged.subscription.long_polling_timeout.CopyFrom(messages.duration(policy.long_polling_ms))
    merged.subscription.fifo = policy.fifo
    retry = policy.retry_policy
    backoff = pb.v2.RetryPolicy(max_attempts=policy.max_delivery_attempts)
    if retry.kind is subscriptions.GroupRetryPolicyType.EXPONENTIAL:
        backoff.exponential_backoff.CopyFrom(
            pb.v2.ExponentialBackoff(
                initial=messages.duration(retry.initial_ms),
                max=messages.duration(retry.max_ms),
                multiplier=float(retry.multiplier),
            )
        )
    else:
        backoff.customized_backoff.CopyFrom(
            pb.v2.CustomizedBackoff(next=[messages.duration(ms) for ms in retry.delays_ms])
        )
    merged.backoff_policy.CopyFrom(backoff)
