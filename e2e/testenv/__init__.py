"""Real Kubernetes control plane for tests: build (``build.sh``), start, stop.

Modules: ``build`` (find the cached binaries), ``pki`` (openssl certificates), ``processes``
(child processes stopped by PID), ``objects`` (fake node, StorageClass), ``cluster``
(``start_cluster`` and the ``Cluster`` handle), ``sockets`` (a process's TCP sockets, to check
that everything stays on loopback).
"""

from e2e.testenv import build, cluster, objects, pki, processes, sockets

__all__ = ["build", "cluster", "objects", "pki", "processes", "sockets"]
