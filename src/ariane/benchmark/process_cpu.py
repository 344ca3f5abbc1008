"""CPU time of a whole process tree, for benchmarks whose servers are child processes.

``machine.LoadMeter`` subtracts only this process's CPU from the machine's busy time. The client
benchmark also runs the name server, the broker and the official client's driver as children,
so its own load is the CPU of the whole tree: this process (``RUSAGE_SELF``), children already
reaped (``RUSAGE_CHILDREN``) and live descendants (utime + stime of ``/proc/<pid>/stat``).
``TreeLoadMeter`` brackets a timed region like ``LoadMeter`` and reports ``machine.RunLoad`` with
``own_cores`` = the tree's cores and ``ext_cores`` = everybody else's (specs/perf.md §2.1).

Linux only; a process that exits between listing and reading counts as 0 for that read, and a
grandchild reaped by its own parent during a region is not counted.
"""

from __future__ import annotations

import os
import pathlib
import resource
import time

from ariane.benchmark import machine

_CLOCK_TICKS_PER_S = os.sysconf("SC_CLK_TCK")


def _stat_fields(pid: int) -> list[str] | None:
    try:
        text = pathlib.Path(f"/proc/{pid}/stat").read_text(encoding="ascii", errors="replace")
    except OSError:
        return None
    # The command name may hold spaces and parentheses: fields start after the last ')'.
    return text[text.rfind(")") + 2 :].split()


def descendants(root: int) -> list[int]:
    """Every live descendant of ``root`` (children, grandchildren, …)."""
    children: dict[int, list[int]] = {}
    for entry in pathlib.Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        fields = _stat_fields(int(entry.name))
        if fields is not None:
            children.setdefault(int(fields[1]), []).append(int(entry.name))
    found: list[int] = []
    pending = [root]
    while pending:
        for child in children.get(pending.pop(), []):
            found.append(child)
            pending.append(child)
    return found


def process_cpu_s(pid: int) -> float:
    """User + system CPU seconds of one live process (0 if it is gone)."""
    fields = _stat_fields(pid)
    if fields is None:
        return 0.0
    # After the name: state(0) ppid(1) … utime(11) stime(12).
    return (int(fields[11]) + int(fields[12])) / _CLOCK_TICKS_PER_S


def tree_cpu_s() -> dict[int, float]:
    """CPU seconds of this process tree: key 0 = this process plus reaped children, and one
    entry per live descendant pid."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    reaped = resource.getrusage(resource.RUSAGE_CHILDREN)
    found = {0: own.ru_utime + own.ru_stime + reaped.ru_utime + reaped.ru_stime}
    for pid in descendants(os.getpid()):
        found[pid] = process_cpu_s(pid)
    return found


class TreeLoadMeter:
    """Measures ``machine.RunLoad`` over a region, counting the whole process tree as own load.

    Call ``start()`` at the start of the timed region and ``stop()`` at its end.

    Args:
        disk: the block device name in /proc/diskstats (``machine.disk_of``), or ``None``.
    """

    def __init__(self, disk: str | None) -> None:
        self._disk = disk
        self._wall = 0.0
        self._cpu = machine.read_cpu_times()
        self._tree: dict[int, float] = {}
        self._written = 0
        self.cores_by_pid: dict[int, float] = {}
        """After ``stop()``: cores used during the region per pid (0 = this process and the
        children it reaped)."""

    def _disk_bytes(self) -> int:
        return machine.disk_written_bytes(self._disk) if self._disk else 0

    def start(self) -> None:
        """Take the counters at the start of the region."""
        self._tree = tree_cpu_s()
        self._written = self._disk_bytes()
        self._cpu = machine.read_cpu_times()
        self._wall = time.perf_counter()

    def stop(self) -> machine.RunLoad:
        """The load since ``start()``."""
        wall = max(time.perf_counter() - self._wall, 1e-9)
        busy = machine.busy_cores(self._cpu, machine.read_cpu_times())
        tree = tree_cpu_s()
        self.cores_by_pid = {
            pid: max(cpu - self._tree.get(pid, 0.0), 0.0) / wall for pid, cpu in tree.items()
        }
        own_s = sum(cpu - self._tree.get(pid, 0.0) for pid, cpu in tree.items())
        # A child reaped meanwhile moved its whole CPU into key 0: take off what it had before.
        own_s -= sum(cpu for pid, cpu in self._tree.items() if pid and pid not in tree)
        own = max(own_s, 0.0) / wall
        return machine.RunLoad(
            wall_s=wall,
            busy_cores=busy,
            own_cores=own,
            ext_cores=max(0.0, busy - own),
            disk_written_bytes=self._disk_bytes() - self._written,
            load_1m=machine.load_average_1m(),
        )
