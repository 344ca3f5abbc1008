"""Reading classic request headers and answering with RocketMQ response codes.

Every handler of ``broker.remoting`` reads its custom header (``extFields``, every value a
string) through ``Header`` and turns a processor's ``ArianeError`` into the response code the
classic clients act on (``response_code``): a missing or malformed required field answers
``INVALID_PARAMETER`` (29) with a remark naming it, never an exception out of the handler.

The mapping mirrors what the Java broker answers for the same condition: an unknown topic
``TOPIC_NOT_EXIST`` (17, clients then fall back to ``TBW102`` or retry another broker), no
permission ``NO_PERMISSION`` (16), an invalid message ``MESSAGE_ILLEGAL`` (13), a full table
``SYSTEM_BUSY`` (2), an unknown group ``SUBSCRIPTION_GROUP_NOT_EXIST`` (26), a filter that does
not parse ``SUBSCRIPTION_PARSE_FAILED`` (23), a store that cannot write
``SERVICE_NOT_AVAILABLE`` (14); anything else ``SYSTEM_ERROR`` (1).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping

from ariane.common import errors
from ariane.remoting import codes, command, transport

_log = logging.getLogger(__name__)

RC = codes.ResponseCode

TransportHandler = transport.Handler
"""A handler of the transport's table: (connection, request) -> response or ``None``."""

RequestHandler = Callable[[command.RemotingCommand], Awaitable[command.RemotingCommand | None]]
"""A handler that needs no connection: request -> response, or ``None`` for oneway requests."""


def ignoring_connection(handler: RequestHandler) -> TransportHandler:
    """``handler`` as a transport handler (the connection is not passed on)."""

    async def handle(
        _connection: transport.Connection, request: command.RemotingCommand
    ) -> command.RemotingCommand | None:
        return await handler(request)

    return handle


REJECT_REQUEST_REMARK = "[REJECTREQUEST]system busy, start flow control for a while"
"""RocketMQ's remark when a processor's ``rejectRequest`` refuses a request
(``NettyRemotingAbstract.processRequestCommand``), e.g. a send or, without
``slaveReadEnable``, a pull on a slave."""


def rejecting(handler: TransportHandler, rejects: Callable[[], bool]) -> TransportHandler:
    """``handler``, answering SYSTEM_BUSY with ``REJECT_REQUEST_REMARK`` (nothing to a oneway
    request) while ``rejects()`` is true, as RocketMQ's transport does before the processor."""

    async def handle(
        connection: transport.Connection, request: command.RemotingCommand
    ) -> command.RemotingCommand | None:
        if not rejects():
            return await handler(connection, request)
        _log.debug("request %d rejected: %s", request.code, REJECT_REQUEST_REMARK)
        if request.is_oneway:
            return None
        return failed(request, RC.SYSTEM_BUSY, REJECT_REQUEST_REMARK)

    return handle


_MESSAGE_ILLEGAL = (
    errors.IllegalTopicError,
    errors.IllegalMessageTagError,
    errors.IllegalMessageKeyError,
    errors.IllegalPropertyKeyError,
    errors.IllegalDeliveryTimeError,
    errors.MessageBodyEmptyError,
    errors.MessageBodyTooLargeError,
    errors.MessagePropertiesTooLargeError,
    errors.MessageCorruptedError,
)


class HeaderError(errors.BadRequestError):
    """A required header field is missing or malformed (``INVALID_PARAMETER``)."""


class SubscriptionNotExistError(errors.BadRequestError):
    """A pull names no subscription and no heartbeat gave one (``SUBSCRIPTION_NOT_EXIST``)."""


_BY_CLASS: tuple[
    tuple[type[errors.ArianeError] | tuple[type[errors.ArianeError], ...], RC], ...
] = (
    (errors.TopicNotFoundError, RC.TOPIC_NOT_EXIST),
    (SubscriptionNotExistError, RC.SUBSCRIPTION_NOT_EXIST),
    (errors.ConsumerGroupNotFoundError, RC.SUBSCRIPTION_GROUP_NOT_EXIST),
    (errors.OffsetNotFoundError, RC.QUERY_NOT_FOUND),
    (errors.MessageNotFoundError, RC.QUERY_NOT_FOUND),
    (errors.IllegalFilterExpressionError, RC.SUBSCRIPTION_PARSE_FAILED),
    (_MESSAGE_ILLEGAL, RC.MESSAGE_ILLEGAL),
    (errors.ForbiddenError, RC.NO_PERMISSION),
    (errors.TooManyRequestsError, RC.SYSTEM_BUSY),
    (errors.ServiceUnavailableError, RC.SERVICE_NOT_AVAILABLE),
    (errors.BadRequestError, RC.INVALID_PARAMETER),
)


def response_code(error: errors.ArianeError) -> RC:
    """The classic response code for a processor's error (module docstring)."""
    for classes, code in _BY_CLASS:
        if isinstance(error, classes):
            return code
    return RC.SYSTEM_ERROR


def ok(
    request: command.RemotingCommand,
    ext_fields: Mapping[str, str] | None = None,
    body: bytes = b"",
) -> command.RemotingCommand:
    """A SUCCESS response to ``request``."""
    return command.response(request, RC.SUCCESS, ext_fields=ext_fields, body=body)


def failed(request: command.RemotingCommand, code: int, remark: str) -> command.RemotingCommand:
    """An error response to ``request`` with ``remark`` (shown by the client)."""
    return command.response(request, code, remark=remark)


def error(request: command.RemotingCommand, exc: errors.ArianeError) -> command.RemotingCommand:
    """The response for a processor's error."""
    return failed(request, response_code(exc), exc.message)


class Header:
    """Typed reads of a request's ``extFields``.

    Args:
        fields: the request's custom header.
    """

    def __init__(self, fields: Mapping[str, str]) -> None:
        self._fields = fields

    def text(self, name: str, default: str | None = None) -> str:
        """The field as text.

        Raises:
            HeaderError: absent (or empty) and no default.
        """
        value = self._fields.get(name)
        if value:
            return value
        if default is None:
            raise HeaderError(f"request header field {name!r} is required")
        return default

    def integer(self, name: str, default: int | None = None) -> int:
        """The field as a 64-bit integer.

        Raises:
            HeaderError: absent with no default, or not an integer in range.
        """
        value = self._fields.get(name)
        if not value:
            if default is None:
                raise HeaderError(f"request header field {name!r} is required")
            return default
        try:
            number = int(value)
        except ValueError:
            raise HeaderError(
                f"request header field {name!r}={value[:40]!r} is no integer"
            ) from None
        if not -(2**63) <= number < 2**63:
            raise HeaderError(f"request header field {name!r} is out of range")
        return number

    def flag(self, name: str) -> bool:
        """The field as a boolean (``"true"``, any case; absent = false)."""
        return self._fields.get(name, "").lower() == "true"
