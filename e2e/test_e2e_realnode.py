"""Ariane on a real Kubernetes node: the image from the Dockerfile run by a kubelet in containers.

All tests share the session's one real-node cluster (``real_node`` in conftest.py); each works in
its own namespace. Pods use ``imagePullPolicy: Never``: the images were imported into the node's
containerd at start, and no registry is reachable.
"""

from __future__ import annotations

import pytest

from e2e.testenv import objects, realnode

pytestmark = pytest.mark.realnode


def test_image_runs_as_uid_10001_with_a_read_only_root(
    real_node: realnode.RealNode, real_namespace: str
) -> None:
    """The image built from the Dockerfile runs ``ariane --version`` as uid 10001 (the image's
    USER, not set by the pod) and cannot write to its root filesystem when it is read-only."""
    script = (
        "ariane --version; echo uid=$(id -u) gid=$(id -g);"
        " if touch /probe 2>/dev/null; then echo root=writable; else echo root=read-only; fi;"
        " touch /tmp/ok && echo tmp=writable"
    )
    pod = {
        "metadata": {"name": "version"},
        "spec": {
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 1,
            "securityContext": objects.restricted_pod_security_context(),
            "containers": [
                {
                    "name": "ariane",
                    "image": real_node.image,
                    "imagePullPolicy": "Never",
                    "command": ["sh", "-c", script],
                    "securityContext": objects.restricted_container_security_context(),
                    "volumeMounts": [{"name": "tmp", "mountPath": "/tmp"}],
                }
            ],
            "volumes": [{"name": "tmp", "emptyDir": {}}],
        },
    }

    log = realnode.run_to_completion(real_node, real_namespace, pod)

    assert "0.1.0" in log.splitlines()[0], log
    assert "uid=10001 gid=10001" in log, log
    assert "root=read-only" in log, log
    assert "tmp=writable" in log, log
