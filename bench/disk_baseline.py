"""The disk's own rate for the same bytes: raw ``os.pwrite``/``os.fdatasync``/``os.pread`` loops.

These are the denominators of the store benchmarks (specs/perf.md §2.2 describes the methods;
here they are re-measured next to each store run, on the same file system, as §2.1 asks).

- ``raw_write``: a file preallocated as the store preallocates its CommitLog segments
  (``posix_fallocate`` then ``fsync``, outside the timing) receives ``chunks`` consecutive
  ``os.pwrite`` calls of one chunk; with ``sync_every_chunks`` set, ``os.fdatasync`` follows
  on average every that many chunks (it may be fractional: a sync follows chunk ``k`` when
  ``floor(k / every)`` grows, so ``chunks / every`` syncs in all, plus one for a tail), inside
  the timing. One latency sample covers one chunk's pwrite and the sync after it, if any.
- ``raw_read``: consecutive ``os.pread`` calls of one chunk size over the first bytes of an
  existing file (the page cache is whatever the caller left warm).

Every loop stops after its count or at ``deadline`` (``time.perf_counter`` seconds), whichever
comes first, so a slow disk cannot stretch a benchmark without bound.
"""

from __future__ import annotations

import os
import pathlib
import time

from ariane.benchmark import measure

_PAGE_BYTES = 4096


def preallocate(path: pathlib.Path, size_bytes: int) -> int:
    """Create ``path`` with ``size_bytes`` (rounded up to a page) allocated and synced; an fd."""
    size = -(-size_bytes // _PAGE_BYTES) * _PAGE_BYTES
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.posix_fallocate(fd, 0, size)
    except OSError:
        os.ftruncate(fd, size)
    os.fsync(fd)
    return fd


def raw_write(
    path: pathlib.Path,
    chunk: bytes,
    chunks: int,
    *,
    sync_every_chunks: float | None,
    deadline: float,
) -> measure.Timing:
    """Write ``chunks`` x ``chunk`` sequentially into a fresh preallocated file at ``path``.

    Args:
        path: the file to create (removed afterwards).
        chunk: the bytes of one call.
        chunks: how many calls.
        sync_every_chunks: ``os.fdatasync`` after every this many chunks on average (at
            least 1; a fraction alternates group sizes); ``None``: never.
        deadline: stop early at this ``time.perf_counter()`` value.

    Returns:
        the timing; ``messages`` is the number of chunks written (the caller rescales).
    """
    assert sync_every_chunks is None or sync_every_chunks >= 1, "at most one sync per chunk"
    every = sync_every_chunks
    fd = preallocate(path, len(chunk) * chunks)
    position = done = 0
    size = len(chunk)
    clock = time.perf_counter_ns
    timer = measure.CallTimer(deadline)
    try:
        while done < chunks:
            t0 = clock()
            os.pwrite(fd, chunk, position)
            position += size
            done += 1
            last = done == chunks or timer.expired(t0)
            if every is not None and (last or done // every > (done - 1) // every):
                os.fdatasync(fd)
            timer.record(t0, clock())
            if last:
                break
        timing = timer.timing(done, position)
    finally:
        os.close(fd)
        path.unlink(missing_ok=True)
    return timing


def raw_read(
    path: pathlib.Path, chunk_bytes: int, total_bytes: int, *, deadline: float
) -> measure.Timing:
    """Read the first ``total_bytes`` of ``path`` with ``os.pread`` of ``chunk_bytes`` each.

    Returns:
        the timing; ``messages`` is the number of chunks read (the caller rescales).
    """
    fd = os.open(path, os.O_RDONLY)
    position = 0
    clock = time.perf_counter_ns
    timer = measure.CallTimer(deadline)
    try:
        while position < total_bytes:
            t0 = clock()
            data = os.pread(fd, min(chunk_bytes, total_bytes - position), position)
            t1 = clock()
            assert data, f"{path} is shorter than {total_bytes} bytes"
            position += len(data)
            if timer.record(t0, t1):
                break
        timing = timer.timing(timer.calls, position)
    finally:
        os.close(fd)
    return timing
