"""Secret keys Ariane generates (the dev cluster's Super user, the operator's Super user, a
``RocketMQUser`` without a given key, the inner credential, the examples' users).

Invariant: a generated key is URL-safe base64 (``A-Z a-z 0-9 - _``, no padding) and **never
starts with "-"**, so it passes through any command line as an option's value as a separate
word: ``ariane admin user create -p KEY``, RocketMQ's ``mqadmin createUser -p KEY`` (commons-cli)
and argparse all take a leading "-" for an option and fail with "expected one argument"
(``secrets.token_urlsafe`` starts one key in 64 that way; CI 2026-11-29 failed on it twice).
"""

from __future__ import annotations

import secrets
import string
from typing import Final

KEY_BYTES_MIN: Final = 16
"""Fewest random bytes a generated key may carry (128 bits)."""

KEY_BYTES_MAX: Final = 512
"""Most random bytes a generated key may carry (a bound, not a recommendation)."""


def generate_secret_key(nbytes: int = 32) -> str:
    """A new random secret key of ``nbytes`` random bytes (URL-safe base64, no padding, about
    ``4 * nbytes / 3`` characters) that does not start with "-".

    A leading "-" is replaced by a random letter: the key keeps its length, and its first
    character is one of 52 letters where the others are one of 64 symbols.

    Raises:
        ValueError: ``nbytes`` outside ``KEY_BYTES_MIN..KEY_BYTES_MAX``.
    """
    if not KEY_BYTES_MIN <= nbytes <= KEY_BYTES_MAX:
        raise ValueError(f"nbytes {nbytes} outside {KEY_BYTES_MIN}..{KEY_BYTES_MAX}")
    key = secrets.token_urlsafe(nbytes)
    if key.startswith("-"):
        key = secrets.choice(string.ascii_letters) + key[1:]
    return key
