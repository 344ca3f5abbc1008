"""The storage engine: CommitLog, ConsumeQueue, IndexFile, flush, recovery and retention.

Standard library only; no network code outside ``store.ha``. See DESIGN.md §5.
"""

from ariane.store import index_codec, index_file, retention

__all__ = ["index_codec", "index_file", "retention"]
