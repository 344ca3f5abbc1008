"""``ariane.ingest.v1.Ingest/SendStream`` against real ``ariane namesrv`` + ``ariane broker``
processes: streamed batches are stored and received in message-group order; each request gets
exactly the answer unary SendMessage gives (a bad message its own status, an unknown topic
TOPIC_NOT_FOUND) and the stream stays usable; the producer writes unanswered batches again on a
new stream after the broker restarts, losing no acknowledged message.

Own cluster: the broker is restarted under a live stream."""

from __future__ import annotations

import asyncio
import pathlib
import subprocess
import sys
from collections.abc import Iterator

import pytest

from ariane import client, dev
from ariane.client import transport
from ariane.common import errors, message
from ariane.grpcwire import codes, messages, pb
from live_testing import DEADLINE_S, drain, make_topic, wait_registered, wait_routed

pytestmark = pytest.mark.slow

STREAMING = client.ProducerSettings(streaming=True, send_attempts=16, stream_window_max=4)
"""Streaming, with enough attempts (10 ms doubling to 1 s) to outlast a broker restart."""


class Cluster:
    """A name server and a broker as child processes; the broker restarts on the same port and
    store."""

    def __init__(self, root: pathlib.Path) -> None:
        self.root = root
        self.namesrv = f"127.0.0.1:{dev.free_port()}"
        self.broker = f"127.0.0.1:{dev.free_port()}"
        self._children: dict[str, subprocess.Popen[bytes]] = {}

    def _spawn(self, name: str, args: list[str]) -> None:
        with (self.root / f"{name}.log").open("ab") as log:
            proc = subprocess.Popen([sys.executable, "-m", "ariane", *args], stdout=log, stderr=log)
        self._children[name] = proc
        port = int(args[args.index("--listen") + 1].rpartition(":")[2])
        dev.wait_until_listening("127.0.0.1", port, process=proc, timeout_s=DEADLINE_S)

    def start_namesrv(self) -> None:
        """Start the name server."""
        self._spawn("namesrv", ["namesrv", "--listen", self.namesrv])

    def start_broker(self) -> None:
        """Start (or start again) the broker on its port and store."""
        config = self.root / "broker.toml"
        config.write_text(dev.DEV_BROKER_TOML.format(flush_disk_type="ASYNC_FLUSH"))
        self._spawn(
            "broker",
            [
                "broker",
                "--config",
                str(config),
                "--namesrv",
                self.namesrv,
                "--listen",
                self.broker,
                "--store-dir",
                str(self.root / "store"),
                "--broker-name",
                "broker-s",
            ],
        )

    def stop_broker(self) -> None:
        """Stop the broker (SIGTERM: clean shutdown) and wait until it exited."""
        assert dev.stop_process(self._children.pop("broker")) == 0

    def stop(self) -> None:
        """Stop every child this cluster started."""
        for name in ("broker", "namesrv"):
            proc = self._children.pop(name, None)
            if proc is not None:
                dev.stop_process(proc)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """A running name server and broker for this module's tests."""
    found = Cluster(tmp_path_factory.mktemp("stream-cluster"))

    async def registered() -> None:
        async with client.AdminClient(found.namesrv) as admin:
            await wait_registered(admin)

    try:
        found.start_namesrv()
        found.start_broker()
        asyncio.run(registered())
        yield found
    finally:
        found.stop()


def raw_message(topic: str, body: bytes, message_id: str, *, tag: str = "") -> pb.v2.Message:
    """A v2 message as the producer builds it."""
    props = pb.v2.SystemProperties(
        message_id=message_id,
        message_type=pb.v2.MessageType.NORMAL,
        born_timestamp=messages.timestamp(1_700_000_000_000),
        born_host="stream-test",
        body_encoding=pb.v2.Encoding.IDENTITY,
    )
    if tag:
        props.tag = tag
    return pb.v2.Message(topic=pb.v2.Resource(name=topic), body=body, system_properties=props)


def shape(response: pb.v2_service.SendMessageResponse) -> tuple[int, list[int]]:
    """The codes of an answer: top-level and per entry."""
    return codes.code_of(response.status), [codes.code_of(e.status) for e in response.entries]


def test_streamed_batches_are_stored_and_received_in_group_order(cluster: Cluster) -> None:
    """Batches of several message groups sent concurrently over the stream are all stored, on one
    stream, and a FIFO consumer receives each group's messages exactly once in send order."""
    groups = [f"s-order-{g}" for g in range(3)]
    per_group = 40

    async def main() -> None:
        async with client.AdminClient(cluster.namesrv) as admin:
            await make_topic(admin, "s-fifo", message.MessageType.FIFO, fifo_group="s-g")
        outgoing = [
            client.OutgoingMessage(f"{group}:{i}".encode(), message_group=group)
            for i in range(per_group)
            for group in groups
        ]
        async with client.Producer(cluster.namesrv, settings=STREAMING) as producer:
            batches = [outgoing[start : start + 8] for start in range(0, len(outgoing), 8)]
            receipts = await asyncio.gather(
                *(producer.send_batch("s-fifo", batch) for batch in batches)
            )
            streams = producer.stream_counts()
        assert sum(len(r) for r in receipts) == len(outgoing)
        assert streams == {cluster.broker: 1}
        async with client.SimpleConsumer(cluster.namesrv, "s-g", "s-fifo") as consumer:
            got = await drain(consumer, len(outgoing), batch=16)
        assert len(got) == len(outgoing)
        for group in groups:
            seen = [m.body.decode() for m in got if m.message_group == group]
            assert seen == [f"{group}:{i}" for i in range(per_group)]

    asyncio.run(main())


def test_stream_answers_exactly_what_send_message_answers(cluster: Cluster) -> None:
    """On one stream: a batch with a bad message is refused whole with that message's code and
    no entries (as unary SendMessage answers the same batch: a request is all-or-nothing), an
    unknown topic answers TOPIC_NOT_FOUND, and the stream still answers the next batch; the
    producer raises the bad message's error class."""

    async def main() -> None:
        async with client.AdminClient(cluster.namesrv) as admin:
            await make_topic(admin, "s-plain", message.MessageType.NORMAL)

        def batch(prefix: str) -> pb.v2_service.SendMessageRequest:
            good = [raw_message("s-plain", b"ok", f"{prefix}{i:030X}") for i in range(2)]
            bad = raw_message("s-plain", b"bad", f"{prefix}{9:030X}", tag="a|b")
            return pb.v2_service.SendMessageRequest(messages=[good[0], bad, good[1]])

        missing = pb.v2_service.SendMessageRequest(
            messages=[raw_message("s-no-such-topic", b"x", f"EE{1:030X}")]
        )
        caller = transport.Transport(timeout_s=10)
        try:
            unary = await caller.unary(
                cluster.broker, "SendMessage", batch("AA"), pb.v2_service.SendMessageResponse
            )
            unary_missing = await caller.unary(
                cluster.broker, "SendMessage", missing, pb.v2_service.SendMessageResponse
            )
            stream = await caller.open_send_stream(cluster.broker)
            answers = []
            for request in (batch("BB"), missing, batch("CC")):
                await stream.write(request)
                answers.append(await stream.read())
            await stream.done_writing()
        finally:
            await caller.close()
        illegal_tag = errors.Code.ILLEGAL_MESSAGE_TAG
        assert shape(unary) == (illegal_tag, [])
        assert shape(answers[0]) == shape(unary) == shape(answers[2])
        assert shape(answers[1]) == shape(unary_missing)
        assert codes.code_of(answers[1].status) == errors.Code.TOPIC_NOT_FOUND
        async with client.Producer(cluster.namesrv, settings=STREAMING) as producer:
            with pytest.raises(errors.IllegalMessageTagError):
                await producer.send_batch(
                    "s-plain", [b"one", client.OutgoingMessage(b"two", tag="x|y"), b"three"]
                )

    asyncio.run(main())


def test_producer_writes_batches_again_after_a_broker_restart(cluster: Cluster) -> None:
    """Batches acknowledged before the broker restarts stay stored; batches sent while it is down
    are written again on a new stream once it is back; every message is then received (at least
    once; here exactly once, since the broker answered everything before it stopped)."""

    async def main() -> None:
        async with client.AdminClient(cluster.namesrv) as admin:
            await make_topic(admin, "s-restart", message.MessageType.NORMAL)
        async with client.Producer(cluster.namesrv, settings=STREAMING) as producer:
            before = [f"before-{i}".encode() for i in range(50)]
            acked = await producer.send_batch("s-restart", before)
            await asyncio.to_thread(cluster.stop_broker)
            after = [f"after-{i}".encode() for i in range(50)]
            sending = asyncio.ensure_future(
                asyncio.gather(*(producer.send_batch("s-restart", [b]) for b in after))
            )
            await asyncio.sleep(0)  # let the writes start while the broker is down
            await asyncio.to_thread(cluster.start_broker)
            resent = await sending
            opened = producer.stream_counts()[cluster.broker]
        assert len(acked) == 50 and len(resent) == 50
        assert opened >= 2
        async with client.AdminClient(cluster.namesrv) as admin:
            await wait_routed(admin, "s-restart")  # the restarted broker registered
        async with client.SimpleConsumer(cluster.namesrv, "s-r", "s-restart") as consumer:
            got = await drain(consumer, 100)
        assert sorted(m.body for m in got) == sorted(before + after)

    asyncio.run(main())
