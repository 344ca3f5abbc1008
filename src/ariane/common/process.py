"""Running a server process: settings, logging, a stop on SIGTERM/SIGINT, exit statuses.

Every long-running Ariane process (``ariane namesrv``, ``ariane broker``) starts the same way:
refuse ``python -O`` (assertions are checks, STYLE §7), build and validate its settings (bad
ones exit 2 with the reason), configure logging (only here, never in library modules), serve
until SIGTERM or SIGINT sets a stop event, and exit 0 after a clean shutdown or 1 when the
server could not start (port taken, store unreadable). The loop is uvloop when it is installed
and not refused (``common.event_loop``), else asyncio's.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import os
import pathlib
import signal
import sys
from collections.abc import Awaitable, Callable
from typing import TypeVar

from ariane.common import event_loop as event_loop_mod

S = TypeVar("S")

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
CGROUP_CPU_MAX = pathlib.Path("/sys/fs/cgroup/cpu.max")
"""cgroup v2 CPU quota of this process's cgroup (a container's own under Kubernetes)."""


def available_cpus(cpu_max: pathlib.Path = CGROUP_CPU_MAX) -> int:
    """CPUs this process may use: its affinity mask, capped by a cgroup v2 CPU quota.

    Mirrors the JVM's container support (``Runtime.availableProcessors()``): a quota of
    ``"150000 100000"`` in ``cpu.max`` allows ceil(1.5) = 2 CPUs; ``"max 100000"`` (no quota)
    or no cgroup file leaves the affinity count. Always at least 1.
    """
    count = len(os.sched_getaffinity(0))
    try:
        fields = cpu_max.read_text().split()
    except OSError:
        return max(1, count)
    if len(fields) == 2 and fields[0] != "max" and fields[0].isdigit() and fields[1].isdigit():
        quota, period = int(fields[0]), int(fields[1])
        if period > 0:
            count = min(count, math.ceil(quota / period))
    return max(1, count)


def physical_memory_bytes() -> int:
    """The machine's physical memory, bytes (RocketMQ ``StoreUtil.TOTAL_PHYSICAL_MEMORY_SIZE``,
    the OS total, not a container's limit); 0 when the OS does not say."""
    try:
        return max(0, os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (OSError, ValueError):
        return 0


STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


async def serve_until_signalled(serve: Callable[[asyncio.Event], Awaitable[None]]) -> None:
    """Run ``serve(stop)`` with ``stop`` set by SIGTERM or SIGINT; restore the handlers after."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in STOP_SIGNALS:
        loop.add_signal_handler(signum, stop.set)
    try:
        await serve(stop)
    finally:
        for signum in STOP_SIGNALS:
            with contextlib.suppress(Exception):
                loop.remove_signal_handler(signum)


def run_server(
    prog: str,
    *,
    make_settings: Callable[[], S],
    serve: Callable[[S, asyncio.Event], Awaitable[None]],
    log_level: str,
    event_loop: event_loop_mod.EventLoop | None = None,
) -> int:
    """Run one server process to completion; returns its exit status.

    Args:
        prog: the command name used in messages (``ariane broker``).
        make_settings: builds the settings; ``ValueError``/``OSError`` mean bad settings.
        serve: serves with the settings until the stop event is set.
        log_level: a ``logging`` level name.
        event_loop: the loop to run (``--event-loop``); None = ``$ARIANE_EVENT_LOOP``, else
            ``auto`` (uvloop if installed).

    Returns:
        0 after a clean stop, 1 when serving failed with ``OSError``, 2 for ``python -O`` or
        bad settings.
    """
    if not __debug__:
        print(f"{prog} refuses to run under python -O (asserts are checks)", file=sys.stderr)
        return 2
    try:
        settings = make_settings()
        choice = event_loop if event_loop is not None else event_loop_mod.default_choice()
        factory, loop_name = event_loop_mod.loop_factory(choice)
    except (ValueError, OSError) as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return 2
    logging.basicConfig(level=log_level, format=LOG_FORMAT, stream=sys.stderr)
    logging.getLogger(prog.replace(" ", ".")).info("event loop: %s", loop_name)
    try:
        with asyncio.Runner(loop_factory=factory) as runner:
            runner.run(serve_until_signalled(lambda stop: serve(settings, stop)))
    except OSError as exc:
        logging.getLogger(prog.replace(" ", ".")).error("%s", exc)
        return 1
    return 0
