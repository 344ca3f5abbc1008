"""A topic's route has no hole across a promotion (issue 25), with real processes: a watcher
asks the name server's QueryRoute every ``POLL_S`` while an ASYNC_MASTER is SIGKILLed and its
slave promoted (failover), or promoted while the master is alive (switchover); the longest run
of answers naming no master (TOPIC_NOT_FOUND, no id-0 queue, a gRPC error) is bounded, and the
old master is never listed again once the new one was.

The bound, from the code: the name server lists the old master (epoch 1) until a member of the
group registers or heartbeats with epoch 2 (``route_info_manager``: an id-0 entry of an older
epoch is dropped when the group's epoch grows), and the promoted slave registers as id 0 at
epoch 2 at once on ``ChangeRole`` (``route_changed``), the drop and its own entry in one
registration; so the route should go from the old master to the new one with no hole. A failed
registration of a master is retried within one renewal period, ``min(1 s, lease_ms / 3)``
(``broker.services.registration.renew_interval_s``), and a master whose lease lapsed meanwhile
has it back at its next OK round; so any hole longer than ``lease_ms`` + one renewal period is
a defect (``GAP_BOUND_S``). The dead master still listed before the promotion (the failover
waits for its lease, ``client.failover.wait_for_master_lease``) is not a hole: it is measured
apart and reported.

Own cluster: the master is SIGKILLed or switched over while the name server's routes are watched."""

from __future__ import annotations

import asyncio
import dataclasses
import pathlib
import threading
import time
from collections.abc import Iterator

import grpc
import pytest

import ha_testing as ht
from ariane.client import failover
from ariane.common import errors, ids
from ariane.grpcwire import convert, pb, rpc

pytestmark = [pytest.mark.slow, pytest.mark.solo]

OK = int(errors.Code.OK)
TOPIC = "gap-topic"
LEASE_MS = 2_000
RENEW_MS = min(1_000, LEASE_MS // 3)
"""``registration.renew_interval_s`` for this lease: heartbeats and registration retries, ms."""
GAP_BOUND_S = (LEASE_MS + RENEW_MS) / 1000
"""Longest run of route answers without a master allowed across a promotion, s."""
POLL_S = 0.05
STEADY_S = 1.0
"""How long the route must name the new master without a break before the watch ends, s."""


@dataclasses.dataclass(frozen=True, slots=True)
class Sample:
    """One QueryRoute answer: monotonic time (s) and the master's endpoint, or ``none:...``."""

    at_s: float
    master: str

    @property
    def routed(self) -> bool:
        return not self.master.startswith("none:")


async def _master_of(channel: grpc.aio.Channel) -> str:
    request = pb.v2_service.QueryRouteRequest(topic=convert.resource(TOPIC))
    try:
        answer = await rpc.unary_call(
            channel,
            pb.MESSAGING_SERVICE,
            "QueryRoute",
            request,
            pb.v2_service.QueryRouteResponse,
            timeout_s=1.0,
            metadata=ht.CLIENT,
        )
    except grpc.aio.AioRpcError as exc:
        return f"none:grpc {exc.code().name}"
    if answer.status.code != OK:
        return f"none:{pb.v2.Code.Name(answer.status.code)}"
    masters = {
        convert.first_address(q.broker.endpoints)
        for q in answer.message_queues
        if q.broker.id == ids.MASTER_BROKER_ID
    }
    return ",".join(sorted(masters)) if masters else "none:no id-0 queue"


class RouteWatch:
    """QueryRoute of ``TOPIC`` every ``POLL_S`` in a thread, each answer kept as a ``Sample``."""

    def __init__(self, namesrv: str) -> None:
        self.samples: list[Sample] = []
        self._namesrv = namesrv
        self._stop = threading.Event()
        self._thread = threading.Thread(target=lambda: asyncio.run(self._run()), daemon=True)

    async def _run(self) -> None:
        async with grpc.aio.insecure_channel(self._namesrv) as channel:
            while not self._stop.is_set():
                master = await _master_of(channel)
                self.samples.append(Sample(time.monotonic(), master))
                await asyncio.sleep(POLL_S)

    def __enter__(self) -> RouteWatch:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def until_steady(self, endpoint: str) -> None:
        """Wait until the answers of the last ``STEADY_S`` all name ``endpoint`` (deadline)."""

        def steady() -> bool:
            now = time.monotonic()
            recent = [s for s in list(self.samples) if s.at_s >= now - STEADY_S]
            old = [s for s in list(self.samples) if s.at_s < now - STEADY_S]
            return bool(old) and len(recent) >= 5 and all(s.master == endpoint for s in recent)

        try:
            ht.poll(steady, f"the route to name {endpoint} for {STEADY_S} s")
        except AssertionError as exc:  # say what the route answered instead
            tail = sorted({s.master for s in self.samples[-20:]})
            raise AssertionError(f"{exc}; its last answers: {tail}") from None


def _longest_hole_s(samples: list[Sample]) -> tuple[float, list[str]]:
    """The longest run of answers without a master, from its first answer to the next routed
    one (s), and that run's answers."""
    longest, worst, start = 0.0, [], -1
    for i, sample in enumerate(samples):
        if not sample.routed and start < 0:
            start = i
        elif sample.routed and start >= 0:
            if sample.at_s - samples[start].at_s > longest:
                longest = sample.at_s - samples[start].at_s
                worst = sorted({s.master for s in samples[start:i]})
            start = -1
    if start >= 0:  # never routed again: the hole lasts to the last answer
        longest, worst = samples[-1].at_s - samples[start].at_s, [samples[start].master]
    return longest, worst


def _old_listed_after_new(samples: list[Sample], old: str, new: str) -> list[Sample]:
    """Answers naming ``old`` that came after the first answer naming ``new``."""
    first_new = next(i for i, s in enumerate(samples) if s.master == new)
    return [s for s in samples[first_new:] if old in s.master.split(",")]


@pytest.fixture
def pair(tmp_path: pathlib.Path) -> Iterator[tuple[str, ht.Broker, ht.Broker]]:
    """A name server and an ASYNC_MASTER + SLAVE pair (2 s lease) with a topic the slave synced."""
    extra = ht.small_store_config(
        tmp_path, "gap", f"[ha]\nlease_ms = {LEASE_MS}\n[slave_sync]\ninterval_ms = 200\n"
    )
    with (
        ht.running_namesrv(tmp_path) as namesrv,
        ht.synced_pair(tmp_path, namesrv, TOPIC, extra) as (master, slave),
    ):
        yield namesrv, master, slave


def test_failover_leaves_no_route_hole_longer_than_lease_plus_renewal(
    pair: tuple[str, ht.Broker, ht.Broker],
) -> None:
    """Proves that across a failover (master SIGKILLed, slave promoted once the lease ran out)
    QueryRoute never answers without a master for more than ``GAP_BOUND_S``, and never names
    the old master once it named the new one."""
    namesrv, master, slave = pair
    with RouteWatch(namesrv) as watch:
        ht.poll(lambda: any(s.master == master.endpoint for s in watch.samples), "a first route")
        master.kill()
        killed_s = time.monotonic()
        promoted = asyncio.run(
            failover.promote((namesrv,), "ha-group", 1, role="ASYNC_MASTER", timeout_s=1.0)
        )
        promoted_s = time.monotonic()
        assert (promoted.epoch, promoted.endpoint) == (2, slave.endpoint)
        watch.until_steady(slave.endpoint)
    samples = [s for s in watch.samples if s.at_s >= killed_s]
    dead_listed = [s.at_s for s in samples if s.master == master.endpoint]
    dead_listed_s = (dead_listed[-1] - killed_s) if dead_listed else 0.0
    hole_s, answers = _longest_hole_s(samples)
    assert hole_s <= GAP_BOUND_S, (
        f"no master in the route for {hole_s:.2f} s (bound {GAP_BOUND_S} s = lease + renewal), "
        f"answers {answers}; the dead master was listed {dead_listed_s:.2f} s after its kill, "
        f"promotion done {promoted_s - killed_s:.2f} s after it"
    )
    stale = _old_listed_after_new(samples, master.endpoint, slave.endpoint)
    assert not stale, f"the old master listed again after the new one, {len(stale)} times"


def test_switchover_leaves_no_route_hole_longer_than_lease_plus_renewal(
    pair: tuple[str, ht.Broker, ht.Broker],
) -> None:
    """Proves that across a switchover (slave promoted while the master is alive, the old
    master demoted into its slave) QueryRoute never answers without a master for more than
    ``GAP_BOUND_S``, and never names the old master once it named the new one."""
    namesrv, master, slave = pair
    with RouteWatch(namesrv) as watch:
        ht.poll(lambda: any(s.master == master.endpoint for s in watch.samples), "a first route")
        started_s = time.monotonic()
        promoted = asyncio.run(failover.promote((namesrv,), "ha-group", 1, role="ASYNC_MASTER"))
        assert (promoted.epoch, promoted.endpoint) == (2, slave.endpoint)
        assert promoted.old_master_demoted
        watch.until_steady(slave.endpoint)
    samples = [s for s in watch.samples if s.at_s >= started_s]
    hole_s, answers = _longest_hole_s(samples)
    assert hole_s <= GAP_BOUND_S, (
        f"no master in the route for {hole_s:.2f} s (bound {GAP_BOUND_S} s), answers {answers}"
    )
    stale = _old_listed_after_new(samples, master.endpoint, slave.endpoint)
    assert not stale, f"the old master listed again after the new one, {len(stale)} times"
