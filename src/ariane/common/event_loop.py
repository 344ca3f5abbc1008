"""Which asyncio event loop a server process runs: asyncio's, or uvloop when asked for.

A broker's classic (Remoting) port is plain asyncio streams: every request is a few socket
reads, a task, a timer for the idle timeout and a write, so the loop's own cost per event is a
visible share of the owner's CPU under pipelined sends and push drains (profile in
``bench/results/profile-2026-11-29*/``). uvloop (libuv under the asyncio API, a well-kept
library of the asyncio ecosystem) runs the same code with a cheaper loop. It is an optional
dependency (``pip install 'ariane[uvloop]'``) and opt-in (``--event-loop auto|uvloop`` or
``$ARIANE_EVENT_LOOP``): by default, without it, or with ``asyncio`` asked for, the standard loop
runs and nothing else changes (the default becomes ``auto`` once the whole suite runs on
uvloop). RocketMQ's counterpart is Netty's epoll transport (``useEpollNativeSelector``), which it
also falls back from when the native library is missing.

Invariants:
- ``loop_factory`` never fails for ``AUTO`` or ``ASYNCIO``; only an explicit ``UVLOOP`` without
  uvloop installed is an error (``ValueError``, a settings error: exit status 2).
- The choice is made once per process, before its loop starts; nothing here runs on a loop.
- Code that gets a transport from the loop takes it through ``stream_transport``: uvloop's
  transports implement ``asyncio.Transport``'s methods without subclassing it, so an
  ``isinstance`` check would refuse them.
"""

from __future__ import annotations

import asyncio
import enum
import importlib
import os
from collections.abc import Callable
from typing import cast

ENV_VAR = "ARIANE_EVENT_LOOP"
"""Environment variable giving the default of ``--event-loop`` (``auto``, ``asyncio``,
``uvloop``): how benchmarks run a whole ``ariane dev`` cluster on one loop or the other."""


class EventLoop(enum.Enum):
    """The event loop a server process runs."""

    AUTO = "auto"
    """uvloop when it can be imported, else asyncio's default loop."""
    ASYNCIO = "asyncio"
    """The standard library's loop (selector-based on Linux)."""
    UVLOOP = "uvloop"
    """uvloop; refused when it is not installed."""


LoopFactory = Callable[[], asyncio.AbstractEventLoop]


def default_choice() -> EventLoop:
    """``$ARIANE_EVENT_LOOP`` as an ``EventLoop`` (``ASYNCIO`` when unset: uvloop is opt-in,
    ``auto`` or ``uvloop``, until the whole suite has run on it).

    Raises:
        ValueError: the variable holds another word.
    """
    word = os.environ.get(ENV_VAR, "").strip().lower() or EventLoop.ASYNCIO.value
    try:
        return EventLoop(word)
    except ValueError:
        known = ", ".join(e.value for e in EventLoop)
        raise ValueError(f"{ENV_VAR}={word!r}: expected one of {known}") from None


def loop_factory(choice: EventLoop) -> tuple[LoopFactory | None, str]:
    """The factory for ``asyncio.Runner(loop_factory=...)`` and the loop's name.

    Returns:
        ``(None, "asyncio")`` for the standard loop (the runner's default), or uvloop's
        ``new_event_loop`` and ``"uvloop"``.

    Raises:
        ValueError: ``UVLOOP`` was asked for and uvloop cannot be imported.
    """
    if choice is EventLoop.ASYNCIO:
        return None, "asyncio"
    try:
        uvloop = importlib.import_module("uvloop")
    except ImportError as exc:
        if choice is EventLoop.UVLOOP:
            raise ValueError(
                f"event loop uvloop asked for but not installed ({exc}); "
                "pip install 'ariane[uvloop]' or use --event-loop auto"
            ) from exc
        return None, "asyncio"
    factory: LoopFactory = uvloop.new_event_loop
    return factory, "uvloop"


_STREAM_METHODS = ("write", "close", "is_closing", "pause_reading", "resume_reading", "abort")


def stream_transport(transport: asyncio.BaseTransport) -> asyncio.Transport:
    """``transport`` as the read-write stream transport a ``Protocol.connection_made`` gets on
    a TCP or Unix socket, from asyncio's loop or uvloop's (whose transport classes do not
    derive from ``asyncio.Transport``).

    Raises:
        AssertionError: it lacks a method of a stream transport (a programmer error: a
            datagram or pipe transport handed to a stream protocol).
    """
    missing = [name for name in _STREAM_METHODS if not callable(getattr(transport, name, None))]
    assert not missing, f"{type(transport).__name__} is no stream transport: no {missing}"
    return cast(asyncio.Transport, transport)
