"""The name server's KV config (RocketMQ ``KVConfigManager``), in memory, bounded, pure.

Namespaced string → string entries that ``mqadmin`` and brokers read and write through
PUT/GET/DELETE_KV_CONFIG (100/101/102) and GET_KVLIST_BY_NAMESPACE (219), e.g. namespace
``ORDER_TOPIC_CONFIG`` holding ``broker-a:4;broker-b:4`` per globally ordered topic. RocketMQ
persists them to ``kvConfig.json``; Ariane's name servers keep no state on disk, so entries
live until the process ends (put them again after a restart, as for routes).

Invariant: at most ``entries_max`` entries over all namespaces; a put beyond it is refused and
changes nothing.
"""

from __future__ import annotations

KV_ENTRIES_MAX = 100_000
"""Default bound on the entries over all namespaces."""

KV_TEXT_BYTES_MAX = 64 * 1024
"""Longest namespace, key or value, UTF-8 bytes."""


class KvConfigFullError(Exception):
    """A put would exceed the entry bound or the text bound; nothing was changed."""


class KvConfig:
    """Namespaced key/value entries.

    Args:
        entries_max: the bound on entries over all namespaces.
    """

    def __init__(self, *, entries_max: int = KV_ENTRIES_MAX) -> None:
        assert entries_max >= 1
        self._entries_max = entries_max
        self._tables: dict[str, dict[str, str]] = {}
        self._count = 0

    def put(self, namespace: str, key: str, value: str) -> None:
        """Set ``key`` in ``namespace`` (``putKVConfig``).

        Raises:
            KvConfigFullError: a new entry beyond ``entries_max``, or a text above
                ``KV_TEXT_BYTES_MAX``.
        """
        for text in (namespace, key, value):
            if len(text.encode("utf-8", "surrogatepass")) > KV_TEXT_BYTES_MAX:
                raise KvConfigFullError(f"a KV text is longer than {KV_TEXT_BYTES_MAX} bytes")
        table = self._tables.get(namespace, {})
        if key not in table and self._count >= self._entries_max:
            raise KvConfigFullError(f"the KV config already holds {self._entries_max} entries")
        if key not in table:
            self._count += 1
        table[key] = value
        self._tables[namespace] = table

    def get(self, namespace: str, key: str) -> str | None:
        """The value of ``key`` in ``namespace``, or ``None`` (``getKVConfig``)."""
        return self._tables.get(namespace, {}).get(key)

    def delete(self, namespace: str, key: str) -> None:
        """Remove ``key`` from ``namespace`` if present (``deleteKVConfig``)."""
        table = self._tables.get(namespace)
        if table is not None and table.pop(key, None) is not None:
            self._count -= 1
            if not table:
                del self._tables[namespace]

    def namespace(self, namespace: str) -> dict[str, str]:
        """A copy of every entry of ``namespace`` (empty if none; ``getKVListByNamespace``)."""
        return dict(self._tables.get(namespace, {}))
