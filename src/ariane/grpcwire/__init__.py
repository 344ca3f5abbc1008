"""Protobuf and gRPC for Ariane: the only package that imports generated code or ``google``.

Modules (import the modules, not their names):

* ``pb``: short names for the generated messages (``pb.v2``, ``pb.v2_service``, ``pb.registry``,
  ``pb.admin``, ``pb.topic``) and the service descriptors (``pb.MESSAGING_SERVICE`` …).
* ``codes``: ``Status`` values from ``ariane.common.errors.Code`` / ``ArianeError`` and back.
* ``convert``: proto ↔ ``ariane.common`` values (Resource, Endpoints, Broker, perm bits →
  Permission, route → v2 ``MessageQueue`` list).
* ``metadata``: the v2 request headers (``x-mq-client-id`` …) of a call.
* ``recall``: the recall-handle codec shared by brokers and access points.
* ``rpc``: serve a service from its descriptor with statuses instead of crashes; typed calls.
* ``server``: the ``grpc.aio`` server with Ariane's options.

The protos live in ``grpcwire/protos`` (ours, re-expressing the public ``apache.rocketmq.v2``
contract, plus ``ariane.*``); ``grpcwire/gen`` is generated from them by ``make protos``.
"""

from ariane.grpcwire import codes, convert, metadata, pb, recall, rpc, server

__all__ = ["codes", "convert", "metadata", "pb", "recall", "rpc", "server"]
