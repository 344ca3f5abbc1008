"""Short, stable names for the generated protobuf modules (the only door into ``grpcwire.gen``).

Other packages never import ``ariane.grpcwire.gen`` directly: they use ``pb.v2.Status``,
``pb.v2_service.QueryRouteRequest``, ``pb.registry.RegisterBrokerRequest`` and so on, so that a
change of layout in the generated tree touches this module only. Message classes are typed by the
generated ``.pyi`` stubs; the ``*_grpc`` modules have no stubs and are ``Any`` to mypy (prefer
``grpcwire.guard`` for typed serving and ``grpcwire.rpc`` for typed calling).

Modules:
    v2: ``apache.rocketmq.v2`` domain types and enums (definition.proto).
    v2_service: ``apache.rocketmq.v2.MessagingService`` requests and responses.
    v2_admin: ``apache.rocketmq.v2.Admin`` (RIP-2's proxy admin, served by brokers).
    topic: ``ariane.common.v1`` topic values shared by the registry and admin protos.
    registry: ``ariane.namesrv.v1.Registry`` (broker registration, route lookups).
    admin: ``ariane.admin.v1.Admin`` (Ariane's admin API served by brokers).
    ingest: ``ariane.ingest.v1.Ingest`` (streaming send for Ariane's own producer; its
        messages are the v2 ``SendMessageRequest``/``SendMessageResponse``).

``Message`` and ``ServiceDescriptor`` name protobuf's types for packages that may not import
protobuf; ``message_class`` finds the generated class of a message descriptor (the guard's
request and response classes).
"""

from __future__ import annotations

from google.protobuf import descriptor, message_factory
from google.protobuf import message as _message

from ariane.grpcwire.gen.apache.rocketmq.v2 import admin_pb2 as v2_admin
from ariane.grpcwire.gen.apache.rocketmq.v2 import admin_pb2_grpc as v2_admin_grpc
from ariane.grpcwire.gen.apache.rocketmq.v2 import definition_pb2 as v2
from ariane.grpcwire.gen.apache.rocketmq.v2 import service_pb2 as v2_service
from ariane.grpcwire.gen.apache.rocketmq.v2 import service_pb2_grpc as v2_service_grpc
from ariane.grpcwire.gen.ariane.admin.v1 import admin_pb2 as admin
from ariane.grpcwire.gen.ariane.admin.v1 import admin_pb2_grpc as admin_grpc
from ariane.grpcwire.gen.ariane.common.v1 import topic_pb2 as topic
from ariane.grpcwire.gen.ariane.ingest.v1 import ingest_pb2 as ingest
from ariane.grpcwire.gen.ariane.namesrv.v1 import registry_pb2 as registry
from ariane.grpcwire.gen.ariane.namesrv.v1 import registry_pb2_grpc as registry_grpc

Message = _message.Message
"""The base class of every generated message (for ``TypeVar`` bounds outside ``grpcwire``)."""

ServiceDescriptor = descriptor.ServiceDescriptor
"""A protobuf service descriptor (``pb.MESSAGING_SERVICE``), for packages that may not import
protobuf themselves."""


def message_class(message_descriptor: descriptor.Descriptor) -> type[_message.Message]:
    """The generated class of a message descriptor."""
    return message_factory.GetMessageClass(message_descriptor)


MESSAGING_SERVICE: descriptor.ServiceDescriptor = v2_service.DESCRIPTOR.services_by_name[
    "MessagingService"
]
"""``apache.rocketmq.v2.MessagingService``: the client protocol."""

V2_ADMIN_SERVICE: descriptor.ServiceDescriptor = v2_admin.DESCRIPTOR.services_by_name["Admin"]
"""``apache.rocketmq.v2.Admin``: the proxy's admin API (RIP-2), served by brokers."""

REGISTRY_SERVICE: descriptor.ServiceDescriptor = registry.DESCRIPTOR.services_by_name["Registry"]
"""``ariane.namesrv.v1.Registry``: what brokers call on every name server."""

ADMIN_SERVICE: descriptor.ServiceDescriptor = admin.DESCRIPTOR.services_by_name["Admin"]
"""``ariane.admin.v1.Admin``: what the operator and ``ariane admin`` call on brokers."""

INGEST_SERVICE: descriptor.ServiceDescriptor = ingest.DESCRIPTOR.services_by_name["Ingest"]
"""``ariane.ingest.v1.Ingest``: Ariane's producer streams batches to brokers (SendStream)."""

__all__ = [
    "ADMIN_SERVICE",
    "INGEST_SERVICE",
    "MESSAGING_SERVICE",
    "REGISTRY_SERVICE",
    "V2_ADMIN_SERVICE",
    "admin",
    "admin_grpc",
    "ingest",
    "registry",
    "registry_grpc",
    "topic",
    "v2",
    "v2_admin",
    "v2_admin_grpc",
    "v2_service",
    "v2_service_grpc",
]
