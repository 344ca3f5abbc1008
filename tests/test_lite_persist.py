"""Lite topics (RocketMQ 5.5) survive a broker crash and a failover, with real processes: the
lite-topic table is rebuilt from the store (``broker.tables.lite_rebuild``), so after a SIGKILL
and restart, or on a promoted slave, the lite topics are listed again by ``ListLiteTopics``
with their latest offsets and store times, count against ``lite_topics_max``
(LITE_TOPIC_QUOTA_EXCEEDED) and expire by TTL afterwards; ``ariane admin topic lite`` lists
them too.

Own cluster: the tests SIGKILL and restart a broker, or kill a master and promote its slave,
and need a broker whose ``[lite]`` quota (three lite topics) and TTL are small.
"""

from __future__ import annotations

import asyncio
import json
import pathlib
import subprocess
import sys
import time
import zlib

import grpc

import ha_testing as ht
from ariane.common import errors
from ariane.grpcwire import codes, messages, pb, rpc

PARENT = "sessions"
QUOTA = 3
TTL_MS = 20_000
OK = int(errors.Code.OK)
QUOTA_EXCEEDED = int(errors.Code.LITE_TOPIC_QUOTA_EXCEEDED)
LITE_TOML = f"[lite]\nlite_topics_max = {QUOTA}\nttl_ms = {TTL_MS}\nexpiry_interval_ms = 200\n"


def _send_lite(endpoint: str, *names: str) -> tuple[int, list[int]]:
    """One SendMessage of a LITE message per lite topic to ``PARENT``; the request's code (the
    first entry's when it has entries) and each entry's queue offset."""

    def one(i: int, name: str) -> pb.v2.Message:
        props = pb.v2.SystemProperties(
            message_id=f"LITE-{name}-{time.monotonic_ns()}-{i}",
            message_type=pb.v2.MessageType.LITE,
            lite_topic=name,
            born_timestamp=messages.timestamp(1_700_000_000_000),
            born_host="t",
            body_encoding=pb.v2.Encoding.IDENTITY,
        )
        body = name.encode()
        return pb.v2.Message(topic=pb.v2.Resource(name=PARENT), body=body, system_properties=props)

    async def call() -> tuple[int, list[int]]:
        async with grpc.aio.insecure_channel(endpoint) as channel:
            answer = await rpc.unary_call(
                channel,
                pb.MESSAGING_SERVICE,
                "SendMessage",
                pb.v2_service.SendMessageRequest(messages=[one(i, n) for i, n in enumerate(names)]),
                pb.v2_service.SendMessageResponse,
                timeout_s=20,
                metadata=ht.CLIENT,
            )
        offsets = [int(e.offset) for e in answer.entries]
        if answer.entries and int(answer.status.code) == OK:
            return int(answer.entries[0].status.code), offsets
        return int(answer.status.code), offsets

    return asyncio.run(call())


def _code(endpoint: str, *names: str) -> int:
    """The code of ``_send_lite``."""
    return _send_lite(endpoint, *names)[0]


def _listed(endpoint: str) -> dict[str, tuple[int, int, int]]:
    """``ListLiteTopics`` of ``PARENT``: name → (queue id, latest offset, store time ms)."""
    answer = ht.admin(
        endpoint,
        "ListLiteTopics",
        pb.admin.ListLiteTopicsRequest(parent=PARENT),
        pb.admin.ListLiteTopicsResponse,
    )
    codes.raise_for_status(answer.status)
    return {
        t.name: (t.queue_id, t.last_queue_offset, t.last_stored_timestamp_ms)
        for t in answer.lite_topics
    }


def _cli_rows(namesrv: str) -> dict[str, tuple[int, int, int]]:
    """``ariane admin --json topic lite PARENT`` as a process: the rows as ``_listed`` gives
    them (empty while the name servers do not route ``PARENT`` yet)."""
    argv = ("admin", "--endpoints", namesrv, "--json", "topic", "lite", PARENT)
    done = subprocess.run(
        [sys.executable, "-m", "ariane", *argv],
        capture_output=True,
        timeout=60,
        check=False,
    )
    if done.returncode != 0:
        return {}
    return {
        r["name"]: (r["queue_id"], r["last_queue_offset"], r["last_stored_timestamp_ms"])
        for r in json.loads(done.stdout)
    }


Expected = dict[str, tuple[int, int, int, int]]
"""Lite topic → (queue id, queue offset of its latest message, wall time ms before and after
the send that stored it)."""


def _fill_the_quota(endpoint: str) -> Expected:
    """Create ``PARENT`` (LITE, 2 queues) and send to three lite topics (alpha twice): the
    quota is full; what ``ListLiteTopics`` must say of them."""
    ht.create_topic(endpoint, PARENT, message_type="LITE")
    expected: Expected = {}
    for names in (("alpha", "beta"), ("gamma", "alpha")):
        before_ms = time.time_ns() // 1_000_000
        code, offsets = _send_lite(endpoint, *names)
        after_ms = time.time_ns() // 1_000_000
        assert code == OK
        for name, offset in zip(names, offsets, strict=True):
            queue_id = zlib.crc32(name.encode()) % 2
            expected[name] = (queue_id, offset, before_ms, after_ms)
    assert _code(endpoint, "delta") == QUOTA_EXCEEDED
    return expected


def _assert_listed(endpoint: str, expected: Expected) -> None:
    """``ListLiteTopics`` lists exactly ``expected``: queue, latest offset, and a store time
    within its send."""
    listed = _listed(endpoint)
    assert sorted(listed) == sorted(expected)
    for name, (queue_id, offset, stored_ms) in listed.items():
        want_queue, want_offset, before_ms, after_ms = expected[name]
        assert (queue_id, offset) == (want_queue, want_offset), name
        assert before_ms <= stored_ms <= after_ms, (name, stored_ms, before_ms, after_ms)


def test_lite_topics_survive_a_sigkill_count_against_the_quota_and_expire_by_ttl(
    tmp_path: pathlib.Path,
) -> None:
    """After a SIGKILL and restart the lite topics are listed with the offsets and store times
    they had, a new one beyond the quota answers LITE_TOPIC_QUOTA_EXCEEDED, and once the TTL
    since their last send has passed they expire and a new one is accepted."""
    extra = ht.small_store_config(tmp_path, "lite", LITE_TOML)
    with ht.running_namesrv(tmp_path) as namesrv:
        broker = ht.new_broker(tmp_path, "lite-broker")
        try:
            broker.start(tmp_path, namesrv, "ASYNC_MASTER", broker_id=0, extra=extra)
            expected = _fill_the_quota(broker.endpoint)
            broker.kill()
            broker.start(tmp_path, namesrv, "ASYNC_MASTER", broker_id=0, extra=extra)

            assert _code(broker.endpoint, "delta") == QUOTA_EXCEEDED
            _assert_listed(broker.endpoint, expected)
            ht.poll(lambda: not _listed(broker.endpoint), "the lite topics to expire by TTL")
            assert _code(broker.endpoint, "delta") == OK
            now = _listed(broker.endpoint)
            assert sorted(now) == ["delta"]
            ht.poll(lambda: _cli_rows(namesrv) == now, "`ariane admin topic lite` to list delta")
        finally:
            broker.stop()


def test_a_promoted_slave_has_the_lite_topics_of_its_master(tmp_path: pathlib.Path) -> None:
    """A slave promoted after its master was SIGKILLed lists the master's lite topics with
    their offsets and store times and refuses a new one beyond the quota."""
    extra = ht.small_store_config(tmp_path, "lite", LITE_TOML.replace(str(TTL_MS), "3600000"))
    with (
        ht.running_namesrv(tmp_path) as namesrv,
        ht.synced_pair(tmp_path, namesrv, "plain", extra) as (master, slave),
    ):
        expected = _fill_the_quota(master.endpoint)
        ht.poll(lambda: PARENT in ht.topics(slave.endpoint), "the LITE topic on the slave")
        ht.poll(
            lambda: (
                ht.stats(slave.endpoint).commit_log_max_offset
                >= ht.stats(master.endpoint).commit_log_max_offset
            ),
            "the slave to hold the master's bytes",
        )
        master.kill()
        ht.change_role(slave.endpoint, "ASYNC_MASTER", epoch=2, broker_id=0)

        assert _code(slave.endpoint, "delta") == QUOTA_EXCEEDED
        _assert_listed(slave.endpoint, expected)
