"""The storage engine: CommitLog, ConsumeQueue, dispatch, flush, checkpoint and recovery.

Standard library only, no network code. See DESIGN.md §5. The entry point is
``MessageStore.open``; the names below are the public surface. The store owns its key index
(``MessageStore.key_index``, ``index_service``) and its retention (``clean_service``: the
broker only says which messages its consumers still need).
"""

from ariane.store import (
    checkpoint,
    clean_service,
    commit_log,
    consume_queue,
    dispatcher,
    file_layer,
    flush,
    index_codec,
    index_file,
    index_service,
    mapped_file,
    mapped_file_queue,
    message_codec,
    message_store,
    metadata,
    record_reader,
    recovery,
    retention,
    settings,
)
from ariane.store.commit_log import AppendRequest, PutMessageResult, PutMessageStatus
from ariane.store.file_layer import FileLayer, MemoryFileLayer, OsFileLayer
from ariane.store.mapped_file_queue import SegmentInfo, StoreLayoutError
from ariane.store.message_store import (
    GetMessageResult,
    GetMessageStatus,
    MessageStore,
    StoreStats,
)
from ariane.store.record_reader import LookupResult, LookupStatus
from ariane.store.settings import FlushDiskType, StoreSettings

__all__ = [
    "AppendRequest",
    "FileLayer",
    "FlushDiskType",
    "GetMessageResult",
    "GetMessageStatus",
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
    "clean_service",
    "commit_log",
    "consume_queue",
    "dispatcher",
    "file_layer",
    "flush",
    "index_codec",
    "index_file",
    "index_service",
    "mapped_file",
    "mapped_file_queue",
    "message_codec",
    "message_store",
    "metadata",
    "record_reader",
    "recovery",
    "retention",
    "settings",
]
