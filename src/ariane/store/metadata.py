"""Small metadata files (topics, subscription groups, consumer offsets) written atomically.

Invariant: a reader sees either the old or the new content of a file, never a torn mix, even if
the process or the machine dies mid-write. The recipe is RocketMQ's ``MixAll.string2File`` made
crash-safe, and it lives in the file layer (``FileLayer.replace_file``: a temporary file in the
same directory, fsync, rename over the target, fsync of the directory), so the in-memory crash
model reaches these files as it reaches the CommitLog.
"""

from __future__ import annotations

import pathlib

from ariane.store import file_layer

METADATA_FILE_BYTES_MAX = 64 * 1024 * 1024
"""Largest metadata file read back, in bytes; a bigger file is refused as corrupt."""

_OS_LAYER = file_layer.OsFileLayer()


def write_atomically(
    path: pathlib.Path, data: bytes, *, layer: file_layer.FileLayer = _OS_LAYER
) -> None:
    """Replace ``path`` with ``data`` so that a crash leaves the old or the new content.

    Args:
        path: the target file; its directory is created if missing.
        data: the full new content, at most ``METADATA_FILE_BYTES_MAX`` bytes.
        layer: the file layer (default: the real file system).

    Raises:
        ValueError: if ``data`` is larger than ``METADATA_FILE_BYTES_MAX``.
        OSError: if the file system refuses the write, sync or rename.
    """
    if len(data) > METADATA_FILE_BYTES_MAX:
        raise ValueError(f"metadata of {len(data)} bytes exceeds {METADATA_FILE_BYTES_MAX}")
    layer.make_dirs(path.parent)
    layer.replace_file(path, data)


def read_optional(path: pathlib.Path, *, layer: file_layer.FileLayer = _OS_LAYER) -> bytes | None:
    """The content of ``path``, or ``None`` if it does not exist.

    Raises:
        ValueError: if the file is larger than ``METADATA_FILE_BYTES_MAX``.
        OSError: for read errors other than a missing file.
    """
    try:
        size = layer.file_size(path)
    except FileNotFoundError:
        return None
    if size > METADATA_FILE_BYTES_MAX:
        raise ValueError(
            f"{path} is {size} bytes; metadata files are at most {METADATA_FILE_BYTES_MAX}"
        )
    return layer.read_file(path)


fsync_directory = file_layer.fsync_directory
"""Make the entries of a directory durable (``file_layer.fsync_directory``)."""
