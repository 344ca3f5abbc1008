"""Broker reconciliation as an ordered list of named, idempotent steps (DESIGN §8).

``reconcile_broker`` renders the model and applies it step by step through ``kube.Kube``; each
step may run again at any time (server-side apply of the same manifests is a no-op, and a hand
edit of an owned field is reverted). It returns the status to write: conditions plus
``observedGeneration`` (only after every step succeeded). A paused Broker applies nothing.

Readiness is read from the live objects the applies return: a Broker is Ready only when the
name-server Deployment and every group's StatefulSet report all their replicas ready at their
current generation (kwok marks pods ready in the e2e control plane). Until then Progressing is
True. After the applies, per group (``_run_group``), with the brokers' admin API (``ha``):
automatic failover (``failover.failover_step``: the master down past
``spec.failover.masterDownTimeoutSeconds`` and its lease run out at the name servers, asked
only when the master does not answer the operator → promote the chosen slave, recorded in
``status.groups[].lastPromotion`` and an Event), then ``roller`` restarts at most one stale pod
(a stale master with an in-sync slave is switched over first). A promotion first moves the
group's entry in the roles ConfigMap (the source of truth for who is master; never derived
from status), then calls ``ChangeRole``; a refused promotion moves it back. A group none of
whose brokers answers is handled as without admin access (nobody could be promoted). Groups beyond
``spec.groups`` are drained (``_scale_in``): write permission off, deleted only once every
consumer group has caught up on them, else refused (``ScaleInBlocked`` condition, an Event);
the condition of a done scale-in (False, Drained) stays until the next one.
Before any workload, ``certs.ensure`` issues or renews the TLS certificates (``spec.tls``;
``status.tls``, the CertificatesReady condition) and ``network_policies`` applies the Broker's
NetworkPolicies (``netpol``; prunes those no longer wanted). ``_grow_claims`` patches the
store claims up to ``spec.storage.size`` when their StorageClass allows expansion (never shrinks;
StorageGrowthBlocked when it does not). The StatefulSets' claim
templates are immutable, so the model keeps each live template's size (``live_claim_sizes``).
"""

from __future__ import annotations

import dataclasses
import datetime
import logging
from collections.abc import Callable, Sequence
from typing import Any

from ariane.common import errors
from ariane.operator import (
    certs,
    failover,
    ha,
    kube,
    model,
    netpol,
    resources,
    roller,
    status,
    storage,
    users,
)

_log = logging.getLogger(__name__)

MONITORING_API = "monitoring.coreos.com/v1"
STORAGE_BLOCKED = "StorageGrowthBlocked"
"""Condition type: True while ``spec.storage.size`` exceeds claims their class cannot grow."""
SCALE_IN_BLOCKED = "ScaleInBlocked"
"""Condition type: True while a scale-in waits for consumers (the groups are not deleted)."""


@dataclasses.dataclass(frozen=True, slots=True)
class Note:
    """An Event the handler posts for this reconcile: ``warning`` or normal, reason, message."""

    warning: bool
    reason: str
    message: str


@dataclasses.dataclass(frozen=True, slots=True)
class Step:
    """One named step: picks the manifests it applies from the rendered objects."""

    name: str
    """Shown in logs and in the Progressing condition when it fails."""
    select: Callable[[resources.Manifest], bool]
    """True for each rendered object this step applies."""


STEPS: Sequence[Step] = (
    Step("config", lambda m: m["kind"] == "ConfigMap"),
    Step(
        "name-server", lambda m: m["metadata"]["labels"]["app.kubernetes.io/component"] == "namesrv"
    ),
    Step(
        "broker-groups",
        lambda m: (
            m["kind"] in ("Service", "StatefulSet", "PodDisruptionBudget")
            and model.GROUP_LABEL in m["metadata"]["labels"]
        ),
    ),
    Step("monitoring", lambda m: m["apiVersion"] == MONITORING_API),
)


def _apply_step(
    client: kube.Kube, step: Step, objects: Sequence[resources.Manifest]
) -> list[resources.Manifest]:
    applied = []
    for manifest in objects:
        if not step.select(manifest):
            continue
        if manifest["apiVersion"] == MONITORING_API and not client.serves(
            MONITORING_API, manifest["kind"]
        ):
            _log.info("skipping %s: prometheus-operator CRDs are absent", manifest["kind"])
            continue
        applied.append(client.apply(manifest))
    return applied


def ready_replicas(live: resources.Manifest) -> int:
    """Ready replicas a live Deployment/StatefulSet reports for its current generation (else 0)."""
    observed = live.get("status", {}).get("observedGeneration", 0)
    if observed < live.get("metadata", {}).get("generation", 0):
        return 0
    return int(live.get("status", {}).get("readyReplicas", 0) or 0)


def observe(live_objects: Sequence[resources.Manifest]) -> tuple[list[dict[str, Any]], bool]:
    """The ``status.groups`` entries and whether every workload has all its replicas ready."""
    groups = []
    all_ready = True
    for live in live_objects:
        if live["kind"] not in ("StatefulSet", "Deployment"):
            continue
        ready = ready_replicas(live)
        wanted = int(live.get("spec", {}).get("replicas", 1))
        all_ready = all_ready and ready >= wanted
        if live["kind"] == "StatefulSet":
            name = live["metadata"]["name"]
            groups.append({"name": name, "statefulSet": name, "readyPods": ready})
    return groups, all_ready


def ensure_operator_secret(
    client: kube.Kube, owner: model.Owner, spec: resources.BrokerSpec
) -> None:
    """With ``spec.auth.enabled``, create the operator's Super user Secret once (random keys);
    an existing one is never changed (its keys are already the brokers' init user: a new key
    would lock the operator out; a Secret an admin made there is used as it is).

    Raises:
        kubernetes.client.ApiException: the Secret could not be read or created.
    """
    if not model.auth_enabled(spec):
        return
    name = model.operator_secret_name(owner.name)
    if client.get("v1", "Secret", owner.namespace, name):
        return
    client.apply(model.operator_secret(owner, users.generate_key(), users.generate_key()))
    _log.info(
        "broker %s/%s: generated the operator's Super user Secret %s",
        owner.namespace,
        owner.name,
        name,
    )


def reconcile_broker(
    client: kube.Kube,
    broker: dict[str, Any],
    now: datetime.datetime,
    admin: ha.GroupAdmin | None = None,
    notes: list[Note] | None = None,
    side: netpol.OperatorSide | None = None,
) -> dict[str, Any]:
    """Converges the objects of one Broker CR (a dict as the apiserver returns it).

    Args:
        client: the Kubernetes API.
        broker: the Broker CR.
        now: the time of this reconcile (conditions, failover timing).
        admin: the brokers' admin API; ``None``: no failover, no switchover (a plain roll),
            and a scale-in is refused (lag cannot be checked).
        notes: receives the Events to post (promotions, refusals).
        side: the operator's namespace, pod labels and Prometheus namespaces (the
            NetworkPolicies' peers); ``None``: ``netpol.OperatorSide()`` (no operator pod).

    Returns:
        The status to patch: ``conditions`` (merged with the old ones) and, when every step
        succeeded, ``observedGeneration``, ``groups`` (pods, master, epoch, last promotion),
        ``readyGroups`` and ``nameServerAddress``.

    Raises:
        kubernetes.client.ApiException: a step's apply failed (retry later; earlier steps
            stay applied, and repeating them is harmless).
    """
    meta = broker["metadata"]
    generation = int(meta.get("generation", 0))
    old = broker.get("status", {}).get("conditions", [])
    if status.is_paused(meta.get("annotations")):
        paused = status.condition(status.PAUSED, True, "Paused", "annotation set", generation, now)
        return {"conditions": status.merge(old, [paused])}
    owner = model.Owner(name=meta["name"], namespace=meta["namespace"], uid=meta["uid"])
    try:  # validate the spec before any read of live state
        model.desired_objects(owner, broker.get("spec", {}))
        certs.lifetimes(broker.get("spec", {}), meta.get("annotations"))
    except model.SpecError as error:
        bad = [
            status.condition(status.READY, False, "InvalidSpec", str(error), generation, now),
            status.condition(status.DEGRADED, True, "InvalidSpec", str(error), generation, now),
        ]
        return {"conditions": status.merge(old, bad)}
    ensure_operator_secret(client, owner, broker.get("spec", {}))
    notes = notes if notes is not None else []
    tls = _certificates(client, owner, broker, now, notes)
    masters, claim_sizes = live_masters(client, owner), live_claim_sizes(client, owner)
    objects = model.desired_objects(owner, broker.get("spec", {}), masters, claim_sizes)
    network_policies(client, owner, broker.get("spec", {}), claim_sizes, side)
    live = _apply_steps(client, owner, objects)
    context = _Context(client, admin, owner, broker, now, masters, notes)
    rolls, groups = [], {}
    for sts in (m for m in live if m["kind"] == "StatefulSet"):
        decision, group = _run_group(context, sts)
        rolls.append(decision)
        groups[sts["metadata"]["name"]] = group
    result = _observed_status(owner, broker, live, rolls, now)
    for entry in result["groups"]:
        entry.update(groups.get(entry["name"], {}))
    desired = [m["metadata"]["name"] for m in live if m["kind"] == "StatefulSet"]
    extra = [_scale_in(context, desired), _grow_claims(context, desired)]
    if tls is not None:
        result["tls"] = tls.tls
        extra.append(certs.condition(tls, int(meta.get("generation", 0)), now))
    result["conditions"] = status.merge(result["conditions"], [c for c in extra if c])
    return result


NETWORK_API = "networking.k8s.io/v1"


def network_policies(
    client: kube.Kube,
    owner: model.Owner,
    spec: resources.BrokerSpec,
    claim_sizes: dict[str, str],
    side: netpol.OperatorSide | None,
) -> list[str]:
    """Applies the Broker's NetworkPolicies (before any workload: a new pod starts isolated)
    for ``spec.groups`` and the groups still live (a draining group keeps its policy), then
    deletes the Broker's policies no longer wanted (all of them when disabled); returns the
    names applied.

    Raises:
        kubernetes.client.ApiException: an apply, the listing or a delete failed.
    """
    groups = model.group_names(owner.name, spec.get("groups", resources.DEFAULT_GROUPS))
    covered = sorted({*groups, *claim_sizes})
    wanted = netpol.policies(owner, spec, covered, side or netpol.OperatorSide())
    for manifest in wanted:
        client.apply(manifest)
    names = [m["metadata"]["name"] for m in wanted]
    selector = {"app.kubernetes.io/name": "ariane", "app.kubernetes.io/instance": owner.name}
    for live in client.list_objects(NETWORK_API, "NetworkPolicy", owner.namespace, selector):
        refs = live["metadata"].get("ownerReferences") or []
        mine = any(ref.get("uid") == owner.uid for ref in refs)
        if mine and live["metadata"]["name"] not in names:
            client.delete(NETWORK_API, "NetworkPolicy", owner.namespace, live["metadata"]["name"])
    return names


def _certificates(
    client: kube.Kube,
    owner: model.Owner,
    broker: dict[str, Any],
    now: datetime.datetime,
    notes: list[Note],
) -> certs.Outcome | None:
    """``certs.ensure`` for the Broker (before any workload: pods mount the Secrets); each
    issue or CA change becomes an Event."""
    meta = broker["metadata"]
    outcome = certs.ensure(client, owner, broker.get("spec", {}), meta.get("annotations"), now)
    if outcome is not None:
        notes.extend(Note(False, "CertificateIssued", text) for text in outcome.notes)
        if not outcome.ready:
            notes.append(Note(True, outcome.reason, outcome.message))
    return outcome


def _apply_steps(
    client: kube.Kube, owner: model.Owner, objects: Sequence[resources.Manifest]
) -> list[resources.Manifest]:
    """Every ``STEPS`` entry in order; the live objects the applies returned."""
    live: list[resources.Manifest] = []
    for step in STEPS:
        applied = _apply_step(client, step, objects)
        live.extend(applied)
        _log.debug(
            "broker %s/%s: step %s applied %d objects",
            owner.namespace,
            owner.name,
            step.name,
            len(applied),
        )
    return live


@dataclasses.dataclass(slots=True)
class _Context:
    """What one reconcile of one Broker shares between its steps."""

    client: kube.Kube
    admin: ha.GroupAdmin | None
    owner: model.Owner
    broker: dict[str, Any]
    now: datetime.datetime
    masters: dict[str, int]
    notes: list[Note]

    @property
    def spec(self) -> resources.BrokerSpec:
        spec: resources.BrokerSpec = self.broker.get("spec", {})
        return spec

    def old_group(self, name: str) -> dict[str, Any]:
        for group in self.broker.get("status", {}).get("groups", []) or []:
            if group.get("name") == name:
                return dict(group)
        return {}

    def condition(self, kind: str, ok: bool, reason: str, message: str) -> dict[str, Any]:
        generation = int(self.broker["metadata"].get("generation", 0))
        return status.condition(kind, ok, reason, message, generation, self.now)


def live_masters(client: kube.Kube, owner: model.Owner) -> dict[str, int]:
    """Group → master pod ordinal from the live roles ConfigMap (``{}`` before it exists).

    Raises:
        kubernetes.client.ApiException: reading it failed.
    """
    found = client.get("v1", "ConfigMap", owner.namespace, model.roles_config_map_name(owner.name))
    data = found.get("data") or {}
    return {group: int(value) for group, value in data.items() if str(value).isdigit()}


def live_claim_sizes(client: kube.Kube, owner: model.Owner) -> dict[str, str]:
    """Group → the claim template size of its live StatefulSet (templates are immutable).

    Raises:
        kubernetes.client.ApiException: listing failed.
    """
    selector = model.selector_labels(owner, "broker")
    sizes = {}
    for sts in client.list_objects("apps/v1", "StatefulSet", owner.namespace, selector):
        for template in sts.get("spec", {}).get("volumeClaimTemplates") or []:
            size = template.get("spec", {}).get("resources", {}).get("requests", {}).get("storage")
            if template.get("metadata", {}).get("name") == "store" and size:
                sizes[sts["metadata"]["name"]] = str(size)
    return sizes


def _timestamp(when: datetime.datetime) -> str:
    return when.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _parse_time(text: str | None) -> datetime.datetime | None:
    if not text:
        return None
    return datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))


def _set_master(context: _Context, group: str, ordinal: int) -> None:
    context.masters[group] = ordinal
    groups = model.group_names(context.owner.name, context.spec.get("groups", 1))
    known = sorted({*groups, *context.masters})
    context.client.apply(model.roles_config_map(context.owner, known, context.masters))


def _promote(
    context: _Context, group: str, member: failover.MemberView, why: str
) -> dict[str, Any] | None:
    """Moves the roles entry to ``member``, then promotes it; the ``lastPromotion`` record, or
    ``None`` (entry moved back) when the brokers refused."""
    assert context.admin is not None
    before = context.masters.get(group, 0)
    _set_master(context, group, member.ordinal)
    try:
        done, epoch = context.admin.promote(group, member.broker_id)
    except errors.ArianeError as error:
        _set_master(context, group, before)
        context.notes.append(Note(True, "PromotionFailed", f"{group}: {why}: {error}"))
        return None
    message = f"{group}: {why}; {done}"
    _log.warning("%s", message)
    context.notes.append(Note(False, "Promoted", message))
    return {
        "time": _timestamp(context.now),
        "epoch": epoch,
        "masterPod": f"{group}-{member.ordinal}",
        "previousMasterPod": f"{group}-{before}",
        "reason": why,
    }


def _failover(
    context: _Context, group: str, members: list[failover.MemberView], entry: dict[str, Any]
) -> bool:
    """Automatic failover of one group; updates its status ``entry``; True if it promoted."""
    old = context.old_group(group)
    timeout_s = context.spec.get("failover", {}).get(
        "masterDownTimeoutSeconds", failover.DEFAULT_MASTER_DOWN_TIMEOUT_S
    )
    master = context.masters.get(group, 0)
    lease = failover.NO_LEASE  # never read while the master answers
    if failover.master_is_down(members, master) and context.admin is not None:
        lease = context.admin.master_lease(group)
    decision = failover.failover_step(
        members,
        master,
        down_since=_parse_time(old.get("masterDownSince")),
        now=context.now,
        timeout_s=float(timeout_s),
        lease=lease,
        seen_epoch=int(old.get("epoch", 0) or 0),
    )
    if "lastPromotion" in old:
        entry["lastPromotion"] = old["lastPromotion"]
    if decision.down_since is not None:
        entry["masterDownSince"] = _timestamp(decision.down_since)
    if decision.step is failover.Step.STUCK and old.get("failover") != decision.message:
        context.notes.append(Note(True, "FailoverBlocked", f"{group}: {decision.message}"))
    if decision.step is not failover.Step.NONE:
        entry["failover"] = decision.message
    if decision.step is failover.Step.PROMOTE:
        chosen = members[decision.ordinal]
        record = _promote(context, group, chosen, f"failover: {decision.message}")
        if record is not None:
            entry["lastPromotion"] = record
            entry.pop("masterDownSince", None)
            entry.pop("failover", None)
            return True
    return False


def _run_group(
    context: _Context, sts: resources.Manifest
) -> tuple[roller.Decision, dict[str, Any]]:
    """Failover, then the roll (switchover first), for one group; its status fields."""
    group = sts["metadata"]["name"]
    pods = roller.group_pods(context.client, sts)
    replicas = int(sts.get("spec", {}).get("replicas", 1))
    members: list[failover.MemberView] = []
    if context.admin is not None and replicas > 1:
        members = context.admin.members(context.owner.namespace, group, pods, replicas)
        if not any(m.role for m in members):
            members = []  # no broker of the group answers: nothing to decide HA from
    entry: dict[str, Any] = {}
    promoted = bool(members) and _failover(context, group, members, entry)
    master = context.masters.get(group, 0)
    in_sync = failover.in_sync_slaves(members, master) if members else []
    if promoted:  # the members' roles are from before the promotion: roll on the next run
        decision = roller.Decision(roller.Action.WAIT, f"{group}: promoted a slave, rolling next")
    else:
        answers = any(m.ordinal == master and m.role in failover.MASTER_ROLES for m in members)
        decision = roller.roll_group(
            context.client,
            sts,
            pods,
            master_ordinal=master,
            in_sync=in_sync,
            master_answers=answers,
        )
    if decision.action is roller.Action.SWITCHOVER:
        record = _promote(context, group, members[decision.ordinal], "switchover before a roll")
        if record is not None:
            entry["lastPromotion"] = record
        master = context.masters.get(group, 0)
    role = context.spec.get("brokerRole", resources.DEFAULT_BROKER_ROLE)
    entry["pods"] = _pods_status(roller.pod_status(pods, role, master), members)
    entry["masterPod"] = (
        f"{group}-{master}" if any(p["name"] == f"{group}-{master}" for p in entry["pods"]) else ""
    )
    if members:
        entry["epoch"] = max(m.epoch for m in members)
    return decision, entry


def _pods_status(
    pods: list[dict[str, Any]], members: list[failover.MemberView]
) -> list[dict[str, Any]]:
    """The model's view of each pod, overwritten by what its broker answered."""
    answered = {m.ordinal: m for m in members if m.role}
    master_end = max((m.max_offset for m in answered.values() if m.role != "SLAVE"), default=0)
    for pod in pods:
        member = answered.get(int(pod["name"].rsplit("-", 1)[1]))
        if member is None:
            continue
        pod.update(
            brokerId=member.broker_id, role=member.role, commitLogMaxOffset=member.max_offset
        )
        if member.role == "SLAVE" and master_end:
            pod["haLagBytes"] = max(0, master_end - member.max_offset)
    return pods


def _had_condition(context: _Context, kind: str) -> bool:
    return _old_condition(context, kind) is not None


def _old_condition(context: _Context, kind: str) -> dict[str, Any] | None:
    """The Broker's current condition ``kind`` (from the status read), or ``None``."""
    conditions = context.broker.get("status", {}).get("conditions", []) or []
    return next((dict(c) for c in conditions if c.get("type") == kind), None)


def _scale_in(context: _Context, desired: list[str]) -> dict[str, Any] | None:
    """Drains and deletes the groups beyond ``spec.groups``; the ScaleInBlocked condition
    (``None`` when no scale-in ever happened)."""
    owner, client = context.owner, context.client
    selector = model.selector_labels(owner, "broker")
    existing = client.list_objects("apps/v1", "StatefulSet", owner.namespace, selector)
    removed = sorted(
        s["metadata"]["name"] for s in existing if s["metadata"]["name"] not in desired
    )
    if not removed:
        previous = _old_condition(context, SCALE_IN_BLOCKED)
        if previous is None or previous.get("status") == "False":
            return previous  # the last scale-in's outcome (Drained) stays on record
        return context.condition(SCALE_IN_BLOCKED, False, "NothingToRemove", "no group removed")
    if context.admin is None:
        message = f"scale-in of {', '.join(removed)} refused: no admin access to check lag"
        context.notes.append(Note(True, "ScaleInRefused", message))
        return context.condition(SCALE_IN_BLOCKED, True, "NoAdminAccess", message)
    try:
        context.admin.set_write_perm(removed, writable=False)
        verdict = failover.drain_verdict(removed, context.admin.unconsumed(removed))
    except errors.ArianeError as error:
        message = f"scale-in of {', '.join(removed)} refused: cannot drain: {error}"
        context.notes.append(Note(True, "ScaleInRefused", message))
        return context.condition(SCALE_IN_BLOCKED, True, "DrainFailed", message)
    if not verdict.safe:
        context.notes.append(Note(True, "ScaleInRefused", verdict.message))
        return context.condition(SCALE_IN_BLOCKED, True, "UnconsumedMessages", verdict.message)
    for group in removed:
        for api, kind in (
            ("apps/v1", "StatefulSet"),
            ("policy/v1", "PodDisruptionBudget"),
            ("v1", "Service"),
        ):
            client.delete(api, kind, owner.namespace, group)
        context.masters.pop(group, None)
    context.notes.append(Note(False, "ScaledIn", verdict.message + "; deleted"))
    return context.condition(SCALE_IN_BLOCKED, False, "Drained", verdict.message + "; deleted")


def _observed_status(
    owner: model.Owner,
    broker: dict[str, Any],
    live: Sequence[resources.Manifest],
    rolls: Sequence[roller.Decision],
    now: datetime.datetime,
) -> dict[str, Any]:
    generation = int(broker["metadata"].get("generation", 0))
    old = broker.get("status", {}).get("conditions", [])
    per_group = broker.get("spec", {}).get("replicasPerGroup", resources.DEFAULT_REPLICAS_PER_GROUP)
    groups, ready = observe(live)
    ready_groups = sum(1 for g in groups if g["readyPods"] >= per_group)
    message = f"{ready_groups}/{len(groups)} broker groups ready"
    rolling = [d.message for d in rolls if d.action is not roller.Action.NONE]
    if not ready:
        progress = (True, "WaitingForPods", message)
    elif rolling:
        progress = (True, "Rolling", "; ".join(rolling))
    else:
        progress = (False, "Converged", message)
    done = [
        status.condition(status.PAUSED, False, "Running", "reconciling", generation, now),
        status.condition(status.DEGRADED, False, "Applied", "every step applied", generation, now),
        status.condition(
            status.READY, ready, "AllReady" if ready else "PodsNotReady", message, generation, now
        ),
        status.condition(status.PROGRESSING, *progress, generation, now),
    ]
    return {
        "conditions": status.merge(old, done),
        "observedGeneration": generation,
        "groups": groups,
        "readyGroups": ready_groups,
        "nameServerAddress": model.namesrv_address(owner),
    }


def _grow_claims(context: _Context, desired: list[str]) -> dict[str, Any] | None:
    """Patches the store claims of ``desired`` groups up to ``spec.storage.size`` when their
    StorageClass allows expansion (never shrinks); the StorageGrowthBlocked condition (``None``
    while it never was blocked and is not now)."""
    owner, client = context.owner, context.client
    wanted = context.spec.get("storage", {}).get("size", resources.DEFAULT_STORAGE_SIZE)
    claims = []
    for group in desired:
        selector = model.selector_labels(owner, "broker", group)
        claims += client.list_objects("v1", "PersistentVolumeClaim", owner.namespace, selector)
    plan = storage.plan_growth(
        [(c["metadata"]["name"], storage.claim_size(c)) for c in claims],
        wanted,
        {c["metadata"]["name"]: _expandable(client, c) for c in claims},
    )
    for name in plan.grow:
        client.apply(storage.claim_patch(owner.namespace, name, wanted))
    if plan.grow:
        context.notes.append(Note(False, "StorageGrown", plan.message))
    if plan.blocked:
        context.notes.append(Note(True, "StorageGrowthBlocked", plan.message))
        return context.condition(STORAGE_BLOCKED, True, "NotExpandable", plan.message)
    if not _had_condition(context, STORAGE_BLOCKED):
        return None
    return context.condition(STORAGE_BLOCKED, False, "AtSize", plan.message)


def _expandable(client: kube.Kube, claim: resources.Manifest) -> bool:
    name = claim.get("spec", {}).get("storageClassName") or ""
    found = client.get("storage.k8s.io/v1", "StorageClass", "", name) if name else {}
    return bool(found.get("allowVolumeExpansion", False))
