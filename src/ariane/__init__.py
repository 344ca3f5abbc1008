"""Ariane: a RocketMQ-compatible message broker written in Python.

The distribution is one package with a subpackage per component (see DESIGN.md §3):
``common`` (values, errors, clock), ``store`` (the storage engine), ``grpcwire`` (protobuf and
gRPC helpers), ``namesrv``, ``broker``, ``client``, ``metrics``, ``operator`` and ``benchmark``
(``ariane bench``), plus the ``cli``, ``admin_cli`` and ``dev`` entry points, and
``connectors`` (``connectors.spark``: the PySpark data source ``rocketmq``).
"""

__version__ = "0.1.0"

__all__ = ["__version__"]
