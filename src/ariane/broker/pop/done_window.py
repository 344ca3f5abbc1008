"""``DoneWindow``: which offsets of one POP queue are done, as a bitmap above ``committed``.

A ``group_state.GroupPopState`` keeps one per queue it reads. ``committed`` is the lowest
offset not yet done (the group's consumer offset); it only moves forward, over a contiguous
done prefix. Pure: no I/O, no clock.

Invariants: every offset below ``committed`` is done; memory is one bit per offset between
``committed`` and the highest marked offset, plus bytes below ``committed`` not yet compacted
away (at most ``_COMPACT_BYTES_MIN`` bytes, or half of the bitmap).
"""

from __future__ import annotations

_COMPACT_BYTES_MIN = 4096
"""Whole bytes below ``committed`` kept before the bitmap is compacted (unless they are at
least half of it), bytes."""


class DoneWindow:
    """Done flags of one queue's offsets at and above ``committed``, as a bitmap.

    ``committed`` is the lowest offset not marked; it advances over every contiguous marked
    offset. Memory is one bit per offset between ``committed`` and the highest marked offset,
    plus bytes below ``committed`` not yet compacted away.
    """

    def __init__(self, committed: int) -> None:
        self.committed = committed
        self._origin = committed
        self._bits = bytearray()

    def is_done(self, offset: int) -> bool:
        """Whether ``offset`` is below ``committed`` or marked."""
        if offset < self.committed:
            return True
        index = offset - self._origin
        byte = index >> 3
        return byte < len(self._bits) and bool(self._bits[byte] >> (index & 7) & 1)

    def mark(self, offset: int) -> None:
        """Mark ``offset`` done (it must be at or above ``committed``) and advance."""
        assert offset >= self.committed, f"offset {offset} is below committed {self.committed}"
        index = offset - self._origin
        byte = index >> 3
        if byte >= len(self._bits):
            self._bits.extend(bytes(byte + 1 - len(self._bits)))
        self._bits[byte] |= 1 << (index & 7)
        if offset == self.committed:
            self._advance()

    def advance_to(self, offset: int) -> None:
        """Treat every offset below ``offset`` as done."""
        if offset <= self.committed:
            return
        if offset - self._origin >= len(self._bits) * 8:
            self.reset(offset)
            return
        self.committed = offset
        self._advance()

    def reset(self, committed: int) -> None:
        """Forget every flag; ``committed`` becomes the given offset."""
        self.committed = committed
        self._origin = committed
        self._bits = bytearray()

    def _advance(self) -> None:
        index = self.committed - self._origin
        bits = self._bits
        while (index >> 3) < len(bits):
            value = bits[index >> 3]
            if value == 0xFF and index & 7 == 0:
                index += 8
            elif value >> (index & 7) & 1:
                index += 1
            else:
                break
        self.committed = self._origin + index
        whole = index >> 3
        if whole and (whole >= _COMPACT_BYTES_MIN or whole * 2 >= len(bits)):
            del bits[:whole]
            self._origin += whole * 8
