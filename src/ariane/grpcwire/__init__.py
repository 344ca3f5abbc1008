"""Protobuf and gRPC for Ariane: the only package that imports generated code or ``google``.

Modules (import the modules, not their names):

* ``pb``: short names for the generated messages (``pb.v2``, ``pb.v2_service``, ``pb.registry``,
  ``pb.admin``, ``pb.topic``) and the service descriptors (``pb.MESSAGING_SERVICE`` …).
* ``codes``: ``Status`` values from ``ariane.common.errors.Code`` / ``ArianeError`` and back.
* ``convert``: proto ↔ ``ariane.common`` values (Resource, Endpoints, Broker, perm bits →
  Permission, route → v2 ``MessageQueue`` list).
* ``metadata``: the v2 request headers (``x-mq-client-id`` …) of a call.
* ``recall``: the recall-handle codec shared by brokers and access points.
* ``guard``: serve a service from its descriptor with statuses instead of crashes (the status
  guard: malformed requests, the authentication gate, refusal logging).
* ``rpc_latency``: the per (RPC, answered code) latency histograms the guard fills.
* ``rpc``: typed unary and bounded server-streaming calls from the calling side.
* ``registry_client``: typed calls of the name server's ``Registry`` (brokers, admin, slaves).
* ``channel_pool``: a bounded pool of client channels, plaintext or TLS (rotating credentials).
* ``server``: the ``grpc.aio`` server with Ariane's options.

The protos live in ``grpcwire/protos`` (ours, re-expressing the public ``apache.rocketmq.v2``
contract, plus ``ariane.*``); ``grpcwire/gen`` is generated from them by ``make protos``.
"""

from ariane.grpcwire import (
    channel_pool,
    codes,
    convert,
    guard,
    metadata,
    pb,
    recall,
    registry_client,
    rpc,
    rpc_latency,
    server,
)

__all__ = [
    "channel_pool",
    "codes",
    "convert",
    "guard",
    "metadata",
    "pb",
    "recall",
    "registry_client",
    "rpc",
    "rpc_latency",
    "server",
]
