from ariane.grpcwire.gen.apache.rocketmq.v2 import definition_pb2 as _definition_pb2
from ariane.grpcwire.gen.ariane.common.v1 import topic_pb2 as _topic_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ResetTarget(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    RESET_TARGET_UNSPECIFIED: _ClassVar[ResetTarget]
    RESET_TARGET_EARLIEST: _ClassVar[ResetTarget]
    RESET_TARGET_LATEST: _ClassVar[ResetTarget]
    RESET_TARGET_TIMESTAMP: _ClassVar[ResetTarget]

class BrokerRole(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    BROKER_ROLE_UNSPECIFIED: _ClassVar[BrokerRole]
    BROKER_ROLE_ASYNC_MASTER: _ClassVar[BrokerRole]
    BROKER_ROLE_SYNC_MASTER: _ClassVar[BrokerRole]
    BROKER_ROLE_SLAVE: _ClassVar[BrokerRole]
RESET_TARGET_UNSPECIFIED: ResetTarget
RESET_TARGET_EARLIEST: ResetTarget
RESET_TARGET_LATEST: ResetTarget
RESET_TARGET_TIMESTAMP: ResetTarget
BROKER_ROLE_UNSPECIFIED: BrokerRole
BROKER_ROLE_ASYNC_MASTER: BrokerRole
BROKER_ROLE_SYNC_MASTER: BrokerRole
BROKER_ROLE_SLAVE: BrokerRole

class Topic(_message.Message):
    __slots__ = ("name", "read_queue_nums", "write_queue_nums", "perm", "message_type", "retention_hours")
    NAME_FIELD_NUMBER: _ClassVar[int]
    READ_QUEUE_NUMS_FIELD_NUMBER: _ClassVar[int]
    WRITE_QUEUE_NUMS_FIELD_NUMBER: _ClassVar[int]
    PERM_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_TYPE_FIELD_NUMBER: _ClassVar[int]
    RETENTION_HOURS_FIELD_NUMBER: _ClassVar[int]
    name: str
    read_queue_nums: int
    write_queue_nums: int
    perm: int
    message_type: _topic_pb2.TopicMessageType
    retention_hours: int
    def __init__(self, name: _Optional[str] = ..., read_queue_nums: _Optional[int] = ..., write_queue_nums: _Optional[int] = ..., perm: _Optional[int] = ..., message_type: _Optional[_Union[_topic_pb2.TopicMessageType, str]] = ..., retention_hours: _Optional[int] = ...) -> None: ...

class CreateTopicRequest(_message.Message):
    __slots__ = ("topic",)
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    topic: Topic
    def __init__(self, topic: _Optional[_Union[Topic, _Mapping]] = ...) -> None: ...

class CreateTopicResponse(_message.Message):
    __slots__ = ("status", "topic")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    status: _definition_pb2.Status
    topic: Topic
    def __init__(self, status: _Optional[_Union[_definition_pb2.Status, _Mapping]] = ..., topic: _Optional[_Union[Topic, _Mapping]] = ...) -> None: ...

class UpdateTopicRequest(_message.Message):
    __slots__ = ("topic",)
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    topic: Topic
    def __init__(self, topic: _Optional[_Union[Topic, _Mapping]] = ...) -> None: ...

class UpdateTopicResponse(_message.Message):
    __slots__ = ("status", "topic")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    status: _definition_pb2.Status
    topic: Topic
    def __init__(self, status: _Optional[_Union[_definition_pb2.Status, _Mapping]] = ..., topic: _Optional[_Union[Topic, _Mapping]] = ...) -> None: ...

class DeleteTopicRequest(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class DeleteTopicResponse(_message.Message):
    __slots__ = ("status",)
    STATUS_FIELD_NUMBER: _ClassVar[int]
    status: _definition_pb2.Status
    def __init__(self, status: _Optional[_Union[_definition_pb2.Status, _Mapping]] = ...) -> None: ...

class ListTopicsRequest(_message.Message):
    __slots__ = ("include_system",)
    INCLUDE_SYSTEM_FIELD_NUMBER: _ClassVar[int]
    include_system: bool
    def __init__(self, include_system: _Optional[bool] = ...) -> None: ...

class ListTopicsResponse(_message.Message):
    __slots__ = ("status", "topics")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    status: _definition_pb2.Status
    topics: _containers.RepeatedCompositeFieldContainer[Topic]
    def __init__(self, status: _Optional[_Union[_definition_pb2.Status, _Mapping]] = ..., topics: _Optional[_Iterable[_Union[Topic, _Mapping]]] = ...) -> None: ...

class ListLiteTopicsRequest(_message.Message):
    __slots__ = ("parent", "limit")
    PARENT_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    parent: str
    limit: int
    def __init__(self, parent: _Optional[str] = ..., limit: _Optional[int] = ...) -> None: ...

class LiteTopic(_message.Message):
    __slots__ = ("name", "queue_id", "last_queue_offset", "last_stored_timestamp_ms")
    NAME_FIELD_NUMBER: _ClassVar[int]
    QUEUE_ID_FIELD_NUMBER: _ClassVar[int]
    LAST_QUEUE_OFFSET_FIELD_NUMBER: _ClassVar[int]
    LAST_STORED_TIMESTAMP_MS_FIELD_NUMBER: _ClassVar[int]
    name: str
    queue_id: int
    last_queue_offset: int
    last_stored_timestamp_ms: int
    def __init__(self, name: _Optional[str] = ..., queue_id: _Optional[int] = ..., last_queue_offset: _Optional[int] = ..., last_stored_timestamp_ms: _Optional[int] = ...) -> None: ...

class ListLiteTopicsResponse(_message.Message):
    __slots__ = ("status", "lite_topics", "parent_total", "broker_total", "broker_quota")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    LITE_TOPICS_FIELD_NUMBER: _ClassVar[int]
    PARENT_TOTAL_FIELD_NUMBER: _ClassVar[int]
    BROKER_TOTAL_FIELD_NUMBER: _ClassVar[int]
    BROKER_QUOTA_FIELD_NUMBER: _ClassVar[int]
    status: _definition_pb2.Status
    lite_topics: _containers.RepeatedCompositeFieldContainer[LiteTopic]
    parent_total: int
    broker_total: int
    broker_quota: int
    def __init__(self, status: _Optional[_Union[_definition_pb2.Status, _Mapping]] = ..., lite_topics: _Optional[_Iterable[_Union[LiteTopic, _Mapping]]] = ..., parent_total: _Optional[int] = ..., broker_total: _Optional[int] = ..., broker_quota: _Optional[int] = ...) -> None: ...

class SubscriptionGroup(_message.Message):
    __slots__ = ("name", "consume_orderly", "max_delivery_attempts", "retry_policy", "broadcast", "allocate_strategy", "allocate_config_queues")
    NAME_FIELD_NUMBER: _ClassVar[int]
    CONSUME_ORDERLY_FIELD_NUMBER: _ClassVar[int]
    MAX_DELIVERY_ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    RETRY_POLICY_FIELD_NUMBER: _ClassVar[int]
    BROADCAST_FIELD_NUMBER: _ClassVar[int]
    ALLOCATE_STRATEGY_FIELD_NUMBER: _ClassVar[int]
    ALLOCATE_CONFIG_QUEUES_FIELD_NUMBER: _ClassVar[int]
    name: str
    consume_orderly: bool
    max_delivery_attempts: int
    retry_policy: _definition_pb2.RetryPolicy
    broadcast: bool
    allocate_strategy: str
    allocate_config_queues: _containers.RepeatedCompositeFieldContainer[QueueRef]
    def __init__(self, name: _Optional[str] = ..., consume_orderly: _Optional[bool] = ..., max_delivery_attempts: _Optional[int] = ..., retry_policy: _Optional[_Union[_definition_pb2.RetryPolicy, _Mapping]] = ..., broadcast: _Optional[bool] = ..., allocate_strategy: _Optional[str] = ..., allocate_config_queues: _Optional[_Iterable[_Union[QueueRef, _Mapping]]] = ...) -> None: ...

class QueueRef(_message.Message):
    __slots__ = ("topic", "broker_name", "queue_id")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    BROKER_NAME_FIELD_NUMBER: _ClassVar[int]
    QUEUE_ID_FIELD_NUMBER: _ClassVar[int]
    topic: str
    broker_name: str
    queue_id: int
    def __init__(self, topic: _Optional[str] = ..., broker_name: _Optional[str] = ..., queue_id: _Optional[int] = ...) -> None: ...

class CreateSubscriptionGroupRequest(_message.Message):
    __slots__ = ("group",)
    GROUP_FIELD_NUMBER: _ClassVar[int]
    group: SubscriptionGroup
    def __init__(self, group: _Optional[_Union[SubscriptionGroup, _Mapping]] = ...) -> None: ...

class CreateSubscriptionGroupResponse(_message.Message):
    __slots__ = ("status", "group")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    GROUP_FIELD_NUMBER: _ClassVar[int]
    status: _definition_pb2.Status
    group: SubscriptionGroup
    def __init__(self, status: _Optional[_Union[_definition_pb2.Status, _Mapping]] = ..., group: _Optional[_Union[SubscriptionGroup, _Mapping]] = ...) -> None: ...

class UpdateSubscriptionGroupRequest(_message.Message):
    __slots__ = ("group",)
    GROUP_FIELD_NUMBER: _ClassVar[int]
    group: SubscriptionGroup
    def __init__(self, group: _Optional[_Union[SubscriptionGroup, _Mapping]] = ...) -> None: ...

class UpdateSubscriptionGroupResponse(_message.Message):
    __slots__ = ("status", "group")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    GROUP_FIELD_NUMBER: _ClassVar[int]
    status: _definition_pb2.Status
    group: SubscriptionGroup
    def __init__(self, status: _Optional[_Union[_definition_pb2.Status, _Mapping]] = ..., group: _Optional[_Union[SubscriptionGroup, _Mapping]] = ...) -> None: ...

class DeleteSubscriptionGroupRequest(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class DeleteSubscriptionGroupResponse(_message.Message):
    __slots__ = ("status",)
    STATUS_FIELD_NUMBER: _ClassVar[int]
    status: _definition_pb2.Status
    def __init__(self, status: _Optional[_Union[_definition_pb2.Status, _Mapping]] = ...) -> None: ...

class ListSubscriptionGroupsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListSubscriptionGroupsResponse(_message.Message):
    __slots__ = ("status", "groups")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    GROUPS_FIELD_NUMBER: _ClassVar[int]
    status: _definition_pb2.Status
    groups: _containers.RepeatedCompositeFieldContainer[SubscriptionGroup]
    def __init__(self, status: _Optional[_Union[_definition_pb2.Status, _Mapping]] = ..., groups: _Optional[_Iterable[_Union[SubscriptionGroup, _Mapping]]] = ...) -> None: ...

class GetConsumerLagRequest(_message.Message):
    __slots__ = ("group", "topic")
    GROUP_FIELD_NUMBER: _ClassVar[int]
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    group: str
    topic: str
    def __init__(self, group: _Optional[str] = ..., topic: _Optional[str] = ...) -> None: ...

class QueueLag(_message.Message):
    __slots__ = ("topic", "broker_name", "queue_id", "broker_offset", "consumer_offset", "lag", "inflight")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    BROKER_NAME_FIELD_NUMBER: _ClassVar[int]
    QUEUE_ID_FIELD_NUMBER: _ClassVar[int]
    BROKER_OFFSET_FIELD_NUMBER: _ClassVar[int]
    CONSUMER_OFFSET_FIELD_NUMBER: _ClassVar[int]
    LAG_FIELD_NUMBER: _ClassVar[int]
    INFLIGHT_FIELD_NUMBER: _ClassVar[int]
    topic: str
    broker_name: str
    queue_id: int
    broker_offset: int
    consumer_offset: int
    lag: int
    inflight: int
    def __init__(self, topic: _Optional[str] = ..., broker_name: _Optional[str] = ..., queue_id: _Optional[int] = ..., broker_offset: _Optional[int] = ..., consumer_offset: _Optional[int] = ..., lag: _Optional[int] = ..., inflight: _Optional[int] = ...) -> None: ...

class GetConsumerLagResponse(_message.Message):
    __slots__ = ("status", "queues", "total_lag", "total_inflight")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    QUEUES_FIELD_NUMBER: _ClassVar[int]
    TOTAL_LAG_FIELD_NUMBER: _ClassVar[int]
    TOTAL_INFLIGHT_FIELD_NUMBER: _ClassVar[int]
    status: _definition_pb2.Status
    queues: _containers.RepeatedCompositeFieldContainer[QueueLag]
    total_lag: int
    total_inflight: int
    def __init__(self, status: _Optional[_Union[_definition_pb2.Status, _Mapping]] = ..., queues: _Optional[_Iterable[_Union[QueueLag, _Mapping]]] = ..., total_lag: _Optional[int] = ..., total_inflight: _Optional[int] = ...) -> None: ...

class ResetOffsetRequest(_message.Message):
    __slots__ = ("group", "topic", "target", "timestamp_ms")
    GROUP_FIELD_NUMBER: _ClassVar[int]
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    TARGET_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMP_MS_FIELD_NUMBER: _ClassVar[int]
    group: str
    topic: str
    target: ResetTarget
    timestamp_ms: int
    def __init__(self, group: _Optional[str] = ..., topic: _Optional[str] = ..., target: _Optional[_Union[ResetTarget, str]] = ..., timestamp_ms: _Optional[int] = ...) -> None: ...

class QueueOffset(_message.Message):
    __slots__ = ("topic", "queue_id", "offset")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    QUEUE_ID_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    topic: str
    queue_id: int
    offset: int
    def __init__(self, topic: _Optional[str] = ..., queue_id: _Optional[int] = ..., offset: _Optional[int] = ...) -> None: ...

class ResetOffsetResponse(_message.Message):
    __slots__ = ("status", "offsets")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    OFFSETS_FIELD_NUMBER: _ClassVar[int]
    status: _definition_pb2.Status
    offsets: _containers.RepeatedCompositeFieldContainer[QueueOffset]
    def __init__(self, status: _Optional[_Union[_definition_pb2.Status, _Mapping]] = ..., offsets: _Optional[_Iterable[_Union[QueueOffset, _Mapping]]] = ...) -> None: ...

class StoredMessage(_message.Message):
    __slots__ = ("topic", "queue_id", "queue_offset", "commit_log_offset", "tag", "keys", "properties", "body", "born_timestamp_ms", "store_timestamp_ms", "reconsume_times", "message_id", "born_host", "store_host", "broker_name")
    class PropertiesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    QUEUE_ID_FIELD_NUMBER: _ClassVar[int]
    QUEUE_OFFSET_FIELD_NUMBER: _ClassVar[int]
    COMMIT_LOG_OFFSET_FIELD_NUMBER: _ClassVar[int]
    TAG_FIELD_NUMBER: _ClassVar[int]
    KEYS_FIELD_NUMBER: _ClassVar[int]
    PROPERTIES_FIELD_NUMBER: _ClassVar[int]
    BODY_FIELD_NUMBER: _ClassVar[int]
    BORN_TIMESTAMP_MS_FIELD_NUMBER: _ClassVar[int]
    STORE_TIMESTAMP_MS_FIELD_NUMBER: _ClassVar[int]
    RECONSUME_TIMES_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    BORN_HOST_FIELD_NUMBER: _ClassVar[int]
    STORE_HOST_FIELD_NUMBER: _ClassVar[int]
    BROKER_NAME_FIELD_NUMBER: _ClassVar[int]
    topic: str
    queue_id: int
    queue_offset: int
    commit_log_offset: int
    tag: str
    keys: _containers.RepeatedScalarFieldContainer[str]
    properties: _containers.ScalarMap[str, str]
    body: bytes
    born_timestamp_ms: int
    store_timestamp_ms: int
    reconsume_times: int
    message_id: str
    born_host: str
    store_host: str
    broker_name: str
    def __init__(self, topic: _Optional[str] = ..., queue_id: _Optional[int] = ..., queue_offset: _Optional[int] = ..., commit_log_offset: _Optional[int] = ..., tag: _Optional[str] = ..., keys: _Optional[_Iterable[str]] = ..., properties: _Optional[_Mapping[str, str]] = ..., body: _Optional[bytes] = ..., born_timestamp_ms: _Optional[int] = ..., store_timestamp_ms: _Optional[int] = ..., reconsume_times: _Optional[int] = ..., message_id: _Optional[str] = ..., born_host: _Optional[str] = ..., store_host: _Optional[str] = ..., broker_name: _Optional[str] = ...) -> None: ...

class QueryMessageByIdRequest(_message.Message):
    __slots__ = ("topic", "message_id")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    topic: str
    message_id: str
    def __init__(self, topic: _Optional[str] = ..., message_id: _Optional[str] = ...) -> None: ...

class QueryMessageByIdResponse(_message.Message):
    __slots__ = ("status", "messages")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    status: _definition_pb2.Status
    messages: _containers.RepeatedCompositeFieldContainer[StoredMessage]
    def __init__(self, status: _Optional[_Union[_definition_pb2.Status, _Mapping]] = ..., messages: _Optional[_Iterable[_Union[StoredMessage, _Mapping]]] = ...) -> None: ...

class QueryMessageByKeyRequest(_message.Message):
    __slots__ = ("topic", "key", "max_messages", "begin_timestamp_ms", "end_timestamp_ms")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    MAX_MESSAGES_FIELD_NUMBER: _ClassVar[int]
    BEGIN_TIMESTAMP_MS_FIELD_NUMBER: _ClassVar[int]
    END_TIMESTAMP_MS_FIELD_NUMBER: _ClassVar[int]
    topic: str
    key: str
    max_messages: int
    begin_timestamp_ms: int
    end_timestamp_ms: int
    def __init__(self, topic: _Optional[str] = ..., key: _Optional[str] = ..., max_messages: _Optional[int] = ..., begin_timestamp_ms: _Optional[int] = ..., end_timestamp_ms: _Optional[int] = ...) -> None: ...

class QueryMessageByKeyResponse(_message.Message):
    __slots__ = ("status", "messages")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    status: _definition_pb2.Status
    messages: _containers.RepeatedCompositeFieldContainer[StoredMessage]
    def __init__(self, status: _Optional[_Union[_definition_pb2.Status, _Mapping]] = ..., messages: _Optional[_Iterable[_Union[StoredMessage, _Mapping]]] = ...) -> None: ...

class GetBrokerRuntimeStatsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetBrokerRuntimeStatsResponse(_message.Message):
    __slots__ = ("status", "cluster_name", "broker_name", "broker_id", "role", "epoch", "commit_log_min_offset", "commit_log_max_offset", "commit_log_confirm_offset", "ha_lag_bytes", "writable", "disk_used_ratio", "messages_in_total", "messages_out_total", "start_timestamp_ms", "extra")
    class ExtraEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    STATUS_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_NAME_FIELD_NUMBER: _ClassVar[int]
    BROKER_NAME_FIELD_NUMBER: _ClassVar[int]
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    COMMIT_LOG_MIN_OFFSET_FIELD_NUMBER: _ClassVar[int]
    COMMIT_LOG_MAX_OFFSET_FIELD_NUMBER: _ClassVar[int]
    COMMIT_LOG_CONFIRM_OFFSET_FIELD_NUMBER: _ClassVar[int]
    HA_LAG_BYTES_FIELD_NUMBER: _ClassVar[int]
    WRITABLE_FIELD_NUMBER: _ClassVar[int]
    DISK_USED_RATIO_FIELD_NUMBER: _ClassVar[int]
    MESSAGES_IN_TOTAL_FIELD_NUMBER: _ClassVar[int]
    MESSAGES_OUT_TOTAL_FIELD_NUMBER: _ClassVar[int]
    START_TIMESTAMP_MS_FIELD_NUMBER: _ClassVar[int]
    EXTRA_FIELD_NUMBER: _ClassVar[int]
    status: _definition_pb2.Status
    cluster_name: str
    broker_name: str
    broker_id: int
    role: BrokerRole
    epoch: int
    commit_log_min_offset: int
    commit_log_max_offset: int
    commit_log_confirm_offset: int
    ha_lag_bytes: int
    writable: bool
    disk_used_ratio: float
    messages_in_total: int
    messages_out_total: int
    start_timestamp_ms: int
    extra: _containers.ScalarMap[str, str]
    def __init__(self, status: _Optional[_Union[_definition_pb2.Status, _Mapping]] = ..., cluster_name: _Optional[str] = ..., broker_name: _Optional[str] = ..., broker_id: _Optional[int] = ..., role: _Optional[_Union[BrokerRole, str]] = ..., epoch: _Optional[int] = ..., commit_log_min_offset: _Optional[int] = ..., commit_log_max_offset: _Optional[int] = ..., commit_log_confirm_offset: _Optional[int] = ..., ha_lag_bytes: _Optional[int] = ..., writable: _Optional[bool] = ..., disk_used_ratio: _Optional[float] = ..., messages_in_total: _Optional[int] = ..., messages_out_total: _Optional[int] = ..., start_timestamp_ms: _Optional[int] = ..., extra: _Optional[_Mapping[str, str]] = ...) -> None: ...

class ChangeRoleRequest(_message.Message):
    __slots__ = ("role", "epoch", "broker_id", "master_ha_address")
    ROLE_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    BROKER_ID_FIELD_NUMBER: _ClassVar[int]
    MASTER_HA_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    role: BrokerRole
    epoch: int
    broker_id: int
    master_ha_address: str
    def __init__(self, role: _Optional[_Union[BrokerRole, str]] = ..., epoch: _Optional[int] = ..., broker_id: _Optional[int] = ..., master_ha_address: _Optional[str] = ...) -> None: ...

class ChangeRoleResponse(_message.Message):
    __slots__ = ("status", "role", "epoch", "commit_log_max_offset")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    COMMIT_LOG_MAX_OFFSET_FIELD_NUMBER: _ClassVar[int]
    status: _definition_pb2.Status
    role: BrokerRole
    epoch: int
    commit_log_max_offset: int
    def __init__(self, status: _Optional[_Union[_definition_pb2.Status, _Mapping]] = ..., role: _Optional[_Union[BrokerRole, str]] = ..., epoch: _Optional[int] = ..., commit_log_max_offset: _Optional[int] = ...) -> None: ...

class WipeWritePermRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class WipeWritePermResponse(_message.Message):
    __slots__ = ("status", "topics_changed")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    TOPICS_CHANGED_FIELD_NUMBER: _ClassVar[int]
    status: _definition_pb2.Status
    topics_changed: int
    def __init__(self, status: _Optional[_Union[_definition_pb2.Status, _Mapping]] = ..., topics_changed: _Optional[int] = ...) -> None: ...

class AddWritePermRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class AddWritePermResponse(_message.Message):
    __slots__ = ("status", "topics_changed")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    TOPICS_CHANGED_FIELD_NUMBER: _ClassVar[int]
    status: _definition_pb2.Status
    topics_changed: int
    def __init__(self, status: _Optional[_Union[_definition_pb2.Status, _Mapping]] = ..., topics_changed: _Optional[int] = ...) -> None: ...

class ListDeadLettersRequest(_message.Message):
    __slots__ = ("group", "max_messages")
    GROUP_FIELD_NUMBER: _ClassVar[int]
    MAX_MESSAGES_FIELD_NUMBER: _ClassVar[int]
    group: str
    max_messages: int
    def __init__(self, group: _Optional[str] = ..., max_messages: _Optional[int] = ...) -> None: ...

class DeadLetter(_message.Message):
    __slots__ = ("message", "origin_topic", "origin_message_id", "attempts")
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    ORIGIN_TOPIC_FIELD_NUMBER: _ClassVar[int]
    ORIGIN_MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    message: StoredMessage
    origin_topic: str
    origin_message_id: str
    attempts: int
    def __init__(self, message: _Optional[_Union[StoredMessage, _Mapping]] = ..., origin_topic: _Optional[str] = ..., origin_message_id: _Optional[str] = ..., attempts: _Optional[int] = ...) -> None: ...

class ListDeadLettersResponse(_message.Message):
    __slots__ = ("status", "letters")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    LETTERS_FIELD_NUMBER: _ClassVar[int]
    status: _definition_pb2.Status
    letters: _containers.RepeatedCompositeFieldContainer[DeadLetter]
    def __init__(self, status: _Optional[_Union[_definition_pb2.Status, _Mapping]] = ..., letters: _Optional[_Iterable[_Union[DeadLetter, _Mapping]]] = ...) -> None: ...

class ResendDeadLettersRequest(_message.Message):
    __slots__ = ("group", "message_ids", "all")
    GROUP_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_IDS_FIELD_NUMBER: _ClassVar[int]
    ALL_FIELD_NUMBER: _ClassVar[int]
    group: str
    message_ids: _containers.RepeatedScalarFieldContainer[str]
    all: bool
    def __init__(self, group: _Optional[str] = ..., message_ids: _Optional[_Iterable[str]] = ..., all: _Optional[bool] = ...) -> None: ...

class ResentLetter(_message.Message):
    __slots__ = ("message_id", "topic", "queue_id", "queue_offset")
    MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    QUEUE_ID_FIELD_NUMBER: _ClassVar[int]
    QUEUE_OFFSET_FIELD_NUMBER: _ClassVar[int]
    message_id: str
    topic: str
    queue_id: int
    queue_offset: int
    def __init__(self, message_id: _Optional[str] = ..., topic: _Optional[str] = ..., queue_id: _Optional[int] = ..., queue_offset: _Optional[int] = ...) -> None: ...

class ResendDeadLettersResponse(_message.Message):
    __slots__ = ("status", "resent")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    RESENT_FIELD_NUMBER: _ClassVar[int]
    status: _definition_pb2.Status
    resent: _containers.RepeatedCompositeFieldContainer[ResentLetter]
    def __init__(self, status: _Optional[_Union[_definition_pb2.Status, _Mapping]] = ..., resent: _Optional[_Iterable[_Union[ResentLetter, _Mapping]]] = ...) -> None: ...

class User(_message.Message):
    __slots__ = ("username", "password", "user_type", "user_status")
    USERNAME_FIELD_NUMBER: _ClassVar[int]
    PASSWORD_FIELD_NUMBER: _ClassVar[int]
    USER_TYPE_FIELD_NUMBER: _ClassVar[int]
    USER_STATUS_FIELD_NUMBER: _ClassVar[int]
    username: str
    password: str
    user_type: str
    user_status: str
    def __init__(self, username: _Optional[str] = ..., password: _Optional[str] = ..., user_type: _Optional[str] = ..., user_status: _Optional[str] = ...) -> None: ...

class CreateUserRequest(_message.Message):
    __slots__ = ("user",)
    USER_FIELD_NUMBER: _ClassVar[int]
    user: User
    def __init__(self, user: _Optional[_Union[User, _Mapping]] = ...) -> None: ...

class CreateUserResponse(_message.Message):
    __slots__ = ("status", "user")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    USER_FIELD_NUMBER: _ClassVar[int]
    status: _definition_pb2.Status
    user: User
    def __init__(self, status: _Optional[_Union[_definition_pb2.Status, _Mapping]] = ..., user: _Optional[_Union[User, _Mapping]] = ...) -> None: ...

class UpdateUserRequest(_message.Message):
    __slots__ = ("user",)
    USER_FIELD_NUMBER: _ClassVar[int]
    user: User
    def __init__(self, user: _Optional[_Union[User, _Mapping]] = ...) -> None: ...

class UpdateUserResponse(_message.Message):
    __slots__ = ("status", "user")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    USER_FIELD_NUMBER: _ClassVar[int]
    status: _definition_pb2.Status
    user: User
    def __init__(self, status: _Optional[_Union[_definition_pb2.Status, _Mapping]] = ..., user: _Optional[_Union[User, _Mapping]] = ...) -> None: ...

class DeleteUserRequest(_message.Message):
    __slots__ = ("username",)
    USERNAME_FIELD_NUMBER: _ClassVar[int]
    username: str
    def __init__(self, username: _Optional[str] = ...) -> None: ...

class DeleteUserResponse(_message.Message):
    __slots__ = ("status",)
    STATUS_FIELD_NUMBER: _ClassVar[int]
    status: _definition_pb2.Status
    def __init__(self, status: _Optional[_Union[_definition_pb2.Status, _Mapping]] = ...) -> None: ...

class GetUserRequest(_message.Message):
    __slots__ = ("username",)
    USERNAME_FIELD_NUMBER: _ClassVar[int]
    username: str
    def __init__(self, username: _Optional[str] = ...) -> None: ...

class GetUserResponse(_message.Message):
    __slots__ = ("status", "user")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    USER_FIELD_NUMBER: _ClassVar[int]
    status: _definition_pb2.Status
    user: User
    def __init__(self, status: _Optional[_Union[_definition_pb2.Status, _Mapping]] = ..., user: _Optional[_Union[User, _Mapping]] = ...) -> None: ...

class ListUsersRequest(_message.Message):
    __slots__ = ("filter",)
    FILTER_FIELD_NUMBER: _ClassVar[int]
    filter: str
    def __init__(self, filter: _Optional[str] = ...) -> None: ...

class ListUsersResponse(_message.Message):
    __slots__ = ("status", "users")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    USERS_FIELD_NUMBER: _ClassVar[int]
    status: _definition_pb2.Status
    users: _containers.RepeatedCompositeFieldContainer[User]
    def __init__(self, status: _Optional[_Union[_definition_pb2.Status, _Mapping]] = ..., users: _Optional[_Iterable[_Union[User, _Mapping]]] = ...) -> None: ...

class AclEntry(_message.Message):
    __slots__ = ("resource", "actions", "source_ips", "decision")
    RESOURCE_FIELD_NUMBER: _ClassVar[int]
    ACTIONS_FIELD_NUMBER: _ClassVar[int]
    SOURCE_IPS_FIELD_NUMBER: _ClassVar[int]
    DECISION_FIELD_NUMBER: _ClassVar[int]
    resource: str
    actions: _containers.RepeatedScalarFieldContainer[str]
    source_ips: _containers.RepeatedScalarFieldContainer[str]
    decision: str
    def __init__(self, resource: _Optional[str] = ..., actions: _Optional[_Iterable[str]] = ..., source_ips: _Optional[_Iterable[str]] = ..., decision: _Optional[str] = ...) -> None: ...

class AclPolicy(_message.Message):
    __slots__ = ("policy_type", "entries")
    POLICY_TYPE_FIELD_NUMBER: _ClassVar[int]
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    policy_type: str
    entries: _containers.RepeatedCompositeFieldContainer[AclEntry]
    def __init__(self, policy_type: _Optional[str] = ..., entries: _Optional[_Iterable[_Union[AclEntry, _Mapping]]] = ...) -> None: ...

class Acl(_message.Message):
    __slots__ = ("subject", "policies")
    SUBJECT_FIELD_NUMBER: _ClassVar[int]
    POLICIES_FIELD_NUMBER: _ClassVar[int]
    subject: str
    policies: _containers.RepeatedCompositeFieldContainer[AclPolicy]
    def __init__(self, subject: _Optional[str] = ..., policies: _Optional[_Iterable[_Union[AclPolicy, _Mapping]]] = ...) -> None: ...

class CreateAclRequest(_message.Message):
    __slots__ = ("acl",)
    ACL_FIELD_NUMBER: _ClassVar[int]
    acl: Acl
    def __init__(self, acl: _Optional[_Union[Acl, _Mapping]] = ...) -> None: ...

class CreateAclResponse(_message.Message):
    __slots__ = ("status", "acl")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    ACL_FIELD_NUMBER: _ClassVar[int]
    status: _definition_pb2.Status
    acl: Acl
    def __init__(self, status: _Optional[_Union[_definition_pb2.Status, _Mapping]] = ..., acl: _Optional[_Union[Acl, _Mapping]] = ...) -> None: ...

class UpdateAclRequest(_message.Message):
    __slots__ = ("acl",)
    ACL_FIELD_NUMBER: _ClassVar[int]
    acl: Acl
    def __init__(self, acl: _Optional[_Union[Acl, _Mapping]] = ...) -> None: ...

class UpdateAclResponse(_message.Message):
    __slots__ = ("status", "acl")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    ACL_FIELD_NUMBER: _ClassVar[int]
    status: _definition_pb2.Status
    acl: Acl
    def __init__(self, status: _Optional[_Union[_definition_pb2.Status, _Mapping]] = ..., acl: _Optional[_Union[Acl, _Mapping]] = ...) -> None: ...

class DeleteAclRequest(_message.Message):
    __slots__ = ("subject", "policy_type", "resource")
    SUBJECT_FIELD_NUMBER: _ClassVar[int]
    POLICY_TYPE_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_FIELD_NUMBER: _ClassVar[int]
    subject: str
    policy_type: str
    resource: str
    def __init__(self, subject: _Optional[str] = ..., policy_type: _Optional[str] = ..., resource: _Optional[str] = ...) -> None: ...

class DeleteAclResponse(_message.Message):
    __slots__ = ("status",)
    STATUS_FIELD_NUMBER: _ClassVar[int]
    status: _definition_pb2.Status
    def __init__(self, status: _Optional[_Union[_definition_pb2.Status, _Mapping]] = ...) -> None: ...

class GetAclRequest(_message.Message):
    __slots__ = ("subject",)
    SUBJECT_FIELD_NUMBER: _ClassVar[int]
    subject: str
    def __init__(self, subject: _Optional[str] = ...) -> None: ...

class GetAclResponse(_message.Message):
    __slots__ = ("status", "acl")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    ACL_FIELD_NUMBER: _ClassVar[int]
    status: _definition_pb2.Status
    acl: Acl
    def __init__(self, status: _Optional[_Union[_definition_pb2.Status, _Mapping]] = ..., acl: _Optional[_Union[Acl, _Mapping]] = ...) -> None: ...

class ListAclsRequest(_message.Message):
    __slots__ = ("subject_filter", "resource_filter")
    SUBJECT_FILTER_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_FILTER_FIELD_NUMBER: _ClassVar[int]
    subject_filter: str
    resource_filter: str
    def __init__(self, subject_filter: _Optional[str] = ..., resource_filter: _Optional[str] = ...) -> None: ...

class ListAclsResponse(_message.Message):
    __slots__ = ("status", "acls")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    ACLS_FIELD_NUMBER: _ClassVar[int]
    status: _definition_pb2.Status
    acls: _containers.RepeatedCompositeFieldContainer[Acl]
    def __init__(self, status: _Optional[_Union[_definition_pb2.Status, _Mapping]] = ..., acls: _Optional[_Iterable[_Union[Acl, _Mapping]]] = ...) -> None: ...

class UserSecret(_message.Message):
    __slots__ = ("username", "secret_key", "user_type", "user_status")
    USERNAME_FIELD_NUMBER: _ClassVar[int]
    SECRET_KEY_FIELD_NUMBER: _ClassVar[int]
    USER_TYPE_FIELD_NUMBER: _ClassVar[int]
    USER_STATUS_FIELD_NUMBER: _ClassVar[int]
    username: str
    secret_key: str
    user_type: str
    user_status: str
    def __init__(self, username: _Optional[str] = ..., secret_key: _Optional[str] = ..., user_type: _Optional[str] = ..., user_status: _Optional[str] = ...) -> None: ...

class ExportAuthMetadataRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ExportAuthMetadataResponse(_message.Message):
    __slots__ = ("status", "users", "acls")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    USERS_FIELD_NUMBER: _ClassVar[int]
    ACLS_FIELD_NUMBER: _ClassVar[int]
    status: _definition_pb2.Status
    users: _containers.RepeatedCompositeFieldContainer[UserSecret]
    acls: _containers.RepeatedCompositeFieldContainer[Acl]
    def __init__(self, status: _Optional[_Union[_definition_pb2.Status, _Mapping]] = ..., users: _Optional[_Iterable[_Union[UserSecret, _Mapping]]] = ..., acls: _Optional[_Iterable[_Union[Acl, _Mapping]]] = ...) -> None: ...
