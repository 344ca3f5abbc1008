"""Power loss under a real broker: its store sits on the FUSE layer of ``e2e.chaos.powerloss``,
the broker is SIGKILLed mid-stream and every unsynced write is then dropped (a random prefix of
them kept, torn). Under SYNC_FLUSH every acknowledged message survives; under ASYNC_FLUSH only a
tail of the CommitLog is lost and the recovered store is consistent (ConsumeQueues never point
past the CommitLog, queue offsets dense, nothing corrupt read).

Own cluster: the broker's store sits on a FUSE mount that loses power under it.
"""

from __future__ import annotations

import pathlib
import threading

import pytest
from e2e.chaos import powerloss

import ha_testing
from ariane import dev
from ariane.common import clock, errors, ids
from ariane.store import GetMessageStatus, MessageStore, StoreSettings


@pytest.fixture(autouse=True, scope="module")
def _fuse() -> None:
    """libfuse 3 and ``fusermount3`` installed (from Debian) before the first mount."""
    powerloss.ensure_fuse()


TOPIC = "powerloss"
ACKS_BEFORE_KILL = 150
BATCH = 5


class _Sender(threading.Thread):
    """Sends numbered bodies ``m-<n>`` in batches, in order, until the broker dies."""

    def __init__(self, endpoint: str) -> None:
        super().__init__(daemon=True)
        self.endpoint = endpoint
        self.sent = 0
        self.acked: list[int] = []
        self.acks = threading.Semaphore(0)

    def run(self) -> None:
        while True:
            numbers = list(range(self.sent, self.sent + BATCH))
            bodies = [f"m-{n}".encode() for n in numbers]
            self.sent += BATCH
            try:
                codes = ha_testing.send_batch(self.endpoint, TOPIC, bodies)
            except Exception:
                return  # the broker is gone
            for number, code in zip(numbers, codes, strict=True):
                if code == int(errors.Code.OK):
                    self.acked.append(number)
                    self.acks.release()


def _config(tmp: pathlib.Path, flush_interval_ms: int) -> tuple[str, ...]:
    config = tmp / "powerloss.toml"
    store_line = f"[store]\nflush_interval_ms = {flush_interval_ms}\n"
    config.write_text(ha_testing.SMALL_STORE_TOML.replace("[store]\n", store_line))
    return ("--config", str(config))


def _recovered(store_dir: pathlib.Path) -> list[tuple[int, bytes]]:
    """(CommitLog offset, body) of every message of ``TOPIC``, read queue by queue from the
    store opened in process; asserts dense queue offsets and no corrupt read."""
    settings = StoreSettings(
        commit_log_file_size_bytes=1048576,
        consume_queue_file_entries=4096,
        message_size_bytes_max=262144,
    )
    store = MessageStore.open(store_dir, settings, clock=clock.SystemClock())
    found: list[tuple[int, bytes]] = []
    try:
        topic = ids.TopicName(TOPIC)
        for queue in range(16):
            queue_id = ids.QueueId(queue)
            at = store.min_queue_offset(topic, queue_id)
            while at < store.max_queue_offset(topic, queue_id):
                got = store.get_messages(topic, queue_id, at, max_count=256, max_bytes=1 << 24)
                assert got.status is GetMessageStatus.FOUND, (queue, at, got.status)
                assert [m.queue_offset for m in got.messages] == list(
                    range(at, at + len(got.messages))
                )
                found += [(m.commit_log_offset, m.body) for m in got.messages]
                at = got.next_begin_offset
        assert store.stats().corrupt_read_count == 0
    finally:
        store.close()
    return sorted(found)


def _power_loss_run(tmp: pathlib.Path, flush: str, flush_interval_ms: int) -> tuple[_Sender, int]:
    """Run a broker on the layer, SIGKILL it after ``ACKS_BEFORE_KILL`` acks, cut the power
    (torn), restart it on the remounted layer and check it takes writes again; returns the
    sender and how many writes the power loss dropped. The store is left in the backing dir."""
    layer = powerloss.PowerLossMount(tmp / "disk", tmp / "layer.log")
    extra = ("--flush-disk-type", flush, *_config(tmp, flush_interval_ms))
    broker = ha_testing.Broker("pl", layer.store, 0, 0)
    broker.port, broker.ha_port = dev.free_port(), dev.free_port()
    try:
        with ha_testing.running_namesrv(tmp) as namesrv:
            layer.mount()
            broker.start(tmp, namesrv, "ASYNC_MASTER", broker_id=0, extra=extra)
            ha_testing.create_topic(broker.endpoint, TOPIC)
            sender = _Sender(broker.endpoint)
            sender.start()
            for _ in range(ACKS_BEFORE_KILL):
                assert sender.acks.acquire(timeout=ha_testing.DEADLINE_S), "acks stopped"
            broker.kill()
            sender.join(ha_testing.DEADLINE_S)
            dropped = layer.crash(seed=len(sender.acked), torn=True)
            layer.mount()
            broker.start(tmp, namesrv, "ASYNC_MASTER", broker_id=0, extra=extra)
            after = ha_testing.send(broker.endpoint, TOPIC, b"after-restart")
            assert after == int(errors.Code.OK)
            broker.stop()
    finally:
        broker.stop()
        layer.close()
    return sender, dropped


@pytest.mark.slow
def test_sync_flush_keeps_every_acknowledged_message_across_a_power_loss(
    tmp_path: pathlib.Path,
) -> None:
    """Proves a SYNC_FLUSH broker SIGKILLed mid-stream and then losing every unsynced write
    (a torn prefix kept) restarts with every acknowledged message readable, in order."""
    sender, dropped = _power_loss_run(tmp_path, "SYNC_FLUSH", 500)
    assert dropped > 0, "the power loss dropped nothing"
    bodies = [body for _, body in _recovered(tmp_path / "disk" / "backing" / "store")]
    assert bodies[-1] == b"after-restart"
    numbers = [int(body[2:]) for body in bodies[:-1]]
    assert numbers == list(range(len(numbers))), "not a prefix of what was sent, in order"
    missing = set(sender.acked) - set(numbers)
    assert not missing, f"{len(missing)} acknowledged messages lost: {sorted(missing)[:10]}"


@pytest.mark.slow
def test_async_flush_loses_only_a_tail_and_recovers_consistent(tmp_path: pathlib.Path) -> None:
    """Proves an ASYNC_FLUSH broker losing its unsynced writes loses acknowledged messages
    (the layer bites) but only a tail: what survives is the sent sequence's prefix, read back
    densely with nothing corrupt, and the broker takes writes after the restart."""
    sender, dropped = _power_loss_run(tmp_path, "ASYNC_FLUSH", 10_000)
    bodies = [body for _, body in _recovered(tmp_path / "disk" / "backing" / "store")]
    assert bodies[-1] == b"after-restart"
    numbers = [int(body[2:]) for body in bodies[:-1]]
    assert numbers == list(range(len(numbers))), "not a prefix of what was sent, in order"
    assert dropped > 0
    assert len(numbers) < len(sender.acked), "nothing acknowledged was lost: no power loss"
