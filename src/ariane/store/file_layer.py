"""The file seam of the store: every byte the store reads or writes goes through a ``FileLayer``.

``OsFileLayer`` is the real one: ``pwrite``/``pread`` on file descriptors and ``fdatasync``
(which releases the GIL, so a flusher thread syncs while appenders keep going). New segment
files are preallocated with ``posix_fallocate`` under a temporary name and renamed into place,
so a segment file either does not exist or has its full size.

Files written through a memory mapping (the IndexFile) are mapped with ``map_file``; a
``MappedBuffer`` is written with ``struct.pack_into`` and made durable with ``flush`` (``msync``).
Small whole files (metadata, checkpoints of the broker's tables) are replaced atomically with
``replace_file``: a temporary file, fsync, rename, fsync of the directory.

``MemoryFileLayer`` keeps files in memory and models a machine crash: each file has the bytes
the process sees and the bytes that are durable (copied on ``sync`` or a mapping's ``flush``).
``crash()`` throws the unsynced bytes away, optionally keeping a prefix of them (a torn write);
a mapped file loses everything written since its last ``flush``. Hooks let tests make ``sync``
block or fail. Directory operations (create, remove, rename, replace) count as durable at once.
"""

from __future__ import annotations

import mmap
import os
import pathlib
import threading
from collections.abc import Callable
from typing import Protocol

from ariane.common import clock as clock_mod

MappedBytes = bytearray | mmap.mmap
"""The writable view of a mapped file: ``struct.pack_into``/``unpack_from`` work on both."""


class RandomAccessFile(Protocol):
    """An open fixed-size file."""

    def pwrite(self, data: bytes | bytearray | memoryview, position: int) -> None:
        """Write all of ``data`` at ``position`` (bytes); raises ``OSError`` on failure."""
        ...

    def pread(self, size: int, position: int) -> bytes:
        """Read up to ``size`` bytes at ``position``; shorter only at the end of the file."""
        ...

    def sync(self) -> None:
        """Make every write so far durable (``fdatasync``); raises ``OSError`` on failure."""
        ...

    def close(self) -> None:
        """Release the handle."""
        ...


class MappedBuffer(Protocol):
    """A file mapped into memory (RocketMQ's ``MappedByteBuffer``); its size is fixed."""

    @property
    def data(self) -> MappedBytes:
        """The file's bytes; writes change the file (durable only after ``flush``)."""
        ...

    def flush(self) -> None:
        """Make every write so far durable (``msync``); raises ``OSError`` on failure."""
        ...

    def close(self) -> None:
        """Unmap (without flushing); idempotent."""
        ...


class FileLayer(Protocol):
    """Files and directories as the store uses them; paths are absolute ``pathlib.Path``."""

    def create_file(self, path: pathlib.Path, size_bytes: int) -> RandomAccessFile:
        """Create a zero-filled file of ``size_bytes`` atomically and open it; ``OSError``."""
        ...

    def open_file(self, path: pathlib.Path) -> RandomAccessFile:
        """Open an existing file for reading and writing; ``OSError`` if missing."""
        ...

    def file_size(self, path: pathlib.Path) -> int:
        """Size of a file in bytes; ``OSError`` if missing."""
        ...

    def modified_ms(self, path: pathlib.Path) -> int:
        """Last modification time, ms since epoch; ``OSError`` if missing."""
        ...

    def exists(self, path: pathlib.Path) -> bool:
        """Whether a file or directory exists at ``path``."""
        ...

    def list_dir(self, path: pathlib.Path) -> list[str]:
        """Sorted names of the entries of a directory (empty if it does not exist)."""
        ...

    def make_dirs(self, path: pathlib.Path) -> None:
        """Create a directory and its parents if missing."""
        ...

    def remove(self, path: pathlib.Path) -> None:
        """Delete a file (a missing file is not an error)."""
        ...

    def map_file(self, path: pathlib.Path) -> MappedBuffer:
        """Map an existing file read-write, whole; ``OSError`` if missing."""
        ...

    def replace_file(self, path: pathlib.Path, data: bytes) -> None:
        """Replace a whole file so that a crash leaves the old or the new content; ``OSError``."""
        ...

    def read_file(self, path: pathlib.Path) -> bytes | None:
        """A whole file's content, ``None`` if it does not exist; ``OSError`` on read errors."""
        ...

    def remove_temporaries(self, path: pathlib.Path) -> list[str]:
        """Delete the temporary files interrupted creations left in a directory; their names."""
        ...


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


def _temporary_name(path: pathlib.Path) -> pathlib.Path:
    return path.with_name(f".{path.name}.tmp")


class _OsMapping:
    def __init__(self, mapping: mmap.mmap) -> None:
        self._map = mapping

    @property
    def data(self) -> MappedBytes:
        return self._map

    def flush(self) -> None:
        self._map.flush()

    def close(self) -> None:
        if not self._map.closed:
            self._map.close()


class _OsFile:
    def __init__(self, fd: int) -> None:
        self._fd = fd

    def pwrite(self, data: bytes | bytearray | memoryview, position: int) -> None:
        view = memoryview(data)
        while view:
            written = os.pwrite(self._fd, view, position)
            view = view[written:]
            position += written

    def pread(self, size: int, position: int) -> bytes:
        return os.pread(self._fd, size, position)

    def sync(self) -> None:
        os.fdatasync(self._fd)

    def close(self) -> None:
        os.close(self._fd)


class OsFileLayer:
    """The real file system."""

    def create_file(self, path: pathlib.Path, size_bytes: int) -> RandomAccessFile:
        """Preallocate under a temporary name, fsync, rename into place, fsync the directory.

        On failure (``ENOSPC`` from ``posix_fallocate`` on a full volume) the temporary file is
        removed, so a failed attempt leaves no partly allocated blocks behind.
        """
        tmp = _temporary_name(path)
        fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            try:
                os.posix_fallocate(fd, 0, size_bytes)
            except OSError as exc:
                if exc.errno not in (95, 22):  # EOPNOTSUPP, EINVAL: file system cannot
                    raise
                os.ftruncate(fd, size_bytes)
            os.fsync(fd)
            os.replace(tmp, path)
            fsync_directory(path.parent)
        except BaseException:
            os.close(fd)
            tmp.unlink(missing_ok=True)  # a failed preallocation must not keep its blocks
            raise
        return _OsFile(fd)

    def open_file(self, path: pathlib.Path) -> RandomAccessFile:
        """Open read-write."""
        return _OsFile(os.open(path, os.O_RDWR))

    def file_size(self, path: pathlib.Path) -> int:
        """``st_size``."""
        return path.stat().st_size

    def modified_ms(self, path: pathlib.Path) -> int:
        """``st_mtime_ns`` in ms."""
        return path.stat().st_mtime_ns // 1_000_000

    def exists(self, path: pathlib.Path) -> bool:
        """``os.path.exists``."""
        return path.exists()

    def list_dir(self, path: pathlib.Path) -> list[str]:
        """Sorted entries, hiding temporary files of interrupted creations."""
        try:
            return sorted(n for n in os.listdir(path) if not n.startswith("."))
        except FileNotFoundError:
            return []

    def make_dirs(self, path: pathlib.Path) -> None:
        """``mkdir -p``."""
        path.mkdir(parents=True, exist_ok=True)

    def remove(self, path: pathlib.Path) -> None:
        """Unlink, ignoring a missing file."""
        path.unlink(missing_ok=True)

    def map_file(self, path: pathlib.Path) -> MappedBuffer:
        """``mmap`` the whole file (``MAP_SHARED``)."""
        fd = os.open(path, os.O_RDWR)
        try:
            return _OsMapping(mmap.mmap(fd, os.fstat(fd).st_size, access=mmap.ACCESS_WRITE))
        finally:
            os.close(fd)

    def replace_file(self, path: pathlib.Path, data: bytes) -> None:
        """Write a temporary file, fsync it, rename it over ``path``, fsync the directory
        (RocketMQ ``MixAll.string2File`` made crash-safe); creates the directory if missing."""
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = _temporary_name(path)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            _OsFile(fd).pwrite(data, 0)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
        fsync_directory(path.parent)

    def read_file(self, path: pathlib.Path) -> bytes | None:
        """``read_bytes``, ``None`` for a missing file."""
        try:
            return path.read_bytes()
        except FileNotFoundError:
            return None

    def remove_temporaries(self, path: pathlib.Path) -> list[str]:
        """Unlink ``.*.tmp`` entries (a crash during ``create_file`` or ``replace_file``)."""
        try:
            names = sorted(n for n in os.listdir(path) if n.startswith(".") and n.endswith(".tmp"))
        except FileNotFoundError:
            return []
        for name in names:
            (path / name).unlink(missing_ok=True)
        return names


class _MemoryFile:
    def __init__(self, layer: MemoryFileLayer, path: pathlib.Path, size_bytes: int) -> None:
        self.layer = layer
        self.path = path
        self.data = bytearray(size_bytes)
        self.durable = bytearray(size_bytes)
        self.dirty_low = size_bytes
        self.dirty_high = 0
        self.modified_ms = int(layer.clock.now_ms())


class _MemoryHandle:
    def __init__(self, file: _MemoryFile) -> None:
        self._file = file

    def pwrite(self, data: bytes | bytearray | memoryview, position: int) -> None:
        f = self._file
        f.layer.before_write(f.path, position, len(data))
        end = position + len(data)
        if end > len(f.data):
            raise OSError(28, "write past the end of a fixed-size file", str(f.path))
        with f.layer.lock:
            f.data[position:end] = data
            f.dirty_low = min(f.dirty_low, position)
            f.dirty_high = max(f.dirty_high, end)
            f.modified_ms = int(f.layer.clock.now_ms())

    def pread(self, size: int, position: int) -> bytes:
        with self._file.layer.lock:
            return bytes(self._file.data[position : position + size])

    def sync(self) -> None:
        f = self._file
        f.layer.before_sync(f.path)
        with f.layer.lock:
            if f.dirty_low < f.dirty_high:
                f.durable[f.dirty_low : f.dirty_high] = f.data[f.dirty_low : f.dirty_high]
            f.dirty_low, f.dirty_high = len(f.data), 0
            f.layer.sync_count += 1

    def close(self) -> None:
        pass


class _MemoryMapping:
    def __init__(self, file: _MemoryFile) -> None:
        self._file = file

    @property
    def data(self) -> MappedBytes:
        return self._file.data  # the same bytearray: a crash resets it in place

    def flush(self) -> None:
        f = self._file
        f.layer.before_sync(f.path)
        with f.layer.lock:
            f.durable[:] = f.data
            f.layer.sync_count += 1

    def close(self) -> None:
        pass


TearFunction = Callable[[pathlib.Path, int, int], int]
"""``(path, dirty_low, dirty_high) -> bytes of the unsynced range [low, high) that survive``."""


class MemoryFileLayer:
    """In-memory files with a crash model; see the module docstring.

    Attributes:
        sync_count: how many ``sync`` calls completed (group-commit tests count fsyncs).
        sync_hook: called with the path before each sync; may block or raise ``OSError``.
        write_hook: called with (path, position, size) before each write; may raise ``OSError``.
        create_hook: called with the path before a file is created; may raise ``OSError``.
    """

    def __init__(self, *, clock: clock_mod.Clock | None = None) -> None:
        self.clock: clock_mod.Clock = clock or clock_mod.SystemClock()
        self.lock = threading.Lock()
        self.files: dict[pathlib.Path, _MemoryFile] = {}
        self.dirs: set[pathlib.Path] = set()
        self.sync_count = 0
        self.sync_hook: Callable[[pathlib.Path], None] | None = None
        self.write_hook: Callable[[pathlib.Path, int, int], None] | None = None
        self.create_hook: Callable[[pathlib.Path], None] | None = None

    def before_sync(self, path: pathlib.Path) -> None:
        """Run ``sync_hook``."""
        if self.sync_hook is not None:
            self.sync_hook(path)

    def before_write(self, path: pathlib.Path, position: int, size: int) -> None:
        """Run ``write_hook``."""
        if self.write_hook is not None:
            self.write_hook(path, position, size)

    def create_file(self, path: pathlib.Path, size_bytes: int) -> RandomAccessFile:
        """A new zero-filled file (durable at once, like the real layer's rename)."""
        if self.create_hook is not None:
            self.create_hook(path)
        with self.lock:
            file = _MemoryFile(self, path, size_bytes)
            self.files[path] = file
            self._add_dirs(path.parent)
        return _MemoryHandle(file)

    def open_file(self, path: pathlib.Path) -> RandomAccessFile:
        """Open an existing in-memory file."""
        with self.lock:
            if path not in self.files:
                raise FileNotFoundError(2, "no such file", str(path))
            return _MemoryHandle(self.files[path])

    def file_size(self, path: pathlib.Path) -> int:
        """Length of the file's data."""
        with self.lock:
            if path not in self.files:
                raise FileNotFoundError(2, "no such file", str(path))
            return len(self.files[path].data)

    def modified_ms(self, path: pathlib.Path) -> int:
        """Clock time of the last write."""
        with self.lock:
            if path not in self.files:
                raise FileNotFoundError(2, "no such file", str(path))
            return self.files[path].modified_ms

    def exists(self, path: pathlib.Path) -> bool:
        """A file or a directory."""
        with self.lock:
            return path in self.files or path in self.dirs

    def list_dir(self, path: pathlib.Path) -> list[str]:
        """Names of files and directories directly under ``path``."""
        with self.lock:
            names = {p.name for p in self.files if p.parent == path}
            names |= {d.name for d in self.dirs if d.parent == path}
        return sorted(names)

    def make_dirs(self, path: pathlib.Path) -> None:
        """Record the directory and its parents."""
        with self.lock:
            self._add_dirs(path)

    def _add_dirs(self, path: pathlib.Path) -> None:
        while path not in self.dirs and path != path.parent:
            self.dirs.add(path)
            path = path.parent

    def remove(self, path: pathlib.Path) -> None:
        """Forget a file."""
        with self.lock:
            self.files.pop(path, None)

    def map_file(self, path: pathlib.Path) -> MappedBuffer:
        """The file's bytes themselves; ``flush`` copies them to the durable bytes whole."""
        with self.lock:
            if path not in self.files:
                raise FileNotFoundError(2, "no such file", str(path))
            return _MemoryMapping(self.files[path])

    def replace_file(self, path: pathlib.Path, data: bytes) -> None:
        """Durable at once, as the real layer's rename."""
        self.write_small_file(path, data)

    def read_file(self, path: pathlib.Path) -> bytes | None:
        """The bytes the process sees, ``None`` for a missing file."""
        with self.lock:
            file = self.files.get(path)
            return None if file is None else bytes(file.data)

    def remove_temporaries(self, path: pathlib.Path) -> list[str]:
        """Nothing: creations here are atomic."""
        return []

    def write_small_file(self, path: pathlib.Path, data: bytes) -> None:
        """Replace a file's content durably (used by tests to plant files)."""
        with self.lock:
            file = _MemoryFile(self, path, len(data))
            file.data[:] = data
            file.durable[:] = data
            self.files[path] = file
            self._add_dirs(path.parent)

    def crash(self, tear: TearFunction | None = None) -> None:
        """Lose every unsynced byte, as a power loss would.

        Args:
            tear: for each file with unsynced bytes in [low, high), how many bytes from ``low``
                survive anyway (a torn write); ``None`` keeps none.
        """
        with self.lock:
            for path, file in self.files.items():
                low, high = file.dirty_low, file.dirty_high
                kept = 0
                if tear is not None and low < high:
                    kept = max(0, min(high - low, tear(path, low, high)))
                survivor = bytes(file.data[low : low + kept])
                file.data[:] = file.durable
                file.data[low : low + kept] = file.durable[low : low + kept] = survivor
                file.dirty_low, file.dirty_high = len(file.data), 0

    def overwrite(self, path: pathlib.Path, position: int, data: bytes) -> None:
        """Change bytes of a file durably behind the store's back (tests corrupt data)."""
        with self.lock:
            file = self.files[path]
            file.data[position : position + len(data)] = data
            file.durable[position : position + len(data)] = data

    def read_durable(self, path: pathlib.Path, position: int, size: int) -> bytes:
        """Durable bytes of a file (tests inspect what a crash would keep)."""
        with self.lock:
            return bytes(self.files[path].durable[position : position + size])
