"""``messages.outgoing`` builds field for field what the constructor-based version built."""

from __future__ import annotations

import hashlib

from hypothesis import given, settings
from hypothesis import strategies as st

from ariane.common import ids, message
from ariane.grpcwire import messages, pb

P = message.Property

_texts = st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=0x2FF), max_size=12)


def _reference(
    stored: message.StoredMessage, delivery: message.Delivery, namespace: str
) -> pb.v2.Message:
    # The previous ``outgoing``: every sub-message built by its constructor, then copied in.
    props = stored.properties
    system = pb.v2.SystemProperties(
        keys=[k for k in props.get(P.KEYS, "").split(message.KEY_SEPARATOR) if k],
        message_id=props.get(P.UNIQ_CLIENT_MESSAGE_ID_KEYIDX, ""),
        body_digest=pb.v2.Digest(
            type=pb.v2.DigestType.MD5, checksum=hashlib.md5(stored.body).hexdigest().upper()
        ),
        body_encoding=(
            pb.v2.Encoding.GZIP
            if stored.sys_flag & message.SysFlag.COMPRESSED
            else pb.v2.Encoding.IDENTITY
        ),
        message_type=props.get(P.MESSAGE_TYPE, "NORMAL")
        if props.get(P.MESSAGE_TYPE, "NORMAL") in messages.MESSAGE_TYPE_NAMES.values()
        else "NORMAL",
        born_timestamp=messages.timestamp(stored.born_timestamp_ms),
        born_host=props.get(P.BORN_HOST_NAME, stored.born_host.ip),
        store_timestamp=messages.timestamp(stored.store_timestamp_ms),
        store_host=str(stored.store_host),
        receipt_handle=delivery.receipt_handle,
        queue_id=stored.queue_id,
        queue_offset=stored.queue_offset,
        invisible_duration=messages.duration(delivery.invisible_ms),
        delivery_attempt=delivery.attempt,
    )
    if P.TAGS in props:
        system.tag = props[P.TAGS]
    if P.SHARDING_KEY in props:
        system.message_group = props[P.SHARDING_KEY]
    if P.TIMER_DELIVER_MS in props:
        system.delivery_timestamp.CopyFrom(messages.timestamp(int(props[P.TIMER_DELIVER_MS])))
    if P.TRACE_CONTEXT in props:
        system.trace_context = props[P.TRACE_CONTEXT]
    if delivery.dead_letter_origin is not None:
        system.dead_letter_queue.CopyFrom(
            pb.v2.DeadLetterQueue(
                topic=delivery.dead_letter_origin[0], message_id=delivery.dead_letter_origin[1]
            )
        )
    return pb.v2.Message(
        topic=pb.v2.Resource(name=stored.topic, resource_namespace=namespace),
        user_properties={k: v for k, v in props.items() if k not in message.RESERVED_PROPERTY_KEYS},
        system_properties=system,
        body=stored.body,
    )


@st.composite
def _stored(draw: st.DrawFn) -> message.StoredMessage:
    props: dict[str, str] = draw(st.dictionaries(_texts.filter(bool), _texts, max_size=3))
    optional = {
        P.TAGS: _texts,
        P.KEYS: st.lists(_texts, max_size=3).map(" ".join),
        P.UNIQ_CLIENT_MESSAGE_ID_KEYIDX: _texts,
        P.MESSAGE_TYPE: st.sampled_from(["NORMAL", "FIFO", "DELAY", "odd"]),
        P.BORN_HOST_NAME: _texts,
        P.SHARDING_KEY: _texts,
        P.TIMER_DELIVER_MS: st.integers(0, 2**41).map(str),
        P.TRACE_CONTEXT: _texts,
    }
    for name, values in optional.items():
        if draw(st.booleans()):
            props[name] = draw(values)
    host = message.HostAddress(draw(st.sampled_from(["10.0.0.1", "::1"])), draw(st.integers(0, 9)))
    return message.StoredMessage(
        message=message.Message(
            topic=ids.TopicName(draw(_texts.filter(bool))),
            body=draw(st.binary(min_size=1, max_size=64)),
            properties=props,
        ),
        queue_id=ids.QueueId(draw(st.integers(0, 2**31 - 1))),
        queue_offset=ids.QueueOffset(draw(st.integers(0, 2**40))),
        commit_log_offset=ids.CommitLogOffset(draw(st.integers(0, 2**40))),
        store_size_bytes=200,
        sys_flag=message.SysFlag(draw(st.sampled_from([0, 1, 0x10, 0x31]))),
        born_timestamp_ms=ids.TimestampMs(draw(st.integers(0, 2**41))),
        born_host=host,
        store_timestamp_ms=ids.TimestampMs(draw(st.integers(0, 2**41))),
        store_host=host,
        reconsume_times=0,
        prepared_transaction_offset=ids.CommitLogOffset(0),
        body_crc=0,
    )


@settings(max_examples=150, deadline=None)
@given(
    _stored(),
    st.builds(
        message.Delivery,
        receipt_handle=_texts,
        invisible_ms=st.integers(0, 2**31),
        attempt=st.integers(1, 20),
        dead_letter_origin=st.none() | st.tuples(_texts, _texts),
    ),
    st.sampled_from(["", "ns1"]),
)
def test_outgoing_equals_the_constructor_built_message(
    stored: message.StoredMessage, delivery: message.Delivery, namespace: str
) -> None:
    """In-place ``outgoing`` gives the same message and bytes as building sub-messages first."""
    expected = _reference(stored, delivery, namespace)
    got = messages.outgoing(stored, delivery, namespace)
    assert got == expected
    assert got.SerializeToString(deterministic=True) == expected.SerializeToString(
        deterministic=True
    )
    response = pb.v2_service.ReceiveMessageResponse()
    messages.outgoing_into(response.message, stored, delivery, namespace)
    assert response.message == expected
