"""Idempotent classic sends against a real broker process: a classic Remoting producer that
sets the user property ``ARIANE_IDEMPOTENCY_KEY`` gets the de-duplication a v2 producer gets
(one send processor serves both protocols): a single message sent again (with a fresh client
``UNIQ_KEY`` and to another queue, as a retrying Java producer may) is stored once and answered
with the first store's offset message id, queue id and queue offset; a key repeated inside a
``SEND_BATCH_MESSAGE`` or already stored is not stored again; messages without a key are
stored every time.

Own cluster: a name server and one broker with its Remoting address."""

from __future__ import annotations

import asyncio
import itertools
import pathlib

import pytest

import ha_testing as ht
from ariane import dev
from ariane.common import idempotency
from ariane.remoting import codes, command, message_codec, transport

pytestmark = pytest.mark.slow

TOPIC = "idem-classic"
KEY = idempotency.IDEMPOTENCY_KEY_PROPERTY
RQ = codes.RequestCode
_SEQUENCE = itertools.count(1)


def _uniq() -> str:
    """A fresh client message id (each try of a re-run producer makes a new one)."""
    return f"7F0000010000{next(_SEQUENCE):020X}"


def _props(key: str | None) -> dict[str, str]:
    props = {"UNIQ_KEY": _uniq(), "TAGS": "t"}
    if key is not None:
        props[KEY] = key
    return props


def _header(queue_id: int, properties: dict[str, str], *, batch: bool) -> dict[str, str]:
    """A ``SendMessageRequestHeaderV2`` as the Java client writes it."""
    return {
        "a": "classic-idem-producer",
        "b": TOPIC,
        "c": "TBW102",
        "d": "4",
        "e": str(queue_id),
        "f": "0",
        "g": "1700000000000",
        "h": "0",
        "i": message_codec.encode_properties(properties).decode(),
        "j": "0",
        "k": "false",
        "m": "true" if batch else "false",
    }


def _call(addr: str, code: int, ext: dict[str, str], body: bytes) -> command.RemotingCommand:
    async def call() -> command.RemotingCommand:
        client = transport.RemotingClient()
        try:
            return await client.invoke(addr, command.request(code, ext, body), 20.0)
        finally:
            await client.close()

    return asyncio.run(call())


def _send_one(addr: str, key: str | None, queue_id: int) -> tuple[str, str, str]:
    """SEND_MESSAGE_V2 of one message; its (msgId, queueId, queueOffset)."""
    reply = _call(addr, RQ.SEND_MESSAGE_V2, _header(queue_id, _props(key), batch=False), b"m")
    assert reply.code == codes.ResponseCode.SUCCESS, reply.remark
    ext = reply.ext_fields
    return ext["msgId"], ext["queueId"], ext["queueOffset"]


def _send_batch(addr: str, keys: list[str | None], queue_id: int) -> command.RemotingCommand:
    body = message_codec.encode_batch(
        [message_codec.BatchMessage(body=b"b", properties=_props(k)) for k in keys]
    )
    return _call(addr, RQ.SEND_BATCH_MESSAGE, _header(queue_id, {}, batch=True), body)


def _stored(endpoint: str) -> int:
    return ht.queue_end(endpoint, TOPIC, 0) + ht.queue_end(endpoint, TOPIC, 1)


def test_a_classic_send_with_an_idempotency_key_is_stored_once(tmp_path: pathlib.Path) -> None:
    """A keyed classic send repeated (single and in batches, to another queue) is stored
    once and answered with where the first try went; unkeyed ones are
    stored each time."""
    remoting = f"127.0.0.1:{dev.free_port()}"
    with ht.running_namesrv(tmp_path) as namesrv:
        broker = ht.new_broker(tmp_path, "broker")
        try:
            broker.start(
                tmp_path,
                namesrv,
                "ASYNC_MASTER",
                broker_id=0,
                extra=("--remoting-listen", remoting),
            )
            ht.create_topic(broker.endpoint, TOPIC)
            first = _send_one(remoting, "order-1", 0)
            again = _send_one(remoting, "order-1", 1)  # a retry to another queue
            assert again == first
            assert _stored(broker.endpoint) == 1
            _send_one(remoting, None, 0)
            _send_one(remoting, None, 0)
            assert _stored(broker.endpoint) == 3
            reply = _send_batch(remoting, ["order-1", "order-2", "order-2", None], 1)
            assert reply.code == codes.ResponseCode.SUCCESS, reply.remark
            assert _stored(broker.endpoint) == 5  # order-2 once and the unkeyed one
            ids = reply.ext_fields["msgId"].split(",")
            assert len(ids) == 4 and ids[0] == first[0] and ids[1] == ids[2]
            assert _send_batch(remoting, ["order-2"], 0).code == codes.ResponseCode.SUCCESS
            assert _stored(broker.endpoint) == 5
        finally:
            broker.stop()
