from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class TopicMessageType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    TOPIC_MESSAGE_TYPE_UNSPECIFIED: _ClassVar[TopicMessageType]
    TOPIC_MESSAGE_TYPE_NORMAL: _ClassVar[TopicMessageType]
    TOPIC_MESSAGE_TYPE_FIFO: _ClassVar[TopicMessageType]
    TOPIC_MESSAGE_TYPE_DELAY: _ClassVar[TopicMessageType]
    TOPIC_MESSAGE_TYPE_TRANSACTION: _ClassVar[TopicMessageType]
    TOPIC_MESSAGE_TYPE_MIXED: _ClassVar[TopicMessageType]
    TOPIC_MESSAGE_TYPE_PRIORITY: _ClassVar[TopicMessageType]
    TOPIC_MESSAGE_TYPE_LITE: _ClassVar[TopicMessageType]
TOPIC_MESSAGE_TYPE_UNSPECIFIED: TopicMessageType
TOPIC_MESSAGE_TYPE_NORMAL: TopicMessageType
TOPIC_MESSAGE_TYPE_FIFO: TopicMessageType
TOPIC_MESSAGE_TYPE_DELAY: TopicMessageType
TOPIC_MESSAGE_TYPE_TRANSACTION: TopicMessageType
TOPIC_MESSAGE_TYPE_MIXED: TopicMessageType
TOPIC_MESSAGE_TYPE_PRIORITY: TopicMessageType
TOPIC_MESSAGE_TYPE_LITE: TopicMessageType

class TopicConfig(_message.Message):
    __slots__ = ("topic", "read_queue_nums", "write_queue_nums", "perm", "message_type")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    READ_QUEUE_NUMS_FIELD_NUMBER: _ClassVar[int]
    WRITE_QUEUE_NUMS_FIELD_NUMBER: _ClassVar[int]
    PERM_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_TYPE_FIELD_NUMBER: _ClassVar[int]
    topic: str
    read_queue_nums: int
    write_queue_nums: int
    perm: int
    message_type: TopicMessageType
    def __init__(self, topic: _Optional[str] = ..., read_queue_nums: _Optional[int] = ..., write_queue_nums: _Optional[int] = ..., perm: _Optional[int] = ..., message_type: _Optional[_Union[TopicMessageType, str]] = ...) -> None: ...
