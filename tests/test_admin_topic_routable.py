"""A topic created with ``AdminClient.create_topic`` / ``ariane admin topic create`` is routable
when the call returns (RocketMQ's broker registers the new topic with the name servers before it
answers ``updateTopic``), against real ``ariane namesrv`` + ``ariane broker`` processes (the
session's ``shared_cluster``, this module's own ``routable-*`` topics).

The chart's ``helm test`` smoke pod runs ``topic create`` then ``message round-trip`` at once;
before the wait, its first send could reach the name server before the broker's registration
did and exit on TOPIC_NOT_FOUND (seen in CI on 2026-11-29).
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
import uuid

import pytest

from ariane import client, dev
from ariane.common import errors

pytestmark = pytest.mark.slow

CLI_TIMEOUT_S = 90.0


def _topic(prefix: str) -> str:
    return f"routable-{prefix}-{uuid.uuid4().hex[:8]}"


async def _routed_now(admin: client.AdminClient, topic: str) -> bool:
    """Whether the name server routes ``topic`` to a master at this instant (no waiting)."""
    try:
        return bool(await admin.topic_masters(topic))
    except errors.TopicNotFoundError:
        return False


async def _routed_by(namesrv: str, topic: str) -> bool:
    async with client.AdminClient(namesrv) as admin:
        return await _routed_now(admin, topic)


def test_create_topic_returns_only_once_the_name_server_routes_it(
    shared_cluster: dev.DevEndpoints,
) -> None:
    """Eight times over, a route query sent the instant ``create_topic`` returned finds the new
    topic on the name server (before the fix, about half of them got TOPIC_NOT_FOUND)."""
    namesrv = shared_cluster.namesrv

    async def main() -> list[str]:
        unrouted = []
        async with client.AdminClient(namesrv) as admin:
            for _ in range(8):
                topic = _topic("lib")
                await admin.create_topic(topic, write_queue_nums=1)
                if not await _routed_now(admin, topic):  # the same channel: no connect time
                    unrouted.append(topic)
        return unrouted

    assert asyncio.run(main()) == []


def test_waiting_for_a_route_that_never_comes_is_bounded(
    shared_cluster: dev.DevEndpoints,
) -> None:
    """Waiting for a route no broker registers gives up after its deadline with
    REQUEST_TIMEOUT naming the topic and the name server, not before and not much after."""

    async def main() -> tuple[float, errors.ArianeError]:
        async with client.AdminClient(shared_cluster.namesrv) as admin:
            started = time.monotonic()
            with pytest.raises(errors.RequestTimeoutError) as refused:
                await admin.wait_until_routed("routable-never", ["broker-a"], timeout_s=1.0)
            return time.monotonic() - started, refused.value

    waited_s, error = asyncio.run(main())

    assert 1.0 <= waited_s < 5.0, waited_s
    assert "routable-never" in str(error) and shared_cluster.namesrv in str(error)


def _admin(namesrv: str, *args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "ariane", "admin", "--endpoints", namesrv, *args]
    return subprocess.run(
        command, capture_output=True, text=True, timeout=CLI_TIMEOUT_S, check=False
    )


def test_cli_topic_create_then_round_trip_succeeds_every_time(
    shared_cluster: dev.DevEndpoints,
) -> None:
    """Three times over, ``ariane admin topic create`` followed at once by ``ariane admin
    message round-trip`` on the new topic (the helm smoke pod's sequence) succeeds, and the
    topic is on the name server the moment ``topic create`` exits."""
    namesrv = shared_cluster.namesrv
    for _ in range(3):
        topic = _topic("cli")
        created = _admin(namesrv, "topic", "create", topic, "--queues", "1")
        routed = asyncio.run(_routed_by(namesrv, topic))
        trip = _admin(namesrv, "message", "round-trip", "--topic", topic)

        assert created.returncode == 0, created.stderr
        assert routed, f"{topic} not routed when `topic create` exited"
        assert trip.returncode == 0, trip.stderr
