"""Idempotent sends without sockets: the key's message id, the producer's choice of broker group
for a key (stable whatever the route order, retries kept there), and the Spark sink's
``exactlyOnce`` and ``checkpointLocation`` options."""

from __future__ import annotations

import asyncio

import pytest

from ariane import client
from ariane.common import idempotency
from ariane.connectors.spark import options
from ariane.grpcwire import pb
from client_testing import FakeTransport, accept_all, queues

TWO_BROKERS = [("broker-a", "10.0.0.1:8081"), ("broker-b", "10.0.0.2:8081")]


def test_a_key_names_one_message_id_in_the_clients_layout() -> None:
    """The id of a key is the same on every call, 34 upper-case hex characters starting 01,
    differs between keys; empty, overlong and control-character keys are refused."""
    first = idempotency.message_id_of("spark/q/0/1/2/abc")
    assert first == idempotency.message_id_of("spark/q/0/1/2/abc")
    assert len(first) == 34 and first.startswith("01") and first == first.upper()
    assert first != idempotency.message_id_of("spark/q/0/1/3/abc")
    for bad in ("", "x" * (idempotency.KEY_CHARS_MAX + 1), "a\x01b"):
        with pytest.raises(ValueError):
            client.OutgoingMessage(b"x", idempotency_key=bad)


def _owners(route: list[tuple[str, str]], keys: list[str]) -> dict[str, str]:
    """Key -> endpoint its message was sent to, by a producer over ``route``."""
    fake = FakeTransport({"t": queues("t", route)})

    async def main() -> dict[str, str]:
        async with client.Producer("ns:9876", transport=fake) as producer:
            batch = [client.OutgoingMessage(k.encode(), idempotency_key=k) for k in keys]
            receipts = await producer.send_batch("t", batch)
        out: dict[str, str] = {}
        for endpoint, request in fake.sent():
            for m in request.messages:
                key = m.user_properties[idempotency.IDEMPOTENCY_KEY_PROPERTY]
                assert m.system_properties.message_id == idempotency.message_id_of(key)
                out[key] = endpoint
        assert [r.message_id for r in receipts] == [idempotency.message_id_of(k) for k in keys]
        return out

    return asyncio.run(main())


def test_a_key_goes_to_the_same_broker_group_whatever_the_route_order() -> None:
    """Keyed messages are spread over both groups by key, each key to the same group when the
    name server lists the groups the other way round."""
    keys = [f"k{i}" for i in range(40)]
    forward = _owners(TWO_BROKERS, keys)
    assert set(forward.values()) == {"10.0.0.1:8081", "10.0.0.2:8081"}
    assert _owners(TWO_BROKERS[::-1], keys) == forward


def test_a_keyed_send_is_retried_on_its_broker_only() -> None:
    """When a key's broker does not answer, the send is retried there (never on the other
    group, which would not know the key) and then given up."""
    key = "r0"
    owner = _owners(TWO_BROKERS, [key])[key]

    async def down(
        endpoint: str, request: pb.v2_service.SendMessageRequest
    ) -> pb.v2_service.SendMessageResponse:
        if endpoint == owner:
            raise client.BrokerUnreachableError(f"{endpoint} did not answer")
        return await accept_all(endpoint, request)

    fake = FakeTransport({"t": queues("t", TWO_BROKERS)}, down)

    async def main() -> None:
        async with client.Producer("ns:9876", transport=fake) as producer:
            with pytest.raises(client.BrokerUnreachableError):
                await producer.send("t", b"x", idempotency_key=key)

    asyncio.run(main())
    assert {endpoint for endpoint, _ in fake.sent()} == {owner}
    assert len(fake.sent()) == client.ProducerSettings().send_attempts


def test_sink_options_exactly_once_by_default_and_checkpoint_location_accepted() -> None:
    """``exactlyOnce`` defaults to true and takes false; Spark's ``checkpointLocation`` (which
    ``writeStream`` passes, lower-cased) is accepted; a malformed value names the option."""
    base = {"endpoints": "h:1", "topic": "t", "checkpointlocation": "/cp"}
    assert options.write_options(base).exactly_once
    assert not options.write_options({**base, "exactlyOnce": "false"}).exactly_once
    with pytest.raises(options.OptionError, match="exactlyOnce"):
        options.write_options({**base, "exactlyOnce": "maybe"})
