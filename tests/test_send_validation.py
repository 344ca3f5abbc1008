"""Unit checks of the send path's range checks and of the log-line limiter (issue 9).

Each conversion that could raise on out-of-range input answers a BAD_REQUEST-family error;
the store's codec refuses out-of-range header fields before encoding; a GZIP-flagged body is
inflated at most one byte past the limit; the limiter bounds lines per key, per window and keys.
"""

from __future__ import annotations

import gzip
import zlib

import pytest

from ariane.broker.processors import send_draft
from ariane.common import errors, log_limits, message
from ariane.grpcwire import messages, pb
from ariane.store import message_codec


def _wire(**system: object) -> pb.v2.Message:
    props = pb.v2.SystemProperties(message_id="M1", born_host="h", **system)  # type: ignore[arg-type]
    return pb.v2.Message(topic=pb.v2.Resource(name="t"), body=b"x", system_properties=props)


@pytest.mark.parametrize(
    ("field", "seconds", "nanos", "error"),
    [
        ("born_timestamp", -(2**62), 0, errors.BadRequestError),
        ("born_timestamp", 253_402_300_800, 0, errors.BadRequestError),
        ("born_timestamp", 0, -1, errors.BadRequestError),
        ("born_timestamp", 0, 1_000_000_000, errors.BadRequestError),
        ("delivery_timestamp", 2**62, 0, errors.IllegalDeliveryTimeError),
    ],
)
def test_timestamps_outside_protobufs_range_are_refused(
    field: str, seconds: int, nanos: int, error: type[errors.ArianeError]
) -> None:
    """A timestamp outside years 1..9999 or with nanos outside 0..999,999,999 is refused."""
    msg = _wire()
    getattr(msg.system_properties, field).seconds = seconds
    getattr(msg.system_properties, field).nanos = nanos
    with pytest.raises(error) as caught:
        messages.incoming(msg)
    assert type(caught.value) is error


def test_the_extreme_valid_timestamps_convert() -> None:
    """The first and last valid seconds convert to ms exactly."""
    for seconds in (messages.TIMESTAMP_SECONDS_MIN, messages.TIMESTAMP_SECONDS_MAX):
        msg = _wire()
        msg.system_properties.born_timestamp.seconds = seconds
        assert messages.incoming(msg).born_timestamp_ms == seconds * 1000


@pytest.mark.parametrize(("field", "value"), [("message_type", 99), ("body_encoding", 7)])
def test_unknown_enum_values_are_bad_requests(field: str, value: int) -> None:
    """An enum number this build does not know is BAD_REQUEST, not NORMAL/IDENTITY."""
    with pytest.raises(errors.BadRequestError):
        messages.incoming(_wire(**{field: value}))


def test_gzip_bodies_are_checked_within_the_limit() -> None:
    """Valid gzip/zlib bodies pass; junk and truncation are MESSAGE_CORRUPTED; a body that
    inflates one byte past the limit is MESSAGE_BODY_TOO_LARGE."""
    send_draft.check_gzip_body(gzip.compress(b"a" * 100), 100)
    send_draft.check_gzip_body(gzip.compress(b"a") + gzip.compress(b"b"), 100)
    send_draft.check_gzip_body(zlib.compress(b"a" * 100), 100)
    for junk in (b"junk", gzip.compress(b"abc")[:-2], gzip.compress(b"a") + b"tail"):
        with pytest.raises(errors.MessageCorruptedError):
            send_draft.check_gzip_body(junk, 100)
    with pytest.raises(errors.MessageBodyTooLargeError):
        send_draft.check_gzip_body(gzip.compress(b"a" * 101), 100)


def test_the_codec_refuses_header_fields_that_do_not_fit_their_slots() -> None:
    """A born timestamp beyond a signed 64-bit long is refused at prepare, not in ``struct``."""
    host = message.HostAddress("127.0.0.1", 1)
    fields = message_codec.RecordFields(0, 0, 0, -(2**65), host, host, 0, 0)
    problem = message_codec.prepare(
        "t", b"x", {}, fields, body_bytes_max=10, properties_bytes_max=100
    )
    assert problem is message_codec.PrepareProblem.FIELD_OUT_OF_RANGE


def test_the_line_limiter_bounds_lines_per_key_window_and_table() -> None:
    """Once per key per interval, at most N lines per window, at most keys_max keys kept."""
    now = [0.0]
    limiter = log_limits.LineLimiter(
        key_interval_s=10, lines_per_window_max=3, window_s=60, keys_max=2, clock=lambda: now[0]
    )
    assert [limiter.allow("a"), limiter.allow("a"), limiter.allow("b")] == [True, False, True]
    assert [limiter.allow("c"), limiter.allow("d")] == [True, False]
    assert len(limiter) == 2 and limiter.suppressed == 2
    now[0] = 61.0
    assert limiter.allow("a") and not limiter.allow("a")
