"""The pure model: a Broker spec → the Kubernetes objects that run it (no I/O, deterministic).

``desired_objects(owner, spec, masters)`` returns, in apply order: the broker ConfigMap, (with
``spec.tls`` on) the name servers' ConfigMap, the roles ConfigMap (each group's master pod
ordinal, ``masters``), the name-server Service (clients) and headless Service (brokers register
with every pod it lists), the name-server Deployment, then per broker group a headless Service,
a StatefulSet and a PodDisruptionBudget, then the optional ServiceMonitor and PrometheusRule
(DESIGN §8).

Invariants:
- Same input, same output (sorted keys never matter to the apiserver, order of lists does, and
  lists are built in a fixed order); every name is a DNS label for names the CRD admits.
- Every object carries an owner reference to the Broker except the store's PVCs: those follow
  the StatefulSet's ``persistentVolumeClaimRetentionPolicy`` (Delete only with ``deleteClaim``).
- Broker groups are ``<broker>-a``, ``<broker>-b``, ...; the group's master is the pod whose
  ordinal the roles ConfigMap names (0 until a switchover or failover moves it). A pod learns
  its ordinal from the ``apps.kubernetes.io/pod-index`` label (downward API) and the master's
  from the roles ConfigMap (``configMapKeyRef``, read by the kubelet at container start), and
  ``ariane broker --pod-ordinal N --master-ordinal M`` derives its broker id and role, so the
  container needs no wrapper script. Slaves find the master's HA port through the name server.
- No pod mounts a ServiceAccount token (``automountServiceAccountToken: false``): brokers and
  name servers never call the apiserver (the kubelet reads the roles ConfigMap for them).
- StatefulSets use ``updateStrategy: OnDelete``: the operator rolls pods itself (slaves first).
- TLS (``spec.tls``, not ``disabled``): both kinds of pod mount their certificate Secret as a
  whole directory at ``TLS_DIR`` and read ``[tls]`` (``tls_table``) from their TOML. The pod
  templates name the Secrets only: a renewed certificate changes no template (no hash of it
  anywhere), so renewals restart nothing; the servers re-read the files (``common.tls``).
  The Secrets come from ``operator.certs``.
- The ServiceMonitor scrapes plain HTTP unless ``spec.tls.mode`` is ``enforcing``; then HTTPS,
  one endpoint per component, each verifying the server against its leaf Secret's bundle and a
  name that leaf carries, presenting no client certificate (the metrics port asks for none).
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import math
import string
from collections.abc import Mapping, Sequence
from typing import Any, Final

from ariane.metrics import alerts
from ariane.operator import resources

BROKER_PORT: Final = 8081
HA_PORT: Final = 10912
"""The HA (replication) port of broker pods (RocketMQ ``haListenPort``)."""
NAMESRV_PORT: Final = 9876
CONFIG_DIR: Final = "/etc/ariane"
CONFIG_FILE: Final = "broker.toml"
STORE_DIR: Final = "/var/lib/ariane/store"
RUN_AS_USER: Final = 10001
POD_INDEX_LABEL: Final = "apps.kubernetes.io/pod-index"
CONFIG_HASH_ANNOTATION: Final = "ariane.dev/config-hash"
GROUP_LABEL: Final = "ariane.dev/broker-group"
DISCOVERY_LABEL: Final = "ariane.dev/discovery"
"""On the name-server pods' headless Service only: the ServiceMonitor skips it (the pods are
scraped through the name-server Service once)."""
MANAGED_BY: Final = "ariane-operator"
OPERATOR_OWNED_KEYS: Final = frozenset(
    {
        "cluster",
        "broker_name",
        "broker_id",
        "listen",
        "advertised_endpoint",
        "namesrv",
        "namesrv_resolve_all",
        "store_dir",
    }
)
"""Broker settings the operator sets itself; ``spec.config`` may not override them."""


class SpecError(ValueError):
    """A spec the model cannot render (the message names the field and the fix)."""


@dataclasses.dataclass(frozen=True, slots=True)
class Owner:
    """The Broker CR that owns the objects (from its metadata)."""

    name: str
    """``metadata.name``; at most ``resources.BROKER_NAME_LENGTH_MAX`` characters."""
    namespace: str
    """``metadata.namespace``; every object is created there."""
    uid: str
    """``metadata.uid`` (owner references need it)."""

    def reference(self) -> dict[str, Any]:
        """The controller owner reference to put on each child object."""
        return {
            "apiVersion": resources.API_VERSION,
            "kind": "Broker",
            "name": self.name,
            "uid": self.uid,
            "controller": True,
            "blockOwnerDeletion": True,
        }


def group_names(broker: str, groups: int) -> list[str]:
    """Broker group (RocketMQ ``brokerName``) names: ``<broker>-a``, ``<broker>-b``, ...

    Raises:
        SpecError: ``groups`` is outside 1..26.
    """
    if not 1 <= groups <= resources.GROUPS_MAX:
        raise SpecError(f"spec.groups={groups} is outside 1..{resources.GROUPS_MAX}")
    return [f"{broker}-{letter}" for letter in string.ascii_lowercase[:groups]]


def namesrv_name(broker: str) -> str:
    """Name of the name-server Deployment and Service of ``broker``."""
    return f"{broker}-namesrv"


def config_map_name(broker: str) -> str:
    """Name of the ConfigMap holding ``broker.toml``."""
    return f"{broker}-config"


def operator_secret_name(broker: str) -> str:
    """The Secret of the operator's own Super user for Broker ``broker`` (``spec.auth``)."""
    return f"{broker}-operator-auth"


TLS_DIR: Final = "/etc/ariane/tls"
"""Where broker and name-server pods mount their certificate Secret (``tls.crt``, ``tls.key``,
``ca.crt``: the trust bundle): a whole-directory Secret volume, which the kubelet updates in
place (an atomic symlink swap) when the Secret changes; the servers re-read the files."""
TLS_CERT_FILE: Final = "tls.crt"
TLS_KEY_FILE: Final = "tls.key"
TLS_CA_FILE: Final = "ca.crt"
NAMESRV_CONFIG_FILE: Final = "namesrv.toml"


def tls_spec(spec: resources.BrokerSpec) -> resources.TlsSpec:
    """``spec.tls`` with the CRD's defaults: absent → ``disabled``; present → ``enforcing``,
    ``clientAuth: none`` unless it says otherwise."""
    given = spec.get("tls")
    if given is None:
        return {"mode": "disabled", "clientAuth": "none"}
    result: resources.TlsSpec = {
        "mode": given.get("mode", resources.DEFAULT_TLS_MODE),
        "clientAuth": given.get("clientAuth", resources.DEFAULT_CLIENT_AUTH),
    }
    for key in ("issuerRef", "certificateValidityDays", "caValidityDays"):
        if key in given:
            result[key] = given[key]
    return result


def tls_enabled(spec: resources.BrokerSpec) -> bool:
    """Whether the Broker's servers serve TLS (``spec.tls.mode`` is not ``disabled``)."""
    return tls_spec(spec)["mode"] != "disabled"


def cluster_ca_secret_name(broker: str) -> str:
    """The Secret of the operator's cluster CA of ``broker`` (no ``issuerRef``)."""
    return f"{broker}-cluster-ca"


def namesrv_tls_secret_name(broker: str) -> str:
    """The Secret holding the name servers' certificate, key and trust bundle."""
    return f"{broker}-namesrv-tls"


def broker_tls_secret_name(broker: str) -> str:
    """The Secret holding the brokers' certificate (every group's names), key and bundle."""
    return f"{broker}-broker-tls"


def operator_tls_secret_name(broker: str) -> str:
    """The Secret holding the operator's client certificate (mTLS ``require``) and bundle."""
    return f"{broker}-operator-tls"


def namesrv_config_map_name(broker: str) -> str:
    """Name of the ConfigMap holding the name servers' ``namesrv.toml`` (``[tls]``)."""
    return f"{broker}-namesrv-config"


def tls_table(spec: resources.BrokerSpec) -> dict[str, Any]:
    """The ``[tls]`` table of brokers and name servers (``common.tls.TlsSettings``): the mode,
    the mounted files, client authentication; ``{}`` when TLS is disabled."""
    tls = tls_spec(spec)
    if tls["mode"] == "disabled":
        return {}
    return {
        "server_mode": tls["mode"],
        "cert_path": f"{TLS_DIR}/{TLS_CERT_FILE}",
        "key_path": f"{TLS_DIR}/{TLS_KEY_FILE}",
        "trust_cert_path": f"{TLS_DIR}/{TLS_CA_FILE}",
        "need_client_auth": tls["clientAuth"],
    }


def _tls_volume(secret_name: str) -> dict[str, Any]:
    """The whole certificate Secret as a volume (never ``subPath``: those are not updated)."""
    return {"name": "tls", "secret": {"secretName": secret_name, "defaultMode": 0o440}}


def namesrv_headless_name(broker: str) -> str:
    """Name of the headless Service listing every name-server pod (brokers register with each)."""
    return f"{broker}-namesrv-pods"


def roles_config_map_name(broker: str) -> str:
    """Name of the ConfigMap naming each group's master pod ordinal."""
    return f"{broker}-roles"


def namesrv_pods_address(owner: Owner) -> str:
    """``HOST:PORT`` of the headless name-server Service: resolves to every name-server pod."""
    return f"{namesrv_headless_name(owner.name)}.{owner.namespace}.svc:{NAMESRV_PORT}"


def namesrv_address(owner: Owner) -> str:
    """``HOST:PORT`` of the name-server Service, as brokers and clients in the cluster dial it."""
    return f"{namesrv_name(owner.name)}.{owner.namespace}.svc:{NAMESRV_PORT}"


def labels(owner: Owner, component: str, group: str | None = None) -> dict[str, str]:
    """Recommended ``app.kubernetes.io/*`` labels (plus the group label for broker pods)."""
    result = {
        **selector_labels(owner, component, group),
        "app.kubernetes.io/part-of": "ariane",
        "app.kubernetes.io/managed-by": MANAGED_BY,
    }
    return result


def selector_labels(owner: Owner, component: str, group: str | None = None) -> dict[str, str]:
    """The immutable subset of ``labels`` used in selectors."""
    result = {
        "app.kubernetes.io/name": "ariane",
        "app.kubernetes.io/instance": owner.name,
        "app.kubernetes.io/component": component,
    }
    if group is not None:
        result[GROUP_LABEL] = group
    return result


def _metadata(owner: Owner, name: str, component: str, group: str | None = None) -> dict[str, Any]:
    return {
        "name": name,
        "namespace": owner.namespace,
        "labels": labels(owner, component, group),
        "ownerReferences": [owner.reference()],
    }


def _toml_value(value: object, where: str) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        escaped = value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
        return f'"{escaped}"'
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v, where) for v in value) + "]"
    raise SpecError(f"spec.config: {where} has a value TOML cannot hold here: {value!r}")


def render_toml(settings: Mapping[str, Any], section: str = "") -> str:
    """Renders a mapping as TOML: scalars and lists first, then one ``[table]`` per sub-mapping.

    Keys are sorted so the output (and the config hash) is deterministic.

    Raises:
        SpecError: a value is not a string, number, boolean, list of those, or mapping.
    """
    lines: list[str] = []
    tables: list[tuple[str, Mapping[str, Any]]] = []
    for key in sorted(settings):
        value = settings[key]
        path = f"{section}.{key}" if section else key
        if isinstance(value, Mapping):
            tables.append((path, value))
        else:
            lines.append(f"{key} = {_toml_value(value, path)}")
    text = "\n".join(lines) + ("\n" if lines else "")
    for path, table in tables:
        text += f"\n[{path}]\n" + render_toml(table, path)
    return text


def broker_settings(owner: Owner, spec: resources.BrokerSpec) -> dict[str, Any]:
    """The broker settings every pod of ``owner`` shares (``broker.toml`` as a mapping).

    Per-pod values (group name, broker id, advertised endpoint) come from flags instead.

    Raises:
        SpecError: ``spec.config`` sets a key the operator owns.
    """
    extra = dict(spec.get("config", {}))
    owned = OPERATOR_OWNED_KEYS | ({"tls"} if tls_enabled(spec) else set())
    clash = sorted(owned & set(extra))
    if clash:
        raise SpecError(f"spec.config may not set {clash}: the operator sets them")
    store = dict(extra.pop("store", {}))
    store.setdefault(
        "flush_disk_type", spec.get("flushDiskType", resources.DEFAULT_FLUSH_DISK_TYPE)
    )
    workers = front_end_workers(spec.get("resources", {}))
    replicated: dict[str, Any] = {}
    if spec.get("replicasPerGroup", resources.DEFAULT_REPLICAS_PER_GROUP) > 1:
        ha = {"ha_listen": f"0.0.0.0:{HA_PORT}", **dict(extra.pop("ha", {}))}
        role = spec.get("brokerRole", resources.DEFAULT_BROKER_ROLE)
        replicated = {"broker_role": role, "ha": ha}
    return {
        "cluster": owner.name,
        "listen": f"0.0.0.0:{BROKER_PORT}",
        "namesrv": [namesrv_pods_address(owner)],
        "namesrv_resolve_all": True,
        "store_dir": STORE_DIR,
        **({} if workers is None else {"workers": workers}),
        **extra,
        **replicated,
        "store": store,
        **({"tls": tls_table(spec)} if tls_enabled(spec) else {}),
    }


def cpu_count(quantity: str | int | float) -> float:
    """CPUs of a Kubernetes CPU quantity: ``"2"`` → 2, ``"1500m"`` → 1.5, ``0.5`` → 0.5.

    Raises:
        SpecError: if the quantity is not a number or millicores.
    """
    text = str(quantity).strip()
    try:
        return int(text[:-1]) / 1000 if text.endswith("m") else float(text)
    except ValueError as exc:
        raise SpecError(f"CPU quantity {quantity!r} is not a number or millicores") from exc


def front_end_workers(container_resources: Mapping[str, Any]) -> int | None:
    """The broker's ``workers`` for a pod with these resources: the pod's CPU count.

    The limit wins over the request (it is what the container may use); ceil of the CPUs,
    and one CPU or less means no workers (a relay hop on one core only adds cost). ``None``
    when neither is set: the broker then counts the CPUs it sees (``spec.config.workers``
    overrides either way).
    """
    for kind in ("limits", "requests"):
        quantity = container_resources.get(kind, {}).get("cpu")
        if quantity is not None:
            cpus = min(math.ceil(cpu_count(quantity)), 64)
            return cpus if cpus >= 2 else 0
    return None


def config_hash(toml_text: str) -> str:
    """Short SHA-256 of the rendered config; a pod whose annotation differs is out of date."""
    return hashlib.sha256(toml_text.encode()).hexdigest()[:16]


def config_map(owner: Owner, spec: resources.BrokerSpec) -> resources.Manifest:
    """The ConfigMap with ``broker.toml`` mounted by every broker pod."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": _metadata(owner, config_map_name(owner.name), "broker"),
        "data": {CONFIG_FILE: render_toml(broker_settings(owner, spec))},
    }


def roles_config_map(
    owner: Owner, groups: Sequence[str], masters: Mapping[str, int]
) -> resources.Manifest:
    """The ConfigMap naming each group's master pod ordinal (``masters``, default 0).

    The operator changes an entry before it promotes a slave, so a pod that starts after the
    promotion starts in its new role; it is not part of the config hash (no roll on a
    failover).
    """
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": _metadata(owner, roles_config_map_name(owner.name), "broker"),
        "data": {group: str(masters.get(group, 0)) for group in groups},
    }


AUTH_DIR: Final = "/etc/ariane/auth"
AUTH_FILE: Final = "auth.toml"
OPERATOR_USER: Final = "ariane-operator"
"""Access key of the operator's Super user (``[auth.init_authentication_user]``)."""
INNER_USER: Final = "ariane-inner"
"""Access key the servers sign their own calls with (slave sync, registration)."""


def auth_enabled(spec: resources.BrokerSpec) -> bool:
    """Whether the Broker has ACL 2.0 on (``spec.auth.enabled``)."""
    return bool(spec.get("auth", {}).get("enabled", False))


def auth_toml(operator_key: str, inner_key: str) -> str:
    """The ``[auth]`` table every broker of an ``auth.enabled`` Broker reads (``--auth-config``):
    authentication and authorization on, the operator's Super user as the init user, and the
    inner credential."""
    return render_toml(
        {
            "auth": {
                "authentication_enabled": True,
                "authorization_enabled": True,
                "init_authentication_user": {"username": OPERATOR_USER, "password": operator_key},
                "inner_client_authentication_credentials": {
                    "access_key": INNER_USER,
                    "secret_key": inner_key,
                },
            }
        }
    )


def operator_secret(owner: Owner, operator_key: str, inner_key: str) -> resources.Manifest:
    """The Secret of the operator's Super user (``accessKey``/``secretKey``, what it signs its
    admin calls with) and the brokers' ``auth.toml``; owned by the Broker, never logged."""
    data = {
        "accessKey": OPERATOR_USER,
        "secretKey": operator_key,
        AUTH_FILE: auth_toml(operator_key, inner_key),
    }
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "Opaque",
        "metadata": _metadata(owner, operator_secret_name(owner.name), "broker"),
        "data": {k: base64.b64encode(v.encode()).decode() for k, v in data.items()},
    }


def _security_context() -> dict[str, Any]:
    return {
        "runAsNonRoot": True,
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
    }


def _pod_security_context() -> dict[str, Any]:
    return {
        "runAsNonRoot": True,
        "runAsUser": RUN_AS_USER,
        "runAsGroup": RUN_AS_USER,
        "fsGroup": RUN_AS_USER,
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def _tcp_probes(port_name: str, startup_failures: int) -> dict[str, Any]:
    tcp = {"tcpSocket": {"port": port_name}}
    return {
        "startupProbe": {**tcp, "periodSeconds": 5, "failureThreshold": startup_failures},
        "readinessProbe": {**tcp, "periodSeconds": 10, "failureThreshold": 3},
        "livenessProbe": {**tcp, "periodSeconds": 20, "failureThreshold": 6},
    }


def _scheduling(spec: resources.BrokerSpec, default_affinity: dict[str, Any]) -> dict[str, Any]:
    result: dict[str, Any] = {"affinity": spec.get("affinity") or default_affinity}
    if spec.get("nodeSelector"):
        result["nodeSelector"] = dict(spec["nodeSelector"])
    if spec.get("tolerations"):
        result["tolerations"] = list(spec["tolerations"])
    if spec.get("topologySpreadConstraints"):
        result["topologySpreadConstraints"] = list(spec["topologySpreadConstraints"])
    return result


def _spread_by_host(match_labels: dict[str, str]) -> dict[str, Any]:
    """Prefer different nodes for pods matching ``match_labels`` (master and slave of a group)."""
    return {
        "podAntiAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": 100,
                    "podAffinityTerm": {
                        "labelSelector": {"matchLabels": match_labels},
                        "topologyKey": "kubernetes.io/hostname",
                    },
                }
            ]
        }
    }


def metrics_port(spec: resources.BrokerSpec) -> int:
    """The port every broker and name-server pod serves ``/metrics`` on (RocketMQ's 5557)."""
    return int(spec.get("metrics", {}).get("port", resources.DEFAULT_METRICS_PORT))


def namesrv_service(owner: Owner, spec: resources.BrokerSpec) -> resources.Manifest:
    """The ClusterIP Service clients and brokers use to reach the name servers (and
    Prometheus their ``metrics`` port)."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _metadata(owner, namesrv_name(owner.name), "namesrv"),
        "spec": {
            "selector": selector_labels(owner, "namesrv"),
            "ports": [
                {"name": "grpc", "port": NAMESRV_PORT, "targetPort": "grpc"},
                {"name": "metrics", "port": metrics_port(spec), "targetPort": "metrics"},
            ],
        },
    }


def namesrv_headless_service(owner: Owner) -> resources.Manifest:
    """The headless Service whose DNS name resolves to every ready name-server pod: brokers
    resolve it before each registration round and register with each (``namesrv_resolve_all``),
    so a new name-server pod is registered with without restarting any broker."""
    metadata = _metadata(owner, namesrv_headless_name(owner.name), "namesrv")
    metadata["labels"][DISCOVERY_LABEL] = "namesrv-pods"
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": metadata,
        "spec": {
            "clusterIP": "None",
            "selector": selector_labels(owner, "namesrv"),
            "ports": [{"name": "grpc", "port": NAMESRV_PORT, "targetPort": "grpc"}],
        },
    }


def namesrv_config_map(owner: Owner, spec: resources.BrokerSpec) -> resources.Manifest:
    """The ConfigMap with the name servers' ``namesrv.toml`` (only ``[tls]``; TLS on only)."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": _metadata(owner, namesrv_config_map_name(owner.name), "namesrv"),
        "data": {NAMESRV_CONFIG_FILE: render_toml({"tls": tls_table(spec)})},
    }


def namesrv_deployment(owner: Owner, spec: resources.BrokerSpec) -> resources.Manifest:
    """The name-server Deployment (stateless, so it may roll: ``RollingUpdate``)."""
    namesrv = spec.get("nameServer", {})
    selector = selector_labels(owner, "namesrv")
    container: dict[str, Any] = {
        "name": "namesrv",
        "image": spec.get("image", resources.DEFAULT_IMAGE),
        "imagePullPolicy": spec.get("imagePullPolicy", resources.DEFAULT_PULL_POLICY),
        "args": [
            "namesrv",
            "--listen",
            f"0.0.0.0:{NAMESRV_PORT}",
            "--metrics-listen",
            f"0.0.0.0:{metrics_port(spec)}",
        ],
        "ports": [
            {"name": "grpc", "containerPort": NAMESRV_PORT},
            {"name": "metrics", "containerPort": metrics_port(spec)},
        ],
        "securityContext": _security_context(),
        "volumeMounts": [{"name": "tmp", "mountPath": "/tmp"}],
        **_tcp_probes("grpc", startup_failures=12),
    }
    if namesrv.get("resources"):
        container["resources"] = namesrv["resources"]
    volumes: list[dict[str, Any]] = [{"name": "tmp", "emptyDir": {}}]
    template_meta: dict[str, Any] = {"labels": labels(owner, "namesrv")}
    if tls_enabled(spec):
        container["args"] += ["--config", f"{CONFIG_DIR}/{NAMESRV_CONFIG_FILE}"]
        container["volumeMounts"] += [
            {"name": "config", "mountPath": CONFIG_DIR, "readOnly": True},
            {"name": "tls", "mountPath": TLS_DIR, "readOnly": True},
        ]
        volumes += [
            {"name": "config", "configMap": {"name": namesrv_config_map_name(owner.name)}},
            _tls_volume(namesrv_tls_secret_name(owner.name)),
        ]
        text = namesrv_config_map(owner, spec)["data"][NAMESRV_CONFIG_FILE]
        template_meta["annotations"] = {CONFIG_HASH_ANNOTATION: config_hash(text)}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": _metadata(owner, namesrv_name(owner.name), "namesrv"),
        "spec": {
            "replicas": namesrv.get("replicas", resources.DEFAULT_NAMESRV_REPLICAS),
            "selector": {"matchLabels": selector},
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 0}},
            "template": {
                "metadata": template_meta,
                "spec": {
                    "automountServiceAccountToken": False,
                    "securityContext": _pod_security_context(),
                    "containers": [container],
                    "volumes": volumes,
                    **_scheduling(spec, _spread_by_host(selector)),
                },
            },
        },
    }


def group_service(owner: Owner, group: str, spec: resources.BrokerSpec) -> resources.Manifest:
    """The headless Service giving each pod of ``group`` a stable DNS name."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _metadata(owner, group, "broker", group),
        "spec": {
            "clusterIP": "None",
            "publishNotReadyAddresses": True,
            "selector": selector_labels(owner, "broker", group),
            "ports": [
                {"name": "grpc", "port": BROKER_PORT, "targetPort": "grpc"},
                {"name": "metrics", "port": metrics_port(spec), "targetPort": "metrics"},
            ],
        },
    }


def _broker_env(owner: Owner, group: str) -> list[dict[str, Any]]:
    def field(path: str) -> dict[str, Any]:
        return {"fieldRef": {"fieldPath": path}}

    roles = {"name": roles_config_map_name(owner.name), "key": group}
    return [
        {"name": "POD_NAME", "valueFrom": field("metadata.name")},
        {"name": "ARIANE_POD_INDEX", "valueFrom": field(f"metadata.labels['{POD_INDEX_LABEL}']")},
        {"name": "ARIANE_MASTER_ORDINAL", "valueFrom": {"configMapKeyRef": roles}},
    ]


def broker_container(owner: Owner, group: str, spec: resources.BrokerSpec) -> dict[str, Any]:
    """The broker container of ``group``'s pods; its broker id and role follow from its ordinal
    and the group's master ordinal (``ariane broker --pod-ordinal/--master-ordinal``)."""
    port = metrics_port(spec)
    advertise = f"$(POD_NAME).{group}.{owner.namespace}.svc:{BROKER_PORT}"
    container: dict[str, Any] = {
        "name": "broker",
        "image": spec.get("image", resources.DEFAULT_IMAGE),
        "imagePullPolicy": spec.get("imagePullPolicy", resources.DEFAULT_PULL_POLICY),
        "args": [
            "broker",
            "--config",
            f"{CONFIG_DIR}/{CONFIG_FILE}",
            "--broker-name",
            group,
            "--pod-ordinal",
            "$(ARIANE_POD_INDEX)",
            "--master-ordinal",
            "$(ARIANE_MASTER_ORDINAL)",
            "--advertise",
            advertise,
            "--metrics-listen",
            f"0.0.0.0:{port}",
        ],
        "env": _broker_env(owner, group),
        "ports": [
            {"name": "grpc", "containerPort": BROKER_PORT},
            {"name": "metrics", "containerPort": port},
            {"name": "ha", "containerPort": HA_PORT},
        ],
        "securityContext": _security_context(),
        "volumeMounts": [
            {"name": "store", "mountPath": STORE_DIR},
            {"name": "config", "mountPath": CONFIG_DIR, "readOnly": True},
            {"name": "tmp", "mountPath": "/tmp"},
        ],
        **_tcp_probes("grpc", startup_failures=120),
    }
    if spec.get("resources"):
        container["resources"] = spec["resources"]
    if auth_enabled(spec):
        container["args"] += ["--auth-config", f"{AUTH_DIR}/{AUTH_FILE}"]
        container["volumeMounts"].append({"name": "auth", "mountPath": AUTH_DIR, "readOnly": True})
    if tls_enabled(spec):
        container["volumeMounts"].append({"name": "tls", "mountPath": TLS_DIR, "readOnly": True})
    return container


def _claim_template(spec: resources.BrokerSpec, size: str | None) -> dict[str, Any]:
    storage = spec.get("storage", {})
    claim: dict[str, Any] = {
        "accessModes": ["ReadWriteOnce"],
        "resources": {
            "requests": {"storage": size or storage.get("size", resources.DEFAULT_STORAGE_SIZE)}
        },
    }
    if "storageClassName" in storage:
        claim["storageClassName"] = storage["storageClassName"]
    return {"metadata": {"name": "store"}, "spec": claim}


def group_statefulset(
    owner: Owner, group: str, spec: resources.BrokerSpec, claim_size: str | None = None
) -> resources.Manifest:
    """The StatefulSet of one broker group (the roles ConfigMap names its master's ordinal).

    ``claim_size``: the live StatefulSet's claim template size (templates are immutable; the
    operator grows the claims themselves), else ``spec.storage.size``.
    """
    toml_text = render_toml(broker_settings(owner, spec))
    selector = selector_labels(owner, "broker", group)
    claims = "Delete" if spec.get("storage", {}).get("deleteClaim", False) else "Retain"
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": _metadata(owner, group, "broker", group),
        "spec": {
            "serviceName": group,
            "replicas": spec.get("replicasPerGroup", resources.DEFAULT_REPLICAS_PER_GROUP),
            "podManagementPolicy": "Parallel",
            "updateStrategy": {"type": "OnDelete"},
            "persistentVolumeClaimRetentionPolicy": {"whenDeleted": claims, "whenScaled": "Retain"},
            "selector": {"matchLabels": selector},
            "template": {
                "metadata": {
                    "labels": labels(owner, "broker", group),
                    "annotations": {
                        CONFIG_HASH_ANNOTATION: config_hash(
                            toml_text + ("\n# auth\n" if auth_enabled(spec) else "")
                        )
                    },
                },
                "spec": {
                    "automountServiceAccountToken": False,
                    "securityContext": _pod_security_context(),
                    "terminationGracePeriodSeconds": 60,
                    "containers": [broker_container(owner, group, spec)],
                    "volumes": _broker_volumes(owner, spec),
                    **_scheduling(spec, _spread_by_host(selector)),
                },
            },
            "volumeClaimTemplates": [_claim_template(spec, claim_size)],
        },
    }


def _broker_volumes(owner: Owner, spec: resources.BrokerSpec) -> list[dict[str, Any]]:
    volumes: list[dict[str, Any]] = [
        {"name": "config", "configMap": {"name": config_map_name(owner.name)}},
        {"name": "tmp", "emptyDir": {}},
    ]
    if auth_enabled(spec):  # only auth.toml: the broker never sees the operator's keys twice
        secret = {
            "secretName": operator_secret_name(owner.name),
            "items": [{"key": AUTH_FILE, "path": AUTH_FILE}],
            "defaultMode": 0o440,
        }
        volumes.append({"name": "auth", "secret": secret})
    if tls_enabled(spec):
        volumes.append(_tls_volume(broker_tls_secret_name(owner.name)))
    return volumes


def group_pdb(owner: Owner, group: str) -> resources.Manifest:
    """At most one pod of a group may be evicted at a time (never master and slave together)."""
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": _metadata(owner, group, "broker", group),
        "spec": {
            "maxUnavailable": 1,
            "selector": {"matchLabels": selector_labels(owner, "broker", group)},
        },
    }


TARGET_LABELS = [
    "app.kubernetes.io/name",
    "app.kubernetes.io/instance",
    "app.kubernetes.io/component",
]
"""Service labels the ServiceMonitor copies onto every target (the alert rules select on them,
as ``app_kubernetes_io_*``)."""


def _metrics_endpoint() -> dict[str, Any]:
    return {"port": "metrics", "path": "/metrics", "interval": "30s"}


def metrics_tls_endpoints(owner: Owner) -> list[dict[str, Any]]:
    """The ServiceMonitor endpoints of an enforcing Broker: one per component (the name
    servers' and the brokers' leaves are different certificates with different names), each
    keeping only its component's Services, scraping HTTPS and verifying the server against the
    ``ca.crt`` bundle of that component's leaf Secret (the bundle the pods trust, which spans a
    CA rollover; cert-manager writes the same key) and a ``serverName`` the leaf carries (its
    Service's ``.svc`` name; ``certs.leaves``). No client certificate: the metrics port asks for
    none (``common.tls.ServerTls.metrics_context``)."""
    ns = owner.namespace
    servers = [
        ("namesrv", namesrv_tls_secret_name(owner.name), namesrv_name(owner.name)),
        ("broker", broker_tls_secret_name(owner.name), group_names(owner.name, 1)[0]),
    ]
    return [
        {
            **_metrics_endpoint(),
            "scheme": "https",
            "tlsConfig": {
                "ca": {"secret": {"name": secret, "key": TLS_CA_FILE}},
                "serverName": f"{service}.{ns}.svc",
            },
            "relabelings": [
                {
                    "action": "keep",
                    "sourceLabels": ["__meta_kubernetes_service_label_app_kubernetes_io_component"],
                    "regex": component,
                }
            ],
        }
        for component, secret, service in servers
    ]


def service_monitor(owner: Owner, spec: resources.BrokerSpec) -> resources.Manifest:
    """A prometheus-operator ServiceMonitor scraping the ``metrics`` port of every broker and
    name-server pod of this Broker (both serve ``/metrics`` there): plain HTTP, one endpoint,
    when ``spec.tls.mode`` is ``disabled`` or ``permissive`` (a permissive process serves
    ``/metrics`` over plain HTTP); HTTPS under ``enforcing`` (``metrics_tls_endpoints``)."""
    enforcing = tls_spec(spec)["mode"] == "enforcing"
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "ServiceMonitor",
        "metadata": _metadata(owner, owner.name, "broker"),
        "spec": {
            "selector": {
                "matchLabels": {
                    "app.kubernetes.io/name": "ariane",
                    "app.kubernetes.io/instance": owner.name,
                },
                "matchExpressions": [{"key": DISCOVERY_LABEL, "operator": "DoesNotExist"}],
            },
            "targetLabels": TARGET_LABELS,
            "endpoints": metrics_tls_endpoints(owner) if enforcing else [_metrics_endpoint()],
        },
    }


def prometheus_rule(owner: Owner) -> resources.Manifest:
    """The alert rules of ``metrics.alerts`` (the chart ships the same), scoped to this
    Broker's targets."""
    where = (
        f'app_kubernetes_io_name="ariane",namespace="{owner.namespace}",'
        f'app_kubernetes_io_instance="{owner.name}"'
    )
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PrometheusRule",
        "metadata": _metadata(owner, owner.name, "broker"),
        "spec": {"groups": [{"name": f"ariane-{owner.name}", "rules": alerts.rules(where)}]},
    }


def desired_objects(
    owner: Owner,
    spec: resources.BrokerSpec,
    masters: Mapping[str, int] | None = None,
    claim_sizes: Mapping[str, str] | None = None,
) -> list[resources.Manifest]:
    """Every object the Broker ``owner`` with ``spec`` needs, in apply order.

    Args:
        owner: the Broker CR.
        spec: its spec.
        masters: group → master pod ordinal (the live roles ConfigMap); missing groups: 0.
        claim_sizes: group → claim template size of its live StatefulSet (kept as is).

    Raises:
        SpecError: the spec cannot be rendered (bad group count, reserved config keys, ...).
    """
    if not 1 <= len(owner.name) <= resources.BROKER_NAME_LENGTH_MAX:
        raise SpecError(f"Broker name {owner.name!r} must have 1..40 characters")
    groups = group_names(owner.name, spec.get("groups", resources.DEFAULT_GROUPS))
    objects = [
        config_map(owner, spec),
        *([namesrv_config_map(owner, spec)] if tls_enabled(spec) else []),
        roles_config_map(owner, groups, masters or {}),
        namesrv_service(owner, spec),
        namesrv_headless_service(owner),
        namesrv_deployment(owner, spec),
    ]
    for group in groups:
        objects.append(group_service(owner, group, spec))
        objects.append(group_statefulset(owner, group, spec, (claim_sizes or {}).get(group)))
        objects.append(group_pdb(owner, group))
    metrics = spec.get("metrics", {})
    if metrics.get("serviceMonitor", False):
        objects.append(service_monitor(owner, spec))
    if metrics.get("prometheusRule", False):
        objects.append(prometheus_rule(owner))
    return objects


def object_key(manifest: Mapping[str, Any]) -> tuple[str, str, str]:
    """``(apiVersion, kind, name)``: what identifies an object within its namespace."""
    return (manifest["apiVersion"], manifest["kind"], manifest["metadata"]["name"])


def keys(objects: Sequence[Mapping[str, Any]]) -> list[tuple[str, str, str]]:
    """``object_key`` of each object, in order."""
    return [object_key(m) for m in objects]
