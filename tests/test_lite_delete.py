"""Deleting a LITE parent topic deletes its lite topics with it (issue 27; RocketMQ 5.5
``AbstractLiteLifecycleManager.cleanByParentTopic``), with real processes: after ``ariane admin
topic delete`` and after mqadmin's Remoting ``DELETE_TOPIC_IN_BROKER``, the parent created again
lists no lite topic and its quota (``lite_topics_max``) is free again. The lite subscriptions
that go with them are proven on the table (``tests/test_lite_topics.py``).

Own cluster: it needs a ``[lite]`` quota of three lite topics, a TTL long enough that none
expires meanwhile, and a Remoting listener.
"""

from __future__ import annotations

import asyncio
import pathlib
import subprocess
import sys

import ha_testing as ht
from ariane import dev
from ariane.remoting import codes, command, transport
from test_lite_persist import LITE_TOML, OK, PARENT, QUOTA_EXCEEDED, TTL_MS, _code, _listed

LONG_TTL_TOML = LITE_TOML.replace(str(TTL_MS), "3600000")


def _cli_delete(namesrv: str) -> bool:
    """``ariane admin topic delete PARENT`` as a process; whether it succeeded (it fails
    while the name servers do not route ``PARENT`` yet)."""
    argv = ("admin", "--endpoints", namesrv, "topic", "delete", PARENT)
    done = subprocess.run(
        [sys.executable, "-m", "ariane", *argv], capture_output=True, timeout=60, check=False
    )
    return done.returncode == 0


def _remoting_delete(remoting: str) -> int:
    """mqadmin ``deleteTopic``'s request to the broker, ``DELETE_TOPIC_IN_BROKER``; its code."""

    async def call() -> int:
        client = transport.RemotingClient()
        try:
            request = command.request(codes.RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": PARENT})
            return (await client.invoke(remoting, request, 20.0)).code
        finally:
            await client.close()

    return asyncio.run(call())


def _fill_three(endpoint: str, names: tuple[str, str, str]) -> None:
    """Create ``PARENT`` (LITE), which lists no lite topic, and send to three new lite topics:
    the quota is full."""
    ht.create_topic(endpoint, PARENT, message_type="LITE")
    assert _listed(endpoint) == {}
    assert _code(endpoint, *names) == OK
    assert sorted(_listed(endpoint)) == sorted(names)
    assert _code(endpoint, "overflow") == QUOTA_EXCEEDED


def test_deleting_a_lite_parent_forgets_its_lite_topics_and_frees_the_quota(
    tmp_path: pathlib.Path,
) -> None:
    """A LITE parent deleted by ``ariane admin topic delete`` and then by Remoting
    DELETE_TOPIC_IN_BROKER, and created again, lists no lite topic and takes three new ones
    (the quota, which the old ones no longer hold)."""
    extra = ht.small_store_config(tmp_path, "lite", LONG_TTL_TOML)
    remoting = f"127.0.0.1:{dev.free_port()}"
    with ht.running_namesrv(tmp_path) as namesrv:
        broker = ht.new_broker(tmp_path, "lite-broker")
        try:
            broker.start(
                tmp_path,
                namesrv,
                "ASYNC_MASTER",
                broker_id=0,
                extra=(*extra, "--remoting-listen", remoting),
            )
            _fill_three(broker.endpoint, ("alpha", "beta", "gamma"))
            ht.poll(lambda: _cli_delete(namesrv), "`ariane admin topic delete` to succeed")
            assert PARENT not in ht.topics(broker.endpoint)

            _fill_three(broker.endpoint, ("one", "two", "three"))
            assert _remoting_delete(remoting) == codes.ResponseCode.SUCCESS
            assert PARENT not in ht.topics(broker.endpoint)

            _fill_three(broker.endpoint, ("four", "five", "six"))
        finally:
            broker.stop()
