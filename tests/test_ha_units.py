"""Replication's pure parts and ack rule without sockets: the HA frame codec round-trips and
refuses bad frames, the truncation rule cuts at the epoch boundary, the promotion decision picks
only a live in-sync slave, and a SYNC_MASTER / SLAVE store answers the ack-rule statuses."""

from __future__ import annotations

import pathlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ariane.broker.services import registration, replication
from ariane.client import failover
from ariane.common import clock, ids, message, promotion
from ariane.grpcwire import pb
from ariane.store import commit_log, message_store, put_wait
from ariane.store import settings as store_settings
from ariane.store.ha import epochs, frames, lease, service
from ariane.store.ha import settings as ha_settings

LONGS = st.integers(min_value=0, max_value=2**62)


@given(kind=st.sampled_from([frames.Kind.HELLO, frames.Kind.REPORT]), epoch=LONGS, offset=LONGS)
def test_report_round_trips(kind: frames.Kind, epoch: int, offset: int) -> None:
    """Proves a HELLO/REPORT decodes to what was encoded."""
    report = frames.Report(kind, epoch, offset)
    assert frames.decode_report(frames.encode_report(report)) == report


@given(epoch=LONGS, start=LONGS, offset=LONGS, body=st.binary(max_size=64))
def test_transfer_round_trips(epoch: int, start: int, offset: int, body: bytes) -> None:
    """Proves a TRANSFER header decodes to what was encoded and the body follows it."""
    header = frames.TransferHeader(frames.Kind.TRANSFER, epoch, start, offset, len(body))
    data = frames.encode_transfer(header, body)
    head = data[: frames.TRANSFER_HEADER_BYTES]
    assert frames.decode_transfer_header(head, body_bytes_max=64) == header
    assert data[frames.TRANSFER_HEADER_BYTES :] == body


def test_bad_frames_are_refused() -> None:
    """Proves an oversize body, an unknown kind and a short report are protocol errors."""
    header = frames.TransferHeader(frames.Kind.TRANSFER, 1, 0, 0, 100)
    raw = frames.encode_transfer(header, bytes(100))[: frames.TRANSFER_HEADER_BYTES]
    with pytest.raises(frames.FrameError, match="exceeds"):
        frames.decode_transfer_header(raw, body_bytes_max=99)
    with pytest.raises(frames.FrameError, match="kind"):
        frames.decode_transfer_header(b"\x09" + raw[1:], body_bytes_max=100)
    with pytest.raises(frames.FrameError):
        frames.decode_report(b"\x01" * 5)


def test_truncation_point_cuts_at_the_next_epoch_start() -> None:
    """Proves a slave of an older epoch keeps only bytes below the master's next epoch."""
    history = [epochs.EpochEntry(1, 0), epochs.EpochEntry(2, 1000), epochs.EpochEntry(3, 5000)]
    assert epochs.truncation_point(history, 6000, 1, 1700) == 1000  # diverged tail cut
    assert epochs.truncation_point(history, 6000, 1, 800) == 800  # a prefix: nothing to cut
    assert epochs.truncation_point(history, 6000, 3, 5500) == 5500  # same epoch
    assert epochs.truncation_point(history, 6000, 3, 7000) == 6000  # ahead of the master
    assert epochs.truncation_point(history, 6000, 0, 0) == 0
    with pytest.raises(epochs.StaleEpochError):
        epochs.truncation_point(history, 6000, 4, 10)


def test_epoch_history_persists_and_truncates(tmp_path: pathlib.Path) -> None:
    """Proves the history survives a reopen, refuses going back, and forgets cut epochs."""
    history = epochs.EpochHistory(tmp_path)
    history.append(1, 0)
    history.append(2, 500)
    with pytest.raises(ValueError):
        history.append(2, 600)
    assert epochs.EpochHistory(tmp_path).entries == history.entries
    history.truncate(500)
    assert epochs.EpochHistory(tmp_path).last_epoch == 1


def test_promotion_picks_the_most_caught_up_live_in_sync_slave() -> None:
    """Proves the decision never promotes while the master lives, nor an out-of-sync slave."""
    master = promotion.Member(0, 3, 900, alive=False, in_sync=True)
    slaves = [
        promotion.Member(1, 3, 800, alive=True, in_sync=True),
        promotion.Member(2, 3, 880, alive=True, in_sync=True),
        promotion.Member(3, 3, 990, alive=True, in_sync=False),
        promotion.Member(4, 3, 995, alive=False, in_sync=True),
    ]
    decided = promotion.choose([master, *slaves])
    assert (decided.broker_id, decided.new_epoch) == (2, 4)
    alive = promotion.Member(0, 3, 900, alive=True, in_sync=True)
    assert promotion.choose([alive, *slaves]).broker_id is None
    assert promotion.choose([alive, *slaves], force=True).broker_id == 2
    assert promotion.choose([master, slaves[2], slaves[3]]).broker_id is None


def test_a_failover_takes_an_epoch_above_the_unreachable_masters_registered_one() -> None:
    """Proves a failover never reuses the epoch of a master it cannot reach: a slave demoted at
    epoch 2 that received no byte of it still reports epoch 1, the name server lists the cut-off
    master at epoch 2, and the promotion takes epoch 3 (epoch 2 twice: two masters)."""
    stats = pb.admin.GetBrokerRuntimeStatsResponse(
        role=pb.admin.BrokerRole.BROKER_ROLE_SLAVE, epoch=1, commit_log_max_offset=100
    )
    members = [
        failover.MemberState(0, "m:1", "m:2", None, registered_epoch=2),
        failover.MemberState(1, "s:1", "s:2", stats, registered_epoch=1, ha_link_address="s:3"),
    ]
    report = promotion.InSyncReport(2, 100, 100, (("s:3", 1, True, 100),))  # vouches for it
    master, epoch = failover.decide(members, 1, report=report)
    assert (master, epoch) == (None, 3)


def _store(
    tmp_path: pathlib.Path, role: ha_settings.BrokerRole, *, min_in_sync_replicas: int = 2
) -> message_store.MessageStore:
    store = message_store.MessageStore.open(
        tmp_path / "store",
        store_settings.StoreSettings(commit_log_file_size_bytes=1 << 20, sync_flush_timeout_ms=200),
        clock=clock.SystemClock(),
    )
    history = epochs.EpochHistory(tmp_path / "ha")
    history.append(1, 0)
    config = ha_settings.HASettings(broker_role=role, min_in_sync_replicas=min_in_sync_replicas)
    store.replication = service.HAService(store, history, config)
    return store


def _gate(store: message_store.MessageStore) -> service.HAService:
    assert isinstance(store.replication, service.HAService)
    return store.replication


def _request() -> commit_log.AppendRequest:
    return commit_log.AppendRequest(message.Message(ids.TopicName("t"), b"body"), ids.QueueId(0))


Status = commit_log.PutMessageStatus


def test_sync_master_without_slave_refuses_before_storing_and_slave_refuses(
    tmp_path: pathlib.Path,
) -> None:
    """Proves a SYNC_MASTER with no slave in sync refuses single and batch appends with
    IN_SYNC_REPLICAS_NOT_ENOUGH storing nothing, and a SLAVE refuses with SERVICE_NOT_AVAILABLE."""
    store = _store(tmp_path / "m", ha_settings.BrokerRole.SYNC_MASTER)
    try:
        (result,) = store.put_messages_sync([_request()])
        assert result.status is Status.IN_SYNC_REPLICAS_NOT_ENOUGH
        batch = store.put_messages_sync([_request()] * 3, atomic=True)
        assert [r.status for r in batch] == [Status.IN_SYNC_REPLICAS_NOT_ENOUGH] * 3
        assert store.max_commit_log_offset == 0
        assert _gate(store).in_sync_replicas() == 1
    finally:
        store.close()
    store = _store(tmp_path / "s", ha_settings.BrokerRole.SLAVE)
    try:
        (result,) = store.put_messages_sync([_request()])
        assert result.status is Status.SERVICE_NOT_AVAILABLE
        assert store.max_commit_log_offset == 0
    finally:
        store.close()


def test_lone_sync_master_with_min_in_sync_replicas_one_acks_alone(tmp_path: pathlib.Path) -> None:
    """Proves ``min_in_sync_replicas = 1`` lets a SYNC_MASTER without slaves store and ack."""
    store = _store(tmp_path, ha_settings.BrokerRole.SYNC_MASTER, min_in_sync_replicas=1)
    try:
        (result,) = store.put_messages_sync([_request()])
        assert result.status is Status.PUT_OK
        assert store.max_commit_log_offset > 0
    finally:
        store.close()


class _FakeMonotonic:
    def __init__(self) -> None:
        self.now_ms = 1_000

    def __call__(self) -> int:
        return self.now_ms


def test_a_lease_is_held_from_a_renewal_until_its_send_time_plus_lease_ms() -> None:
    """Proves the lease is not held before the first renewal, ends lease_ms after the renewal
    was SENT (not answered), never moves back on an older renewal, and a revoke ends it."""
    now = _FakeMonotonic()
    held = lease.MasterLease(lease_ms=3_000, clock=now)
    assert not held.held() and held.remaining_ms() == 0
    sent_ms = held.now_ms()
    now.now_ms += 500  # the answers came back 0.5 s later
    held.extend(sent_ms)
    assert held.held() and held.remaining_ms() == 2_500
    held.extend(sent_ms - 1_000)  # a slower, older round answered late
    assert held.remaining_ms() == 2_500
    now.now_ms = sent_ms + 3_000
    assert not held.held()
    held.extend(now.now_ms)
    held.revoke()
    assert not held.held()


def test_a_master_without_its_lease_or_fenced_stores_nothing(tmp_path: pathlib.Path) -> None:
    """Proves an ASYNC_MASTER keeping a lease refuses appends (SERVICE_NOT_AVAILABLE, nothing
    written) until renewed and once it lapsed, accepts them while held, and a fence (newer
    epoch) refuses them again even with a fresh renewal."""
    store = _store(tmp_path, ha_settings.BrokerRole.ASYNC_MASTER)
    gate = store.replication
    assert isinstance(gate, service.HAService)
    now = _FakeMonotonic()
    gate.lease = lease.MasterLease(lease_ms=3_000, clock=now)
    try:
        (result,) = store.put_messages_sync([_request()])
        assert result.status is commit_log.PutMessageStatus.SERVICE_NOT_AVAILABLE
        assert store.max_commit_log_offset == 0
        gate.lease.extend(now.now_ms)
        (result,) = store.put_messages_sync([_request()])
        assert result.status is commit_log.PutMessageStatus.PUT_OK
        now.now_ms += 3_000
        (result,) = store.put_messages_sync([_request()])
        assert result.status is commit_log.PutMessageStatus.SERVICE_NOT_AVAILABLE
        gate.lease.extend(now.now_ms)
        gate.fence("a name server knows epoch 2")
        (result,) = store.put_messages_sync([_request()])
        assert result.status is commit_log.PutMessageStatus.SERVICE_NOT_AVAILABLE
        assert not gate.lease.held()
    finally:
        store.close()


def test_slave_lost_after_the_check_times_out_stored_and_quorum_counts_reports(
    tmp_path: pathlib.Path,
) -> None:
    """Proves the race edge: an append let in while a slave was in sync, whose slave then went,
    is stored and answered FLUSH_SLAVE_TIMEOUT; and with 3 replicas required the ack waits for
    the second-highest slave report."""
    store = _store(tmp_path / "a", ha_settings.BrokerRole.SYNC_MASTER)
    gate = _gate(store)
    try:
        gate._slaves[0] = service.SlaveProgress("s", 0, 1)
        assert gate.refusal() is None
        results, flushed = store._submit([_request()])
        del gate._slaves[0]  # the slave drops between the check and the wait
        (result,) = put_wait.wait_blocking(results, flushed, gate, timeout_ms=200)
        assert result.status is Status.FLUSH_SLAVE_TIMEOUT
        assert store.max_commit_log_offset == results[0].wrote_bytes
    finally:
        store.close()
    store = _store(tmp_path / "b", ha_settings.BrokerRole.SYNC_MASTER, min_in_sync_replicas=3)
    gate = _gate(store)
    try:
        gate._slaves[0] = service.SlaveProgress("s0", 500, 1)
        assert gate.refusal() is Status.IN_SYNC_REPLICAS_NOT_ENOUGH
        gate._slaves[1] = service.SlaveProgress("s1", 300, 1)
        assert (gate.refusal(), gate.in_sync_replicas(), gate.acked_offset()) == (None, 3, 300)
    finally:
        store.close()


def test_an_ack_after_the_lease_lapsed_is_never_a_plain_ok(tmp_path: pathlib.Path) -> None:
    """Proves an append that passed the gate but reaches its ack after the lease lapsed (a
    pause in between) answers SLAVE_NOT_AVAILABLE, not PUT_OK."""
    store = _store(tmp_path, ha_settings.BrokerRole.ASYNC_MASTER)
    gate = store.replication
    assert isinstance(gate, service.HAService)
    now = _FakeMonotonic()
    gate.lease = lease.MasterLease(lease_ms=3_000, clock=now)
    gate.lease.extend(now.now_ms)
    try:
        assert gate.replicated(100).result() is commit_log.PutMessageStatus.PUT_OK
        now.now_ms += 3_000
        assert gate.replicated(100).result() is commit_log.PutMessageStatus.SLAVE_NOT_AVAILABLE
    finally:
        store.close()


def test_lease_settings_are_checked_and_only_replicated_masters_keep_one() -> None:
    """Proves lease_ms defaults to 10 s, 0 turns the lease off, out-of-range values are refused,
    and a lone broker (no role) keeps no lease."""
    assert ha_settings.HASettings().lease_ms == 10_000
    assert not ha_settings.HASettings().keeps_lease
    role = ha_settings.BrokerRole.ASYNC_MASTER
    assert ha_settings.HASettings(broker_role=role).keeps_lease
    assert not ha_settings.HASettings(broker_role=role, lease_ms=0).keeps_lease
    for bad in (-1, 299, 600_001):
        with pytest.raises(ValueError, match="lease_ms"):
            ha_settings.HASettings(lease_ms=bad)


def test_a_renewal_extends_the_lease_once_a_majority_of_name_servers_answered() -> None:
    """Proves a renewal round to 3 name servers holds the lease only from the 2nd answer on,
    from the round's send time, and a round to 1 name server needs its answer."""
    assert [registration.majority(n) for n in (1, 2, 3, 4, 5)] == [1, 2, 2, 3, 3]
    now = _FakeMonotonic()
    held = lease.MasterLease(lease_ms=3_000, clock=now)
    round_ = registration._Renewal(held, registration.majority(3))
    sent_ms = now.now_ms
    now.now_ms += 1_000
    round_.acknowledged()
    assert not held.held()
    round_.acknowledged()
    assert held.held() and held.remaining_ms() == sent_ms + 3_000 - now.now_ms
    round_.acknowledged()
    assert held.remaining_ms() == 2_000


def test_a_refused_master_rejoins_as_a_slave_only_when_nothing_speaks_against_it() -> None:
    """Proves the rejoin decision: on by default; refused while the setting is off, while the
    master's lease is held, or when the name server named no master HA address or no id."""
    assert ha_settings.HASettings().rejoin_as_slave
    seen = replication.NewerEpoch(2, "b:1", "b:10912", 1)
    assert replication.rejoin_refusal(seen, enabled=True, lease_held=False) is None
    refusals = [
        replication.rejoin_refusal(seen, enabled=False, lease_held=False),
        replication.rejoin_refusal(seen, enabled=True, lease_held=True),
        replication.rejoin_refusal(
            replication.NewerEpoch(2, "b:1", "", 1), enabled=True, lease_held=False
        ),
        replication.rejoin_refusal(
            replication.NewerEpoch(2, "b:1", "b:10912", 0), enabled=True, lease_held=False
        ),
    ]
    assert all(refusals), refusals
    assert "lease" in str(refusals[1]) and "rejoin_as_slave" in str(refusals[0])
