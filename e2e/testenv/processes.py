"""Child processes of the test environment: start with a log file, poll, stop by PID.

Invariants: every process is started by this module and remembered by its ``Popen`` object;
stopping sends SIGTERM, waits a bounded time, then SIGKILL, only to that PID (never by name).
Every wait is a poll against a deadline.
"""

from __future__ import annotations

import collections
import dataclasses
import logging
import pathlib
import subprocess
import time
from collections.abc import Callable, Sequence

from ariane import dev

logger = logging.getLogger(__name__)

POLL_INTERVAL_S = 0.1
STOP_GRACE_S = 10.0
LOG_TAIL_LINES = 40


class StartupError(RuntimeError):
    """A component did not become ready in time; the message carries its log tail."""


free_port = dev.free_port
"""A TCP port on 127.0.0.1 that was free a moment ago, below the ephemeral range (``dev``)."""


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
