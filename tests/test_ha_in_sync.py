"""A failover promotes only a slave its master last reported in sync and holding every byte it
acknowledged (issue 25 item 2; the chaos run's SYNC_MASTER data loss): the pure rule
(``promotion.in_sync_by_report``, ``failover.decide``) and, with real processes, a SYNC_MASTER
with two slaves, one paused while the master acknowledges sends with the other's help, the
master SIGKILLed: the lagging slave is refused, the in-sync one promoted with every
acknowledged byte. The way out for a master that died before its report named the slave
(``promotion.in_sync_by_report``'s unlisted case, the report's age rule, the master's
immediate heartbeat when a slave joins) and, with real processes, a master cut off from the
name server before its slave joined, then SIGKILLed: the caught-up slave is promoted.

Own cluster: the master is SIGKILLed and one slave paused mid-run, so no shared cluster can be
used.
"""

from __future__ import annotations

import asyncio
import os
import pathlib
import signal
import types
from collections.abc import Iterator

import grpc
import pytest
from e2e.testenv import cutproxy

import ha_testing as ht
from ariane.broker.services import registration
from ariane.client import failover
from ariane.common import errors, promotion
from ariane.grpcwire import channel_pool, pb, registry_client
from ariane.store.ha import frames

OK = int(errors.Code.OK)
TOPIC = "in-sync-topic"
LEASE_MS = 1_500
SENDS = 20


def _slave(broker_id: int, offset: int, link: str, *, epoch: int = 3) -> failover.MemberState:
    stats = pb.admin.GetBrokerRuntimeStatsResponse(
        role=pb.admin.BrokerRole.BROKER_ROLE_SLAVE, epoch=epoch, commit_log_max_offset=offset
    )
    return failover.MemberState(broker_id, f"s{broker_id}:1", "", stats, epoch, link)


DOWN_MASTER = failover.MemberState(0, "m:1", "m:2", None, registered_epoch=3)


def _in_sync_report() -> promotion.InSyncReport:
    """Epoch 3, 1,000 bytes, 900 acknowledged as replicated; one slave in sync, one not."""
    return promotion.InSyncReport(
        epoch=3,
        master_max_offset=1_000,
        replicated_offset=900,
        replicas=(("10.0.0.1:5000", 1, True, 900), ("10.0.0.2:5000", 2, False, 400)),
    )


def test_a_slave_is_eligible_only_when_reported_in_sync_and_holding_what_was_acknowledged() -> None:
    """Proves the pure rule: listed in sync and at or above the master's acknowledged offsets →
    eligible; below them, not listed in sync, unknown, or no report at the epoch → not."""
    report = _in_sync_report()

    def check(
        report: promotion.InSyncReport | None, broker_id: int, offset: int, link: str = ""
    ) -> bool:
        return promotion.in_sync_by_report(
            report,
            epoch=3,
            broker_id=broker_id,
            link_address=link,
            max_offset=offset,
            slave_epoch=3,
        )[0]

    assert check(report, 1, 900)
    assert not check(report, 1, 899)  # cut its tail after the report
    assert not check(report, 2, 999)  # not in sync when last heard, short of the master's end
    assert not check(report, 3, 999)  # not connected to the master, short of its end
    assert not check(None, 1, 1_000)  # an older master: no report
    older = promotion.InSyncReport(2, 1_000, 0, (("10.0.0.1:5000", 1, True, 1_000),))
    assert not check(older, 1, 1_000)  # a report of an earlier epoch
    # Reported in sync with a low acked offset (it re-fetches after cutting its own tail), but
    # the master acknowledged 900 bytes as replicated: the chaos run's loss.
    refetching = promotion.InSyncReport(3, 1_000, 900, (("10.0.0.1:5000", 1, True, 500),))
    assert not check(refetching, 1, 600)
    # A slave of an older build names no id: matched by its HA link address instead.
    unnamed = promotion.InSyncReport(3, 1_000, 900, (("10.0.0.1:5000", 0, True, 900),))
    assert check(unnamed, 1, 900, "10.0.0.1:5000")
    assert not check(unnamed, 1, 900, "10.0.0.1:5001")
    assert not check(unnamed, 1, 900)


def test_failover_decide_refuses_a_live_slave_the_masters_report_does_not_vouch_for() -> None:
    """Proves ``failover.decide`` with the master down: the only live slave is refused when it
    lags the reported acknowledged offset, is not in the in-sync set, or no report was heard
    (unless forced); in the set and caught up, it is promoted at an epoch above the master's."""
    report = _in_sync_report()
    behind = [DOWN_MASTER, _slave(1, 899, "10.0.0.1:5000")]
    with pytest.raises(errors.PreconditionFailedError, match="acknowledged"):
        failover.decide(behind, 1, report=report)
    not_in_set = [DOWN_MASTER, _slave(2, 999, "10.0.0.2:5000")]
    with pytest.raises(errors.PreconditionFailedError, match="does not list it in sync"):
        failover.decide(not_in_set, 2, report=report)
    caught_up = [DOWN_MASTER, _slave(1, 900, "10.0.0.1:5000")]
    with pytest.raises(errors.PreconditionFailedError, match=r"no current in-sync report.*--force"):
        failover.decide(caught_up, 1)
    assert failover.decide(caught_up, 1, report=report) == (None, 4)
    assert failover.decide(behind, 1, report=None, force=True) == (None, 4)


def test_a_slave_the_report_does_not_list_counts_only_holding_every_byte_the_master_had() -> None:
    """Proves the way out for a master that died before its report named the slave: unlisted
    (or listed out of sync), a slave is eligible only when its last byte is of the master's
    epoch and it holds at least the master's reported CommitLog end (or the master held
    nothing); one byte short, or holding more under an older epoch (a diverged tail), it is
    refused, even when it holds the acknowledged offset."""
    report = promotion.InSyncReport(3, 1_000, 900, (("10.0.0.2:5000", 2, False, 400),))

    def check(broker_id: int, offset: int, slave_epoch: int = 3) -> tuple[bool, str]:
        return promotion.in_sync_by_report(
            report,
            epoch=3,
            broker_id=broker_id,
            link_address="",
            max_offset=offset,
            slave_epoch=slave_epoch,
        )

    assert check(1, 1_000) == (True, "")  # connected after the master's last report
    assert check(2, 1_000) == (True, "")  # listed out of sync, caught up since
    assert check(1, 1_200) == (True, "")
    eligible, why = check(1, 999)
    assert not eligible and "1000" in why and "does not list it in sync" in why
    assert not check(1, 950)[0]  # above the acknowledged 900, yet short of what the master had
    eligible, why = check(1, 1_200, slave_epoch=2)  # an old master's tail, not yet cut
    assert not eligible and "epoch 2" in why
    empty = promotion.InSyncReport(3, 0, 0, ())
    assert promotion.in_sync_by_report(
        empty, epoch=3, broker_id=1, link_address="", max_offset=0, slave_epoch=0
    ) == (True, "")


def test_failover_decide_promotes_a_caught_up_slave_its_master_died_before_reporting() -> None:
    """Proves ``failover.decide`` with the master down and its last report (sent before the
    slave connected) listing no slave: the slave holding the master's reported end is
    promoted, one byte short it is refused, naming what it lacks (the e2e failover that the
    first in-sync rule left stuck)."""
    report = promotion.InSyncReport(3, 1_000, 1_000, ())
    caught_up = [DOWN_MASTER, _slave(1, 1_000, "10.0.0.1:5000")]
    assert failover.decide(caught_up, 1, report=report) == (None, 4)
    behind = [DOWN_MASTER, _slave(1, 999, "10.0.0.1:5000")]
    with pytest.raises(errors.PreconditionFailedError, match="999 bytes, below the 1000"):
        failover.decide(behind, 1, report=report)


def _cluster_info(
    report_ago_ms: int, master: tuple[int, int] | None
) -> pb.registry.GetClusterInfoResponse:
    """One name server's answer: group ``g`` with an epoch-3 report heard ``report_ago_ms``
    ago and (``master``: (heard ago ms, lease ms)) its master member."""
    group = pb.registry.BrokerGroup(broker_name="g")
    group.in_sync_report.CopyFrom(
        pb.registry.InSyncReport(epoch=3, master_max_offset=10, heard_ago_ms=report_ago_ms)
    )
    if master is not None:
        group.members.append(
            pb.registry.BrokerMember(
                broker_id=0, epoch=3, heard_ago_ms=master[0], lease_ms=master[1]
            )
        )
    return pb.registry.GetClusterInfoResponse(broker_groups=[group])


def test_a_report_older_than_the_lease_before_the_masters_last_heartbeat_is_as_good_as_none() -> (
    None
):
    """Proves the report's age rule: a report that reached a name server more than the
    master's lease (10 s when it keeps none) before that name server last heard the master
    does not count; within it, or with the master no longer listed, it does."""
    assert failover.report_of([_cluster_info(20_000, (5_000, 3_000))], "g") is None
    assert failover.report_of([_cluster_info(20_000, (5_000, 0))], "g") is None
    found = failover.report_of([_cluster_info(8_000, (5_000, 3_000))], "g")
    assert found is not None and found.heard_ago_ms == 8_000
    assert failover.report_of([_cluster_info(14_000, (5_000, 0))], "g") is not None
    assert failover.report_of([_cluster_info(60_000, None)], "g") is not None
    assert failover.report_of([_cluster_info(60_000, None)], "other") is None
    fresh_and_stale = [_cluster_info(20_000, (5_000, 3_000)), _cluster_info(6_000, (5_000, 3_000))]
    found = failover.report_of(fresh_and_stale, "g")
    assert found is not None and found.heard_ago_ms == 6_000


def test_a_master_heartbeats_its_report_at_once_when_its_in_sync_set_changes() -> None:
    """Proves the registration loop sends a heartbeat (with the in-sync report) as soon as the
    master's HA service sets ``replicas_changed`` (a slave connected or came in sync), well
    before the 1 s renewal interval, and keeps to the interval otherwise."""
    replicas_changed = asyncio.Event()
    runtime = types.SimpleNamespace(
        settings=types.SimpleNamespace(namesrv_addrs=["127.0.0.1:1"]),
        route_changed=asyncio.Event(),
    )
    replication = types.SimpleNamespace(
        master=types.SimpleNamespace(replicas_changed=replicas_changed), lease=None
    )
    service = registration.RegistrationService(
        runtime,  # type: ignore[arg-type]
        channel_pool.ChannelPool(channels_max=1),
        replication=replication,  # type: ignore[arg-type]
    )
    beats: list[float] = []
    beat = asyncio.Event()

    async def heartbeat_all() -> bool:
        beats.append(asyncio.get_running_loop().time())
        beat.set()
        return True

    service.heartbeat_all = heartbeat_all  # type: ignore[method-assign]

    async def run() -> None:
        loop = asyncio.get_running_loop()
        watching = asyncio.create_task(service._watch(loop.time() + 30, probe=True))
        await asyncio.sleep(0.1)
        assert beats == []  # nothing changed, the interval not yet over
        changed_at = loop.time()
        replicas_changed.set()
        await asyncio.wait_for(beat.wait(), 0.5)  # the renewal interval is 1 s
        assert beats[0] - changed_at < 0.5, beats
        assert not replicas_changed.is_set()  # consumed: one heartbeat per change
        runtime.route_changed.set()
        await asyncio.wait_for(watching, 2.0)  # a route change still ends the watch
        assert len(beats) == 1

    asyncio.run(run())


def test_ident_frames_round_trip_and_refuse_a_bad_broker_id() -> None:
    """Proves the IDENT frame (a slave naming its broker id on the HA stream) decodes to the id
    it was made with, has a known size for the master's reader, and a non-positive id or a
    wrong length is a protocol error."""
    frame = frames.encode_ident(7)
    assert len(frame) == frames.slave_frame_bytes(frame[0]) == frames.IDENT_BYTES
    assert frames.decode_ident(frame) == 7
    with pytest.raises(frames.FrameError):
        frames.decode_ident(frame[:1] + (0).to_bytes(8, "big"))
    with pytest.raises(frames.FrameError):
        frames.decode_ident(frame + b"x")


def _config(tmp: pathlib.Path) -> tuple[str, ...]:
    """Small CommitLog segments, a 1.5 s lease, and a SYNC_MASTER that acks with one in-sync
    slave of its two."""
    config = tmp / "in-sync.toml"
    config.write_text(
        "[store]\ncommit_log_file_size_bytes = 1048576\n"
        f"[ha]\nlease_ms = {LEASE_MS}\nmin_in_sync_replicas = 1\n"
        "[slave_sync]\ninterval_ms = 200\n"
    )
    return ("--config", str(config))


def _report(namesrv: str) -> pb.registry.InSyncReport:
    async def call() -> pb.registry.GetClusterInfoResponse:
        async with grpc.aio.insecure_channel(namesrv) as channel:
            return await registry_client.RegistryClient(channel, timeout_s=10).get_cluster_info()

    group = next(g for g in asyncio.run(call()).broker_groups if g.broker_name == "ha-group")
    return group.in_sync_report


@pytest.fixture
def trio(tmp_path: pathlib.Path) -> Iterator[tuple[str, ht.Broker, ht.Broker, ht.Broker]]:
    """A name server, a SYNC_MASTER and two slaves holding its bytes; all stopped after (a
    SIGSTOPped one continued first)."""
    extra = _config(tmp_path)
    brokers = [ht.new_broker(tmp_path, n) for n in ("master", "slave-a", "slave-b")]
    master, slave_a, slave_b = brokers
    with ht.running_namesrv(tmp_path) as namesrv:
        try:
            master.start(tmp_path, namesrv, "SYNC_MASTER", broker_id=0, extra=extra)
            for broker_id, slave in ((1, slave_a), (2, slave_b)):
                slave.start(
                    tmp_path,
                    namesrv,
                    "SLAVE",
                    broker_id=broker_id,
                    master_ha=master.ha,
                    extra=extra,
                )
            ht.create_topic(master.endpoint, TOPIC)
            assert ht.send(master.endpoint, TOPIC, b"before") == OK
            end = ht.stats(master.endpoint).commit_log_max_offset
            for slave in (slave_a, slave_b):
                ht.poll(
                    lambda s=slave: ht.stats(s.endpoint).commit_log_max_offset >= end,  # type: ignore[misc]
                    f"{slave.name} to hold the master's bytes",
                )
            yield namesrv, master, slave_a, slave_b
        finally:
            for broker in brokers:
                if broker.process is not None:
                    broker.process.send_signal(signal.SIGCONT)
                broker.stop()


@pytest.mark.slow
def test_failover_refuses_the_lagging_slave_and_promotes_the_in_sync_one_losing_nothing(
    trio: tuple[str, ht.Broker, ht.Broker, ht.Broker],
) -> None:
    """Proves the chaos run's loss cannot happen: slave B paused while the SYNC_MASTER acks
    SENDS messages with slave A, the master SIGKILLed and A unreachable: promoting B (the only
    live slave, lacking acknowledged bytes) is refused; with A back, A is promoted and holds
    every acknowledged byte."""
    namesrv, master, slave_a, slave_b = trio
    assert master.process and slave_a.process and slave_b.process
    os.kill(slave_b.process.pid, signal.SIGSTOP)
    codes = [ht.send(master.endpoint, TOPIC, f"acked-{i}".encode()) for i in range(SENDS)]
    assert codes == [OK] * SENDS
    acked_end = ht.stats(master.endpoint).commit_log_max_offset
    ht.poll(
        lambda: _report(namesrv).replicated_offset >= acked_end,
        "the master's in-sync report of the acknowledged sends",
    )
    assert {r.broker_id for r in _report(namesrv).replicas} == {1, 2}  # named by IDENT
    master.kill()
    os.kill(slave_a.process.pid, signal.SIGSTOP)
    os.kill(slave_b.process.pid, signal.SIGCONT)
    assert ht.stats(slave_b.endpoint).commit_log_max_offset < acked_end
    with pytest.raises(errors.PreconditionFailedError, match="acknowledged"):
        asyncio.run(failover.promote((namesrv,), "ha-group", 2, timeout_s=1.0))
    assert ht.stats(slave_b.endpoint).role == pb.admin.BrokerRole.BROKER_ROLE_SLAVE

    os.kill(slave_a.process.pid, signal.SIGCONT)
    promoted = asyncio.run(failover.promote((namesrv,), "ha-group", 1, timeout_s=1.0))
    assert promoted.endpoint == slave_a.endpoint
    assert promoted.commit_log_max_offset >= acked_end
    assert ht.send(slave_a.endpoint, TOPIC, b"after") == OK


@pytest.mark.slow
def test_a_master_killed_before_its_report_named_the_slave_fails_over_to_the_caught_up_slave(
    tmp_path: pathlib.Path,
) -> None:
    """Proves the way out with real processes: the master's path to the name server cut before
    its slave joins (its last report there lists no slave, with its CommitLog end), the slave
    copies every byte, the master is SIGKILLed: the slave is promoted holding every
    acknowledged byte and takes sends (the first in-sync rule refused it forever: the e2e
    operator failover's stuck "does not list it in sync")."""
    extra = _config(tmp_path)
    master, slave = (ht.new_broker(tmp_path, n) for n in ("master", "slave-a"))
    with ht.running_namesrv(tmp_path) as namesrv:
        proxy = cutproxy.CutProxy(namesrv)  # the master's path alone: the slave dials directly
        try:
            proxy.start()
            master.start(tmp_path, proxy.endpoint, "SYNC_MASTER", broker_id=0, extra=extra)
            ht.create_topic(master.endpoint, TOPIC)
            codes = [ht.send(master.endpoint, TOPIC, f"acked-{i}".encode()) for i in range(SENDS)]
            assert codes == [OK] * SENDS  # min_in_sync_replicas = 1: a lone master acks alone
            acked_end = ht.stats(master.endpoint).commit_log_max_offset
            ht.poll(
                lambda: _report(namesrv).master_max_offset >= acked_end,
                "the master's report of its CommitLog end",
            )
            proxy.cut()
            slave.start(tmp_path, namesrv, "SLAVE", broker_id=1, master_ha=master.ha, extra=extra)
            ht.poll(
                lambda: ht.stats(slave.endpoint).commit_log_max_offset >= acked_end,
                "the slave to copy the master's bytes",
            )
            assert not _report(namesrv).replicas  # the name server never heard of the slave
            master.kill()
            promoted = asyncio.run(failover.promote((namesrv,), "ha-group", 1, timeout_s=1.0))
            assert promoted.endpoint == slave.endpoint
            assert promoted.commit_log_max_offset >= acked_end
            assert ht.send(slave.endpoint, TOPIC, b"after") == OK
        finally:
            proxy.stop()
            for broker in (master, slave):
                broker.stop()
