"""The storage engine: CommitLog, ConsumeQueue, dispatch, flush, checkpoint and recovery.

Standard library only and no network code (replication, DESIGN.md §7, has not landed).
See DESIGN.md §5. The entry point
is ``MessageStore.open``; the names below are the public surface (the IndexFile plugs in as a
``KeyIndexSink``; a retention policy uses ``SegmentInfo`` and ``delete_expired_commit_log``).
"""

from ariane.store import (
    checkpoint,
    commit_log,
    consume_queue,
    dispatcher,
    file_layer,
    flush,
    index_codec,
    index_file,
    mapped_file,
    mapped_file_queue,
    message_codec,
    message_store,
    metadata,
    recovery,
    retention,
    settings,
)
from ariane.store.commit_log import (
    AppendRequest,
    LookupResult,
    LookupStatus,
    PutMessageResult,
    PutMessageStatus,
)
from ariane.store.dispatcher import FlushableKeyIndexSink, KeyIndexSink
from ariane.store.file_layer import FileLayer, MemoryFileLayer, OsFileLayer
from ariane.store.mapped_file_queue import SegmentInfo, StoreLayoutError
from ariane.store.message_store import (
    GetMessageResult,
    GetMessageStatus,
    MessageStore,
    StoreStats,
)
from ariane.store.settings import FlushDiskType, StoreSettings

__all__ = [
    "AppendRequest",
    "FileLayer",
    "FlushDiskType",
    "FlushableKeyIndexSink",
    "GetMessageResult",
    "GetMessageStatus",
    "KeyIndexSink",
    "LookupResult",
    "LookupStatus",
    "MemoryFileLayer",
    "MessageStore",
    "OsFileLayer",
    "PutMessageResult",
    "PutMessageStatus",
    "SegmentInfo",
    "StoreLayoutError",
    "StoreSettings",
    "StoreStats",
    "checkpoint",
    "commit_log",
    "consume_queue",
    "dispatcher",
    "file_layer",
    "flush",
    "index_codec",
    "index_file",
    "mapped_file",
    "mapped_file_queue",
    "message_codec",
    "message_store",
    "metadata",
    "recovery",
    "retention",
    "settings",
]
