"""Bounded caches of security outcomes, each valid for one generation of the users and ACLs.

Both protocol gates (``broker.grpc.auth_gate``, ``remoting.security_gate``) remember what they
verified or decided so that the hot path (one request per message for the official clients'
single sends) does not pay an HMAC, a header parse, a permission mapping and an ACL walk per
request. RocketMQ 5.3 does the same with its stateful strategies
(``StatefulAuthenticationStrategy``: per channel, 60 s, without re-checking the signature,
weakness 3 of security.md; ``StatefulAuthorizationStrategy``: decisions per channel and
resource, ``statefulAuthorizationCacheMaxNum`` 10000, so a decision may outlive an ACL change
by up to ``statefulAuthorizationCacheExpiredSecond`` = 60 s, on top of its ACL metadata
cache's own expiry). Ariane's caches are exact instead:

* a key holds everything the uncached decision reads from the request (the signature and the
  signed content for authentication; the RPC or code, the resource names, the user and the
  peer for authorization), so a request that differs in any of them misses;
* a value is only valid for the ``generation`` of the metadata store it was computed under
  (``AuthMetadataStore.generation``, bumped by every change of a user or an ACL, including the
  copy a slave takes of its master's): every ``get`` and ``put`` passes the current generation,
  and a cache that sees it move forgets everything first. A changed secret, a deleted or
  disabled user, a changed ACL are therefore refused by the very next request, with no expiry
  window.

Invariants: at most ``entries_max`` entries (least recently used evicted first); ``get`` never
returns a value put under another generation than the one it is given. Not thread-safe: one
per event loop (the store owner's), like the gates that hold them.
"""

from __future__ import annotations

import collections
from collections.abc import Hashable
from typing import Generic, TypeVar

V = TypeVar("V")


class GenerationCache(Generic[V]):
    """A bounded mapping, least recently used entry evicted first, emptied whenever the
    generation it is given moves.

    Args:
        entries_max: most entries kept, a count (>= 1).
    """

    __slots__ = ("_entries", "_entries_max", "_generation")

    def __init__(self, entries_max: int) -> None:
        assert entries_max >= 1, entries_max
        self._entries_max = entries_max
        self._entries: collections.OrderedDict[Hashable, V] = collections.OrderedDict()
        self._generation: int | None = None

    def __len__(self) -> int:
        return len(self._entries)

    def _at(self, generation: int) -> None:
        if generation != self._generation:
            self._entries.clear()
            self._generation = generation

    def get(self, key: Hashable, generation: int) -> V | None:
        """The value put under ``key`` during ``generation``, or ``None``."""
        self._at(generation)
        found = self._entries.get(key)
        if found is not None:
            self._entries.move_to_end(key)
        return found

    def put(self, key: Hashable, value: V, generation: int) -> None:
        """Remember ``value`` for ``key`` while the generation stays ``generation``."""
        self._at(generation)
        self._entries[key] = value
        self._entries.move_to_end(key)
        if len(self._entries) > self._entries_max:
            self._entries.popitem(last=False)

    def clear(self) -> None:
        """Forget everything."""
        self._entries.clear()
