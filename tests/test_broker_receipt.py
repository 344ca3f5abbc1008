"""Receipt handles round-trip, stay urlsafe and bounded, and reject anything else cleanly."""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import re
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ariane.broker.pop import receipt
from ariane.common import errors, ids

_NAMES = st.text(alphabet=st.characters(exclude_categories=["Cs"]), min_size=1, max_size=60).filter(
    lambda s: len(s.encode("utf-8")) <= receipt.NAME_BYTES_MAX
)

_HANDLES = st.builds(
    receipt.ReceiptHandle,
    broker_name=_NAMES.map(ids.BrokerName),
    topic=_NAMES.map(ids.TopicName),
    queue_id=st.integers(0, 2**32 - 1).map(ids.QueueId),
    queue_offset=st.integers(0, 2**64 - 1).map(ids.QueueOffset),
    commit_log_offset=st.integers(0, 2**64 - 1).map(ids.CommitLogOffset),
    popped_at_ms=st.integers(0, 2**64 - 1).map(ids.TimestampMs),
    invisible_ms=st.integers(0, 2**32 - 1),
    delivery_attempt=st.integers(0, 2**16 - 1),
    handle_version=st.integers(0, 2**64 - 1),
)


def _sample() -> receipt.ReceiptHandle:
    return receipt.ReceiptHandle(
        broker_name=ids.BrokerName("broker-a"),
        topic=ids.TopicName("orders"),
        queue_id=ids.QueueId(3),
        queue_offset=ids.QueueOffset(1234),
        commit_log_offset=ids.CommitLogOffset(987_654_321),
        popped_at_ms=ids.TimestampMs(1_700_000_000_000),
        invisible_ms=30_000,
        delivery_attempt=2,
        handle_version=77,
    )


@settings(max_examples=150, deadline=None)
@given(_HANDLES)
def test_every_handle_round_trips_as_urlsafe_bounded_text(handle: receipt.ReceiptHandle) -> None:
    """encode → decode gives the same handle; the text is base64url within the length bound."""
    text = receipt.encode(handle)
    assert re.fullmatch(r"[A-Za-z0-9_-]+", text)
    assert len(text) <= receipt.RECEIPT_HANDLE_CHARS_MAX
    assert receipt.decode(text) == handle


def test_the_longest_handle_fits_the_bound() -> None:
    """Two 255-byte names and maximal numbers still encode within RECEIPT_HANDLE_CHARS_MAX."""
    longest = receipt.ReceiptHandle(
        broker_name=ids.BrokerName("b" * 255),
        topic=ids.TopicName("%DLQ%" + "g" * 250),
        queue_id=ids.QueueId(2**32 - 1),
        queue_offset=ids.QueueOffset(2**64 - 1),
        commit_log_offset=ids.CommitLogOffset(2**64 - 1),
        popped_at_ms=ids.TimestampMs(2**64 - 1),
        invisible_ms=2**32 - 1,
        delivery_attempt=2**16 - 1,
        handle_version=2**64 - 1,
    )
    assert receipt.decode(receipt.encode(longest)) == longest
    assert len(receipt.encode(longest)) <= receipt.RECEIPT_HANDLE_CHARS_MAX
    assert longest.invisible_until_ms == longest.popped_at_ms + longest.invisible_ms


def test_encoding_refuses_values_that_do_not_fit() -> None:
    """Empty or over-long names and out-of-range numbers are programmer errors at encode."""
    base = _sample()
    for bad in (
        _replace(base, broker_name=ids.BrokerName("")),
        _replace(base, topic=ids.TopicName("t" * 256)),
        _replace(base, queue_id=ids.QueueId(-1)),
        _replace(base, delivery_attempt=2**16),
    ):
        with pytest.raises(ValueError):
            receipt.encode(bad)


def _replace(handle: receipt.ReceiptHandle, **changes: object) -> receipt.ReceiptHandle:
    return dataclasses.replace(handle, **changes)  # type: ignore[arg-type]


def test_damaged_handles_are_invalid_with_a_clear_reason() -> None:
    """A flipped character, truncation, padding, a foreign version or junk all raise the error."""
    text = receipt.encode(_sample())
    flipped = text[:10] + ("A" if text[10] != "A" else "B") + text[11:]
    raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    body = bytes((9,)) + raw[1:-4]
    other_version = base64.urlsafe_b64encode(body + zlib.crc32(body).to_bytes(4, "big"))
    cases = {
        "": "empty",
        "x" * (receipt.RECEIPT_HANDLE_CHARS_MAX + 1): "limit",
        text + "=": "alphabet",
        "has space": "alphabet",
        flipped: "checksum",
        text[:-6]: "checksum",
        "A": "base64",
        other_version.decode().rstrip("="): "version 9",
    }
    for bad, reason in cases.items():
        with pytest.raises(errors.InvalidReceiptHandleError, match=reason):
            receipt.decode(bad)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=300))
def test_garbage_text_raises_only_the_receipt_error(text: str) -> None:
    """Arbitrary strings never crash decode with anything but InvalidReceiptHandleError."""
    with contextlib.suppress(errors.InvalidReceiptHandleError):
        receipt.decode(text)


@settings(max_examples=200, deadline=None)
@given(st.binary(min_size=1, max_size=600))
def test_checksummed_garbage_raises_only_the_receipt_error(payload: bytes) -> None:
    """Even garbage with a valid CRC (past the checksum) fails only with the receipt error."""
    body = bytes((receipt.FORMAT_VERSION,)) + payload
    text = base64.urlsafe_b64encode(body + zlib.crc32(body).to_bytes(4, "big")).decode()
    with contextlib.suppress(errors.InvalidReceiptHandleError):
        receipt.decode(text.rstrip("="))
