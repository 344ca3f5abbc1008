"""The chaos checker counts what it should (lost, duplicated, order per message group,
unavailability) on hand-made histories, and a short chaos run with real processes (SIGKILL of
the master with promotion, SIGKILL of the slave, SIGSTOP of the master) loses no acknowledged
message under SYNC_MASTER + SYNC_FLUSH."""

from __future__ import annotations

import asyncio
import pathlib

import pytest
from e2e.chaos import checker, nemesis, runner


def _send(group: str, seq: int, at_ms: int, *, acked: bool = True) -> checker.Send:
    return checker.Send(f"{group}-{seq}", group, seq, acked, at_ms)


def test_checker_counts_lost_duplicated_unacked_and_order() -> None:
    """Proves an acked message never delivered is lost, a second delivery is a duplicate, an
    unacked send that arrived is counted apart, and a lower sequence after a higher one in the
    same group is an order violation (not across groups)."""
    sends = [
        _send("a", 0, 10),
        _send("a", 1, 20),
        _send("a", 2, 30),
        _send("b", 0, 15, acked=False),
        _send("b", 1, 25),
    ]
    deliveries = [
        checker.Delivery("a-1", 100),
        checker.Delivery("b-1", 105),
        checker.Delivery("a-0", 110),
        checker.Delivery("a-1", 120),
        checker.Delivery("b-0", 130),
    ]
    report = checker.check(sends, deliveries)
    assert (report.acked, report.failed_sends, report.delivered_unique) == (4, 1, 4)
    assert report.lost == 1 and report.lost_ids == ("a-2",)
    assert report.duplicated == 1
    assert report.unacked_delivered == 1
    assert report.order_violations == 2  # a-0 after a-1, b-0 after b-1


def test_checker_unavailability_counts_gaps_without_acks() -> None:
    """Proves gaps between acked sends of at least the floor are unavailability (the longest and
    the sum), failed attempts inside them do not close them, and shorter gaps do not count."""
    sends = [_send("a", 0, 0), _send("a", 1, 500), _send("a", 2, 1_000, acked=False)]
    sends += [_send("a", 3, 3_500), _send("a", 4, 4_000), _send("a", 5, 5_200)]
    report = checker.check(sends, [])
    assert report.unavailable_longest_ms == 3_000
    assert report.unavailable_total_ms == 3_000 + 1_200


@pytest.mark.slow
def test_short_chaos_run_loses_nothing_with_sync_master_and_sync_flush(
    tmp_path: pathlib.Path,
) -> None:
    """Proves three faults (master SIGKILLed then promoted away, slave SIGKILLed, master
    SIGSTOPped) with producers and consumers running end with every acknowledged message
    delivered, in order per message group, and the group healed each time."""
    kinds = ("kill_master", "kill_slave", "pause_master")
    schedule = nemesis.Schedule(faults=3, seed=5, kinds=kinds, gap_s=(1.0, 2.0))
    workload = runner.Workload(drain_quiet_s=10.0, drain_max_s=60.0)
    report = asyncio.run(runner.run(tmp_path, schedule=schedule, workload=workload))
    result, faults = report["result"], report["faults"]
    assert len(faults) == 3 and all(f["in_sync"] for f in faults), faults
    assert result["acked"] > 100, result
    assert result["lost"] == 0, result
    assert result["order_violations"] == 0, result
