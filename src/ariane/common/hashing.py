"""Java's ``String.hashCode`` and int32 wrapping: the hashes RocketMQ puts on disk.

The ConsumeQueue's tag code (``tagsString2tagsCode``) and the IndexFile's key hash are Java
``String.hashCode`` values, so Ariane's files and filters must compute exactly what Java does:
``s[0]*31^(n-1) + … + s[n-1]`` over UTF-16 code units (a character outside the Basic
Multilingual Plane counts as its surrogate pair; lone surrogates as themselves), wrapped to a
signed 32-bit integer. Pure functions, standard library only.
"""

from __future__ import annotations

_INT32_MOD = 1 << 32
INT32_MAX = (1 << 31) - 1


def to_int32(value: int) -> int:
    """Wrap any integer to Java's signed 32-bit range (two's complement)."""
    value %= _INT32_MOD
    return value - _INT32_MOD if value > INT32_MAX else value


def java_string_hash(text: str) -> int:
    """Java ``String.hashCode`` of ``text``: a signed 32-bit integer."""
    data = text.encode("utf-16-be", "surrogatepass")
    h = 0
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - _INT32_MOD if h & 0x80000000 else h
