from ariane.grpcwire.gen.apache.rocketmq.v2 import definition_pb2 as _definition_pb2
from ariane.grpcwire.gen.ariane.common.v1 import topic_pb2 as _topic_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class RegisterBrokerRequest(_message.Message):
    __slots__ = ("cluster_name", "broker_name", "broker_id", "client_endpoint", "ha_address", "data_version", "topic_configs", "remoting_address", "epoch", "lease_ms", "in_sync_report", "ha_link_address")
    CLUSTER_NAME_FIELD_NUMBER: _ClassVar[int]
    BROKER_NAME_FIELD_NUMBER: _ClassVar[int]
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    CLIENT_ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    HA_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    DATA_VERSION_FIELD_NUMBER: _ClassVar[int]
    TOPIC_CONFIGS_FIELD_NUMBER: _ClassVar[int]
    REMOTING_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    LEASE_MS_FIELD_NUMBER: _ClassVar[int]
    IN_SYNC_REPORT_FIELD_NUMBER: _ClassVar[int]
    HA_LINK_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    cluster_name: str
    broker_name: str
    broker_id: int
    client_endpoint: _definition_pb2.Address
    ha_address: str
    data_version: int
    topic_configs: _containers.RepeatedCompositeFieldContainer[_topic_pb2.TopicConfig]
    remoting_address: str
    epoch: int
    lease_ms: int
    in_sync_report: InSyncReport
    ha_link_address: str
    def __init__(self, cluster_name: _Optional[str] = ..., broker_name: _Optional[str] = ..., broker_id: _Optional[int] = ..., client_endpoint: _Optional[_Union[_definition_pb2.Address, _Mapping]] = ..., ha_address: _Optional[str] = ..., data_version: _Optional[int] = ..., topic_configs: _Optional[_Iterable[_Union[_topic_pb2.TopicConfig, _Mapping]]] = ..., remoting_address: _Optional[str] = ..., epoch: _Optional[int] = ..., lease_ms: _Optional[int] = ..., in_sync_report: _Optional[_Union[InSyncReport, _Mapping]] = ..., ha_link_address: _Optional[str] = ...) -> None: ...

class ReplicaProgress(_message.Message):
    __slots__ = ("link_address", "in_sync", "acked_offset", "broker_id")
    LINK_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    IN_SYNC_FIELD_NUMBER: _ClassVar[int]
    ACKED_OFFSET_FIELD_NUMBER: _ClassVar[int]
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    link_address: str
    in_sync: bool
    acked_offset: int
    broker_id: int
    def __init__(self, link_address: _Optional[str] = ..., in_sync: _Optional[bool] = ..., acked_offset: _Optional[int] = ..., broker_id: _Optional[int] = ...) -> None: ...

class InSyncReport(_message.Message):
    __slots__ = ("epoch", "master_max_offset", "replicated_offset", "replicas", "heard_ago_ms")
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    MASTER_MAX_OFFSET_FIELD_NUMBER: _ClassVar[int]
    REPLICATED_OFFSET_FIELD_NUMBER: _ClassVar[int]
    REPLICAS_FIELD_NUMBER: _ClassVar[int]
    HEARD_AGO_MS_FIELD_NUMBER: _ClassVar[int]
    epoch: int
    master_max_offset: int
    replicated_offset: int
    replicas: _containers.RepeatedCompositeFieldContainer[ReplicaProgress]
    heard_ago_ms: int
    def __init__(self, epoch: _Optional[int] = ..., master_max_offset: _Optional[int] = ..., replicated_offset: _Optional[int] = ..., replicas: _Optional[_Iterable[_Union[ReplicaProgress, _Mapping]]] = ..., heard_ago_ms: _Optional[int] = ...) -> None: ...

class RegisterBrokerResponse(_message.Message):
    __slots__ = ("status", "master_client_endpoint", "master_ha_address", "group_epoch", "rejoin_broker_id")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    MASTER_CLIENT_ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    MASTER_HA_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    GROUP_EPOCH_FIELD_NUMBER: _ClassVar[int]
    REJOIN_BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    status: _definition_pb2.Status
    master_client_endpoint: _definition_pb2.Address
    master_ha_address: str
    group_epoch: int
    rejoin_broker_id: int
    def __init__(self, status: _Optional[_Union[_definition_pb2.Status, _Mapping]] = ..., master_client_endpoint: _Optional[_Union[_definition_pb2.Address, _Mapping]] = ..., master_ha_address: _Optional[str] = ..., group_epoch: _Optional[int] = ..., rejoin_broker_id: _Optional[int] = ...) -> None: ...

class UnregisterBrokerRequest(_message.Message):
    __slots__ = ("cluster_name", "broker_name", "broker_id", "epoch")
    CLUSTER_NAME_FIELD_NUMBER: _ClassVar[int]
    BROKER_NAME_FIELD_NUMBER: _ClassVar[int]
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    cluster_name: str
    broker_name: str
    broker_id: int
    epoch: int
    def __init__(self, cluster_name: _Optional[str] = ..., broker_name: _Optional[str] = ..., broker_id: _Optional[int] = ..., epoch: _Optional[int] = ...) -> None: ...

class UnregisterBrokerResponse(_message.Message):
    __slots__ = ("status",)
    STATUS_FIELD_NUMBER: _ClassVar[int]
    status: _definition_pb2.Status
    def __init__(self, status: _Optional[_Union[_definition_pb2.Status, _Mapping]] = ...) -> None: ...

class BrokerHeartbeatRequest(_message.Message):
    __slots__ = ("cluster_name", "broker_name", "broker_id", "data_version", "epoch", "in_sync_report", "ha_link_address")
    CLUSTER_NAME_FIELD_NUMBER: _ClassVar[int]
    BROKER_NAME_FIELD_NUMBER: _ClassVar[int]
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    DATA_VERSION_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    IN_SYNC_REPORT_FIELD_NUMBER: _ClassVar[int]
    HA_LINK_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    cluster_name: str
    broker_name: str
    broker_id: int
    data_version: int
    epoch: int
    in_sync_report: InSyncReport
    ha_link_address: str
    def __init__(self, cluster_name: _Optional[str] = ..., broker_name: _Optional[str] = ..., broker_id: _Optional[int] = ..., data_version: _Optional[int] = ..., epoch: _Optional[int] = ..., in_sync_report: _Optional[_Union[InSyncReport, _Mapping]] = ..., ha_link_address: _Optional[str] = ...) -> None: ...

class BrokerHeartbeatResponse(_message.Message):
    __slots__ = ("status", "registration_required", "group_epoch", "master_client_endpoint", "master_ha_address", "rejoin_broker_id")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    REGISTRATION_REQUIRED_FIELD_NUMBER: _ClassVar[int]
    GROUP_EPOCH_FIELD_NUMBER: _ClassVar[int]
    MASTER_CLIENT_ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    MASTER_HA_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    REJOIN_BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    status: _definition_pb2.Status
    registration_required: bool
    group_epoch: int
    master_client_endpoint: _definition_pb2.Address
    master_ha_address: str
    rejoin_broker_id: int
    def __init__(self, status: _Optional[_Union[_definition_pb2.Status, _Mapping]] = ..., registration_required: _Optional[bool] = ..., group_epoch: _Optional[int] = ..., master_client_endpoint: _Optional[_Union[_definition_pb2.Address, _Mapping]] = ..., master_ha_address: _Optional[str] = ..., rejoin_broker_id: _Optional[int] = ...) -> None: ...

class BrokerMember(_message.Message):
    __slots__ = ("broker_id", "client_endpoint", "ha_address", "data_version", "last_update_timestamp_ms", "remoting_address", "epoch", "lease_ms", "heard_ago_ms", "ha_link_address")
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    CLIENT_ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    HA_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    DATA_VERSION_FIELD_NUMBER: _ClassVar[int]
    LAST_UPDATE_TIMESTAMP_MS_FIELD_NUMBER: _ClassVar[int]
    REMOTING_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    LEASE_MS_FIELD_NUMBER: _ClassVar[int]
    HEARD_AGO_MS_FIELD_NUMBER: _ClassVar[int]
    HA_LINK_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    broker_id: int
    client_endpoint: _definition_pb2.Address
    ha_address: str
    data_version: int
    last_update_timestamp_ms: int
    remoting_address: str
    epoch: int
    lease_ms: int
    heard_ago_ms: int
    ha_link_address: str
    def __init__(self, broker_id: _Optional[int] = ..., client_endpoint: _Optional[_Union[_definition_pb2.Address, _Mapping]] = ..., ha_address: _Optional[str] = ..., data_version: _Optional[int] = ..., last_update_timestamp_ms: _Optional[int] = ..., remoting_address: _Optional[str] = ..., epoch: _Optional[int] = ..., lease_ms: _Optional[int] = ..., heard_ago_ms: _Optional[int] = ..., ha_link_address: _Optional[str] = ...) -> None: ...

class BrokerGroup(_message.Message):
    __slots__ = ("cluster_name", "broker_name", "members", "in_sync_report")
    CLUSTER_NAME_FIELD_NUMBER: _ClassVar[int]
    BROKER_NAME_FIELD_NUMBER: _ClassVar[int]
    MEMBERS_FIELD_NUMBER: _ClassVar[int]
    IN_SYNC_REPORT_FIELD_NUMBER: _ClassVar[int]
    cluster_name: str
    broker_name: str
    members: _containers.RepeatedCompositeFieldContainer[BrokerMember]
    in_sync_report: InSyncReport
    def __init__(self, cluster_name: _Optional[str] = ..., broker_name: _Optional[str] = ..., members: _Optional[_Iterable[_Union[BrokerMember, _Mapping]]] = ..., in_sync_report: _Optional[_Union[InSyncReport, _Mapping]] = ...) -> None: ...

class GetClusterInfoRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetClusterInfoResponse(_message.Message):
    __slots__ = ("status", "broker_groups")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    BROKER_GROUPS_FIELD_NUMBER: _ClassVar[int]
    status: _definition_pb2.Status
    broker_groups: _containers.RepeatedCompositeFieldContainer[BrokerGroup]
    def __init__(self, status: _Optional[_Union[_definition_pb2.Status, _Mapping]] = ..., broker_groups: _Optional[_Iterable[_Union[BrokerGroup, _Mapping]]] = ...) -> None: ...

class QueueData(_message.Message):
    __slots__ = ("broker_name", "read_queue_nums", "write_queue_nums", "perm", "message_type")
    BROKER_NAME_FIELD_NUMBER: _ClassVar[int]
    READ_QUEUE_NUMS_FIELD_NUMBER: _ClassVar[int]
    WRITE_QUEUE_NUMS_FIELD_NUMBER: _ClassVar[int]
    PERM_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_TYPE_FIELD_NUMBER: _ClassVar[int]
    broker_name: str
    read_queue_nums: int
    write_queue_nums: int
    perm: int
    message_type: _topic_pb2.TopicMessageType
    def __init__(self, broker_name: _Optional[str] = ..., read_queue_nums: _Optional[int] = ..., write_queue_nums: _Optional[int] = ..., perm: _Optional[int] = ..., message_type: _Optional[_Union[_topic_pb2.TopicMessageType, str]] = ...) -> None: ...

class GetTopicRouteRequest(_message.Message):
    __slots__ = ("topic",)
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    topic: str
    def __init__(self, topic: _Optional[str] = ...) -> None: ...

class GetTopicRouteResponse(_message.Message):
    __slots__ = ("status", "queue_datas", "broker_groups")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    QUEUE_DATAS_FIELD_NUMBER: _ClassVar[int]
    BROKER_GROUPS_FIELD_NUMBER: _ClassVar[int]
    status: _definition_pb2.Status
    queue_datas: _containers.RepeatedCompositeFieldContainer[QueueData]
    broker_groups: _containers.RepeatedCompositeFieldContainer[BrokerGroup]
    def __init__(self, status: _Optional[_Union[_definition_pb2.Status, _Mapping]] = ..., queue_datas: _Optional[_Iterable[_Union[QueueData, _Mapping]]] = ..., broker_groups: _Optional[_Iterable[_Union[BrokerGroup, _Mapping]]] = ...) -> None: ...
