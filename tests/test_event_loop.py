"""Which asyncio loop a server process runs (``common.event_loop``): uvloop when installed and
not refused, asyncio's otherwise; a broker on uvloop serves Remoting and gRPC (issue 26 item 5).

Own cluster: the process test runs its name server and broker on uvloop, which the shared
clusters (started on the suite's default loop) do not.
"""

from __future__ import annotations

import asyncio
import importlib
import pathlib
import types

import pytest

import ha_testing
import live_testing
import test_broker_remoting as classic
from ariane import dev
from ariane.common import event_loop
from ariane.remoting import codes, command, transport

RQ = codes.RequestCode
RC = codes.ResponseCode
TOPIC = "on-uvloop"


def _without_uvloop(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.import_module

    def refuse(name: str, package: str | None = None) -> types.ModuleType:
        if name == "uvloop":
            raise ImportError("No module named 'uvloop'")
        return real(name, package)

    monkeypatch.setattr(importlib, "import_module", refuse)


def test_asyncio_asked_for_runs_the_standard_loop() -> None:
    """``asyncio`` gives no factory (``asyncio.Runner``'s default loop) whatever is installed."""
    assert event_loop.loop_factory(event_loop.EventLoop.ASYNCIO) == (None, "asyncio")


def test_auto_falls_back_to_asyncio_without_uvloop(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without uvloop, ``auto`` runs asyncio's loop and an explicit ``uvloop`` is a settings
    error naming the extra to install."""
    _without_uvloop(monkeypatch)
    assert event_loop.loop_factory(event_loop.EventLoop.AUTO) == (None, "asyncio")
    with pytest.raises(ValueError, match=r"ariane\[uvloop\]"):
        event_loop.loop_factory(event_loop.EventLoop.UVLOOP)


def test_auto_picks_uvloop_when_installed() -> None:
    """With uvloop installed, ``auto`` and ``uvloop`` build uvloop's loop."""
    uvloop = pytest.importorskip("uvloop")
    for choice in (event_loop.EventLoop.AUTO, event_loop.EventLoop.UVLOOP):
        factory, name = event_loop.loop_factory(choice)
        assert name == "uvloop" and factory is not None
        loop = factory()
        try:
            assert isinstance(loop, uvloop.Loop)
        finally:
            loop.close()


def test_environment_default(monkeypatch: pytest.MonkeyPatch) -> None:
    """``$ARIANE_EVENT_LOOP`` sets the default (any case); unset is ``asyncio`` (uvloop is
    opt-in); another word is
    refused with the choices named."""
    monkeypatch.delenv(event_loop.ENV_VAR, raising=False)
    assert event_loop.default_choice() is event_loop.EventLoop.ASYNCIO
    monkeypatch.setenv(event_loop.ENV_VAR, "AUTO")
    assert event_loop.default_choice() is event_loop.EventLoop.AUTO
    monkeypatch.setenv(event_loop.ENV_VAR, "AsyncIO")
    assert event_loop.default_choice() is event_loop.EventLoop.ASYNCIO
    monkeypatch.setenv(event_loop.ENV_VAR, "trio")
    with pytest.raises(ValueError, match="auto, asyncio, uvloop"):
        event_loop.default_choice()


async def _send_pull_and_route(broker: str, namesrv: str) -> bytes:
    """A classic send and pull on the broker's Remoting port; then the name server's route of
    the topic over its shared port (the broker registered through its gRPC splice)."""
    client = transport.RemotingClient({})
    try:
        text = "TAGS\x01t\x02"
        header = classic.send_header(TOPIC, 0, text)
        sent = await client.invoke(
            broker, command.request(RQ.SEND_MESSAGE_V2, header, b"on uv"), 10.0
        )
        assert sent.code == RC.SUCCESS, sent.remark
        pull = {**classic.pull_header(0, 0), "topic": TOPIC}
        pulled = await client.invoke(broker, command.request(RQ.PULL_MESSAGE, pull), 10.0)
        assert pulled.code == RC.SUCCESS, pulled.remark

        async def routed() -> bool:
            asked = command.request(RQ.GET_ROUTEINFO_BY_TOPIC, {"topic": TOPIC})
            reply = await client.invoke(namesrv, asked, 10.0)
            return reply.code == RC.SUCCESS and broker.encode() in reply.body

        await live_testing.eventually(routed)
        return pulled.body
    finally:
        await client.close()


def test_cluster_on_uvloop_serves_remoting_and_grpc(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With ``ARIANE_EVENT_LOOP=uvloop`` a name server and a broker with one front-end worker
    run on uvloop (their logs say so): a topic is created over gRPC (worker, relay to the
    owner), a classic send is stored and pulled back over Remoting, and the name server routes
    the topic to the broker's Remoting address (registration through the shared port's splice,
    the route asked over its Remoting side)."""
    pytest.importorskip("uvloop")
    monkeypatch.setenv(event_loop.ENV_VAR, "uvloop")  # inherited by the processes started here
    remoting_port = dev.free_port()
    with ha_testing.running_namesrv(tmp_path) as namesrv:
        broker = ha_testing.new_broker(tmp_path, "uv")
        extra = ("--remoting-listen", f"127.0.0.1:{remoting_port}", "--workers", "1")
        broker.start(tmp_path, namesrv, "ASYNC_MASTER", broker_id=0, extra=extra)
        try:
            ha_testing.create_topic(broker.endpoint, TOPIC)
            addr = f"127.0.0.1:{remoting_port}"
            body = asyncio.run(_send_pull_and_route(addr, namesrv))
        finally:
            broker.stop()
    assert b"on uv" in body
    assert "event loop: uvloop" in (tmp_path / "uv.log").read_text()
    assert "event loop: uvloop" in (tmp_path / "namesrv.log").read_text()
