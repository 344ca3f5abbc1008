"""Topic and ConsumerGroup CRs reconciled through the broker's admin API (``ariane.client``).

The operator reaches a Broker's brokers through its name server only; ``namesrv_endpoint`` is
the **address seam**: in the cluster it is the name-server Service DNS name, and an override
map (``settings.NAMESRV_OVERRIDES_ENV``, JSON ``{"<namespace>/<broker>" | "<broker>" | "*":
"host:port"}``) lets tests and out-of-cluster runs point a Broker at a loopback ``ariane
namesrv``.

Invariants: every function here is idempotent (create = create-or-replace on every master);
the status returned is what the CRD declares (``route``, ``lag``, conditions,
``observedGeneration`` only after success); a paused CR touches no broker.
"""

from __future__ import annotations

import datetime
import logging
from collections.abc import Mapping
from typing import Any, Final

from ariane.client import admin, admin_types
from ariane.common import message
from ariane.operator import model, resources, status

_log = logging.getLogger(__name__)

ADMIN_TIMEOUT_S: Final = 10.0
"""Deadline of each admin call the operator makes, in seconds."""


def namesrv_endpoint(namespace: str, broker: str, overrides: Mapping[str, str]) -> str:
    """``host:port`` the admin client dials for the Broker CR ``namespace/broker``.

    The most specific override wins (``ns/name``, then ``name``, then ``*``); without one it is
    the name-server Service of the model (``<broker>-namesrv.<ns>.svc:9876``).
    """
    for key in (f"{namespace}/{broker}", broker, "*"):
        if key in overrides:
            return overrides[key]
    return f"{model.namesrv_name(broker)}.{namespace}.svc:{model.NAMESRV_PORT}"


def topic_name(body: Mapping[str, Any]) -> str:
    """The topic's name on the brokers (``spec.topicName`` or ``metadata.name``)."""
    return str(body.get("spec", {}).get("topicName") or body["metadata"]["name"])


def group_name(body: Mapping[str, Any]) -> str:
    """The group's name on the brokers (``spec.groupName`` or ``metadata.name``)."""
    return str(body.get("spec", {}).get("groupName") or body["metadata"]["name"])


def _paused(body: Mapping[str, Any], now: datetime.datetime) -> dict[str, Any] | None:
    meta = body["metadata"]
    if not status.is_paused(meta.get("annotations")):
        return None
    generation = int(meta.get("generation", 0))
    paused = status.condition(status.PAUSED, True, "Paused", "annotation set", generation, now)
    return {"conditions": status.merge(body.get("status", {}).get("conditions", []), [paused])}


def converged_conditions(
    body: Mapping[str, Any], now: datetime.datetime, message_text: str
) -> list[dict[str, Any]]:
    """Conditions saying the CR is applied: Ready True, not Progressing, not Degraded, running."""
    generation = int(body["metadata"].get("generation", 0))
    done = [
        status.condition(status.PAUSED, False, "Running", "reconciling", generation, now),
        status.condition(status.READY, True, "Applied", message_text, generation, now),
        status.condition(status.PROGRESSING, False, "Applied", message_text, generation, now),
        status.condition(status.DEGRADED, False, "Applied", message_text, generation, now),
    ]
    return status.merge(body.get("status", {}).get("conditions", []), done)


def failed_status(
    body: Mapping[str, Any], now: datetime.datetime, reason: str, error: str
) -> dict[str, Any]:
    """Conditions saying the last attempt failed (Ready False, Degraded True, still Progressing)."""
    generation = int(body["metadata"].get("generation", 0))
    bad = [
        status.condition(status.READY, False, reason, error, generation, now),
        status.condition(status.DEGRADED, True, reason, error, generation, now),
        status.condition(status.PROGRESSING, True, "Retrying", error, generation, now),
    ]
    return {"conditions": status.merge(body.get("status", {}).get("conditions", []), bad)}


async def reconcile_topic(
    client: admin.AdminClient, body: Mapping[str, Any], now: datetime.datetime
) -> dict[str, Any]:
    """Creates or replaces the topic on every master of its Broker; returns the status to patch.

    Raises:
        ariane.common.errors.ArianeError: a broker or name server refused or did not answer.
    """
    paused = _paused(body, now)
    if paused is not None:
        return paused
    spec: resources.TopicSpec = body.get("spec", {})
    name = topic_name(body)
    queues = spec.get("queues", 8)
    stored = await client.create_topic(
        name,
        read_queue_nums=queues,
        write_queue_nums=queues,
        message_type=message.MessageType(spec.get("messageType", "NORMAL")),
        perm=spec.get("perm", 6),
        retention_hours=spec.get("retentionHours", 72),
    )
    # Masters from the cluster info: the topic's route reaches the name server only with the
    # broker's next registration, so asking for it right after the create could fail.
    addresses = {m.broker_name: m.endpoint for m in await client.masters()}
    route = [
        {
            "brokerName": t.broker_name,
            "masterAddress": addresses.get(t.broker_name, ""),
            "readQueues": t.read_queue_nums,
            "writeQueues": t.write_queue_nums,
            "perm": t.perm,
        }
        for t in stored
    ]
    return {
        "conditions": converged_conditions(body, now, f"on {len(route)} broker group(s)"),
        "observedGeneration": int(body["metadata"].get("generation", 0)),
        "topicName": name,
        "route": route,
    }


def _retry_policy(spec: resources.ConsumerGroupSpec) -> admin_types.GroupRetryPolicy | None:
    policy = spec.get("retryPolicy")
    if not policy:
        return None
    if policy.get("type", "EXPONENTIAL") == "CUSTOMIZED":
        delays = tuple(policy.get("customizedBackoffMs", []))
        return admin_types.GroupRetryPolicy(kind=admin_types.RetryKind.CUSTOMIZED, delays_ms=delays)
    return admin_types.GroupRetryPolicy(
        kind=admin_types.RetryKind.EXPONENTIAL,
        initial_ms=policy.get("initialBackoffMs", 1000),
        max_ms=policy.get("maxBackoffMs", 7_200_000),
        multiplier=int(policy.get("multiplier", 2)),
    )


def lag_by_topic(queues: list[admin_types.QueueLag]) -> list[dict[str, Any]]:
    """``status.lag`` entries: lag and in-flight summed per topic, sorted by topic."""
    totals: dict[str, dict[str, Any]] = {}
    for queue in queues:
        entry = totals.setdefault(queue.topic, {"topic": queue.topic, "lag": 0, "inflight": 0})
        entry["lag"] += queue.lag
        entry["inflight"] += queue.inflight
    return [totals[t] for t in sorted(totals)]


async def reconcile_group(
    client: admin.AdminClient, body: Mapping[str, Any], now: datetime.datetime
) -> dict[str, Any]:
    """Creates or replaces the group on every master, applies a new ``resetOffset`` once, and
    returns the status to patch (lag per topic).

    Raises:
        ariane.common.errors.ArianeError: a broker or name server refused or did not answer.
    """
    paused = _paused(body, now)
    if paused is not None:
        return paused
    spec: resources.ConsumerGroupSpec = body.get("spec", {})
    name = group_name(body)
    await client.create_group(
        name,
        consume_orderly=spec.get("consumeOrderly", False),
        max_delivery_attempts=spec.get("maxDeliveryAttempts", 17),
        broadcast=spec.get("broadcast", False),
        retry_policy=_retry_policy(spec),
        allocate_strategy=spec.get("allocateStrategy", "AVG"),
    )
    result: dict[str, Any] = {}
    reset = spec.get("resetOffset")
    applied = body.get("status", {}).get("lastResetOffset", {}).get("requestId")
    if reset and reset.get("topic") and reset.get("requestId") != applied:
        await _reset(client, name, reset)
        result["lastResetOffset"] = {
            "requestId": reset["requestId"],
            "appliedAt": now.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        }
    lag = lag_by_topic(await client.consumer_lag(name))
    result.update(
        conditions=converged_conditions(body, now, f"lag {sum(e['lag'] for e in lag)} messages"),
        observedGeneration=int(body["metadata"].get("generation", 0)),
        groupName=name,
        lag=lag,
        totalLag=sum(e["lag"] for e in lag),
        totalInflight=sum(e["inflight"] for e in lag),
    )
    return result


async def _reset(client: admin.AdminClient, group: str, reset: resources.ResetOffsetSpec) -> None:
    target = admin_types.ResetTarget[reset["to"].upper()]
    timestamp_ms = 0
    if "timestamp" in reset:
        when = datetime.datetime.fromisoformat(reset["timestamp"].replace("Z", "+00:00"))
        timestamp_ms = int(when.timestamp() * 1000)
    await client.reset_offset(group, reset["topic"], target, timestamp_ms=timestamp_ms)
