"""RocketMQ status codes and Ariane's error tree.

``Code`` holds the ``apache.rocketmq.v2.Code`` values (grpc-v2.md §3); every RPC answers with one.
Errors that cross a component boundary are ``ArianeError`` subclasses, each bound to one ``Code``
through the registry ``error_for_code``/``ERROR_CLASSES``, so a server turns an exception into a
status and a client turns a status back into the same exception class. Expected hot-path outcomes
(a full disk on append, an empty receive) are status enums in result objects, not exceptions.

The tree::

    ArianeError                       (code INTERNAL_ERROR, retriable False)
    ├── BadRequestError               (400xx: the request itself is wrong; never retry as is)
    │   ├── IllegalTopicError         ILLEGAL_TOPIC
    │   ├── IllegalConsumerGroupError ILLEGAL_CONSUMER_GROUP
    │   ├── IllegalMessageTagError    ILLEGAL_MESSAGE_TAG
    │   ├── IllegalMessageKeyError    ILLEGAL_MESSAGE_KEY
    │   ├── IllegalMessageGroupError  ILLEGAL_MESSAGE_GROUP
    │   ├── IllegalMessageIdError     ILLEGAL_MESSAGE_ID
    │   ├── IllegalPropertyKeyError   ILLEGAL_MESSAGE_PROPERTY_KEY
    │   ├── IllegalInvisibleTimeError ILLEGAL_INVISIBLE_TIME
    │   ├── IllegalDeliveryTimeError  ILLEGAL_DELIVERY_TIME
    │   ├── IllegalFilterExpressionError ILLEGAL_FILTER_EXPRESSION
    │   ├── IllegalPollingTimeError   ILLEGAL_POLLING_TIME
    │   ├── IllegalOffsetError        ILLEGAL_OFFSET
    │   ├── IllegalLiteTopicError     ILLEGAL_LITE_TOPIC
    │   ├── InvalidReceiptHandleError INVALID_RECEIPT_HANDLE
    │   ├── InvalidTransactionIdError INVALID_TRANSACTION_ID
    │   ├── MessageTypeConflictError  MESSAGE_PROPERTY_CONFLICT_WITH_TYPE
    │   ├── ClientIdRequiredError     CLIENT_ID_REQUIRED
    │   ├── MessageCorruptedError     MESSAGE_CORRUPTED
    │   ├── MessageBodyEmptyError     MESSAGE_BODY_EMPTY
    │   ├── MessageBodyTooLargeError  MESSAGE_BODY_TOO_LARGE
    │   └── MessagePropertiesTooLargeError MESSAGE_PROPERTIES_TOO_LARGE
    ├── NotFoundError                 NOT_FOUND
    │   ├── TopicNotFoundError        TOPIC_NOT_FOUND
    │   ├── ConsumerGroupNotFoundError CONSUMER_GROUP_NOT_FOUND
    │   ├── MessageNotFoundError      MESSAGE_NOT_FOUND
    │   └── OffsetNotFoundError       OFFSET_NOT_FOUND
    ├── UnauthorizedError             UNAUTHORIZED (authentication failed)
    ├── ForbiddenError                FORBIDDEN
    ├── TooManyRequestsError          TOO_MANY_REQUESTS      (retriable)
    │   ├── LiteTopicQuotaExceededError LITE_TOPIC_QUOTA_EXCEEDED (not retriable)
    │   └── LiteSubscriptionQuotaExceededError LITE_SUBSCRIPTION_QUOTA_EXCEEDED (not retriable)
    ├── ServiceUnavailableError       INTERNAL_SERVER_ERROR  (retriable; e.g. disk full)
    ├── PersistenceTimeoutError       MASTER_PERSISTENCE_TIMEOUT (retriable)
    ├── SlavePersistenceTimeoutError  SLAVE_PERSISTENCE_TIMEOUT (retriable)
    ├── HaNotAvailableError           HA_NOT_AVAILABLE       (retriable)
    ├── RequestTimeoutError           REQUEST_TIMEOUT        (retriable)
    ├── ProxyTimeoutError             PROXY_TIMEOUT          (retriable; a forwarded call timed out)
    ├── RequestHeaderFieldsTooLargeError REQUEST_HEADER_FIELDS_TOO_LARGE
    ├── UnsupportedError              UNSUPPORTED / NOT_IMPLEMENTED
    └── PreconditionFailedError       PRECONDITION_FAILED (e.g. a role change to an old epoch)
"""

from __future__ import annotations

import enum
from typing import ClassVar


class Code(enum.IntEnum):
    """``apache.rocketmq.v2.Code`` (definition.proto); the number is the wire value."""

    CODE_UNSPECIFIED = 0
    OK = 20000
    MULTIPLE_RESULTS = 30000
    BAD_REQUEST = 40000
    ILLEGAL_ACCESS_POINT = 40001
    ILLEGAL_TOPIC = 40002
    ILLEGAL_CONSUMER_GROUP = 40003
    ILLEGAL_MESSAGE_TAG = 40004
    ILLEGAL_MESSAGE_KEY = 40005
    ILLEGAL_MESSAGE_GROUP = 40006
    ILLEGAL_MESSAGE_PROPERTY_KEY = 40007
    INVALID_TRANSACTION_ID = 40008
    ILLEGAL_MESSAGE_ID = 40009
    ILLEGAL_FILTER_EXPRESSION = 40010
    ILLEGAL_INVISIBLE_TIME = 40011
    ILLEGAL_DELIVERY_TIME = 40012
    INVALID_RECEIPT_HANDLE = 40013
    MESSAGE_PROPERTY_CONFLICT_WITH_TYPE = 40014
    UNRECOGNIZED_CLIENT_TYPE = 40015
    MESSAGE_CORRUPTED = 40016
    CLIENT_ID_REQUIRED = 40017
    ILLEGAL_POLLING_TIME = 40018
    ILLEGAL_OFFSET = 40019
    ILLEGAL_LITE_TOPIC = 40020
    INVALID_CLIENT_PROPERTIES = 40021
    UNAUTHORIZED = 40100
    PAYMENT_REQUIRED = 40200
    FORBIDDEN = 40300
    NOT_FOUND = 40400
    MESSAGE_NOT_FOUND = 40401
    TOPIC_NOT_FOUND = 40402
    CONSUMER_GROUP_NOT_FOUND = 40403
    OFFSET_NOT_FOUND = 40404
    REQUEST_TIMEOUT = 40800
    PAYLOAD_TOO_LARGE = 41300
    MESSAGE_BODY_TOO_LARGE = 41301
    MESSAGE_BODY_EMPTY = 41302
    PRECONDITION_FAILED = 42800
    TOO_MANY_REQUESTS = 42900
    LITE_TOPIC_QUOTA_EXCEEDED = 42901
    LITE_SUBSCRIPTION_QUOTA_EXCEEDED = 42902
    REQUEST_HEADER_FIELDS_TOO_LARGE = 43100
    MESSAGE_PROPERTIES_TOO_LARGE = 43101
    INTERNAL_ERROR = 50000
    INTERNAL_SERVER_ERROR = 50001
    HA_NOT_AVAILABLE = 50002
    NOT_IMPLEMENTED = 50100
    PROXY_TIMEOUT = 50400
    MASTER_PERSISTENCE_TIMEOUT = 50401
    SLAVE_PERSISTENCE_TIMEOUT = 50402
    UNSUPPORTED = 50500
    VERSION_UNSUPPORTED = 50501
    VERIFY_FIFO_MESSAGE_UNSUPPORTED = 50502
    FAILED_TO_CONSUME_MESSAGE = 60000


class ArianeError(Exception):
    """Root of Ariane's errors; carries the RocketMQ ``Code`` a server answers with.

    Attributes:
        code: the status code sent on the wire for this error class.
        retriable: whether retrying the same request later may succeed.
    """

    code: ClassVar[Code] = Code.INTERNAL_ERROR
    retriable: ClassVar[bool] = False

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class BadRequestError(ArianeError):
    """The request is malformed or illegal; it must be fixed before it can succeed."""

    code = Code.BAD_REQUEST


class IllegalTopicError(BadRequestError):
    """Topic name breaks RocketMQ's rules (TopicValidator)."""

    code = Code.ILLEGAL_TOPIC


class IllegalConsumerGroupError(BadRequestError):
    """Group name breaks RocketMQ's rules."""

    code = Code.ILLEGAL_CONSUMER_GROUP


class IllegalMessageTagError(BadRequestError):
    """Tag is empty, blank or contains ``|``."""

    code = Code.ILLEGAL_MESSAGE_TAG


class IllegalMessageKeyError(BadRequestError):
    """A message key is blank."""

    code = Code.ILLEGAL_MESSAGE_KEY


class IllegalMessageGroupError(BadRequestError):
    """A FIFO message group is blank or too long."""

    code = Code.ILLEGAL_MESSAGE_GROUP


class IllegalMessageIdError(BadRequestError):
    """A message without a message id, or an id that does not parse."""

    code = Code.ILLEGAL_MESSAGE_ID


class IllegalPropertyKeyError(BadRequestError):
    """A user property key is empty or reserved."""

    code = Code.ILLEGAL_MESSAGE_PROPERTY_KEY


class IllegalInvisibleTimeError(BadRequestError):
    """An invisible duration outside the allowed range."""

    code = Code.ILLEGAL_INVISIBLE_TIME


class IllegalDeliveryTimeError(BadRequestError):
    """A delivery timestamp too far in the future."""

    code = Code.ILLEGAL_DELIVERY_TIME


class IllegalFilterExpressionError(BadRequestError):
    """A tag or SQL92 filter expression that does not parse."""

    code = Code.ILLEGAL_FILTER_EXPRESSION


class IllegalPollingTimeError(BadRequestError):
    """A long-polling timeout outside the allowed range."""

    code = Code.ILLEGAL_POLLING_TIME


class IllegalOffsetError(BadRequestError):
    """An offset outside a queue's [min, max] range."""

    code = Code.ILLEGAL_OFFSET


class IllegalLiteTopicError(BadRequestError):
    """A lite topic name breaks RocketMQ 5.5's rules (blank, too long, or characters other than
    letters, digits, ``-`` and ``_``), or a lite send/subscription names no LITE parent."""

    code = Code.ILLEGAL_LITE_TOPIC


class InvalidReceiptHandleError(BadRequestError):
    """A receipt handle that does not decode or no longer matches an in-flight message."""

    code = Code.INVALID_RECEIPT_HANDLE


class InvalidTransactionIdError(BadRequestError):
    """A transaction id that does not name a half message."""

    code = Code.INVALID_TRANSACTION_ID


class MessageTypeConflictError(BadRequestError):
    """A message whose type the topic does not accept."""

    code = Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE


class ClientIdRequiredError(BadRequestError):
    """A request without the ``x-mq-client-id`` header."""

    code = Code.CLIENT_ID_REQUIRED


class MessageCorruptedError(BadRequestError):
    """A body whose digest does not match, or a stored record that fails its CRC."""

    code = Code.MESSAGE_CORRUPTED


class MessageBodyEmptyError(BadRequestError):
    """A message with an empty body."""

    code = Code.MESSAGE_BODY_EMPTY


class MessageBodyTooLargeError(BadRequestError):
    """A message body above the broker's ``message_size_bytes_max``."""

    code = Code.MESSAGE_BODY_TOO_LARGE


class MessagePropertiesTooLargeError(BadRequestError):
    """Properties above the size or count limits."""

    code = Code.MESSAGE_PROPERTIES_TOO_LARGE


class NotFoundError(ArianeError):
    """The named resource does not exist."""

    code = Code.NOT_FOUND


class TopicNotFoundError(NotFoundError):
    """The topic does not exist on this broker (and auto-create is off)."""

    code = Code.TOPIC_NOT_FOUND


class ConsumerGroupNotFoundError(NotFoundError):
    """The consumer group does not exist (and auto-create is off)."""

    code = Code.CONSUMER_GROUP_NOT_FOUND


class MessageNotFoundError(NotFoundError):
    """No message matched (also the status of an empty receive)."""

    code = Code.MESSAGE_NOT_FOUND


class OffsetNotFoundError(NotFoundError):
    """No committed offset exists for the group and queue."""

    code = Code.OFFSET_NOT_FOUND


class UnauthorizedError(ArianeError):
    """The request's credentials were missing or did not verify (RocketMQ
    ``AuthenticationException``: unknown or disabled user, bad signature)."""

    code = Code.UNAUTHORIZED


class ForbiddenError(ArianeError):
    """The operation is not permitted (e.g. the topic or broker lacks write permission, or the
    ACLs deny the user this action on this resource)."""

    code = Code.FORBIDDEN


class TooManyRequestsError(ArianeError):
    """A bound was hit (queue, in-flight table, long-poll slots); retry later."""

    code = Code.TOO_MANY_REQUESTS
    retriable = True


class LiteTopicQuotaExceededError(TooManyRequestsError):
    """A send would create a lite topic beyond the broker's ``lite_topics_max`` (RocketMQ 5.5
    ``LITE_TOPIC_QUOTA_EXCEEDED``); retrying does not help until lite topics expire."""

    code = Code.LITE_TOPIC_QUOTA_EXCEEDED
    retriable = False


class LiteSubscriptionQuotaExceededError(TooManyRequestsError):
    """A consumer's lite subscriptions would exceed its ``lite_subscription_quota``
    (``LITE_SUBSCRIPTION_QUOTA_EXCEEDED``)."""

    code = Code.LITE_SUBSCRIPTION_QUOTA_EXCEEDED
    retriable = False


class ServiceUnavailableError(ArianeError):
    """The service cannot take the request now (disk full, shutting down); retry later."""

    code = Code.INTERNAL_SERVER_ERROR
    retriable = True


class PersistenceTimeoutError(ArianeError):
    """SYNC_FLUSH did not make the message durable within ``sync_flush_timeout_ms``."""

    code = Code.MASTER_PERSISTENCE_TIMEOUT
    retriable = True


class SlavePersistenceTimeoutError(ArianeError):
    """SYNC_MASTER: no slave acknowledged the bytes in time."""

    code = Code.SLAVE_PERSISTENCE_TIMEOUT
    retriable = True


class HaNotAvailableError(ArianeError):
    """SYNC_MASTER: no in-sync slave is connected."""

    code = Code.HA_NOT_AVAILABLE
    retriable = True


class RequestTimeoutError(ArianeError):
    """The request did not complete within its deadline."""

    code = Code.REQUEST_TIMEOUT
    retriable = True


class ProxyTimeoutError(ArianeError):
    """An access point forwarded the request and the broker did not answer in time."""

    code = Code.PROXY_TIMEOUT
    retriable = True


class RequestHeaderFieldsTooLargeError(ArianeError):
    """A request header is longer than the server accepts."""

    code = Code.REQUEST_HEADER_FIELDS_TOO_LARGE


class UnsupportedError(ArianeError):
    """The feature or request kind is not supported by this server."""

    code = Code.UNSUPPORTED


class PreconditionFailedError(ArianeError):
    """The request contradicts the server's state (e.g. a role change to an older epoch)."""

    code = Code.PRECONDITION_FAILED


def _collect() -> dict[Code, type[ArianeError]]:
    table: dict[Code, type[ArianeError]] = {}
    pending: list[type[ArianeError]] = [ArianeError]
    while pending:
        cls = pending.pop()
        table.setdefault(cls.code, cls)
        pending.extend(cls.__subclasses__())
    return table


ERROR_CLASSES: dict[Code, type[ArianeError]] = _collect()
"""The one registry from ``Code`` to error class (the first class declaring a code wins)."""


def error_for_code(code: int, message: str) -> ArianeError:
    """Build the error a status code stands for.

    Args:
        code: a ``Code`` wire value; unknown values map to ``ArianeError``.
        message: the status message.

    Returns:
        An instance of the registered class, or of the nearest family for unregistered 4xx/5xx
        codes (``BadRequestError`` for 400xx, ``ArianeError`` otherwise).

    Raises:
        ValueError: if ``code`` is a success code (OK, MULTIPLE_RESULTS).
    """
    if code in (Code.OK, Code.MULTIPLE_RESULTS):
        raise ValueError(f"code {code} is a success, not an error")
    try:
        known = Code(code)
    except ValueError:
        return ArianeError(f"[code {code}] {message}")
    cls = ERROR_CLASSES.get(known)
    if cls is None:
        cls = BadRequestError if 40000 <= code < 40100 else ArianeError
    return cls(message)
