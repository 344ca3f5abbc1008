"""The operator's settings: every environment variable it reads, read once at start-up into a
frozen ``OperatorSettings`` that ``ariane operator`` hands to what needs it (kopf's timers, the
handlers through kopf's ``memo``).

========================================  ==========================================  ========
variable                                  meaning                                     default
========================================  ==========================================  ========
``ARIANE_OPERATOR_RESYNC_INTERVAL_S``     seconds between drift-reverting re-applies  60
``ARIANE_OPERATOR_NAMESRV_OVERRIDES``     JSON ``{"<ns>/<broker>"|"<broker>"|"*":     in-cluster
                                          "host:port"}``: name servers dialled        DNS
``ARIANE_OPERATOR_POD_OVERRIDES``         JSON ``{"<ns>/<pod>"|"<pod>": "host:port"}``  pod DNS
``ARIANE_TLS`` / ``ARIANE_CA_FILE``       the operator's admin calls speak TLS        per Broker
                                          (``1``/``true``/``yes``), with that CA
``ARIANE_OPERATOR_NAMESPACE``             the operator pod's namespace                none
``ARIANE_OPERATOR_POD_LABELS``            JSON object: its pod's selector labels      chart's
``ARIANE_OPERATOR_PROMETHEUS_NAMESPACES``  JSON list: namespaces Prometheus scrapes    monitoring
========================================  ==========================================  ========

The override maps are the address seams of ``metadata.namesrv_endpoint`` and
``ha.pod_endpoint`` (tests and out-of-cluster runs point a Broker at loopback processes); the
TLS pair wins over each Broker's own trust bundle (``certs.client_tls``), as for ``ariane
admin``; the last three describe the operator's own pod to ``netpol``.

Invariants: nothing else in the operator reads the environment (the Kubernetes client's own
``KUBECONFIG`` aside); a value that does not parse raises ``SettingsError`` naming the
variable, and ``ariane operator`` exits 2 with it before kopf starts.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import types
from collections.abc import Mapping
from typing import Any, Final

from ariane.grpcwire import tls as grpc_tls
from ariane.operator import netpol

RESYNC_ENV: Final = "ARIANE_OPERATOR_RESYNC_INTERVAL_S"
NAMESRV_OVERRIDES_ENV: Final = "ARIANE_OPERATOR_NAMESRV_OVERRIDES"
POD_OVERRIDES_ENV: Final = "ARIANE_OPERATOR_POD_OVERRIDES"
TLS_ENV: Final = "ARIANE_TLS"
CA_FILE_ENV: Final = "ARIANE_CA_FILE"
OPERATOR_NAMESPACE_ENV: Final = "ARIANE_OPERATOR_NAMESPACE"
OPERATOR_LABELS_ENV: Final = "ARIANE_OPERATOR_POD_LABELS"
PROMETHEUS_NAMESPACES_ENV: Final = "ARIANE_OPERATOR_PROMETHEUS_NAMESPACES"
"""The variables (see the module's table)."""

RESYNC_DEFAULT_S: Final = 60.0
RESYNC_MIN_S: Final = 1.0
RESYNC_MAX_S: Final = 3600.0
"""The resync interval's default and bounds, in seconds."""

ENV_VALUE_BYTES_MAX: Final = 64 * 1024
"""Longest value of one variable read (a map of a few hundred overrides fits many times)."""

_TRUE = ("1", "true", "yes")
_EMPTY: Final[Mapping[str, str]] = types.MappingProxyType({})


class SettingsError(ValueError):
    """A variable whose value the operator cannot use.

    Attributes:
        variable: the variable's name.
    """

    def __init__(self, variable: str, problem: str) -> None:
        super().__init__(f"{variable} {problem}")
        self.variable = variable


@dataclasses.dataclass(frozen=True, slots=True)
class OperatorSettings:
    """What the operator's environment says, parsed (``from_env``); the defaults are an
    in-cluster operator with no variable set.

    Attributes:
        resync_interval_s: seconds between the timers' re-applies (1..3600).
        namesrv_overrides: Broker (``ns/name``, ``name`` or ``*``) → name server
            ``host:port`` (empty: the Service DNS name).
        pod_overrides: broker pod (``ns/pod`` or ``pod``) → ``host:port`` (empty: pod DNS).
        client_tls: TLS of every admin call when ``ARIANE_TLS`` is on, else ``None`` (each
            Broker's own bundle).
        side: the operator's own pod, for the NetworkPolicies.
    """

    resync_interval_s: float = RESYNC_DEFAULT_S
    namesrv_overrides: Mapping[str, str] = dataclasses.field(default_factory=lambda: _EMPTY)
    pod_overrides: Mapping[str, str] = dataclasses.field(default_factory=lambda: _EMPTY)
    client_tls: grpc_tls.ClientTls | None = None
    side: netpol.OperatorSide = dataclasses.field(default_factory=netpol.OperatorSide)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> OperatorSettings:
        """The settings of ``environ`` (default ``os.environ``), unset variables defaulted.

        Raises:
            SettingsError: a value that does not parse, naming the variable.
        """
        env = os.environ if environ is None else environ
        for name in (RESYNC_ENV, NAMESRV_OVERRIDES_ENV, POD_OVERRIDES_ENV, OPERATOR_LABELS_ENV,
                     PROMETHEUS_NAMESPACES_ENV, OPERATOR_NAMESPACE_ENV, CA_FILE_ENV):  # fmt: skip
            if len(env.get(name, "")) > ENV_VALUE_BYTES_MAX:
                raise SettingsError(name, f"is longer than {ENV_VALUE_BYTES_MAX} characters")
        return cls(
            resync_interval_s=_resync_interval_s(env.get(RESYNC_ENV, "")),
            namesrv_overrides=types.MappingProxyType(_string_map(env, NAMESRV_OVERRIDES_ENV)),
            pod_overrides=types.MappingProxyType(_string_map(env, POD_OVERRIDES_ENV)),
            client_tls=_client_tls(env),
            side=_side(env),
        )


def _resync_interval_s(text: str) -> float:
    if not text.strip():
        return RESYNC_DEFAULT_S
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not RESYNC_MIN_S <= value <= RESYNC_MAX_S:
        raise SettingsError(
            RESYNC_ENV,
            f"must be a number of seconds in {RESYNC_MIN_S:g}..{RESYNC_MAX_S:g}, not {text!r}",
        )
    return value


def _json(env: Mapping[str, str], name: str, kind: type[Any]) -> Any:
    """The JSON value of variable ``name`` of type ``kind``.

    Raises:
        SettingsError: not JSON, or not a ``kind``.
    """
    text = env[name]
    try:
        value = json.loads(text)
    except json.JSONDecodeError as error:
        raise SettingsError(name, f"is not JSON ({error}): {text!r}") from None
    if not isinstance(value, kind):
        raise SettingsError(name, f"must be a JSON {_KIND_NAMES[kind]}, not {text!r}")
    return value


_KIND_NAMES: Final[dict[type[Any], str]] = {dict: "object of strings", list: "list of strings"}


def _strings(values: Any, name: str, text: str, kind: type[Any]) -> None:
    if not all(isinstance(v, str) for v in values):
        raise SettingsError(name, f"must be a JSON {_KIND_NAMES[kind]}, not {text!r}")


def _string_map(env: Mapping[str, str], name: str) -> dict[str, str]:
    """The JSON object of strings in variable ``name`` (``{}`` when unset or blank)."""
    if not env.get(name, "").strip():
        return {}
    found: dict[str, str] = _json(env, name, dict)
    _strings([*found, *found.values()], name, env[name], dict)
    return found


def _client_tls(env: Mapping[str, str]) -> grpc_tls.ClientTls | None:
    if env.get(TLS_ENV, "").strip().lower() not in _TRUE:
        return None
    return grpc_tls.ClientTls(ca_file=env.get(CA_FILE_ENV, "").strip())


def _side(env: Mapping[str, str]) -> netpol.OperatorSide:
    """The operator's pod: ``OPERATOR_NAMESPACE_ENV``, ``OPERATOR_LABELS_ENV`` (set and not
    empty) and ``PROMETHEUS_NAMESPACES_ENV`` (set: even ``[]``, no Prometheus peer)."""
    labels = dict(netpol.DEFAULT_OPERATOR_LABELS)
    if env.get(OPERATOR_LABELS_ENV):
        labels = _string_map(env, OPERATOR_LABELS_ENV)
    namespaces = list(netpol.DEFAULT_PROMETHEUS_NAMESPACES)
    if env.get(PROMETHEUS_NAMESPACES_ENV) is not None:
        namespaces = _json(env, PROMETHEUS_NAMESPACES_ENV, list)
        _strings(namespaces, PROMETHEUS_NAMESPACES_ENV, env[PROMETHEUS_NAMESPACES_ENV], list)
    return netpol.OperatorSide(
        namespace=env.get(OPERATOR_NAMESPACE_ENV, ""),
        pod_labels=tuple(sorted(labels.items())),
        prometheus_namespaces=tuple(namespaces),
    )
