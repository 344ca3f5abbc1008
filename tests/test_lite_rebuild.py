"""The lite-topic table rebuilt from the store when a broker's runtime reopens it
(``broker.tables.lite_rebuild``), in-process over a real store and a manual clock: every lite
topic comes back with its queue, latest offset and store time, TTL expiry counts from its last
send, lite topics idle past the TTL are not read back, the newest are kept under a lowered
quota, and ``rebuild_units_max`` bounds the scan; and the ``ListLiteTopics`` admin RPC that
lists them."""

from __future__ import annotations

import asyncio
import itertools
import pathlib

import admin_testing
import broker_harness
from ariane.broker import runtime
from ariane.broker.services import lite_expiry
from ariane.broker.tables import lite_settings, topic_config
from ariane.common import clock, errors, ids, message
from ariane.grpcwire import pb
from broker_harness import incoming

PARENT = ids.TopicName("sessions")
QUEUES = 4
TTL_MS = 60_000
_BODIES = itertools.count()


def _open(root: pathlib.Path, time: clock.ManualClock, **lite: int) -> broker_harness.BrokerHarness:
    settings = lite_settings.LiteSettings(**{"ttl_ms": TTL_MS, **lite})
    return broker_harness.BrokerHarness(root, time=time, lite=settings)


def _send(harness: broker_harness.BrokerHarness, *names: str) -> list[errors.Code]:
    """One LITE message per name, in one request; the codes (a refused request's for all)."""
    batch = []
    for name in names:
        plain = incoming(PARENT, f"{name}-{next(_BODIES)}".encode())  # a message id each
        fields = {f: getattr(plain, f) for f in plain.__slots__}
        batch.append(
            message.IncomingMessage(**{**fields, "message_type": "LITE", "lite_topic": name})
        )
    try:
        outcomes = asyncio.run(harness.processors.sender.send(batch, born_ip="10.1.2.3"))
    except errors.ArianeError as exc:  # a refused request: its code for every message
        return [exc.code] * len(names)
    return [o.code for o in outcomes]


def _records(harness: broker_harness.BrokerHarness) -> dict[str, tuple[int, int, int, int]]:
    table = harness.runtime.lite_topics
    return {
        n: (r.queue_id, r.last_offset, r.last_active_ms, r.last_stored_ms)
        for n in table.names(PARENT)
        if (r := table.get(PARENT, n)) is not None
    }


def test_a_reopened_broker_has_its_lite_topics_back_with_their_offsets_and_times(
    tmp_path: pathlib.Path,
) -> None:
    """After a reopen every lite topic is listed again with the queue, latest queue offset and
    store time it had, counts against the quota, and expires a TTL after its last send."""
    time = clock.ManualClock()
    first = _open(tmp_path, time, lite_topics_max=3)
    first.create_topic(PARENT, queues=QUEUES, kind=message.MessageType.LITE)
    assert _send(first, "a", "b", "a") == [errors.Code.OK] * 3
    time.advance_ms(5_000)
    assert _send(first, "c") == [errors.Code.OK]
    before = {n: (q, o, s) for n, (q, o, _, s) in _records(first).items()}
    first.close()

    time.advance_ms(10_000)
    again = _open(tmp_path, time, lite_topics_max=3)
    try:
        after = _records(again)
        assert {n: (q, o, s) for n, (q, o, _, s) in after.items()} == before
        assert before["c"][2] - before["a"][2] == 5_000
        now = time.monotonic_ms()
        assert (now - after["a"][2], now - after["c"][2]) == (15_000, 10_000)
        assert _send(again, "d") == [errors.Code.LITE_TOPIC_QUOTA_EXCEEDED]

        expiry = lite_expiry.LiteExpiryService(
            table=again.runtime.lite_topics,
            settings=again.runtime.settings.lite,
            lagging=lambda *_: False,
            notify=lambda *_: True,
            time=time,
        )
        time.advance_ms(TTL_MS - 15_000)  # a and b: a TTL since their last send; c not yet
        assert expiry.run_once() == 2
        assert again.runtime.lite_topics.names(PARENT) == ["c"]
        assert _send(again, "d") == [errors.Code.OK]
    finally:
        again.close()


def test_the_rebuild_skips_lite_topics_idle_past_the_ttl_and_keeps_the_newest_under_the_quota(
    tmp_path: pathlib.Path,
) -> None:
    """A lite topic whose latest message is older than the TTL is not read back; a quota lowered
    below what the store holds keeps the lite topics with the newest messages."""
    time = clock.ManualClock()
    first = _open(tmp_path, time)
    first.create_topic(PARENT, queues=QUEUES, kind=message.MessageType.LITE)
    assert _send(first, "old") == [errors.Code.OK]
    time.advance_ms(TTL_MS + 1)
    for name in ("n1", "n2", "n3", "n4"):
        assert _send(first, name) == [errors.Code.OK]
        time.advance_ms(10)
    first.close()

    again = _open(tmp_path, time, lite_topics_max=2)
    try:
        assert again.runtime.lite_topics.names(PARENT) == ["n3", "n4"]
    finally:
        again.close()
    roomy = _open(tmp_path, time)
    try:
        assert sorted(roomy.runtime.lite_topics.names(PARENT)) == ["n1", "n2", "n3", "n4"]
    finally:
        roomy.close()


def test_rebuild_units_max_bounds_the_units_read_per_queue(tmp_path: pathlib.Path) -> None:
    """With ``rebuild_units_max`` 1 only each queue's last unit is read back: at most one lite
    topic per queue returns, the one stored last there."""
    time = clock.ManualClock()
    first = _open(tmp_path, time)
    first.create_topic(PARENT, queues=1, kind=message.MessageType.LITE)
    assert _send(first, "x", "y", "z") == [errors.Code.OK] * 3
    first.close()
    again = _open(tmp_path, time, rebuild_units_max=1)
    try:
        assert again.runtime.lite_topics.names(PARENT) == ["z"]
        report = again.runtime.rebuild_lite_topics()
        assert (report.restored, report.units_read, report.records_read) == (1, 1, 1)
    finally:
        again.close()


def test_list_lite_topics_answers_rows_counts_and_topic_not_found(tmp_path: pathlib.Path) -> None:
    """``ListLiteTopics`` lists a parent's lite topics in the table's order up to ``limit``
    with their queue, latest offset and store time, the parent's and broker's counts and the
    quota, and answers TOPIC_NOT_FOUND for an unknown parent."""

    async def main() -> None:
        settings = admin_testing.tiny_settings(
            tmp_path, lite=lite_settings.LiteSettings(lite_topics_max=7)
        )
        broker = runtime.BrokerRuntime(settings, time=clock.ManualClock())
        table = broker.lite_topics
        for i, name in enumerate(("a", "b", "c")):
            table.touch(PARENT, name, i, 0)
            table.stored(PARENT, name, 10 + i, 0, 1_700_000_000_000 + i)
        table.touch(ids.TopicName("other"), "z", 0, 0)
        broker.topics.create_or_update(
            topic_config.TopicConfig(PARENT, message_type=message.MessageType.LITE)
        )
        try:
            async with admin_testing.serving(broker) as (caller, _):
                request = pb.admin.ListLiteTopicsRequest(parent=PARENT, limit=2)
                listed = await caller.call("ListLiteTopics", request)
                missing = await caller.call(
                    "ListLiteTopics", pb.admin.ListLiteTopicsRequest(parent="nope")
                )
        finally:
            broker.close()
        assert errors.Code(listed.status.code) is errors.Code.OK
        rows = [
            (t.name, t.queue_id, t.last_queue_offset, t.last_stored_timestamp_ms)
            for t in listed.lite_topics
        ]
        assert rows == [("a", 0, 10, 1_700_000_000_000), ("b", 1, 11, 1_700_000_000_001)]
        assert (listed.parent_total, listed.broker_total, listed.broker_quota) == (3, 4, 7)
        assert errors.Code(missing.status.code) is errors.Code.TOPIC_NOT_FOUND

    asyncio.run(main())
