"""Bodies of the objects every test cluster starts with: the fake node and the storage class.

The node carries kwok's annotation and no taint, so ordinary pods schedule onto it without
tolerations; kwok fills its status (Ready, addresses, capacity). The StorageClass ``standard`` is
the default class and names kwok's volume provisioner: the kwok volume stages assembled by
build.sh (their class name rewritten to ``standard``) create a PersistentVolume for every claim
of this class and bind it, and delete the volume when its claim goes away.
"""

from __future__ import annotations

from typing import Any

KWOK_PROVISIONER = "kwok.x-k8s.io/volume"
"""Provisioner name used by kwok's volume stages (kustomize/stage/volume/fast in kwok v0.8.0)."""


def fake_node(name: str) -> dict[str, Any]:
    """Returns a Node managed by kwok (``--manage-all-nodes``), schedulable by any pod."""
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "annotations": {"node.alpha.kubernetes.io/ttl": "0", "kwok.x-k8s.io/node": "fake"},
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "type": "kwok",
            },
        },
    }


def default_storage_class(name: str) -> dict[str, Any]:
    """Returns the default StorageClass whose claims kwok's volume stages provision and bind."""
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {
            "name": name,
            "annotations": {"storageclass.kubernetes.io/is-default-class": "true"},
        },
        "provisioner": KWOK_PROVISIONER,
        "reclaimPolicy": "Delete",
        "volumeBindingMode": "Immediate",
        "allowVolumeExpansion": True,
    }


RESTRICTED_NAMESPACE_LABELS = {
    "pod-security.kubernetes.io/enforce": "restricted",
    "pod-security.kubernetes.io/enforce-version": "latest",
}
"""Labels of a test namespace: the apiserver's PodSecurity admission enforces the
``restricted`` Pod Security Standard there (it rejects any pod that breaks it)."""


def restricted_pod_security_context() -> dict[str, Any]:
    """The pod-level ``securityContext`` the ``restricted`` standard needs (non-root, the
    runtime's default seccomp profile); the uid is the image's ``USER``."""
    return {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}}


def restricted_container_security_context() -> dict[str, Any]:
    """The container-level ``securityContext`` the ``restricted`` standard needs (no privilege
    escalation, every capability dropped), plus a read-only root file system."""
    return {
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
        "readOnlyRootFilesystem": True,
    }
