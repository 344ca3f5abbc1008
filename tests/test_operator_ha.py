"""The operator's HA decisions, pure and through reconcile with fakes: in-sync slaves, failover
timing and choice, switchover before a master restart, scale-in drain, pod roles and addresses."""

from __future__ import annotations

import argparse
import asyncio
import datetime
import pathlib
from collections.abc import Sequence
from typing import Any

import kopf
import pytest

from ariane.broker import __main__ as broker_main
from ariane.broker.services import registration, replication
from ariane.common import errors
from ariane.operator import failover, ha, handlers, kube, model, reconcile, roller, storage
from ariane.store.ha import settings as ha_settings

NOW = datetime.datetime(2026, 11, 24, 12, 0, 0, tzinfo=datetime.UTC)
OWNER = model.Owner(name="demo", namespace="mq", uid="u-1")


def _member(
    ordinal: int, role: str = "SLAVE", offset: int = 1000, epoch: int = 1, ready: bool = True
) -> failover.MemberView:
    broker_id = 0 if role in failover.MASTER_ROLES else max(ordinal, 1)
    return failover.MemberView(ordinal, broker_id, role, epoch, offset, ready)


def _step(
    members: list[failover.MemberView],
    *,
    down_since: datetime.datetime | None,
    timeout_s: float,
    lease: failover.LeaseView = failover.NO_LEASE,
) -> failover.FailoverDecision:
    return failover.failover_step(
        members, 0, down_since=down_since, now=NOW, timeout_s=timeout_s, lease=lease
    )


def _lease(held_ms: int, heard_ago_ms: int, lease_ms: int = 3_000) -> failover.LeaseView:
    return failover.LeaseView(True, held_ms=held_ms, heard_ago_ms=heard_ago_ms, lease_ms=lease_ms)


def test_in_sync_slaves_are_live_slaves_within_the_gap_of_a_live_master() -> None:
    """Only answering slaves within the in-sync gap count, most caught up first; none without a
    live master."""
    members = [
        _member(0, "SYNC_MASTER", 10_000_000_000),
        _member(1, offset=10_000_000_000 - 5),
        _member(2, offset=10_000_000_000),
        _member(3, offset=10_000_000_000 - failover.IN_SYNC_GAP_BYTES - 1),
        _member(4, role=""),
    ]
    assert failover.in_sync_slaves(members, 0) == [2, 1]
    down = [_member(0, "SYNC_MASTER", ready=False), *members[1:]]
    assert failover.in_sync_slaves(down, 0) == []


def test_failover_waits_for_the_timeout_then_promotes_the_most_caught_up_slave() -> None:
    """A master down less than the timeout is waited on (its first-seen time kept); past it the
    live slave with the highest offset is promoted with epoch + 1; an up master clears it."""
    members = [
        _member(0, role="", ready=False),
        _member(1, offset=500, epoch=3),
        _member(2, offset=900, epoch=3),
    ]
    since = NOW - datetime.timedelta(seconds=10)
    waiting = _step(members, down_since=None, timeout_s=30)
    still = _step(members, down_since=since, timeout_s=30)
    due = _step(members, down_since=since, timeout_s=5)
    up = _step([_member(0, "ASYNC_MASTER"), *members[1:]], down_since=since, timeout_s=5)

    assert (waiting.step, waiting.down_since) == (failover.Step.WAIT, NOW)
    assert (still.step, still.down_since) == (failover.Step.WAIT, since)
    assert (due.step, due.ordinal, due.broker_id, due.epoch) == (failover.Step.PROMOTE, 2, 2, 4)
    assert (up.step, up.down_since) == (failover.Step.NONE, None)


def test_failover_never_promotes_an_unready_or_silent_slave() -> None:
    """A master down past the timeout with only unready or silent slaves is STUCK (no unclean
    election); a master pod that is ready but whose broker is silent counts as down."""
    members = [
        _member(0, role="", ready=True),
        _member(1, ready=False),
        _member(2, role=""),
    ]
    long_ago = NOW - datetime.timedelta(minutes=5)
    stuck = _step(members, down_since=long_ago, timeout_s=30)

    assert failover.master_is_down(members, 0)
    assert stuck.step is failover.Step.STUCK
    assert "no live in-sync slave" in stuck.message


def test_a_ready_master_silent_to_the_operator_is_down_only_once_its_lease_ran_out() -> None:
    """A Ready master that does not answer the operator is HELD (not down, nothing counted,
    nobody promoted) while the name servers hold its lease or do not answer; once its lease ran
    out it is down since it was last heard, so it is promoted as soon as that is past the
    timeout; a master that keeps no lease is judged by the operator's view alone."""
    members = [_member(0, role="", ready=True), _member(1, offset=900, epoch=3)]
    long_ago = NOW - datetime.timedelta(minutes=5)
    held = _step(members, down_since=long_ago, timeout_s=5, lease=_lease(2_000, 1_250))
    silent_ns = _step(members, down_since=long_ago, timeout_s=5, lease=failover.LeaseView(False))
    expired = _step(members, down_since=None, timeout_s=5, lease=_lease(0, 6_000))
    expired_recently = _step(members, down_since=None, timeout_s=5, lease=_lease(0, 3_500))
    no_lease = _step(members, down_since=None, timeout_s=5)

    assert (held.step, held.down_since) == (failover.Step.HELD, None)
    assert "renews its lease" in held.message and "1250 ms ago" in held.message
    assert (silent_ns.step, silent_ns.down_since) == (failover.Step.HELD, None)
    assert "cannot tell" in silent_ns.message
    assert (expired.step, expired.ordinal, expired.epoch) == (failover.Step.PROMOTE, 1, 4)
    assert expired.down_since == NOW - datetime.timedelta(seconds=6)
    assert expired_recently.step is failover.Step.WAIT
    assert expired_recently.down_since == NOW - datetime.timedelta(seconds=3.5)
    assert (no_lease.step, no_lease.down_since) == (failover.Step.WAIT, NOW)


def test_a_gone_master_pod_is_down_but_nobody_is_promoted_while_its_lease_is_held() -> None:
    """A missing master pod counts as down at once, yet past the timeout nobody is promoted
    while the name servers hold its lease or do not answer (WAIT, saying why); once it ran out,
    the slave is."""
    members = [_member(0, role="", ready=False), _member(1, offset=900)]
    long_ago = NOW - datetime.timedelta(minutes=5)
    held = _step(members, down_since=None, timeout_s=0, lease=_lease(2_000, 1_250))
    silent_ns = _step(members, down_since=long_ago, timeout_s=5, lease=failover.LeaseView(False))
    expired = _step(members, down_since=long_ago, timeout_s=5, lease=_lease(0, 9_000))

    assert (held.step, held.down_since) == (failover.Step.WAIT, NOW)
    assert "hold its lease 2000 ms more" in held.message
    assert silent_ns.step is failover.Step.WAIT and "do not answer" in silent_ns.message
    assert (expired.step, expired.ordinal, expired.down_since) == (
        failover.Step.PROMOTE,
        1,
        long_ago,
    )


def test_drain_verdict_refuses_while_any_consumer_group_has_lag() -> None:
    """Any consumer group behind on the removed groups blocks the scale-in and is named."""
    blocked = failover.drain_verdict(["demo-b"], {"billing": 7, "audit": 0, "ship": 3})
    drained = failover.drain_verdict(["demo-b"], {"billing": 0})

    assert (blocked.safe, blocked.unconsumed) == (False, 10)
    assert "billing=7" in blocked.message and "ship=3" in blocked.message
    assert "audit" not in blocked.message
    assert (drained.safe, drained.unconsumed) == (True, 0)


def _sts(replicas: int = 2) -> dict[str, Any]:
    return {
        "metadata": {"name": "demo-a", "namespace": "mq"},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"g": "a"}}},
        "status": {"updateRevision": "new"},
    }


def _pod(ordinal: int, revision: str, ready: bool = True) -> dict[str, Any]:
    state = "True" if ready else "False"
    return {
        "metadata": {
            "name": f"demo-a-{ordinal}",
            "uid": f"uid-{ordinal}-{revision}",
            "labels": {roller.REVISION_LABEL: revision, model.POD_INDEX_LABEL: str(ordinal)},
        },
        "status": {"conditions": [{"type": "Ready", "status": state}]},
    }


def test_a_stale_master_is_switched_over_to_an_in_sync_slave_first() -> None:
    """With only the master stale and an in-sync current slave, the decision is SWITCHOVER to
    it; while the master answers but no slave is in sync, WAIT; with nobody to ask, the master
    is restarted in place."""
    pods = [_pod(0, "old"), _pod(1, "new")]
    switch = roller.next_action(_sts(), pods, in_sync=[1], master_answers=True)
    wait = roller.next_action(_sts(), pods, in_sync=[], master_answers=True)
    blind = roller.next_action(_sts(), pods)

    assert (switch.action, switch.pod, switch.ordinal) == (roller.Action.SWITCHOVER, "demo-a-1", 1)
    assert wait.action is roller.Action.WAIT
    assert (blind.action, blind.pod) == (roller.Action.DELETE, "demo-a-0")


def test_after_a_promotion_the_old_master_ordinal_rolls_as_a_slave() -> None:
    """With ordinal 1 the master, stale ordinal 0 is a slave and goes first, and ordinal 1 is
    the master that waits for the switchover."""
    first = roller.next_action(_sts(), [_pod(0, "old"), _pod(1, "old")], master_ordinal=1)
    assert (first.action, first.pod) == (roller.Action.DELETE, "demo-a-0")
    assert "slave" in first.message
    statuses = roller.pod_status([_pod(0, "new"), _pod(1, "new")], "SYNC_MASTER", 1)
    assert [(p["brokerId"], p["role"]) for p in statuses] == [(1, "SLAVE"), (0, "SYNC_MASTER")]


@pytest.mark.parametrize(
    ("ordinal", "master", "expected"),
    [
        (0, 0, (0, "SYNC_MASTER")),
        (1, 0, (1, "SLAVE")),
        (1, 1, (0, "SYNC_MASTER")),
        (0, 1, (1, "SLAVE")),
        (2, 1, (2, "SLAVE")),
    ],
)
def test_pod_role_follows_its_ordinal_and_the_master_ordinal(
    ordinal: int, master: int, expected: tuple[int, str]
) -> None:
    """The master pod is broker id 0; ordinal 0 takes the master's ordinal as id (what a
    ChangeRole promotion leaves), the others keep theirs."""
    broker_id, role = broker_main.role_by_ordinal(
        ordinal, master, ha_settings.BrokerRole.SYNC_MASTER
    )
    assert (broker_id, role.value) == expected


def test_broker_flags_set_id_and_role_and_keep_a_lone_master_lone(tmp_path: pathlib.Path) -> None:
    """``--pod-ordinal/--master-ordinal`` give a slave its id and role; a lone master (no role
    configured) stays without an HA port; one flag alone is refused."""
    parser = argparse.ArgumentParser()
    broker_main.add_arguments(parser)
    store = ["--store-dir", str(tmp_path)]
    slave = broker_main.settings_from_args(
        parser.parse_args(
            [*store, "--broker-role", "SYNC_MASTER", "--pod-ordinal", "0", "--master-ordinal", "2"]
        )
    )
    lone = broker_main.settings_from_args(
        parser.parse_args([*store, "--pod-ordinal", "0", "--master-ordinal", "0"])
    )

    assert (slave.broker_id, slave.ha.broker_role) == (2, ha_settings.BrokerRole.SLAVE)
    assert (lone.broker_id, lone.ha.broker_role) == (0, None)
    with pytest.raises(ValueError, match="go together"):
        broker_main.settings_from_args(parser.parse_args([*store, "--pod-ordinal", "1"]))


def test_a_slave_with_broker_id_zero_is_refused_at_start(tmp_path: pathlib.Path) -> None:
    """A SLAVE with broker id 0 (no --broker-id, or 0 in the config) is refused with a message
    naming --broker-id, as RocketMQ's BrokerStartup refuses it: it would register as its
    group's master; with an id of 1 or more it starts."""
    parser = argparse.ArgumentParser()
    broker_main.add_arguments(parser)
    slave = ["--store-dir", str(tmp_path), "--broker-role", "SLAVE", "--master-ha", "127.0.0.1:1"]
    with pytest.raises(ValueError, match="--broker-id"):
        broker_main.settings_from_args(parser.parse_args(slave))
    with pytest.raises(ValueError, match="--broker-id"):
        broker_main.settings_from_args(parser.parse_args([*slave, "--broker-id", "0"]))
    ok = broker_main.settings_from_args(parser.parse_args([*slave, "--broker-id", "1"]))
    assert (ok.broker_id, ok.ha.broker_role) == (1, ha_settings.BrokerRole.SLAVE)


def test_ha_address_uses_the_advertised_host_when_listening_everywhere() -> None:
    """A pod's HA port binds 0.0.0.0, so slaves are told the advertised host (brokerIP2)."""
    pod = replication.advertised_ha_address("0.0.0.0:10912", "demo-a-0.demo-a.mq.svc:8081", 10912)
    local = replication.advertised_ha_address("127.0.0.1:0", "127.0.0.1:5000", 4567)
    assert pod == "demo-a-0.demo-a.mq.svc:10912"
    assert local == "127.0.0.1:4567"


def test_model_renders_roles_and_ha_for_groups_with_slaves() -> None:
    """Groups with slaves get a role and a wildcard HA port in broker.toml, and the roles
    ConfigMap names each group's master ordinal (0 unless moved)."""
    spec: Any = {"groups": 2, "replicasPerGroup": 2, "brokerRole": "SYNC_MASTER"}
    objects = {model.object_key(m): m for m in model.desired_objects(OWNER, spec, {"demo-b": 1})}
    roles = objects[("v1", "ConfigMap", "demo-roles")]
    toml = objects[("v1", "ConfigMap", "demo-config")]["data"]["broker.toml"]
    lone = model.broker_settings(OWNER, {"replicasPerGroup": 1})

    assert roles["data"] == {"demo-a": "0", "demo-b": "1"}
    assert 'broker_role = "SYNC_MASTER"' in toml
    assert 'ha_listen = "0.0.0.0:10912"' in toml
    assert "broker_role" not in lone and "ha" not in lone


def test_pod_endpoint_prefers_overrides_then_the_pod_dns_name() -> None:
    """The namespaced override wins, then the bare pod name, else the advertised DNS name."""
    overrides = {"mq/demo-a-0": "127.0.0.1:1", "demo-a-1": "127.0.0.1:2"}
    assert ha.pod_endpoint("mq", "demo-a", "demo-a-0", overrides) == "127.0.0.1:1"
    assert ha.pod_endpoint("mq", "demo-a", "demo-a-1", overrides) == "127.0.0.1:2"
    assert ha.pod_endpoint("mq", "demo-a", "demo-a-2", overrides) == "demo-a-2.demo-a.mq.svc:8081"


class FakeKube:
    """The ``kube.Kube`` calls reconcile makes, over a dict; records every write in order."""

    def __init__(self, pods: list[dict[str, Any]]) -> None:
        self.objects: dict[tuple[str, str], dict[str, Any]] = {}
        self.pods = pods
        self.log: list[tuple[str, str, str]] = []

    def apply(self, manifest: dict[str, Any]) -> dict[str, Any]:
        key = (manifest["kind"], manifest["metadata"]["name"])
        live = dict(manifest)
        if manifest["kind"] == "StatefulSet":
            live["status"] = {"updateRevision": "new", "readyReplicas": 2}
        self.objects[key] = live
        self.log.append(("apply", *key))
        return live

    def serves(self, api_version: str, kind: str) -> bool:
        return False

    def get(self, api_version: str, kind: str, namespace: str, name: str) -> dict[str, Any]:
        return self.objects.get((kind, name), {})

    def list_objects(
        self, api_version: str, kind: str, namespace: str, selector: dict[str, str]
    ) -> list[dict[str, Any]]:
        if kind == "Pod":
            return self.pods
        return [o for (k, _), o in self.objects.items() if k == kind]

    def delete(self, api_version: str, kind: str, namespace: str, name: str) -> None:
        self.objects.pop((kind, name), None)
        self.log.append(("delete", kind, name))


class FakeAdmin:
    """A ``GroupAdmin`` with fixed members; ``promote`` notes the roles ConfigMap it saw."""

    def __init__(
        self,
        kube: FakeKube,
        members: list[failover.MemberView],
        refuse: bool = False,
        lease: failover.LeaseView = failover.NO_LEASE,
    ) -> None:
        self.kube, self.members_seen, self.refuse, self.lease = kube, members, refuse, lease
        self.lease_asked = 0
        self.promoted: list[tuple[int, str]] = []
        self.write_perm: list[tuple[tuple[str, ...], bool]] = []
        self.lag: dict[str, int] = {}

    def members(
        self, namespace: str, group: str, pods: Sequence[dict[str, Any]], replicas: int
    ) -> list[failover.MemberView]:
        return self.members_seen

    def master_lease(self, group: str) -> failover.LeaseView:
        self.lease_asked += 1
        return self.lease

    def promote(self, group: str, broker_id: int) -> tuple[str, int]:
        roles = self.kube.objects[("ConfigMap", "demo-roles")]["data"][group]
        self.promoted.append((broker_id, roles))
        if self.refuse:
            raise errors.PreconditionFailedError("slave behind")
        return "promoted", 2

    def set_write_perm(self, groups: Sequence[str], *, writable: bool) -> None:
        self.write_perm.append((tuple(groups), writable))

    def unconsumed(self, groups: Sequence[str]) -> dict[str, int]:
        return self.lag


def _broker(spec: dict[str, Any], groups_status: list[dict[str, Any]] | None = None) -> Any:
    return {
        "metadata": {"name": "demo", "namespace": "mq", "uid": "u-1", "generation": 1},
        "spec": {"replicasPerGroup": 2, "brokerRole": "SYNC_MASTER", **spec},
        "status": {"groups": groups_status or []},
    }


def test_reconcile_moves_the_roles_entry_before_promoting_and_back_when_refused() -> None:
    """A master down past the timeout: the roles ConfigMap names the slave before the promote
    call (a pod starting meanwhile starts in its new role), status records the promotion and a
    Promoted note is made; a refused promotion puts the entry back and notes why."""
    down_since = (NOW - datetime.timedelta(seconds=60)).strftime("%Y-%m-%dT%H:%M:%SZ")
    old = [{"name": "demo-a", "masterDownSince": down_since}]
    members = [_member(0, role="", ready=False), _member(1, offset=700)]
    for refuse, master_after in ((False, "1"), (True, "0")):
        kube = FakeKube([_pod(1, "new")])
        admin = FakeAdmin(kube, members, refuse=refuse)
        notes: list[reconcile.Note] = []
        result = reconcile.reconcile_broker(kube, _broker({}, old), NOW, admin, notes)  # type: ignore[arg-type]

        assert admin.promoted == [(1, "1")]
        assert kube.objects[("ConfigMap", "demo-roles")]["data"] == {"demo-a": master_after}
        [group] = result["groups"]
        if refuse:
            assert "lastPromotion" not in group
            assert [n.reason for n in notes] == ["PromotionFailed"]
        else:
            assert group["lastPromotion"]["masterPod"] == "demo-a-1"
            assert group["lastPromotion"]["epoch"] == 2
            assert group["lastPromotion"]["time"] == "2026-11-24T12:00:00Z"
            assert [n.reason for n in notes] == ["Promoted"]


def test_reconcile_never_fails_over_a_master_that_renews_its_lease_at_the_name_servers() -> None:
    """A master whose pod is Ready but whose broker does not answer the operator, long past the
    timeout, is not failed over while the name servers hold its lease (roles ConfigMap untouched,
    no promote call, status says why and keeps no down time); once its lease ran out it is."""
    down_since = (NOW - datetime.timedelta(seconds=60)).strftime("%Y-%m-%dT%H:%M:%SZ")
    old = [{"name": "demo-a", "masterDownSince": down_since}]
    members = [_member(0, role="", ready=True), _member(1, offset=700)]
    held = failover.LeaseView(answered=True, held_ms=7_000, heard_ago_ms=3_000, lease_ms=10_000)
    kube = FakeKube([_pod(0, "new"), _pod(1, "new")])
    admin = FakeAdmin(kube, members, lease=held)
    notes: list[reconcile.Note] = []
    result = reconcile.reconcile_broker(kube, _broker({}, old), NOW, admin, notes)  # type: ignore[arg-type]

    assert admin.promoted == []
    assert kube.objects[("ConfigMap", "demo-roles")]["data"] == {"demo-a": "0"}
    [group] = result["groups"]
    assert "masterDownSince" not in group and "lastPromotion" not in group
    assert "renews its lease at the name servers" in group["failover"]
    assert [n.reason for n in notes] == []

    expired = failover.LeaseView(answered=True, held_ms=0, heard_ago_ms=12_000, lease_ms=10_000)
    admin.lease = expired
    promoted = reconcile.reconcile_broker(kube, _broker({}, old), NOW, admin, notes)  # type: ignore[arg-type]
    assert admin.promoted == [(1, "1")]
    assert promoted["groups"][0]["lastPromotion"]["masterPod"] == "demo-a-1"


def test_no_failover_before_the_groups_first_master_ever_served() -> None:
    """A new group whose master pod is still starting past the timeout, its slave up but never
    fed (epoch 0): nobody is promoted (the promoted slave would take epoch 1, the epoch the
    starting master opens with: two masters at one epoch, neither fenced; found on real pods
    on a busy node), and status says why; once the group has been seen at an epoch, the same
    facts fail over."""
    down_since = (NOW - datetime.timedelta(seconds=60)).strftime("%Y-%m-%dT%H:%M:%SZ")
    members = [_member(0, role="", ready=False, epoch=0), _member(1, offset=0, epoch=0)]
    outcomes = []
    for old in ({"masterDownSince": down_since}, {"masterDownSince": down_since, "epoch": 1}):
        kube = FakeKube([_pod(1, "new")])
        admin = FakeAdmin(kube, members)
        broker = _broker({}, [{"name": "demo-a", **old}])
        [group] = reconcile.reconcile_broker(kube, broker, NOW, admin, [])["groups"]  # type: ignore[arg-type]
        outcomes.append((admin.promoted, group))

    (never, first), (promoted, _) = outcomes
    assert never == []
    assert "no master has served" in first["failover"]
    assert "masterDownSince" not in first
    assert promoted == [(1, "1")]


def test_reconcile_refuses_scale_in_with_lag_and_deletes_once_drained() -> None:
    """A group beyond spec.groups gets its write permission wiped; with lag it is kept (the
    ScaleInBlocked condition says why); with none its StatefulSet, PDB and Service go."""
    kube = FakeKube([])
    kube.objects[("StatefulSet", "demo-b")] = {"metadata": {"name": "demo-b"}}
    admin = FakeAdmin(kube, [])
    admin.lag = {"billing": 4}
    notes: list[reconcile.Note] = []
    blocked = reconcile.reconcile_broker(kube, _broker({"replicasPerGroup": 1}), NOW, admin, notes)  # type: ignore[arg-type]
    kept = ("StatefulSet", "demo-b") in kube.objects
    admin.lag = {"billing": 0}
    done = reconcile.reconcile_broker(kube, _broker({"replicasPerGroup": 1}), NOW, admin, notes)  # type: ignore[arg-type]

    def scale_in(result: dict[str, Any]) -> dict[str, Any]:
        return next(c for c in result["conditions"] if c["type"] == reconcile.SCALE_IN_BLOCKED)

    assert kept
    assert (scale_in(blocked)["status"], scale_in(blocked)["reason"]) == (
        "True",
        "UnconsumedMessages",
    )
    assert admin.write_perm[0] == (("demo-b",), False)
    assert (scale_in(done)["status"], scale_in(done)["reason"]) == ("False", "Drained")
    assert ("delete", "StatefulSet", "demo-b") in kube.log
    assert [n.reason for n in notes] == ["ScaleInRefused", "ScaledIn"]


def test_a_done_scale_in_keeps_its_drained_condition_on_later_reconciles() -> None:
    """Once the drained group is deleted, the next reconciles (nothing left to remove) keep
    ScaleInBlocked False/Drained with its message and time, not a "no group removed" that
    hides the scale-in (found on real pods: the record lasted one 2 s resync); a scale-in
    withdrawn while blocked (spec.groups raised back) becomes False/NothingToRemove."""
    kube = FakeKube([])
    kube.objects[("StatefulSet", "demo-b")] = {"metadata": {"name": "demo-b"}}
    admin = FakeAdmin(kube, [])
    admin.lag = {"billing": 0}
    broker = _broker({"replicasPerGroup": 1})
    done = reconcile.reconcile_broker(kube, broker, NOW, admin, [])  # type: ignore[arg-type]
    later = NOW + datetime.timedelta(seconds=2)
    broker["status"] = done
    kept = reconcile.reconcile_broker(kube, broker, later, admin, [])  # type: ignore[arg-type]
    withdrawn = _broker({"replicasPerGroup": 1})
    blocked = {"type": reconcile.SCALE_IN_BLOCKED, "status": "True", "reason": "Unconsumed"}
    withdrawn["status"]["conditions"] = [{**blocked, "lastTransitionTime": "x", "message": ""}]
    after = reconcile.reconcile_broker(kube, withdrawn, later, admin, [])  # type: ignore[arg-type]

    def scale_in(result: dict[str, Any]) -> dict[str, Any]:
        return next(c for c in result["conditions"] if c["type"] == reconcile.SCALE_IN_BLOCKED)

    assert scale_in(done)["reason"] == "Drained"
    assert scale_in(kept) == scale_in(done)
    assert (scale_in(after)["status"], scale_in(after)["reason"]) == ("False", "NothingToRemove")


def test_storage_growth_patches_only_smaller_expandable_claims() -> None:
    """Claims below spec.storage.size grow when their class allows it, are blocked (named)
    when not, and claims at or above it are never shrunk."""
    claims = [("store-a-0", "1Gi"), ("store-a-1", "1Gi"), ("store-b-0", "4Gi"), ("store-c-0", "1G")]
    expandable = {"store-a-0": True, "store-a-1": False, "store-b-0": True, "store-c-0": True}
    plan = storage.plan_growth(claims, "2Gi", expandable)

    assert plan.grow == ("store-a-0", "store-c-0")
    assert plan.blocked == ("store-a-1",)
    assert "store-a-1" in plan.message and "allowVolumeExpansion" in plan.message
    assert storage.quantity_bytes("1.5Gi") == 1610612736
    assert storage.plan_growth([("x", "2Gi")], "2048Mi", {}).grow == ()
    with pytest.raises(ValueError):
        storage.quantity_bytes("2 GB")


def test_model_keeps_a_live_claim_template_size() -> None:
    """A live StatefulSet's claim template (immutable) is rendered as it is, not the spec's."""
    spec: Any = {"groups": 1, "storage": {"size": "5Gi"}}
    objects = {
        model.object_key(m): m for m in model.desired_objects(OWNER, spec, {}, {"demo-a": "1Gi"})
    }
    [template] = objects[("apps/v1", "StatefulSet", "demo-a")]["spec"]["volumeClaimTemplates"]
    assert template["spec"]["resources"]["requests"]["storage"] == "1Gi"


def test_brokers_register_with_every_name_server_pod_of_the_headless_service() -> None:
    """broker.toml names the headless name-server Service with namesrv_resolve_all, and the
    broker turns that name into one target per address it resolves to (IPv6 bracketed), while a
    plain list is dialled as given and an unresolvable name is kept."""
    objects = {model.object_key(m): m for m in model.desired_objects(OWNER, {})}
    headless = objects[("v1", "Service", "demo-namesrv-pods")]
    toml = objects[("v1", "ConfigMap", "demo-config")]["data"]["broker.toml"]

    async def resolver(host: str, port: int) -> list[str]:
        if host == "gone.svc":
            raise OSError("no such host")
        assert (host, port) == ("demo-namesrv-pods.mq.svc", 9876)
        return ["10.0.0.7", "10.0.0.9", "fd00::1"]

    def targets(addrs: list[str], resolve_all: bool) -> list[str]:
        return asyncio.run(
            registration.name_server_targets(addrs, resolve_all=resolve_all, resolver=resolver)
        )

    assert headless["spec"]["clusterIP"] == "None"
    assert 'namesrv = ["demo-namesrv-pods.mq.svc:9876"]' in toml
    assert "namesrv_resolve_all = true" in toml
    assert targets(["demo-namesrv-pods.mq.svc:9876"], True) == [
        "10.0.0.7:9876",
        "10.0.0.9:9876",
        "[fd00::1]:9876",
    ]
    assert targets(["demo-namesrv-pods.mq.svc:9876"], False) == ["demo-namesrv-pods.mq.svc:9876"]
    assert targets(["gone.svc:1"], True) == ["gone.svc:1"]


def test_a_group_whose_brokers_all_stay_silent_starts_no_failover_timer() -> None:
    """When no broker of a group answers (the operator cannot reach them), no failover is
    pending and the master is restarted in place by a roll, as without admin access."""
    kube = FakeKube([_pod(0, "old"), _pod(1, "new")])
    admin = FakeAdmin(kube, [_member(0, role=""), _member(1, role="")])
    notes: list[reconcile.Note] = []
    result = reconcile.reconcile_broker(kube, _broker({}), NOW, admin, notes)  # type: ignore[arg-type]

    [group] = result["groups"]
    assert "masterDownSince" not in group and "failover" not in group
    assert ("delete", "Pod", "demo-a-0") in kube.log
    assert admin.promoted == [] and notes == []


def test_a_deleted_broker_waits_for_its_running_resync_about_a_second_not_a_minute(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """kopf re-checks a resource's stopping resync timer (a sync reconcile in a worker thread,
    which it cannot cancel) every ``TIMER_STOP_POLL_S``, not its default 60 s: a Broker deleted
    during a reconcile has its finalizer released once the reconcile ends (the e2e tests saw
    60 s deletions under load)."""
    monkeypatch.setattr(kube, "api_client_from_environment", lambda: None)
    monkeypatch.setattr(kube, "Kube", lambda client: client)
    settings = kopf.OperatorSettings()
    handlers.configure(settings=settings, memo=kopf.Memo())  # type: ignore[call-arg]

    assert settings.background.cancellation_polling <= 2.0
