"""kopf wiring only: which handler runs ``reconcile`` / ``metadata`` for which CR, and when.

Broker: create/update/resume apply the model (``reconcile.reconcile_broker``, sync, in kopf's
thread pool) and a timer re-applies it every ``resync_interval_s`` seconds (``settings``), which
reverts drift and
refreshes readiness. Topic, ConsumerGroup and RocketMQUser: create/update/resume and a timer
create-or-replace them through the admin API (``metadata``, ``users``: the user, its ACL and its
Secret); a delete handler (behind the ``FINALIZER``) removes them from the brokers. Admin calls
are signed as the operator's Super user when the Broker has ``spec.auth.enabled``, and dial
TLS with the Broker's trust bundle and the operator's client certificate when it has
``spec.tls.mode: enforcing`` (``certs.client_tls``; ``ARIANE_TLS`` wins when set).
The operator's settings (``settings.OperatorSettings``, read once by ``ariane operator``)
reach the handlers as ``memo.settings``; the timers, whose interval is one of them, are
registered by ``register_timers`` (the change handlers register on import).
Settings (``configure``): diff base and handler progress in
``status.kopf`` (declared by the CRDs; never in annotations), a finalizer under ``ariane.dev``,
events posted for handler outcomes. A CR annotated ``ariane.dev/pause-reconciliation: "true"``
is left alone and says so in its conditions.

Invariants: every handler is idempotent; no handler sleeps (a failure raises
``kopf.TemporaryError``); the status written is only what the CRDs declare.
"""

from __future__ import annotations

import asyncio
import datetime
import functools
import logging
import time
from collections.abc import Mapping
from typing import Any, Final

import kopf
import kubernetes  # type: ignore[import-untyped]

from ariane import metrics
from ariane.client import admin, credentials
from ariane.common import errors
from ariane.grpcwire import tls as grpc_tls
from ariane.operator import (
    certs,
    ha,
    kube,
    metadata,
    model,
    reconcile,
    resources,
    status,
    users,
)
from ariane.operator import settings as operator_settings

_log = logging.getLogger(__name__)
Logger = logging.Logger | logging.LoggerAdapter[Any]

FINALIZER: Final = "ariane.dev/operator"
"""The finalizer kopf puts on CRs with delete handlers or timers (never kopf's default)."""

RETRY_DELAY_S: Final = 10.0
"""Delay before a failed handler runs again, in seconds."""
TIMER_STOP_POLL_S: Final = 1.0
"""How often kopf looks again whether a resource's resync timer has ended once the resource is
being deleted, s (kopf's ``background.cancellation_polling``, 60 s by default). The timers run
sync handlers in worker threads, which cannot be cancelled: a deletion arriving while one runs
(a reconcile with its admin calls, seconds under load) waited a whole minute before the
finalizer was released."""

METRICS = metrics.OperatorMetrics()
"""The operator's reconcile counters and durations (served by ``ariane operator``)."""
RECONCILES = METRICS.reconciles
FAILURES = METRICS.failures
DURATION = METRICS.duration
_last_success = {"monotonic_s": time.monotonic()}


G, V = resources.GROUP, resources.VERSION


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


@kopf.on.startup()
def configure(settings: kopf.OperatorSettings, memo: kopf.Memo, **_: Any) -> None:
    """kopf settings and the shared Kubernetes client (``memo.kube``; ``memo.settings`` is the
    operator's, given to ``kopf.run``)."""
    settings.persistence.finalizer = FINALIZER
    settings.persistence.diffbase_storage = kopf.StatusDiffBaseStorage(field="status.kopf.diffbase")
    settings.persistence.progress_storage = kopf.StatusProgressStorage(
        field="status.kopf.progress", touch_field="status.kopf.touch"
    )
    settings.posting.reporting_component = "ariane-operator"
    # kopf posts no log lines as events (posting.loggers is False): the handlers post their own
    # (Applied/Paused on changes, a Warning on each failure), so resync ticks add none.
    settings.networking.request_timeout = 60.0
    settings.execution.max_workers = 8
    settings.background.cancellation_polling = TIMER_STOP_POLL_S
    memo.kube = kube.Kube(kube.api_client_from_environment())


@kopf.on.probe(id="last_success_age_s")
def last_success_age(**_: Any) -> float:
    """Liveness detail: seconds since the last successful reconciliation."""
    return round(time.monotonic() - _last_success["monotonic_s"], 1)


def _settings(memo: kopf.Memo) -> operator_settings.OperatorSettings:
    """The operator's settings (``ariane operator`` puts them in the root memo)."""
    found = memo.get("settings")
    assert isinstance(found, operator_settings.OperatorSettings), found
    return found


def _write(patch: kopf.Patch, result: dict[str, Any]) -> None:
    for key, value in result.items():
        patch.status[key] = value


def _seam_credentials(body: kopf.Body, memo: kopf.Memo) -> credentials.Credentials | None:
    """What the Broker's failover, switchover and drain calls are signed with; ``None`` also
    while its Secret is not there yet (``reconcile`` creates it; the next run signs)."""
    namespace, name = str(body.metadata.namespace), str(body.metadata.name)
    try:
        return _operator_credentials(memo.kube, namespace, name, dict(body))
    except users.SpecProblem as problem:
        _log.warning("Broker %s/%s: HA calls unsigned: %s", namespace, name, problem)
        return None


def _seam_tls(body: kopf.Body, memo: kopf.Memo) -> grpc_tls.ClientTls | None:
    """What the Broker's failover, switchover and drain calls dial with (``certs.client_tls``)."""
    namespace, name = str(body.metadata.namespace), str(body.metadata.name)
    return certs.client_tls(
        memo.kube, namespace, name, dict(body), override=_settings(memo).client_tls
    )


def _broker(body: kopf.Body, patch: kopf.Patch, memo: kopf.Memo, change: bool) -> None:
    RECONCILES.labels("Broker").inc()
    settings = _settings(memo)
    namesrv = metadata.namesrv_endpoint(
        str(body.metadata.namespace), str(body.metadata.name), settings.namesrv_overrides
    )
    admin_seam = ha.AdminSeam(
        namesrv, settings.pod_overrides, _seam_credentials(body, memo), _seam_tls(body, memo)
    )
    notes: list[reconcile.Note] = []
    with DURATION.labels("Broker").time():
        try:
            result = reconcile.reconcile_broker(
                memo.kube, dict(body), _now(), admin_seam, notes, settings.side
            )
        except kubernetes.client.ApiException as error:
            FAILURES.labels("Broker").inc()
            message = f"apply failed: {error.status} {error.reason}"
            _write(patch, metadata.failed_status(body, _now(), "ApplyFailed", message))
            kopf.warn(body, reason="ApplyFailed", message=message)
            raise kopf.TemporaryError(message, delay=RETRY_DELAY_S) from None
    _write(patch, result)
    _last_success["monotonic_s"] = time.monotonic()
    for note in notes:
        post = kopf.warn if note.warning else kopf.info
        post(body, reason=note.reason, message=note.message)
    for cond in result["conditions"]:
        if cond["type"] == status.PROGRESSING and "restarting" in cond["message"]:
            kopf.info(body, reason="RollingPod", message=cond["message"])
    if change:
        paused = status.is_paused(body.metadata.annotations)
        kopf.info(
            body,
            reason="Paused" if paused else "Applied",
            message="reconciliation paused" if paused else "objects applied",
        )


@kopf.on.resume(G, V, "brokers")
@kopf.on.create(G, V, "brokers")
@kopf.on.update(G, V, "brokers")
def broker_changed(body: kopf.Body, patch: kopf.Patch, memo: kopf.Memo, **_: Any) -> None:
    """A Broker was created or changed (or the operator restarted): apply its objects."""
    _broker(body, patch, memo, change=True)


def broker_resync(body: kopf.Body, patch: kopf.Patch, memo: kopf.Memo, **_: Any) -> None:
    """Periodic re-apply: reverts drift and refreshes readiness in status."""
    _broker(body, patch, memo, change=False)


async def _broker_of(memo: kopf.Memo, body: kopf.Body) -> dict[str, Any]:
    name = body.get("spec", {}).get("broker", "")
    found: dict[str, Any] = await asyncio.to_thread(
        memo.kube.get, resources.API_VERSION, "Broker", body.metadata.namespace, name
    )
    return found


def _operator_credentials(
    kube_client: kube.Kube, namespace: str, name: str, broker: Mapping[str, Any]
) -> credentials.Credentials | None:
    """The operator's Super user of Broker ``name`` when it has ``spec.auth.enabled`` (keys in
    ``users.operator_secret_name``), else ``None`` (blocking: a Kubernetes read).

    Raises:
        users.SpecProblem: auth is on but the Secret is missing or malformed.
    """
    if not broker.get("spec", {}).get("auth", {}).get("enabled", False):
        return None
    secret = kube_client.get("v1", "Secret", namespace, users.operator_secret_name(name))
    if not secret:
        raise users.SpecProblem(f"Secret {users.operator_secret_name(name)!r} not found yet")
    try:
        return users.operator_credentials(secret)
    except ValueError as error:
        raise users.SpecProblem(f"{users.operator_secret_name(name)}: {error}") from None


async def _client(memo: kopf.Memo, body: kopf.Body, broker: dict[str, Any]) -> admin.AdminClient:
    """An admin client to the Broker's name servers, signed as the operator's Super user when
    the Broker has ``spec.auth.enabled`` (``_operator_credentials``)."""
    namespace, name = str(body.metadata.namespace), str(body["spec"]["broker"])
    signed = await asyncio.to_thread(_operator_credentials, memo.kube, namespace, name, broker)
    settings = _settings(memo)
    tls = await asyncio.to_thread(
        functools.partial(certs.client_tls, override=settings.client_tls),
        memo.kube,
        namespace,
        name,
        broker,
    )
    return admin.AdminClient(
        metadata.namesrv_endpoint(namespace, name, settings.namesrv_overrides),
        timeout_s=metadata.ADMIN_TIMEOUT_S,
        tls=tls,
        credentials=signed,
    )


async def _step(
    client: admin.AdminClient, body: kopf.Body, memo: kopf.Memo, broker: dict[str, Any]
) -> dict[str, Any]:
    kind = str(body["kind"])
    if kind == "Topic":
        return await metadata.reconcile_topic(client, body, _now())
    if kind == "ConsumerGroup":
        return await metadata.reconcile_group(client, body, _now())
    bundle = ""
    if model.tls_enabled(broker.get("spec", {})):
        namespace = str(body.metadata.namespace)
        bundle = await asyncio.to_thread(certs.trust_bundle, memo.kube, namespace, broker)
    return await users.reconcile_user(
        client,
        memo.kube,
        body,
        _now(),
        endpoints=";".join(client.namesrv_endpoints),
        ca_file=client.tls.ca_file if client.tls is not None else "",
        ca_pem=bundle,
    )


async def _admin_reconcile(body: kopf.Body, patch: kopf.Patch, memo: kopf.Memo) -> None:
    kind = str(body["kind"])
    RECONCILES.labels(kind).inc()
    broker = await _broker_of(memo, body)
    if not broker:
        FAILURES.labels(kind).inc()
        message = f"Broker {body['spec']['broker']!r} not found in this namespace"
        _write(patch, metadata.failed_status(body, _now(), "BrokerNotFound", message))
        kopf.warn(body, reason="BrokerNotFound", message=message)
        raise kopf.TemporaryError(message, delay=RETRY_DELAY_S)
    with DURATION.labels(kind).time():
        try:
            async with await _client(memo, body, broker) as client:
                result = await _step(client, body, memo, broker)
        except (errors.ArianeError, kubernetes.client.ApiException) as error:
            FAILURES.labels(kind).inc()
            reason = "SecretError" if isinstance(error, users.SpecProblem) else "BrokerError"
            text = str(error) if isinstance(error, errors.ArianeError) else _api_text(error)
            _write(patch, metadata.failed_status(body, _now(), reason, text))
            kopf.warn(body, reason=reason, message=text)
            raise kopf.TemporaryError(text, delay=RETRY_DELAY_S) from None
    _write(patch, result)
    _last_success["monotonic_s"] = time.monotonic()


def _api_text(error: kubernetes.client.ApiException) -> str:
    return f"Kubernetes API: {error.status} {error.reason}"


async def _admin_delete(body: kopf.Body, memo: kopf.Memo, logger: Logger) -> None:
    broker = await _broker_of(memo, body)
    if status.is_paused(body.metadata.annotations):
        logger.info("paused: %s left on the brokers (orphaned)", body["kind"])
        return
    if not broker or broker["metadata"].get("deletionTimestamp"):
        logger.info("Broker %s is gone: nothing to delete", body["spec"]["broker"])
        return
    try:
        async with await _client(memo, body, broker) as client:
            if body["kind"] == "Topic":
                await client.delete_topic(metadata.topic_name(body))
            elif body["kind"] == "ConsumerGroup":
                await client.delete_group(metadata.group_name(body))
            else:
                await users.delete_user(client, users.username(body))
    except errors.NotFoundError:
        logger.info("already absent from the brokers")
    except errors.ArianeError as error:
        raise kopf.TemporaryError(str(error), delay=RETRY_DELAY_S) from None


async def admin_changed(body: kopf.Body, patch: kopf.Patch, memo: kopf.Memo, **kwargs: Any) -> None:
    """A Topic/ConsumerGroup/RocketMQUser was created or changed (or the operator restarted), or
    its resync timer fired: create-or-replace it on every broker of its Broker, refresh status."""
    await _admin_reconcile(body, patch, memo)
    if "reason" in kwargs:  # a change handler (timers get no cause): say what was done
        kopf.info(body, reason="Applied", message="applied on the brokers")


async def admin_deleted(body: kopf.Body, memo: kopf.Memo, logger: Logger, **_: Any) -> None:
    """A Topic/ConsumerGroup/RocketMQUser CR is being deleted: delete it from the brokers, then
    let it go."""
    await _admin_delete(body, memo, logger)


ADMIN_PLURALS: Final = ("topics", "consumergroups", "rocketmqusers")
for _plural in ADMIN_PLURALS:
    kopf.on.resume(G, V, _plural)(admin_changed)
    kopf.on.create(G, V, _plural)(admin_changed)
    kopf.on.update(G, V, _plural)(admin_changed)
    kopf.on.delete(G, V, _plural)(admin_deleted)


def register_timers(settings: operator_settings.OperatorSettings) -> None:
    """Register the resync timers of Brokers and of the admin CRs, every
    ``settings.resync_interval_s`` (first after one interval), in kopf's default registry;
    once, before ``kopf.run``."""
    every_s = settings.resync_interval_s
    kopf.timer(G, V, "brokers", interval=every_s, initial_delay=every_s)(broker_resync)
    for plural in ADMIN_PLURALS:
        kopf.timer(G, V, plural, interval=every_s, initial_delay=every_s, id="resync")(
            admin_changed
        )
