"""Power loss for a broker's store: a FUSE layer that forgets what was never synced.

Technique: a pass-through FUSE file system (``mfusepy`` over the system's libfuse 3) mounted on
a temporary directory over a backing directory. Every write, truncate and fallocate goes through
to the backing file at once, and the layer keeps, per file, an undo log of what it overwrote
since that file's last ``fsync``/``fdatasync`` (``msync`` of a shared mapping reaches the layer as
the kernel's write-back of the dirty pages followed by an fsync, so the IndexFile's mapped
writes are covered too). ``crash`` (the broker SIGKILLed first) stops taking writes (the kernel
still writes back dirty mapped pages on the unmount: they are dropped), undoes every unsynced
write of every file, newest first, and cuts each file back to its size at its last sync;
optionally a random prefix of each file's unsynced writes is kept (a torn write: the kernel
splits a large ``pwrite`` into ``max_write`` chunks, so this tears inside one store write too).
The mount is then unmounted (which also drops the kernel's page cache for it) and mounted again
for the restart.

What is durable at once: directory operations (create, rename, unlink, mkdir): the store makes
a new file durable by fsyncing it before renaming it into place, and this layer models no
directory-entry loss. The backing files themselves are never fsynced (the host's durability is
not the subject).

The layer runs in its own process (``python -m e2e.chaos.powerloss BACKING MOUNTPOINT``), driven
by lines on its stdin (``crash SEED KEEP_TORN``, answered ``crashed N`` with N the writes undone);
``PowerLossMount`` starts, crashes, remounts and finally unmounts it and removes the mount point.
Only the process it started is ever signalled.

Invariants: after a crash every file's content is exactly its content at its last sync (or with
``torn``, at its last sync plus a prefix of the writes after it); no write reaches a backing file
after the crash began.
"""

from __future__ import annotations

import ctypes.util
import dataclasses
import errno
import os
import pathlib
import random
import shutil
import subprocess
import sys
import threading
import time
from typing import Any

MOUNT_TIMEOUT_S = 15.0
"""Longest wait for the layer to mount or unmount, s."""
UNDO_BYTES_MAX = 512 * 1024 * 1024
"""Unsynced bytes the layer remembers across all files; past this writes fail with EIO."""


FUSE_PACKAGE = "fuse3"
"""The Debian package with ``fusermount3`` and libfuse 3 (``ensure_fuse`` installs it)."""

APT_TIMEOUT_S = 300
"""Longest ``apt-get install`` of ``FUSE_PACKAGE``, s."""


def _fuse_missing() -> list[str]:
    missing = [] if shutil.which("fusermount3") else ["fusermount3"]
    return missing + ([] if ctypes.util.find_library("fuse3") else ["libfuse3"])


def ensure_fuse() -> None:
    """Make the FUSE layer usable: install ``fuse3`` from Debian when ``fusermount3`` or
    libfuse 3 is missing (as root, like ``e2e/testenv/build-node.sh`` installs its packages).

    Raises:
        RuntimeError: ``/dev/fuse`` is absent (the kernel's fuse module is not loaded:
            ``modprobe fuse``), or the package could not be installed (apt-get's output named).
    """
    if not os.path.exists("/dev/fuse"):
        raise RuntimeError("/dev/fuse is missing: load the kernel's fuse module (modprobe fuse)")
    if not _fuse_missing():
        return
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        raise RuntimeError(f"{_fuse_missing()} missing: install Debian's {FUSE_PACKAGE} package")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    command = ["apt-get", "-o", "DPkg::Lock::Timeout=120", "install", "-y", "-q",
               "--no-install-recommends", FUSE_PACKAGE]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, env=env,
                          timeout=APT_TIMEOUT_S, check=False)  # fmt: skip
    if done.returncode != 0:
        subprocess.run(["apt-get", "update", "-q"], capture_output=True, env=env,
                       timeout=APT_TIMEOUT_S, check=False)  # fmt: skip
        done = subprocess.run(command, capture_output=True, text=True, env=env,
                              timeout=APT_TIMEOUT_S, check=False)  # fmt: skip
    if done.returncode != 0 or _fuse_missing():
        raise RuntimeError(f"apt-get install {FUSE_PACKAGE} failed: {done.stderr[-2000:]}")


@dataclasses.dataclass(slots=True)
class _Undo:
    """One unsynced change of a file: the bytes it overwrote and the size before it."""

    offset: int
    old: bytes
    size_before: int


@dataclasses.dataclass(slots=True)
class _FileLog:
    """A file's size at its last sync and its unsynced changes, oldest first."""

    synced_size: int
    changes: list[_Undo] = dataclasses.field(default_factory=list)


class UndoLog:
    """Per-file undo logs of the unsynced changes of files under ``root`` (thread-safe).

    Paths are relative to the mount (``/commitlog/000...``); the caller holds no lock.
    """

    def __init__(self, root: pathlib.Path) -> None:
        self._root = root
        self._files: dict[str, _FileLog] = {}
        self._lock = threading.Lock()
        self._bytes = 0
        self.crashed = False

    def _backing(self, path: str) -> str:
        return str(self._root / path.lstrip("/"))

    def _log(self, path: str) -> _FileLog:
        log = self._files.get(path)
        if log is None:
            log = _FileLog(os.stat(self._backing(path)).st_size)
            self._files[path] = log
        return log

    def before_change(self, path: str, offset: int, length: int) -> None:
        """Record what ``[offset, offset + length)`` of ``path`` holds before it changes."""
        log = self._log(path)
        size = os.stat(self._backing(path)).st_size
        old = b""
        if offset < size and length > 0:
            with open(self._backing(path), "rb") as handle:
                handle.seek(offset)
                old = handle.read(min(length, size - offset))
        if self._bytes + len(old) > UNDO_BYTES_MAX:
            raise OSError(errno.EIO, "power-loss layer: too many unsynced bytes")
        self._bytes += len(old)
        log.changes.append(_Undo(offset, old, size))

    def synced(self, path: str) -> None:
        """``path`` was fsynced: everything written to it so far is durable."""
        log = self._files.pop(path, None)
        if log is not None:
            self._bytes -= sum(len(c.old) for c in log.changes)

    def renamed(self, old: str, new: str) -> None:
        """Move the log of ``old`` (and of any file under it) to ``new``."""
        for path in [p for p in self._files if p == old or p.startswith(old + "/")]:
            self._files[new + path[len(old) :]] = self._files.pop(path)

    def removed(self, path: str) -> None:
        """``path`` was unlinked: nothing to undo in it."""
        self.synced(path)

    def crash(self, rng: random.Random | None) -> int:
        """Stop taking writes and undo every unsynced change; with ``rng`` keep a random prefix
        of each file's changes. Returns how many changes were undone."""
        self.crashed = True
        undone = 0
        for path, log in self._files.items():
            keep = rng.randint(0, len(log.changes)) if rng is not None else 0
            dropped = log.changes[keep:]
            if not dropped:
                continue
            try:
                fd = os.open(self._backing(path), os.O_WRONLY)
            except FileNotFoundError:
                continue
            try:
                for change in reversed(dropped):
                    os.pwrite(fd, change.old, change.offset)
                os.ftruncate(fd, dropped[0].size_before if keep else log.synced_size)
            finally:
                os.close(fd)
            undone += len(dropped)
        self._files.clear()
        self._bytes = 0
        return undone

    @property
    def lock(self) -> threading.Lock:
        """Held around every change and the crash (one writer at a time)."""
        return self._lock


def _operations(root: pathlib.Path, undo: UndoLog) -> Any:
    """The mfusepy ``Operations`` of the pass-through layer over ``root``."""
    import mfusepy  # type: ignore[import-untyped]

    def real(path: str) -> str:
        return str(root / path.lstrip("/"))

    class Layer(mfusepy.Operations):  # type: ignore[misc]
        use_ns = True

        def getattr(self, path: str, fh: int | None = None) -> dict[str, int]:
            st = os.fstat(fh) if fh is not None else os.lstat(real(path))
            keys = ("st_mode", "st_nlink", "st_uid", "st_gid", "st_size", "st_ino")
            out = {key: getattr(st, key) for key in keys}
            for key in ("st_atime_ns", "st_mtime_ns", "st_ctime_ns"):
                out[key[:-3]] = getattr(st, key)
            return out

        def access(self, path: str, amode: int) -> int:
            if not os.access(real(path), amode):
                raise mfusepy.FuseOSError(errno.EACCES)
            return 0

        def readdir(self, path: str, fh: int) -> list[str]:
            return [".", "..", *os.listdir(real(path))]

        def mkdir(self, path: str, mode: int) -> None:
            os.mkdir(real(path), mode)

        def rmdir(self, path: str) -> None:
            os.rmdir(real(path))

        def unlink(self, path: str) -> None:
            with undo.lock:
                os.unlink(real(path))
                undo.removed(path)

        def rename(self, old: str, new: str) -> None:
            with undo.lock:
                os.rename(real(old), real(new))
                undo.removed(new)
                undo.renamed(old, new)

        def chmod(self, path: str, mode: int) -> None:
            os.chmod(real(path), mode)

        def utimens(self, path: str, times: tuple[int, int] | None = None) -> None:
            if times is None:
                os.utime(real(path))
            else:
                os.utime(real(path), ns=times)

        def statfs(self, path: str) -> dict[str, int]:
            st = os.statvfs(real(path))
            keys = ("f_bavail", "f_bfree", "f_blocks", "f_bsize", "f_favail", "f_ffree")
            return {key: getattr(st, key) for key in (*keys, "f_files", "f_frsize", "f_namemax")}

        def open(self, path: str, flags: int) -> int:
            return os.open(real(path), flags & ~os.O_APPEND)

        def create(self, path: str, mode: int, fi: Any = None) -> int:
            with undo.lock:
                return os.open(real(path), os.O_RDWR | os.O_CREAT | os.O_TRUNC, mode)

        def read(self, path: str, size: int, offset: int, fh: int) -> bytes:
            return os.pread(fh, size, offset)

        def write(self, path: str, data: bytes, offset: int, fh: int) -> int:
            with undo.lock:
                if undo.crashed:
                    return len(data)  # the power is off: the write never lands
                undo.before_change(path, offset, len(data))
                return os.pwrite(fh, data, offset)

        def truncate(self, path: str, length: int, fh: int | None = None) -> None:
            with undo.lock:
                if undo.crashed:
                    return
                size = os.stat(real(path)).st_size
                undo.before_change(path, length, max(0, size - length))
                os.truncate(real(path), length)

        def fallocate(self, path: str, mode: int, offset: int, length: int, fh: int) -> int:
            if mode != 0:
                raise mfusepy.FuseOSError(errno.EOPNOTSUPP)
            with undo.lock:
                undo.before_change(path, offset, 0)
                os.posix_fallocate(fh, offset, length)
            return 0

        def fsync(self, path: str, datasync: int, fh: int) -> int:
            with undo.lock:
                if not undo.crashed:
                    undo.synced(path)
            return 0

        def flush(self, path: str, fh: int) -> int:
            return 0

        def release(self, path: str, fh: int) -> int:
            os.close(fh)
            return 0

    return Layer()


def _serve(backing: pathlib.Path, mountpoint: pathlib.Path) -> None:
    """Mount the layer (foreground) and answer ``crash`` lines on stdin from a thread."""
    import mfusepy

    undo = UndoLog(backing)

    def control() -> None:
        for line in sys.stdin:
            words = line.split()
            if words[:1] == ["crash"]:
                seed, torn = int(words[1]), words[2] == "1"
                with undo.lock:
                    undone = undo.crash(random.Random(seed) if torn else None)
                print(f"crashed {undone}", flush=True)

    threading.Thread(target=control, daemon=True).start()
    mfusepy.FUSE(_operations(backing, undo), str(mountpoint), foreground=True, nothreads=False)


class PowerLossMount:
    """A mounted power-loss layer: the broker's store directory is ``mountpoint / "store"``.

    Args:
        work: a directory for the backing files and the mount point (both made here).
        log: the layer's stderr.

    ``close`` (always call it, in a ``finally``) unmounts, ends the layer process and removes
    the mount point; the backing directory stays for post-mortems.
    """

    def __init__(self, work: pathlib.Path, log: pathlib.Path) -> None:
        self.backing = work / "backing"
        self.mountpoint = work / "mnt"
        self._log = log
        self._process: subprocess.Popen[str] | None = None
        self.backing.mkdir(parents=True, exist_ok=True)
        self.mountpoint.mkdir(parents=True, exist_ok=True)

    @property
    def store(self) -> pathlib.Path:
        """The store directory to give the broker (inside the mount)."""
        return self.mountpoint / "store"

    def mount(self) -> None:
        """Start the layer process and wait until the mount point is a mount."""
        with self._log.open("a") as err:
            self._process = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "e2e.chaos.powerloss",
                    str(self.backing),
                    str(self.mountpoint),
                ],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=err,
                text=True,
            )
        self._wait(lambda: os.path.ismount(self.mountpoint), "mount")
        self.store.mkdir(exist_ok=True)

    def crash(self, *, seed: int = 0, torn: bool = False) -> int:
        """Power loss (the broker must already be SIGKILLed): drop every unsynced write (with
        ``torn``, keep a random prefix of each file's), unmount. Returns the writes dropped."""
        assert self._process is not None and self._process.stdin and self._process.stdout
        self._process.stdin.write(f"crash {seed} {int(torn)}\n")
        self._process.stdin.flush()
        answer = self._process.stdout.readline().split()
        if answer[:1] != ["crashed"]:
            raise RuntimeError(f"power-loss layer answered {answer!r}")
        self._unmount()
        return int(answer[1])

    def _unmount(self) -> None:
        process = self._process
        if process is None:
            return
        if os.path.ismount(self.mountpoint):
            done = subprocess.run(["fusermount3", "-u", str(self.mountpoint)], check=False)
            if done.returncode != 0:
                subprocess.run(["fusermount3", "-uz", str(self.mountpoint)], check=False)
        try:
            process.wait(timeout=MOUNT_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        for pipe in (process.stdin, process.stdout):
            if pipe is not None:
                pipe.close()
        self._process = None

    def close(self) -> None:
        """Unmount, end the layer process and remove the (empty) mount point."""
        try:
            self._unmount()
        finally:
            if not os.path.ismount(self.mountpoint):
                shutil.rmtree(self.mountpoint, ignore_errors=True)

    def _wait(self, check: Any, what: str) -> None:
        deadline = time.monotonic() + MOUNT_TIMEOUT_S
        while not check():
            if self._process is not None and self._process.poll() is not None:
                raise RuntimeError(f"power-loss layer exited before {what}: see {self._log}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"power-loss layer: no {what} in {MOUNT_TIMEOUT_S} s")
            time.sleep(0.02)


if __name__ == "__main__":
    _serve(pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2]))
