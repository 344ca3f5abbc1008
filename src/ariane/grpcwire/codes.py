"""Build and read ``apache.rocketmq.v2.Status`` values from Ariane's ``Code`` and error tree.

Every response Ariane sends carries a status whose code is never 0 (the official clients raise
"response is illegal" on 0 or on a missing status, grpc-v2.md §7.6). Servers turn an
``ArianeError`` into a status with ``from_error``; clients turn a status back into the same
error class with ``raise_for_status`` (through ``ariane.common.errors.error_for_code``).
``combine`` gives the top-level code of a multi-entry response (SendMessage, AckMessage) as the
Java proxy does: the single code when all entries agree, else MULTIPLE_RESULTS.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import cast

from ariane.common import errors
from ariane.grpcwire import pb

SUCCESS_CODES: frozenset[errors.Code] = frozenset({errors.Code.OK, errors.Code.MULTIPLE_RESULTS})
"""Codes a client treats as success."""


def v2_code(code: errors.Code | int) -> pb.v2.Code:
    """The protobuf enum value of ``code`` (same wire number)."""
    return cast("pb.v2.Code", int(code))


def status(code: errors.Code, message: str = "") -> pb.v2.Status:
    """A status with ``code`` and a human-readable ``message``.

    Raises:
        ValueError: for CODE_UNSPECIFIED (0), which clients reject as an illegal response.
    """
    if code == errors.Code.CODE_UNSPECIFIED:
        raise ValueError("a status code of 0 is never a valid answer")
    return pb.v2.Status(code=v2_code(code), message=message or code.name)


def ok(message: str = "OK") -> pb.v2.Status:
    """The OK (20000) status."""
    return status(errors.Code.OK, message)


def not_implemented(what: str) -> pb.v2.Status:
    """NOT_IMPLEMENTED (50100) for an RPC or feature this server does not offer."""
    return status(errors.Code.NOT_IMPLEMENTED, f"{what} is not implemented by this server")


def from_error(error: errors.ArianeError) -> pb.v2.Status:
    """The status an ``ArianeError`` answers with: its class's code and its message."""
    return status(error.code, error.message)


def internal_error(message: str) -> pb.v2.Status:
    """INTERNAL_ERROR (50000) for a failure that is a bug or an unexpected condition."""
    return status(errors.Code.INTERNAL_ERROR, message)


def code_of(value: pb.v2.Status) -> int:
    """The raw wire code of a status (may be a number this build does not know)."""
    return int(value.code)


def is_success(value: pb.v2.Status) -> bool:
    """Whether a client counts the status as success (OK or MULTIPLE_RESULTS)."""
    return code_of(value) in SUCCESS_CODES


def raise_for_status(value: pb.v2.Status) -> None:
    """Raise the ``ArianeError`` a non-success status stands for; return on success.

    Raises:
        ArianeError: the registered class for the code (``error_for_code``); a plain
            ``ArianeError`` for code 0, which means the server sent no status at all.
    """
    code = code_of(value)
    if code == errors.Code.CODE_UNSPECIFIED:
        raise errors.ArianeError("response is illegal: it carries no status code")
    if code not in SUCCESS_CODES:
        raise errors.error_for_code(code, value.message)


def combine(statuses: Iterable[pb.v2.Status]) -> pb.v2.Status:
    """The top-level status of a response whose entries each carry a status.

    Returns:
        OK for no entries; the shared status when every entry has the same code; otherwise
        MULTIPLE_RESULTS (as the Java proxy answers SendMessage and AckMessage).
    """
    items = list(statuses)
    codes = {code_of(s) for s in items}
    if not items:
        return ok()
    if len(codes) == 1:
        return pb.v2.Status(code=items[0].code, message=items[0].message)
    return status(errors.Code.MULTIPLE_RESULTS, "entries have different results")
