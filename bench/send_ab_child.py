"""One timed send run for ``bench.send_ab``, run by the interpreter of the tree under test.

Run as a script (``<tree>/.venv/bin/python bench/send_ab_child.py FLUSH MESSAGES WARMUP`` with
``PYTHONPATH=<tree>``), it imports only what every tree since 2026-11-23 has:
``bench.compare.ariane_cluster``, ``driver_args`` and ``run_drivers`` of *that* tree, so the
broker, the store and the official-client driver are the tree's own. It starts a fresh
``ariane dev`` cluster with ``FLUSH``, sends ``WARMUP`` messages untimed, then ``MESSAGES``
with one producer process (one synchronous ``Producer.send`` at a time), and prints one JSON
line: messages, seconds, and the CPU seconds (utime + stime from ``/proc``) over the timed span
of the broker's owner process (also per thread) and of its front-end workers. It reads
``/proc`` itself rather than through ``ariane.benchmark.process_cpu``, which the 2026-11-23
baseline does not have.
"""

from __future__ import annotations

import json
import os
import pathlib
import sys
import tempfile

TICKS_PER_S = os.sysconf("SC_CLK_TCK")


def _cpu_s(stat_path: pathlib.Path) -> float:
    try:
        text = stat_path.read_text(encoding="ascii", errors="replace")
    except OSError:
        return 0.0
    fields = text[text.rfind(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / TICKS_PER_S


def _threads_cpu_s(pid: int) -> dict[int, float]:
    tasks = pathlib.Path(f"/proc/{pid}/task")
    return {int(t.name): _cpu_s(t / "stat") for t in tasks.iterdir()}


def _children(pid: int) -> list[int]:
    path = pathlib.Path(f"/proc/{pid}/task/{pid}/children")
    try:
        return [int(p) for p in path.read_text().split()]
    except OSError:
        return []


def main(argv: list[str]) -> int:
    """Run the cluster and the timed sends; print the JSON line."""
    flush, messages, warmup = argv[0], int(argv[1]), int(argv[2])
    from bench import compare  # the tree under test's, found through PYTHONPATH

    with (
        tempfile.TemporaryDirectory(prefix="send-ab-") as base,
        compare.ariane_cluster(pathlib.Path(base), flush, "ab") as cluster,
    ):
        compare.run_drivers([compare.driver_args("produce", cluster, warmup, 1, "")], None)
        owner = cluster.broker_pid
        workers = _children(owner)
        threads_before = _threads_cpu_s(owner)
        workers_before = sum(_cpu_s(pathlib.Path(f"/proc/{w}/stat")) for w in workers)
        run = compare.driver_args("produce", cluster, messages, 1, "")
        result = compare.run_drivers([run], None)
        threads_after = _threads_cpu_s(owner)
        workers_after = sum(_cpu_s(pathlib.Path(f"/proc/{w}/stat")) for w in workers)
    threads = {tid: after - threads_before.get(tid, 0.0) for tid, after in threads_after.items()}
    busiest = sorted((v for v in threads.values() if v > 0), reverse=True)
    print(
        json.dumps(
            {
                "messages": result.timing.messages,
                "seconds": result.timing.seconds,
                "owner_cpu_s": sum(threads.values()),
                "owner_threads_cpu_s": busiest,
                "workers_cpu_s": workers_after - workers_before,
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.path.pop(0)  # this file's directory: ``bench`` must be the tree's package
    sys.exit(main(sys.argv[1:]))
