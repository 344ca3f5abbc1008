"""The Kubernetes operator: Broker, Topic and ConsumerGroup CRs turned into running clusters.

``resources`` types the CR specs (the CRDs in ``crds/`` are their schema); ``model`` is the pure
spec → manifests function (no I/O); ``status`` builds conditions; ``reconcile`` applies the
model in named idempotent steps through ``kube``, the only API I/O. The operator deploys
brokers and name servers, so it never imports ``ariane.broker``, ``ariane.namesrv`` or
``ariane.store``; it talks to them through ``ariane.client`` only.
"""

import importlib
import types

__all__ = [
    "failover",
    "ha",
    "kube",
    "metadata",
    "model",
    "reconcile",
    "resources",
    "roller",
    "status",
    "storage",
]


def __getattr__(name: str) -> types.ModuleType:
    """The submodules, imported on first use (PEP 562): ``ariane operator``'s parser is built by
    every ``ariane`` command, and the Kubernetes client should load only when needed."""
    if name in __all__:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
