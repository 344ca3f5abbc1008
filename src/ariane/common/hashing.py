"""Java's ``String.hashCode`` and int32 wrapping: the hashes RocketMQ puts on disk.

The ConsumeQueue's tag code (``tagsString2tagsCode``) and the IndexFile's key hash are Java
``String.hashCode`` values, so Ariane's files and filters must compute exactly what Java does:
``s[0]*31^(n-1) + … + s[n-1]`` over UTF-16 code units (a character outside the Basic
Multilingual Plane counts as its surrogate pair; lone surrogates as themselves), wrapped to a
signed 32-bit integer. Pure functions, standard library only.
"""

from __future__ import annotations

import array
import operator
import sys

_INT32_MOD = 1 << 32
INT32_MAX = (1 << 31) - 1

FAST_HASH_UNITS_MAX = 1024
"""Longest text (UTF-16 units) hashed with the precomputed powers; longer text loops in Python."""

_POWERS = [pow(31, k, _INT32_MOD) for k in range(FAST_HASH_UNITS_MAX)]
"""``31**k mod 2**32``: the polynomial's coefficients, last character first."""
_LITTLE_ENDIAN = sys.byteorder == "little"


def to_int32(value: int) -> int:
    """Wrap any integer to Java's signed 32-bit range (two's complement)."""
    value %= _INT32_MOD
    return value - _INT32_MOD if value > INT32_MAX else value


def java_string_hash(text: str) -> int:
    """Java ``String.hashCode`` of ``text``: a signed 32-bit integer.

    ``sum(unit[i] * 31**(n-1-i)) mod 2**32`` is summed in C (``map``/``sum`` over the
    precomputed powers) rather than by a Python loop per character: the index hashes a key of
    every stored message. ASCII text is its own UTF-16 units, so its bytes are used directly.
    """
    units: bytes | array.array[int]
    if text.isascii():
        units = text.encode("ascii")
    else:
        units = array.array("H")
        assert units.itemsize == 2
        units.frombytes(text.encode("utf-16-be", "surrogatepass"))
        if _LITTLE_ENDIAN:
            units.byteswap()
    if len(units) > FAST_HASH_UNITS_MAX:
        h = 0
        for unit in units:
            h = (31 * h + unit) & 0xFFFFFFFF
    else:
        h = sum(map(operator.mul, reversed(units), _POWERS)) & 0xFFFFFFFF
    return h - _INT32_MOD if h & 0x80000000 else h
