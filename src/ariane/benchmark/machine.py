"""The machine a benchmark runs on: the quiet-machine gate, outside load, and machine facts.

Implements the measurement discipline of specs/perf.md §2.1 for every benchmark (``ariane bench``
and the repository's ``bench/``):

- ``wait_for_quiet`` reads the aggregate ``cpu`` line of ``/proc/stat`` twice, ``window_s``
  apart, until a window shows fewer than ``busy_cores_max`` busy cores, or ``wait_max_s`` has
  passed (the wait is always bounded; a run that did not get a quiet machine says so).
- ``LoadMeter`` brackets one timed region and reports the busy cores of the whole machine, the
  CPU of this process (``getrusage(RUSAGE_SELF)``, every thread included) and their difference,
  ``ext_cores``: the load of everything else. It also reports the bytes written to the disk
  that holds the benchmark directory (``/proc/diskstats`` sectors x 512).
- ``machine_info`` describes CPU, kernel, Python, memory, the file system of a directory and a
  CPU calibration (``sum(range(1000))``, as in perf.md §2).

Linux only (``/proc``); every reader degrades to ``None``/0 rather than failing a run.
"""

from __future__ import annotations

import dataclasses
import os
import pathlib
import platform
import resource
import subprocess
import sys
import time
import timeit
from types import TracebackType

_CLOCK_TICKS_PER_S = os.sysconf("SC_CLK_TCK")
_SECTOR_BYTES = 512


@dataclasses.dataclass(frozen=True, slots=True)
class CpuTimes:
    """Aggregate CPU counters of all cores, seconds (from the ``cpu`` line of /proc/stat)."""

    busy_s: float
    total_s: float


def read_cpu_times() -> CpuTimes:
    """The machine's cumulative busy and total CPU time over all cores, seconds.

    Busy is everything but idle and iowait; total sums the first eight fields (guest time
    is already inside user).
    """
    with open("/proc/stat", encoding="ascii") as stat:
        fields = [int(f) for f in stat.readline().split()[1:9]]
    total = sum(fields)
    idle = fields[3] + fields[4]
    return CpuTimes((total - idle) / _CLOCK_TICKS_PER_S, total / _CLOCK_TICKS_PER_S)


def busy_cores(before: CpuTimes, after: CpuTimes) -> float:
    """Average busy cores between two samples: cores x (1 - Δidle / Δtotal)."""
    delta_total = after.total_s - before.total_s
    if delta_total <= 0:
        return 0.0
    return (os.cpu_count() or 1) * (after.busy_s - before.busy_s) / delta_total


def load_average_1m() -> float:
    """The 1-minute load average."""
    return os.getloadavg()[0]


@dataclasses.dataclass(frozen=True, slots=True)
class GateResult:
    """What the quiet-machine gate saw before one run.

    Attributes:
        quiet: whether a window under the threshold was seen before the wait ran out.
        busy_cores: busy cores in the last window measured.
        waited_s: seconds spent waiting, windows included.
        load_1m: the 1-minute load average when the gate finished.
    """

    quiet: bool
    busy_cores: float
    waited_s: float
    load_1m: float


def wait_for_quiet(busy_cores_max: float, wait_max_s: float, window_s: float = 1.0) -> GateResult:
    """Wait until a ``window_s`` window shows fewer than ``busy_cores_max`` busy cores.

    Args:
        busy_cores_max: the threshold, cores (perf.md §2.1 uses 0.25 on 2 cores).
        wait_max_s: the longest wait, seconds; at least one window is always measured.
        window_s: the length of one sampling window, seconds.

    Returns:
        the gate's outcome; ``quiet`` is False when the wait ran out.
    """
    started = time.monotonic()
    while True:
        before = read_cpu_times()
        time.sleep(window_s)
        cores = busy_cores(before, read_cpu_times())
        waited = time.monotonic() - started
        if cores < busy_cores_max or waited + window_s > wait_max_s:
            return GateResult(cores < busy_cores_max, cores, waited, load_average_1m())


@dataclasses.dataclass(frozen=True, slots=True)
class RunLoad:
    """The machine's load over one timed region.

    Attributes:
        wall_s: the region's wall time, seconds.
        busy_cores: average busy cores of the whole machine.
        own_cores: average cores used by this process (all its threads).
        ext_cores: ``busy_cores - own_cores`` (floored at 0): everybody else's load.
        disk_written_bytes: bytes written to the benchmark directory's disk meanwhile
            (every writer's, not only ours); 0 if the disk is unknown.
        load_1m: the 1-minute load average at the end.
    """

    wall_s: float
    busy_cores: float
    own_cores: float
    ext_cores: float
    disk_written_bytes: int
    load_1m: float


def _own_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


class LoadMeter:
    """A context manager measuring ``RunLoad`` over its body; ``result()`` after it exits.

    Args:
        disk: the block device name in /proc/diskstats (``disk_of``), or ``None``.
    """

    def __init__(self, disk: str | None) -> None:
        self._disk = disk
        self._start = (0.0, read_cpu_times(), 0.0, 0)
        self.load: RunLoad | None = None

    def __enter__(self) -> LoadMeter:
        self._start = (time.perf_counter(), read_cpu_times(), _own_cpu_s(), self._written())
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        wall0, cpu0, own0, written0 = self._start
        wall = max(time.perf_counter() - wall0, 1e-9)
        machine = busy_cores(cpu0, read_cpu_times())
        own = (_own_cpu_s() - own0) / wall
        self.load = RunLoad(
            wall_s=wall,
            busy_cores=machine,
            own_cores=own,
            ext_cores=max(0.0, machine - own),
            disk_written_bytes=self._written() - written0,
            load_1m=load_average_1m(),
        )

    def result(self) -> RunLoad:
        """The measured load (only after the ``with`` block ended)."""
        assert self.load is not None, "LoadMeter.result() read before the block ended"
        return self.load

    def _written(self) -> int:
        return disk_written_bytes(self._disk) if self._disk else 0


def disk_of(path: pathlib.Path) -> str | None:
    """The /proc/diskstats name of the block device holding ``path`` (``None`` if unknown)."""
    dev = os.stat(path).st_dev
    link = pathlib.Path(f"/sys/dev/block/{os.major(dev)}:{os.minor(dev)}")
    try:
        return link.resolve(strict=True).name
    except OSError:
        return None


def disk_written_bytes(disk: str) -> int:
    """Cumulative bytes written to ``disk`` (sectors written x 512), 0 if it is not listed."""
    with open("/proc/diskstats", encoding="ascii") as stats:
        for line in stats:
            fields = line.split()
            if len(fields) > 9 and fields[2] == disk:
                return int(fields[9]) * _SECTOR_BYTES
    return 0


@dataclasses.dataclass(frozen=True, slots=True)
class FileSystem:
    """The mount holding a directory: device, mount point, type and options."""

    device: str
    mount_point: str
    fs_type: str
    options: str


def file_system_of(path: pathlib.Path) -> FileSystem | None:
    """The longest mount point in /proc/self/mounts that contains ``path``."""
    target = str(path.resolve())
    best: FileSystem | None = None
    with open("/proc/self/mounts", encoding="utf-8") as mounts:
        for line in mounts:
            device, mount_point, fs_type, options = line.split()[:4]
            inside = target == mount_point or target.startswith(mount_point.rstrip("/") + "/")
            if inside and (best is None or len(mount_point) > len(best.mount_point)):
                best = FileSystem(device, mount_point, fs_type, options)
    return best


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as info:
            for line in info:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _memory_total_bytes() -> int:
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def _git_commit(repo: pathlib.Path) -> str:
    try:
        done = subprocess.run(
            ["git", "-C", str(repo), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        )
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return done.stdout.strip()


def _active_scheduler(path: pathlib.Path | None) -> str | None:
    # The file lists every scheduler and brackets the active one: "none [mq-deadline] kyber".
    if path is None or not path.exists():
        return None
    text = path.read_text()
    start, end = text.find("["), text.find("]")
    return text[start + 1 : end] if 0 <= start < end else text.strip()


def calibration_us() -> float:
    """``sum(range(1000))`` in µs, best of 5 x 2,000 loops (perf.md §2: 15.4 µs here)."""
    return min(timeit.repeat("sum(range(1000))", number=2_000, repeat=5)) / 2_000 * 1e6


def machine_info(bench_dir: pathlib.Path, repo: pathlib.Path) -> dict[str, object]:
    """Facts to record with a result: CPU, kernel, Python, memory, file system, calibration."""
    fs = file_system_of(bench_dir)
    disk = disk_of(bench_dir)
    scheduler = pathlib.Path(f"/sys/block/{disk}/queue/scheduler") if disk else None
    return {
        "cpu_count": os.cpu_count(),
        "cpu_model": _cpu_model(),
        "memory_total_bytes": _memory_total_bytes(),
        "kernel": platform.release(),
        "python": sys.version.split()[0],
        "python_implementation": platform.python_implementation(),
        "calibration_sum_range_1000_us": round(calibration_us(), 2),
        "bench_dir": str(bench_dir.resolve()),
        "file_system": dataclasses.asdict(fs) if fs else None,
        "disk": disk,
        "disk_scheduler": _active_scheduler(scheduler),
        "git_commit": _git_commit(repo),
        "load_average_at_start": list(os.getloadavg()),
    }
