"""Idempotent sends: the user property that names a message's idempotency key, and the message
id derived from it (shared by the producer, the broker and the Spark sink).

RocketMQ has no idempotent producer (apache/rocketmq#4933, #10263): a retried send after a
lost answer stores the message twice, and consumers are told to de-duplicate by key. Ariane
stores a message carrying ``IDEMPOTENCY_KEY_PROPERTY`` at most once per topic and broker group
within the broker's window (``broker.processors.idempotency``). Its message id (``UNIQ_KEY``)
is ``message_id_of(key)``: every try of the same key has the same id, so a consumer that sees
one anyway (a try after the window) can still de-duplicate by id.

Invariants: ``message_id_of`` is a pure function of the key, 34 upper-case hex characters
starting ``01`` like the RocketMQ 5 clients' ids (``MessageIdCodec``), so tools that parse ids
accept it; keys are 1..``KEY_CHARS_MAX`` characters.
"""

from __future__ import annotations

import hashlib

IDEMPOTENCY_KEY_PROPERTY = "ARIANE_IDEMPOTENCY_KEY"
"""The user property holding a message's idempotency key (a user property, so the official
clients can set it too; consumers see it among the properties)."""

KEY_CHARS_MAX = 512
"""Longest idempotency key, characters (it is stored with every message)."""

_ID_VERSION = "01"
_ID_HASH_HEX_CHARS = 32


def check_key(key: str) -> str:
    """``key`` when it is a usable idempotency key.

    Raises:
        ValueError: empty, longer than ``KEY_CHARS_MAX``, or holding a control character
            (the store's property separators are ``\\x01`` and ``\\x02``).
    """
    if not key or len(key) > KEY_CHARS_MAX:
        raise ValueError(f"an idempotency key has 1..{KEY_CHARS_MAX} characters, not {len(key)}")
    if any(ord(c) < 0x20 for c in key):
        raise ValueError("an idempotency key may not hold control characters")
    return key


def message_id_of(key: str) -> str:
    """The message id (``UNIQ_KEY``) of every message sent with idempotency key ``key``:
    ``01`` then the first 16 bytes of SHA-256(key) as upper-case hex (34 characters)."""
    digest = hashlib.sha256(key.encode()).hexdigest()[:_ID_HASH_HEX_CHARS]
    return _ID_VERSION + digest.upper()
