from ariane.grpcwire.gen.apache.rocketmq.v2 import service_pb2 as _service_pb2
from google.protobuf import descriptor as _descriptor
from typing import ClassVar as _ClassVar

DESCRIPTOR: _descriptor.FileDescriptor
