"""Credentials Ariane's clients sign their gRPC calls with (RocketMQ ACL 2.0).

A ``Credentials`` value is an access key (the user name) and its secret key. With it, every
call of a producer, consumer, pull consumer or admin client carries the v2 signature headers
the official clients send (``security.signing.sign_grpc``; security.md §4.2)::

    x-mq-date-time: 20250507T101500Z
    authorization:  MQv2-HMAC-SHA1 Credential=<AK>, SignedHeaders=x-mq-date-time, Signature=<hex>

signed again for each call with the current UTC time (the official clients stamp local time;
the broker only verifies the signature). Without credentials no such header is sent, as the
Java and Go clients do.

Invariant: the secret key never appears in a ``repr``, a log line or an error message.
"""

from __future__ import annotations

import dataclasses
import datetime
import os
from collections.abc import Callable, Mapping

from ariane.security import signing

ACCESS_KEY_ENV = "ARIANE_ACCESS_KEY"
SECRET_KEY_ENV = "ARIANE_SECRET_KEY"
"""Environment variables ``from_env`` reads."""

KEY_CHARS_MAX = 1024
"""Longest access or secret key accepted, characters."""


def _utc_now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


@dataclasses.dataclass(frozen=True, slots=True)
class Credentials:
    """An access key and its secret key.

    Raises:
        ValueError: a blank key, one longer than ``KEY_CHARS_MAX``, or an access key holding a
            space, ``,`` or ``/`` (the ``authorization`` header could not carry it).
    """

    access_key: str
    """The user name (RocketMQ ``accessKey``)."""

    secret_key: str = dataclasses.field(repr=False)
    """The user's password (RocketMQ ``secretKey``); never shown."""

    def __post_init__(self) -> None:
        if not self.access_key.strip() or not self.secret_key.strip():
            raise ValueError("credentials need a non-blank access key and secret key")
        if len(self.access_key) > KEY_CHARS_MAX or len(self.secret_key) > KEY_CHARS_MAX:
            raise ValueError(f"access and secret keys are at most {KEY_CHARS_MAX} characters")
        if any(c in self.access_key for c in " ,/"):
            raise ValueError("the access key may not hold a space, ',' or '/'")

    def headers(
        self, now: Callable[[], datetime.datetime] = _utc_now
    ) -> tuple[tuple[str, str], ...]:
        """The ``x-mq-date-time`` and ``authorization`` headers of one call, signed now."""
        date_time = signing.grpc_date_time(now())
        return signing.sign_grpc(
            access_key=self.access_key, secret_key=self.secret_key, date_time=date_time
        )


def from_env(environ: Mapping[str, str] | None = None) -> Credentials | None:
    """Credentials from ``ARIANE_ACCESS_KEY``/``ARIANE_SECRET_KEY``, or ``None`` when neither
    is set.

    Raises:
        ValueError: only one of the two is set, or the keys are invalid.
    """
    env = os.environ if environ is None else environ
    access_key = env.get(ACCESS_KEY_ENV, "")
    secret_key = env.get(SECRET_KEY_ENV, "")
    if not access_key and not secret_key:
        return None
    if not access_key or not secret_key:
        raise ValueError(f"set both {ACCESS_KEY_ENV} and {SECRET_KEY_ENV}, or neither")
    return Credentials(access_key, secret_key)
