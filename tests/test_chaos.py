"""The chaos checker counts what it should (lost, duplicated, order per message group,
unavailability, RTO) and writes an OpenChaos history on hand-made histories; the network cuts
the right proxies; and two short chaos runs with real processes lose no acknowledged message
under SYNC_MASTER + SYNC_FLUSH: faults one at a time (a power loss of the master on its FUSE
layer, failed over; a SIGKILL of the slave; a bit flip or truncation of a store) with nothing
corrupt delivered, and a partition that isolates the master past its lease while the slave is
promoted behind its back."""

from __future__ import annotations

import asyncio
import pathlib

import pytest
from e2e.chaos import checker, nemesis, network, runner
from e2e.chaos import cluster as cluster_mod

from ariane.client import transport
from ariane.common import errors


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


def test_checker_counts_a_delivered_body_that_differs_from_the_sent_one_as_corrupt() -> None:
    """Proves a delivery whose body is not the body sent under its key, or whose key was never
    sent, counts as corrupt, while a matching body or a delivery without a recorded body does
    not."""
    sends = [
        checker.Send("a-0", "a", 0, True, 10, body=runner.body_for("a-0")),
        checker.Send("a-1", "a", 1, True, 20, body=runner.body_for("a-1")),
    ]
    flipped = runner.body_for("a-1").replace("|", "}", 1)
    deliveries = [
        checker.Delivery("a-0", 100, body=runner.body_for("a-0")),
        checker.Delivery("a-1", 110, body=flipped),
        checker.Delivery("a-1", 120),
        checker.Delivery("b-9", 130, body=runner.body_for("b-9")),
    ]
    report = checker.check(sends, deliveries)
    assert report.corrupt_delivered == 2 and report.corrupt_ids == ("a-1", "b-9")
    assert report.lost == 0


def test_checker_unavailability_counts_gaps_without_acks() -> None:
    """Proves gaps between acked sends of at least the floor are unavailability (the longest and
    the sum), failed attempts inside them do not close them, and shorter gaps do not count."""
    sends = [_send("a", 0, 0), _send("a", 1, 500), _send("a", 2, 1_000, acked=False)]
    sends += [_send("a", 3, 3_500), _send("a", 4, 4_000), _send("a", 5, 5_200)]
    report = checker.check(sends, [])
    assert report.unavailable_longest_ms == 3_000
    assert report.unavailable_total_ms == 3_000 + 1_200


def test_checker_rto_is_fault_to_first_ack_invoked_after_it() -> None:
    """Proves each fault's RTO runs from its injection to the end of the first acknowledged send
    invoked at or after it (an ack invoked before it does not count), p50/p99 over the faults
    that recovered, and one without any later ack counts as unrecovered."""
    sends = [
        checker.Send("a-0", "a", 0, True, 1_200, 900),  # invoked before the fault at 1 000
        checker.Send("a-1", "a", 1, False, 4_000, 1_300, checker.INFO),
        checker.Send("a-2", "a", 2, True, 6_000, 4_100),
        checker.Send("a-3", "a", 3, False, 9_500, 9_000, checker.FAIL),
    ]
    faults = [
        checker.FaultSpan("f1", 1_000, 2_000),
        checker.FaultSpan("f2", 4_000, 4_500),
        checker.FaultSpan("f3", 8_000, 8_500),
    ]
    report = checker.check(sends, [checker.Delivery("a-3", 9_600)], faults)
    assert report.rto_ms == (5_000, 2_000, None)
    assert (report.rto_p50_ms, report.rto_p99_ms, report.rto_max_ms) == (2_000, 5_000, 5_000)
    assert report.rto_unrecovered == 1
    assert report.failed_delivered == 1  # a-3 was refused, yet delivered


def test_history_is_openchaos_tab_separated_and_time_ordered() -> None:
    """Proves the history file has OpenChaos's columns: an enqueue REQUEST per invoke, a
    RESPONSE with SUCCESS/FAILURE/UNKNOWN, value, sharding key, wall ms and latency, dequeue
    SUCCESS per delivery, fault start/end lines, all sorted by time."""
    sends = [
        checker.Send("g0-0", "g0", 0, True, 30, 10, checker.OK, 0),
        checker.Send("g0-1", "g0", 1, False, 90, 40, checker.INFO, 0),
    ]
    deliveries = [checker.Delivery("g0-0", 60, 1)]
    faults = [checker.FaultSpan("partition_isolate", 35, 80)]
    lines = checker.history_lines(sends, deliveries, faults, 1_000, consumer_process_base=4)
    assert [line.rstrip("\n").split("\t") for line in lines] == [
        ["0", "enqueue", "REQUEST", "g0-0", "g0", "1010"],
        ["0", "enqueue", "RESPONSE", "SUCCESS", "g0-0", "g0", "1030", "20", "null", "0"],
        ["fault", "partition_isolate", "start", "1035"],
        ["0", "enqueue", "REQUEST", "g0-1", "g0", "1040"],
        ["5", "dequeue", "RESPONSE", "SUCCESS", "g0-0", "g0", "1060", "0", "null", "0"],
        ["fault", "partition_isolate", "end", "1080"],
        ["0", "enqueue", "RESPONSE", "UNKNOWN", "g0-1", "g0", "1090", "50", "null", "0"],
    ]


def test_a_send_fails_definitely_only_on_a_brokers_refusal() -> None:
    """Proves a broker's refusal is a definite ``fail`` while a timeout, an unreachable broker or
    any non-broker error is ``info`` (it may have been stored)."""
    assert runner.outcome(errors.HaNotAvailableError("no slave")) == checker.FAIL
    assert runner.outcome(errors.SlavePersistenceTimeoutError("slow")) == checker.INFO
    assert runner.outcome(transport.BrokerUnreachableError("cut")) == checker.INFO
    assert runner.outcome(TimeoutError()) == checker.INFO


def test_partitions_cut_the_proxies_between_the_two_sides() -> None:
    """Proves isolating a node cuts every pair with it, two halves cut only across, and a
    bridge node keeps talking to both halves while they cannot talk to each other."""
    nodes = ("client", "namesrv", "broker-a", "broker-b")
    assert network.isolate("broker-a", nodes) == {
        frozenset(("broker-a", n)) for n in ("client", "namesrv", "broker-b")
    }
    halves = network.split(("client", "broker-a"), nodes)
    assert frozenset(("client", "broker-a")) not in halves
    assert halves == {
        frozenset(p)
        for p in (
            ("client", "namesrv"),
            ("client", "broker-b"),
            ("broker-a", "namesrv"),
            ("broker-a", "broker-b"),
        )
    }
    bridged = network.bridge("namesrv", nodes, ["broker-a"])
    assert bridged == {frozenset(("broker-a", "client")), frozenset(("broker-a", "broker-b"))}


def _mounts_under(path: pathlib.Path) -> list[str]:
    with open("/proc/mounts") as mounts:
        return [line.split()[1] for line in mounts if line.split()[1].startswith(str(path))]


@pytest.mark.slow
def test_a_chaos_run_that_fails_to_start_leaves_no_power_loss_layer_mounted(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Proves the brokers' power-loss layers, mounted when the cluster starts, are unmounted
    (their mount points removed) when the run fails before the first fault."""

    def broken(self: cluster_mod.Cluster, node: cluster_mod.Node) -> None:
        assert len(_mounts_under(tmp_path)) == 2, "the layers are not mounted at start"
        raise RuntimeError("broker start failed")

    monkeypatch.setattr(cluster_mod.Cluster, "start_broker", broken)
    schedule = nemesis.Schedule(faults=1, seed=1, kinds=("kill_slave",))
    with pytest.raises(RuntimeError, match="broker start failed"):
        asyncio.run(runner.run(tmp_path, schedule=schedule, network=False))
    assert _mounts_under(tmp_path) == []
    assert not list(tmp_path.glob("*-disk/mnt"))


@pytest.mark.slow
def test_short_chaos_run_loses_nothing_with_sync_master_and_sync_flush(
    tmp_path: pathlib.Path,
) -> None:
    """Proves three faults on a group whose stores sit on FUSE power-loss layers (a power loss
    of the master, its unsynced writes dropped and the slave promoted; the slave SIGKILLed; a
    bit flip or truncation of a stopped broker's CommitLog or ConsumeQueue, repaired from its
    peer or its own CommitLog) with producers and consumers running end with every
    acknowledged message delivered, in order per message group, no delivered body differing
    from the one sent, and the group healed each time."""
    kinds = ("power_loss_master", "kill_slave", "bitflip_master")
    schedule = nemesis.Schedule(faults=3, seed=5, kinds=kinds, gap_s=(1.0, 2.0), overlap=False)
    workload = runner.Workload(drain_quiet_s=10.0, drain_max_s=60.0)
    report = asyncio.run(runner.run(tmp_path, schedule=schedule, workload=workload, network=False))
    result, faults = report["result"], report["faults"]
    assert sorted(f["kind"] for f in faults) == sorted(kinds), faults
    assert all(f["in_sync"] for f in faults), faults
    notes = {f["kind"]: f["note"] for f in faults}
    assert "power loss of" in notes["power_loss_master"], notes
    assert "promoted" in notes["power_loss_master"], notes
    assert '"kind": ' in notes["bitflip_master"], notes  # something was damaged
    assert result["acked"] > 100, result
    assert result["lost"] == 0, result
    assert result["corrupt_delivered"] == 0, result
    assert result["order_violations"] == 0, result


@pytest.mark.slow
def test_a_master_partitioned_past_its_lease_stops_acking_and_loses_nothing(
    tmp_path: pathlib.Path,
) -> None:
    """Proves a SYNC_MASTER cut (through Toxiproxy) from the name server, the slave and the
    clients for longer than its lease says it is not writable once the slave is promoted behind
    its back, and that after the heal (the stale master demoted in place) every acknowledged
    message is delivered, in order per message group, with an OpenChaos history written."""
    schedule = nemesis.Schedule(
        faults=1, seed=7, kinds=("partition_failover",), gap_s=(1.0, 1.5), hold_s=(1.0, 1.5)
    )
    workload = runner.Workload(drain_quiet_s=10.0, drain_max_s=60.0)
    history = tmp_path / "history.tsv"
    report = asyncio.run(
        runner.run(tmp_path, schedule=schedule, workload=workload, history_path=history)
    )
    result, (fault,) = report["result"], report["faults"]
    assert "promoted" in fault["note"], fault
    assert "stale master writable: False" in fault["note"], fault
    assert result["acked"] > 50, result
    assert result["lost"] == 0, result
    assert result["order_violations"] == 0, result
    assert result["rto_unrecovered"] == 0, result
    lines = history.read_text().splitlines()
    assert lines[0].split("\t")[1:3] == ["enqueue", "REQUEST"]
    assert any(line.startswith("fault\tpartition_failover\tstart\t") for line in lines)
