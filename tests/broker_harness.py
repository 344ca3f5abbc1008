"""In-process broker for processor tests: real store in a temp dir, a manual clock, no sockets.

The idea of httpx's ``MockTransport``: ``BrokerHarness`` opens a ``BrokerRuntime`` (the real
``MessageStore``, tables and POP service) under ``tmp_path`` with a ``ManualClock`` and builds
the processors with ``broker.assembly.build`` exactly as the server does; tests call the
processors directly and advance the clock instead of waiting. ``FakeCallContext`` satisfies
``guard.CallContext`` so the gRPC adapters (``MessagingService``, ``AdminService``) run
in-process too.
"""

from __future__ import annotations

import pathlib
from collections.abc import Iterable
from typing import NoReturn

import grpc

from ariane.broker import assembly, filters, runtime
from ariane.broker import settings as broker_settings
from ariane.broker.processors import consume
from ariane.broker.tables import lite_settings, topic_config
from ariane.common import clock, ids, message
from ariane.store import settings as store_settings

SMALL_STORE = store_settings.StoreSettings(
    commit_log_file_size_bytes=4 * 1024 * 1024, consume_queue_file_entries=10_000
)


class FakeCallContext:
    """A ``guard.CallContext`` with a client id header, a peer and no deadline."""

    def __init__(self, client_id: str = "harness-client", peer: str = "ipv4:10.1.2.3:5000"):
        self._metadata = (("x-mq-client-id", client_id),)
        self._peer = peer

    def invocation_metadata(self) -> Iterable[tuple[str, str | bytes]] | None:
        return self._metadata

    def peer(self) -> str:
        return self._peer

    def time_remaining(self) -> float | None:
        return None

    async def abort(self, code: grpc.StatusCode, details: str = "") -> NoReturn:
        raise AssertionError(f"aborted with {code}: {details}")


class BrokerHarness:
    """One broker's runtime and processors over ``root``, driven by a manual clock."""

    def __init__(
        self,
        root: pathlib.Path,
        *,
        receive: broker_settings.ReceiveSettings | None = None,
        time: clock.ManualClock | None = None,
        lite: lite_settings.LiteSettings | None = None,
    ) -> None:
        self.clock = time or clock.ManualClock()
        settings = broker_settings.BrokerSettings(
            store_dir=root / "store",
            store=SMALL_STORE,
            receive=receive or broker_settings.ReceiveSettings(),
            lite=lite or lite_settings.LiteSettings(),
        )
        self.runtime = runtime.BrokerRuntime(settings, time=self.clock)
        self.processors = assembly.build(self.runtime, time=self.clock)

    def close(self) -> None:
        self.runtime.close()

    def create_topic(
        self, name: str, *, queues: int = 4, kind: message.MessageType = message.MessageType.NORMAL
    ) -> None:
        self.processors.admin.create_topic(
            topic_config.TopicConfig(
                ids.TopicName(name),
                read_queue_nums=queues,
                write_queue_nums=queues,
                message_type=kind,
            )
        )

    def receive_request(
        self, group: str, topic: str, *, batch_size: int = 32, invisible_ms: int = 10_000
    ) -> consume.ReceiveRequest:
        return consume.ReceiveRequest(
            group=ids.GroupName(group),
            topic=ids.TopicName(topic),
            queue_id=-1,
            message_filter=filters.compile_filter(filters.FilterKind.TAG, "*"),
            batch_size=batch_size,
            invisible_ms=invisible_ms,
            poll_s=0.0,
        )


def incoming(
    topic: str,
    body: bytes = b"hello",
    *,
    message_id: str = "",
    group: str | None = None,
    keys: tuple[str, ...] = (),
) -> message.IncomingMessage:
    """A NORMAL (or, with ``group``, FIFO) message as a decoded send request carries it."""
    return message.IncomingMessage(
        topic=topic,
        body=body,
        gzip=False,
        user_properties={},
        tag="t",
        keys=keys,
        message_id=message_id or f"ID-{topic}-{body.hex()}",
        message_type="FIFO" if group else "NORMAL",
        message_group=group,
        delivery_timestamp_ms=None,
        born_timestamp_ms=1_700_000_000_000,
        born_host="10.1.2.3",
        trace_context=None,
    )
