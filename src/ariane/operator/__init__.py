"""The Kubernetes operator: Broker, Topic and ConsumerGroup CRs turned into running clusters.

``resources`` types the CR specs (the CRDs in ``crds/`` are their schema); ``model`` is the pure
spec → manifests function (no I/O); ``status`` builds conditions; ``reconcile`` applies the
model in named idempotent steps through ``kube``, the only API I/O. The operator deploys
brokers and name servers, so it never imports ``ariane.broker``, ``ariane.namesrv`` or
``ariane.store``; it talks to them through ``ariane.client`` only.
"""

from ariane.operator import kube, metadata, model, reconcile, resources, roller, status

__all__ = ["kube", "metadata", "model", "reconcile", "resources", "roller", "status"]
