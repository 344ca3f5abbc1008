"""Typed views of the Ariane CR specs (group ``ariane.dev``, version ``v1alpha1``).

The CRDs in ``crds/`` are the schema and fill the defaults; these TypedDicts mirror them so the
model and handlers are type-checked. Keys are the CRD's camelCase field names. Every key is
optional here (``total=False``) because the model must also accept a spec read without the
apiserver's defaulting (the constants below repeat the CRD defaults; a test keeps them equal).
"""

from __future__ import annotations

from typing import Any, Final, TypedDict

GROUP: Final = "ariane.dev"
VERSION: Final = "v1alpha1"
API_VERSION: Final = f"{GROUP}/{VERSION}"

Manifest = dict[str, Any]
"""One Kubernetes object as the JSON the apiserver takes (``apiVersion``, ``kind``, ...)."""


class NameServerSpec(TypedDict, total=False):
    """``Broker.spec.nameServer``: the name-server Deployment."""

    replicas: int
    resources: dict[str, Any]


class StorageSpec(TypedDict, total=False):
    """``Broker.spec.storage``: one PVC per broker pod for the store."""

    size: str
    storageClassName: str
    deleteClaim: bool


class MetricsSpec(TypedDict, total=False):
    """``Broker.spec.metrics``: Prometheus port and prometheus-operator objects."""

    port: int
    serviceMonitor: bool
    prometheusRule: bool


class FailoverSpec(TypedDict, total=False):
    """``Broker.spec.failover``: automatic promotion of a slave when a master is gone."""

    masterDownTimeoutSeconds: int


class AuthSpec(TypedDict, total=False):
    """``spec.auth``: ACL 2.0 on the brokers, the operator signing as its own Super user."""

    enabled: bool


class IssuerRefSpec(TypedDict, total=False):
    """``spec.tls.issuerRef``: the cert-manager issuer that signs the certificates."""

    name: str
    kind: str
    group: str


class TlsSpec(TypedDict, total=False):
    """``Broker.spec.tls``: TLS on every listener; certificates from the operator or
    cert-manager."""

    mode: str
    clientAuth: str
    issuerRef: IssuerRefSpec
    certificateValidityDays: int
    caValidityDays: int


class NetworkPolicySpec(TypedDict, total=False):
    """``Broker.spec.networkPolicy``: the NetworkPolicies the operator renders (``netpol``)."""

    enabled: bool
    clientSelectors: list[dict[str, Any]]
    metricsSelectors: list[dict[str, Any]]


class BrokerSpec(TypedDict, total=False):
    """``Broker.spec``: one cluster (RocketMQ ``brokerClusterName``) of name servers and groups."""

    image: str
    imagePullPolicy: str
    nameServer: NameServerSpec
    groups: int
    replicasPerGroup: int
    brokerRole: str
    flushDiskType: str
    storage: StorageSpec
    failover: FailoverSpec
    auth: AuthSpec
    tls: TlsSpec
    networkPolicy: NetworkPolicySpec
    resources: dict[str, Any]
    config: dict[str, Any]
    metrics: MetricsSpec
    nodeSelector: dict[str, str]
    affinity: dict[str, Any]
    tolerations: list[dict[str, Any]]
    topologySpreadConstraints: list[dict[str, Any]]


class TopicSpec(TypedDict, total=False):
    """``Topic.spec``: one topic on every group of one Broker."""

    broker: str
    topicName: str
    queues: int
    messageType: str
    perm: int
    retentionHours: int


class RetryPolicySpec(TypedDict, total=False):
    """``ConsumerGroup.spec.retryPolicy`` (RocketMQ v2 ``RetryPolicy``)."""

    type: str
    initialBackoffMs: int
    maxBackoffMs: int
    multiplier: float
    customizedBackoffMs: list[int]


class ResetOffsetSpec(TypedDict, total=False):
    """``ConsumerGroup.spec.resetOffset``: one-shot reset, applied once per ``requestId``."""

    requestId: str
    to: str
    timestamp: str
    topic: str


class ConsumerGroupSpec(TypedDict, total=False):
    """``ConsumerGroup.spec``: one subscription group on one Broker."""

    broker: str
    groupName: str
    maxDeliveryAttempts: int
    retryPolicy: RetryPolicySpec
    consumeOrderly: bool
    broadcast: bool
    allocateStrategy: str
    resetOffset: ResetOffsetSpec


DEFAULT_IMAGE: Final = "ariane:0.1.0"
DEFAULT_PULL_POLICY: Final = "IfNotPresent"
DEFAULT_NAMESRV_REPLICAS: Final = 1
DEFAULT_GROUPS: Final = 1
DEFAULT_REPLICAS_PER_GROUP: Final = 1
DEFAULT_BROKER_ROLE: Final = "ASYNC_MASTER"
DEFAULT_FLUSH_DISK_TYPE: Final = "ASYNC_FLUSH"
DEFAULT_STORAGE_SIZE: Final = "10Gi"
DEFAULT_METRICS_PORT: Final = 5557
DEFAULT_TLS_MODE: Final = "enforcing"
"""``spec.tls.mode`` when ``spec.tls`` is given without it (no ``spec.tls``: disabled)."""
DEFAULT_CLIENT_AUTH: Final = "none"
DEFAULT_CERTIFICATE_VALIDITY_DAYS: Final = 90
DEFAULT_CA_VALIDITY_DAYS: Final = 1825
BROKER_NAME_LENGTH_MAX: Final = 40
"""Longest Broker CR name: ``<name>-namesrv`` and ``<name>-<group>-<ordinal>`` stay DNS labels
(StatefulSet pod names carry a hash label, so the CRD caps names well below 63)."""
GROUPS_MAX: Final = 26
REPLICAS_PER_GROUP_MAX: Final = 5
