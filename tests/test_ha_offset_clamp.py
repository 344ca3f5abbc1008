"""Consumer offsets past a queue's end after a promotion (issue 25, the chaos run's 8 lost
messages): a slave copies its master's committed offsets over the metadata sync, which runs
apart from the HA stream, so the copy can be ahead of the messages the slave holds; promoted, it
pulls every such offset back to the queue's end before it writes, and the group receives every
message written after the promotion.

Own cluster: the master is SIGKILLed and its slave, which never received a byte, promoted."""

from __future__ import annotations

import asyncio
import contextlib
import pathlib
import time
from collections.abc import Iterator

import pytest

import ha_testing as ht
from ariane import client, dev
from ariane.common import errors
from ariane.grpcwire import codes, pb

pytestmark = pytest.mark.slow

OK = int(errors.Code.OK)
TOPIC = "clamp-topic"
GROUP = "clamp-group"
CONSUMED = 20
"""Messages the group consumed on the old master (about 10 a queue)."""
NEW = 4
"""Messages written after the promotion (about 2 a queue: below the copied offsets)."""
FAST = client.ConsumerSettings(long_polling_timeout_s=5.0)


@pytest.fixture
def namesrv(tmp_path: pathlib.Path) -> Iterator[str]:
    with ht.running_namesrv(tmp_path) as endpoint:
        yield endpoint


def _admin(endpoint: str, name: str, request: object, answer: type[object]) -> object:
    response = ht.admin(endpoint, name, request, answer)  # type: ignore[arg-type]
    codes.raise_for_status(response.status)
    return response


def _offsets(endpoint: str) -> dict[int, int]:
    """The group's committed offsets on ``endpoint``; empty until a slave copied the group."""
    request = pb.admin.GetConsumerLagRequest(group=GROUP, topic=TOPIC)
    try:
        lag = _admin(endpoint, "GetConsumerLag", request, pb.admin.GetConsumerLagResponse)
    except errors.ConsumerGroupNotFoundError:
        return {}
    assert isinstance(lag, pb.admin.GetConsumerLagResponse)
    return {q.queue_id: q.consumer_offset for q in lag.queues}


def _receive_all(namesrv: str, count: int) -> list[bytes]:
    """Receive (and ack) as the group until ``count`` messages came or the deadline passed."""

    async def receive() -> list[bytes]:
        got: list[bytes] = []
        deadline = time.monotonic() + 15.0
        async with client.SimpleConsumer(namesrv, GROUP, TOPIC, settings=FAST) as consumer:
            while len(got) < count and time.monotonic() < deadline:
                with contextlib.suppress(errors.ArianeError):
                    batch = await consumer.receive(16, 30.0)
                    got += [m.body for m in batch]
                    if batch:
                        await consumer.ack(batch)
        return got

    return asyncio.run(receive())


def test_promoted_slave_pulls_copied_offsets_back_to_its_queue_ends(
    tmp_path: pathlib.Path, namesrv: str
) -> None:
    """Proves a slave promoted with copied offsets beyond the messages it holds clamps them to
    its queue ends, so the group receives every message written after the promotion."""
    master, slave = ht.new_broker(tmp_path, "master"), ht.new_broker(tmp_path, "slave")
    config = tmp_path / "fast.toml"
    config.write_text("[slave_sync]\ninterval_ms = 200\n[ha]\nlease_ms = 2000\n")
    extra = ("--config", str(config))
    nowhere = f"127.0.0.1:{dev.free_port()}"  # the HA stream never connects: offsets, no data
    try:
        master.start(tmp_path, namesrv, "ASYNC_MASTER", broker_id=0, extra=extra)
        ht.create_topic(master.endpoint, TOPIC)
        group = pb.admin.SubscriptionGroup(name=GROUP, max_delivery_attempts=5)
        create = pb.admin.CreateSubscriptionGroupRequest(group=group)
        _admin(
            master.endpoint,
            "CreateSubscriptionGroup",
            create,
            pb.admin.CreateSubscriptionGroupResponse,
        )
        assert (
            ht.send_batch(master.endpoint, TOPIC, [f"old-{i}".encode() for i in range(CONSUMED)])
            == [OK] * CONSUMED
        )
        reset = pb.admin.ResetOffsetRequest(
            group=GROUP, topic=TOPIC, target=pb.admin.ResetTarget.RESET_TARGET_LATEST
        )
        _admin(master.endpoint, "ResetOffset", reset, pb.admin.ResetOffsetResponse)
        committed = _offsets(master.endpoint)
        assert sum(committed.values()) == CONSUMED

        slave.start(tmp_path, namesrv, "SLAVE", broker_id=1, master_ha=nowhere, extra=extra)
        ht.poll(lambda: _offsets(slave.endpoint) == committed, "the slave's offset copy")
        assert ht.stats(slave.endpoint).commit_log_max_offset == 0, "the slave got data"
        master.kill()
        ht.change_role(slave.endpoint, "ASYNC_MASTER", epoch=2, broker_id=0)

        clamped = _offsets(slave.endpoint)
        ends = {q: ht.queue_end(slave.endpoint, TOPIC, q) for q in committed}
        assert clamped == ends, f"copied offsets {clamped} past the queue ends {ends}"
        log = (tmp_path / "slave.log").read_text()
        assert f"promotion: 2 consumer offsets of group {GROUP} were past" in log
        sent = [f"new-{i}".encode() for i in range(NEW)]
        for body in sent:
            assert ht.send(slave.endpoint, TOPIC, body) == OK
        assert sorted(_receive_all(namesrv, NEW)) == sorted(sent)
    finally:
        master.stop()
        slave.stop()
