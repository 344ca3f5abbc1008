"""Child processes of the tests (tests/ and e2e/): start with a log file, poll, stop by PID.

The one process layer of the test suites (issue 22): ``spawn_ariane`` starts ``python -m ariane
...`` (a name server, a broker of any role, ``ariane dev``), ``running_namesrv`` a name server for
a ``with`` block, ``track`` records any other child (an official-client driver) with its log,
``kill_tree`` SIGKILLs a broker and waits for its front-end workers, ``wait_until`` polls with a
deadline and names what it waited for, ``loaded_timeout_s`` stretches a hang guard on a loaded
machine; ``ManagedProcess`` runs the control plane's components.
Every process started through ``spawn_ariane``/``track`` is remembered (the last
``TRACKED_MAX``) with its log, so tests/conftest.py attaches the log tails of the processes a
failing test started (or that still run) to its report (``log_tails``).

Invariants: every process is started by this module and remembered by its ``Popen`` object;
stopping sends SIGTERM, waits a bounded time, then SIGKILL, only to that PID (never by name).
Every wait is a poll against a deadline. A deadline that only tells a hung process from a slow
one (a start, a catch-up) is ``loaded_timeout_s`` of its unloaded value; a bound the product
promises (a lease, a failover or delivery time) is never stretched.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import itertools
import logging
import os
import pathlib
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence

from ariane import dev

logger = logging.getLogger(__name__)

POLL_INTERVAL_S = 0.1
STOP_GRACE_S = 10.0
LOG_TAIL_LINES = 40
TRACKED_MAX = 256
"""Processes remembered for log tails (the oldest are forgotten first)."""
READY_TIMEOUT_S = 30.0
"""Longest wait for a started name server to listen, s."""
KILL_TIMEOUT_S = 60.0
"""Longest wait for a SIGKILLed process and its children to be gone, s."""
LOAD_FACTOR_MAX = 10.0
"""Most a hang guard is stretched (``loaded_timeout_s``): 30 s become at most 300 s, inside
pytest's 600 s per test."""


class StartupError(RuntimeError):
    """A component did not become ready in time; the message carries its log tail."""


free_port = dev.free_port
"""A TCP port on 127.0.0.1 that was free a moment ago, below the ephemeral range (``dev``)."""


def load_factor() -> float:
    """How many runnable tasks share each CPU: the 1-minute load average per CPU, clamped to
    [1, ``LOAD_FACTOR_MAX``] (1 where the platform reports none).

    On the shared 2-core test machine (8 engineers and CI at once) it reaches 10: a ``python -m
    ariane broker`` that listens after 3 s alone then needs 30-50 s of wall time for the same
    CPU work (imports and the front-end workers' imports, measured)."""
    try:
        load_1m = os.getloadavg()[0]
    except OSError:
        return 1.0
    return min(max(load_1m / (os.cpu_count() or 1), 1.0), LOAD_FACTOR_MAX)


def loaded_timeout_s(timeout_s: float) -> float:
    """``timeout_s`` (the deadline on an idle machine) times ``load_factor()`` now, in s.

    Only for a hang guard: a wait that ends as soon as its condition holds (a process listens,
    a slave caught up), whose deadline only tells "hung" from "slow". A bound the product
    promises (a lease, a failover time, a timer's lateness) must not be stretched."""
    return timeout_s * load_factor()


def wait_until(check: Callable[[], bool], *, timeout_s: float, what: str) -> None:
    """Polls ``check`` every POLL_INTERVAL_S until it returns True.

    Args:
        check: returns True when the awaited state holds; exceptions count as "not yet",
            except StartupError, which ends the wait at once.
        timeout_s: deadline, in seconds from now.
        what: names the awaited state in the error.

    Raises:
        TimeoutError: the deadline passed; the last exception, if any, is chained.
        StartupError: raised by ``check``.
    """
    deadline = time.monotonic() + timeout_s
    last_error: Exception | None = None
    while True:
        try:
            if check():
                return
        except StartupError:
            raise
        except Exception as error:  # any failure means "not ready yet"
            last_error = error
        if time.monotonic() >= deadline:
            raise TimeoutError(f"timed out after {timeout_s:.0f} s waiting for {what}") from (
                last_error
            )
        time.sleep(POLL_INTERVAL_S)


@dataclasses.dataclass(slots=True)
class ManagedProcess:
    """One child process started by the test environment, with its output in ``log_path``."""

    name: str
    """Component name (``etcd``, ``kube-apiserver``, ...), used in messages."""
    popen: subprocess.Popen[bytes]
    """The child; its PID is the only one this object ever signals."""
    log_path: pathlib.Path
    """File receiving the child's stdout and stderr."""

    @classmethod
    def start(
        cls, name: str, argv: Sequence[str], *, log_dir: pathlib.Path, cwd: pathlib.Path
    ) -> ManagedProcess:
        """Starts ``argv`` with stdout/stderr appended to ``log_dir/<name>.log``."""
        log_path = log_dir / f"{name}.log"
        with log_path.open("ab") as log_file:
            popen = subprocess.Popen(
                list(argv),
                stdin=subprocess.DEVNULL,
                stdout=log_file,
                stderr=subprocess.STDOUT,
                cwd=cwd,
                start_new_session=True,
            )
        logger.info("started %s (pid %d), log %s", name, popen.pid, log_path)
        return cls(name=name, popen=popen, log_path=log_path)

    def running(self) -> bool:
        """Returns True while the child has not exited."""
        return self.popen.poll() is None

    def log_tail(self, lines: int = LOG_TAIL_LINES) -> str:
        """Returns the last ``lines`` lines of the child's log."""
        try:
            with self.log_path.open(errors="replace") as log_file:
                return "".join(collections.deque(log_file, maxlen=lines))
        except FileNotFoundError:
            return ""

    def wait_ready(self, check: Callable[[], bool], *, timeout_s: float, what: str) -> None:
        """Polls ``check`` until True, failing early if the child exits.

        Raises:
            StartupError: the child exited or the deadline passed; carries the log tail.
        """

        def ready() -> bool:
            if not self.running():
                raise StartupError(f"{self.name} exited with {self.popen.returncode}")
            return check()

        try:
            wait_until(ready, timeout_s=timeout_s, what=what)
        except (TimeoutError, StartupError) as error:
            raise StartupError(
                f"{self.name}: {error} (last error: {error.__cause__!r})\n"
                f"--- last lines of {self.log_path} ---\n{self.log_tail()}"
            ) from error

    def stop(self, grace_s: float = STOP_GRACE_S) -> int:
        """Stops the child: SIGTERM, wait up to ``grace_s`` seconds, then SIGKILL.

        Returns:
            The child's exit status (negative signal number when killed by a signal).
        """
        if self.running():
            self.popen.terminate()
            try:
                return self.popen.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                logger.warning("%s (pid %d) ignored SIGTERM; killing", self.name, self.popen.pid)
                self.popen.kill()
        return self.popen.wait()


@dataclasses.dataclass(frozen=True, slots=True)
class Tracked:
    """A child started by a test and where its output goes."""

    seq: int
    """Order of start (0, 1, ...): ``log_tails(since)`` picks those started since a mark."""
    popen: subprocess.Popen[bytes] | subprocess.Popen[str]
    log_path: pathlib.Path


_tracked: collections.deque[Tracked] = collections.deque(maxlen=TRACKED_MAX)
_seq = itertools.count()


def track(popen: subprocess.Popen[bytes] | subprocess.Popen[str], log_path: pathlib.Path) -> None:
    """Remember ``popen`` (writing its output to ``log_path``) for ``log_tails``."""
    _tracked.append(Tracked(next(_seq), popen, log_path))


def started_mark() -> int:
    """A mark for ``log_tails``: processes started from now on are after it."""
    return _tracked[-1].seq + 1 if _tracked else 0


def log_tails(since: int, lines: int = LOG_TAIL_LINES) -> list[tuple[str, str]]:
    """``(title, last lines of the log)`` of each tracked process started at or after ``since``
    or still running, one entry per log file, oldest first."""
    seen: set[pathlib.Path] = set()
    out: list[tuple[str, str]] = []
    for entry in list(_tracked):
        if entry.log_path in seen or (entry.seq < since and entry.popen.poll() is not None):
            continue
        seen.add(entry.log_path)
        try:
            with entry.log_path.open(errors="replace") as log_file:
                tail = "".join(collections.deque(log_file, maxlen=lines))
        except OSError:
            continue
        state = "running" if entry.popen.poll() is None else f"exit {entry.popen.returncode}"
        out.append((f"pid {entry.popen.pid} ({state}) {entry.log_path}", tail))
    return out


def spawn_ariane(
    args: Sequence[str], log: pathlib.Path, *, env: Mapping[str, str] | None = None
) -> subprocess.Popen[bytes]:
    """Start ``python -m ariane ARGS`` with stdout and stderr appended to ``log``; tracked.
    ``env``: variables added to this process's environment (e.g. libfaketime's)."""
    with log.open("ab") as out:
        popen = subprocess.Popen(
            [sys.executable, "-m", "ariane", *args],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=None if env is None else {**os.environ, **env},
        )
    track(popen, log)
    return popen


@contextlib.contextmanager
def running_namesrv(
    log: pathlib.Path,
    extra: Sequence[str] = (),
    *,
    check_exit: bool = False,
    timeout_s: float = READY_TIMEOUT_S,
) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """An ``ariane namesrv`` on a free port (with ``extra`` arguments) for the ``with`` block,
    its output in ``log``; yields ``HOST:PORT`` and the process (to pause or kill it). Stopped by
    PID on exit (SIGCONT first: a paused one must be able to stop).

    Raises:
        RuntimeError: it exited or did not listen within ``timeout_s`` (``loaded_timeout_s``).
        AssertionError: ``check_exit`` and its exit status on the clean stop was not 0.
    """
    port = dev.free_port()
    proc = spawn_ariane(["namesrv", "--listen", f"127.0.0.1:{port}", *extra], log)
    try:
        ready_s = loaded_timeout_s(timeout_s)
        dev.wait_until_listening("127.0.0.1", port, process=proc, timeout_s=ready_s)
        yield f"127.0.0.1:{port}", proc
    finally:
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGCONT)
        status = dev.stop_process(proc)
    assert not check_exit or status == 0, f"name server exited with {status}"


def kill_tree(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL a process by its PID (no clean shutdown: nothing is flushed or persisted), then
    wait until the processes it had started (a broker's front-end workers) are gone too.

    The workers share the broker's port (SO_REUSEPORT): while an orphaned one still accepts, a
    broker restarted on that port looks listening before it is, and the next call is refused.

    Raises:
        AssertionError: a child outlived it by ``KILL_TIMEOUT_S``.
    """
    children = _children(proc.pid)
    proc.kill()
    proc.wait(timeout=KILL_TIMEOUT_S)
    deadline = time.monotonic() + KILL_TIMEOUT_S
    while (alive := [pid for pid in children if pathlib.Path(f"/proc/{pid}").exists()]) and (
        time.monotonic() < deadline
    ):
        time.sleep(0.05)
    assert not alive, f"children {alive} of killed process {proc.pid} outlived it"


def _children(pid: int) -> list[int]:
    """Direct children of ``pid`` (from /proc/<pid>/task/*/children)."""
    found: list[int] = []
    for task in pathlib.Path(f"/proc/{pid}/task").glob("*"):
        with contextlib.suppress(OSError):
            found += [int(c) for c in (task / "children").read_text().split()]
    return found
