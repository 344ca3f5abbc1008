"""Small metadata files (topics, subscription groups, consumer offsets) written atomically.

Invariant: a reader sees either the old or the new content of a file, never a torn mix, even if
the process or the machine dies mid-write. The recipe is RocketMQ's ``MixAll.string2File`` made
crash-safe: write a temporary file in the same directory, fsync it, rename it over the target,
then fsync the directory so the rename itself is durable.
"""

from __future__ import annotations

import os
import pathlib

METADATA_FILE_BYTES_MAX = 64 * 1024 * 1024
"""Largest metadata file read back, in bytes; a bigger file is refused as corrupt."""


def write_atomically(path: pathlib.Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` so that a crash leaves the old or the new content.

    Args:
        path: the target file; its directory is created if missing.
        data: the full new content, at most ``METADATA_FILE_BYTES_MAX`` bytes.

    Raises:
        ValueError: if ``data`` is larger than ``METADATA_FILE_BYTES_MAX``.
        OSError: if the file system refuses the write, sync or rename.
    """
    if len(data) > METADATA_FILE_BYTES_MAX:
        raise ValueError(f"metadata of {len(data)} bytes exceeds {METADATA_FILE_BYTES_MAX}")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            written = os.write(fd, view)
            view = view[written:]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    fsync_directory(path.parent)


def read_optional(path: pathlib.Path) -> bytes | None:
    """The content of ``path``, or ``None`` if it does not exist.

    Raises:
        ValueError: if the file is larger than ``METADATA_FILE_BYTES_MAX``.
        OSError: for read errors other than a missing file.
    """
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        return None
    if size > METADATA_FILE_BYTES_MAX:
        raise ValueError(
            f"{path} is {size} bytes; metadata files are at most {METADATA_FILE_BYTES_MAX}"
        )
    return path.read_bytes()


def fsync_directory(directory: pathlib.Path) -> None:
    """Make the entries of ``directory`` (creations, renames, deletions) durable.

    Raises:
        OSError: if the directory cannot be opened or synced.
    """
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
