"""The storage engine: CommitLog, ConsumeQueue, IndexFile, flush, recovery and retention.

Standard library only; no network code outside ``store.ha``. See DESIGN.md §5.
"""
