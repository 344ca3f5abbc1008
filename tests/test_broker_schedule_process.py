"""Timer messages against real ``ariane namesrv`` and ``ariane broker`` processes: 1,000 DELAY
messages due at spread times over ~20 s arrive no earlier than due and at most 1 s late, across a
SIGKILL of the broker in the middle; a recall through the name server cancels one; a delivery
time beyond the maximum is refused; a DELAY message to a NORMAL topic is refused as the RocketMQ 5
proxy refuses it (MESSAGE_PROPERTY_CONFLICT_WITH_TYPE).

Messages due while the broker is down cannot be on time, so the schedule leaves a gap around the
kill (the test fails if the restart does not finish inside it): 500 are due in the 4.5 s before
the kill, 500 after the restart. The gap is ``GAP_S`` on an idle machine and grows with the
machine's load and with how long the broker's first start took (``RESTART_FACTOR`` times it):
under load a start takes several times longer, while the timers' bounds (never early, at most
``LATE_MS_MAX`` late) stay as they are.

Own cluster: the broker is SIGKILLed and restarted in the middle of a timed schedule.
"""

from __future__ import annotations

import asyncio
import contextlib
import pathlib
import subprocess
import time
from typing import Any

import grpc
import pytest
from e2e.testenv import processes

import live_testing
from ariane import client, dev
from ariane.common import errors, message
from ariane.grpcwire import convert, messages, pb
from live_testing import kill, wait_registered, wait_routed

pytestmark = pytest.mark.slow

DEADLINE_S = 60.0
TOPIC = "delayed"
GROUP = "delayed-group"
HEADERS = (("x-mq-client-id", "schedule-test@1@0@t"), ("x-mq-language", "PYTHON"))
LATE_MS_MAX = 1_000
LEAD_S = 3.0
"""From the sends' start to the first message due (idle machine; stretched under load)."""
BEFORE_SPAN_MS = 4_500
"""The 500 messages due before the kill are due over this span."""
GAP_S = 8.5
"""From the last "before" message's lateness bound to the first "after" one (idle machine)."""
RESTART_FACTOR = 3.0
"""The gap is at least this many times the broker's first start (the restart recovers a store
a SIGKILL left, on a machine whose load may change meanwhile)."""


_spawn = processes.spawn_ariane
_namesrv = live_testing.namesrv_process


def _start_broker(tmp: pathlib.Path, namesrv: str, port: int) -> subprocess.Popen[bytes]:
    args = ["broker", "--listen", f"127.0.0.1:{port}", "--store-dir", str(tmp / "store")]
    proc = _spawn([*args, "--broker-name", "broker-s", "--namesrv", namesrv], tmp / "broker.log")
    listening_s = processes.loaded_timeout_s(DEADLINE_S)
    dev.wait_until_listening("127.0.0.1", port, process=proc, timeout_s=listening_s)
    return proc


def _schedule(first_start_s: float) -> tuple[dict[str, int], dict[str, int], int]:
    """Due times (epoch ms) of the 500 "before" and the 500 "after" messages, and the first
    "after" one's; the gap between them is sized for a restart (see the module docstring)."""
    t0 = int(time.time() * 1000) + int(processes.loaded_timeout_s(LEAD_S) * 1000)
    gap_s = max(processes.loaded_timeout_s(GAP_S), RESTART_FACTOR * first_start_s)
    after_ms = t0 + BEFORE_SPAN_MS + LATE_MS_MAX + int(gap_s * 1000)
    before = {f"B{i:04d}": t0 + i * 9 for i in range(500)}  # t0 .. t0 + 4.5 s
    after = {f"A{i:04d}": after_ms + i * 12 for i in range(500)}  # 6 s from after_ms
    return before, after, after_ms


def _delay_message(topic: str, message_id: str, delivery_ms: int) -> Any:
    msg = pb.v2.Message(topic=convert.resource(topic), body=message_id.encode())
    props = msg.system_properties
    props.message_id = message_id
    props.message_type = pb.v2.MessageType.DELAY
    props.body_encoding = pb.v2.Encoding.IDENTITY
    props.born_timestamp.CopyFrom(messages.timestamp(int(time.time() * 1000)))
    props.delivery_timestamp.CopyFrom(messages.timestamp(delivery_ms))
    return msg


async def _call(address: str, name: str, request: Any) -> Any:
    async with grpc.aio.insecure_channel(address) as channel:
        stub = pb.v2_service_grpc.MessagingServiceStub(channel)
        return await getattr(stub, name)(request, timeout=10, metadata=HEADERS)


async def _send(broker: str, schedule: dict[str, int], topic: str = TOPIC) -> dict[str, str]:
    """Send DELAY messages in requests of 50; returns message id → recall handle."""
    handles: dict[str, str] = {}
    items = list(schedule.items())
    for start in range(0, len(items), 50):
        batch = [_delay_message(topic, mid, due) for mid, due in items[start : start + 50]]
        answer = await _call(
            broker, "SendMessage", pb.v2_service.SendMessageRequest(messages=batch)
        )
        assert answer.status.code == errors.Code.OK, answer.status
        handles.update({e.message_id: e.recall_handle for e in answer.entries})
    return handles


async def _setup(namesrv: str) -> None:
    async with client.AdminClient(namesrv) as admin:
        await wait_registered(admin)
        await admin.create_topic(TOPIC, write_queue_nums=4, message_type=message.MessageType.DELAY)
        await admin.create_topic("plain", write_queue_nums=1)
        await admin.create_group(GROUP)
        await wait_routed(admin, TOPIC)


async def _receive(namesrv: str, count: int, until_s: float) -> dict[str, tuple[int, int]]:
    """Receive and ack until ``count`` arrived or ``until_s``: id → (store ms, receive ms)."""
    got: dict[str, tuple[int, int]] = {}
    async with client.SimpleConsumer(namesrv, GROUP, TOPIC) as consumer:
        while len(got) < count and time.monotonic() < until_s:
            with contextlib.suppress(errors.ServiceUnavailableError, errors.RequestTimeoutError):
                received = await consumer.receive(32, invisible_duration_s=30)
                now_ms = int(time.time() * 1000)
                for m in received:
                    got.setdefault(m.message_id, (m.store_timestamp_ms, now_ms))
                await consumer.ack(received)
    return got


async def _recall_via_namesrv(namesrv: str, recall: Any) -> Any:
    """RecallMessage at the name server, again while it cannot reach the restarted broker yet
    (its channel backs off after the refused connections of the kill: SERVICE_UNAVAILABLE)."""
    deadline = time.monotonic() + processes.loaded_timeout_s(5)
    while True:
        answer = await _call(namesrv, "RecallMessage", recall)
        if answer.status.code != errors.Code.INTERNAL_SERVER_ERROR or time.monotonic() > deadline:
            return answer
        await asyncio.sleep(0.1)


def _check_on_time(schedule: dict[str, int], got: dict[str, tuple[int, int]]) -> None:
    early = {m: (s, schedule[m]) for m, (s, _) in got.items() if s < schedule[m]}
    late = {m: s - schedule[m] for m, (s, _) in got.items() if s > schedule[m] + LATE_MS_MAX}
    seen_early = {m: r - schedule[m] for m, (_, r) in got.items() if r < schedule[m]}
    assert not early and not seen_early, f"delivered before due: {early} {seen_early}"
    assert not late, f"{len(late)} delivered more than {LATE_MS_MAX} ms late: {late}"


@pytest.mark.solo  # asserts at most 1 s late (and a restart inside the gap)
def test_a_thousand_timer_messages_arrive_on_time_across_a_sigkill(tmp_path: pathlib.Path) -> None:
    """500 due before the kill, 500 after the restart (one recalled): each on time, once."""
    with _namesrv(tmp_path) as namesrv:
        port = dev.free_port()
        started_s = time.monotonic()
        broker = _start_broker(tmp_path, namesrv, port)
        first_start_s = time.monotonic() - started_s
        address = f"127.0.0.1:{port}"
        try:
            asyncio.run(_setup(namesrv))
            before, after, after_ms = _schedule(first_start_s)
            handles = asyncio.run(_send(address, {**before, **after}))
            assert all(handles.values()), "every DELAY send answers a recall handle"
            until_s = (after_ms - LATE_MS_MAX) / 1000 - time.time() + time.monotonic()
            got = asyncio.run(_receive(namesrv, 500, until_s))
            assert set(got) == set(before), "only the first 500 were due before the kill"
            _check_on_time(before, got)
            kill(
                broker
            )  # SIGKILL (and its front-end workers gone): nothing persisted on the way out
            broker = _start_broker(tmp_path, namesrv, port)
            restarted_ms = time.time() * 1000
            overrun_s = (restarted_ms - (after_ms - LATE_MS_MAX)) / 1000
            assert overrun_s < 0, (
                f"the restart ended {overrun_s:.1f} s after the gap (the first start took"
                f" {first_start_s:.1f} s)"
            )
            recall = pb.v2_service.RecallMessageRequest(
                topic=convert.resource(TOPIC), recall_handle=handles["A0250"]
            )
            answer = asyncio.run(_recall_via_namesrv(namesrv, recall))
            assert (answer.status.code, answer.message_id) == (errors.Code.OK, "A0250")
            wanted = set(after) - {"A0250"}
            after_end_s = (max(after.values()) - time.time() * 1000) / 1000
            guard_s = processes.loaded_timeout_s(15)
            late_got = asyncio.run(
                _receive(namesrv, len(wanted), time.monotonic() + after_end_s + guard_s)
            )
            assert set(late_got) == wanted
            _check_on_time(after, late_got)
            again = asyncio.run(_call(namesrv, "RecallMessage", recall))
            assert again.status.code == errors.Code.NOT_FOUND
        finally:
            dev.stop_process(broker)


def test_bad_delay_sends_are_refused_with_rocketmq_codes(tmp_path: pathlib.Path) -> None:
    """Beyond 24 h: ILLEGAL_DELIVERY_TIME; to a NORMAL topic: MESSAGE_PROPERTY_CONFLICT_WITH_TYPE;
    a handle that names no waiting message: NOT_FOUND."""
    with _namesrv(tmp_path) as namesrv:
        port = dev.free_port()
        broker = _start_broker(tmp_path, namesrv, port)
        address = f"127.0.0.1:{port}"
        try:
            asyncio.run(_setup(namesrv))
            now = int(time.time() * 1000)
            cases = [(TOPIC, now + 24 * 3600_000 + 60_000), ("plain", now + 5_000)]
            codes = []
            for topic, due in cases:
                request = pb.v2_service.SendMessageRequest(
                    messages=[_delay_message(topic, f"X-{topic}", due)]
                )
                codes.append(asyncio.run(_call(address, "SendMessage", request)).status.code)
            assert codes == [
                errors.Code.ILLEGAL_DELIVERY_TIME,
                errors.Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE,
            ]
            handles = asyncio.run(_send(address, {"R1": now + 30_000}))
            recall = pb.v2_service.RecallMessageRequest(
                topic=convert.resource(TOPIC), recall_handle=handles["R1"]
            )
            assert asyncio.run(_call(address, "RecallMessage", recall)).status.code == 20000
            assert asyncio.run(_call(address, "RecallMessage", recall)).status.code == 40400
        finally:
            dev.stop_process(broker)
