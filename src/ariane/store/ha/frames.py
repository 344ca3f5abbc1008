"""The HA stream's wire format: pure encode/decode, no I/O, no clock (RocketMQ ``HAConnection``).

A slave talks to its master's HA port over one TCP connection. Every frame starts with a
one-byte kind; all integers are big-endian and signed (Java ``long``/``int``).

Slave → master, fixed 17 bytes (RocketMQ's 8-byte offset report, plus the slave's epoch so that
the master can fence itself or tell a diverged slave where to cut, as ``AutoSwitchHAClient``)::

    offset  size  field
    0       1     kind          HELLO (1, first frame of a connection) or REPORT (2)
    1       8     epoch         the epoch of the slave's last CommitLog byte (0: none)
    9       8     max_offset    the slave's max CommitLog offset (bytes it holds)

Master → slave, a 33-byte header then ``body_size`` bytes of CommitLog (RocketMQ's
``[phyOffset 8][bodySize 4]`` transfer header with the epoch fields of the controller mode)::

    offset  size  field
    0       1     kind                TRANSFER (3), TRUNCATE (4) or FETCH (8)
    1       8     epoch               the epoch the body's bytes were written under
    9       8     epoch_start_offset  where that epoch starts in the CommitLog
    17      8     offset              TRANSFER: CommitLog offset of the body's first byte;
                                      TRUNCATE: cut the slave's CommitLog here, then HELLO again;
                                      FETCH: send back your record starting here
    25      4     body_size           bytes that follow (0 for TRUNCATE, FETCH and heartbeats)
    29      4     reserved            0

A record repair (Ariane's addition, ``store.record_repair``): a master whose read met a
damaged record sends FETCH; the slave answers with its own record at that offset if it passes
its checks there (``body_size`` 0 if not), in a 13-byte header and the record::

    slave → master FETCHED, 13 bytes then body_size bytes
    0       1     kind          FETCHED (9)
    1       8     offset        the FETCH's offset
    9       4     body_size     the record's bytes that follow (at most the reader's cap)

Who the slave is (Ariane's addition, issue 25: the master reports its in-sync set per broker
id to the name servers, and a failover promotes only a slave listed there). A slave may open
the connection with IDENT, before its HELLO or AUTH_REQUEST::

    slave → master IDENT, 9 bytes
    0       1     kind          IDENT (10)
    1       8     broker_id     the slave's broker id (above 0)

A master of an older build refuses the unknown kind and closes; the slave then connects again
without IDENT (``store.ha.client``), and that master reports no broker id for it.

The authenticated handshake (when the group has an inner credential; Ariane's addition: RocketMQ's
HA port has no authentication at all, security.md §8.1). The slave speaks first, the master
answers with a fresh nonce and proves the credential itself, then the slave's HELLO carries an
HMAC over both nonces and its fields; the connection then goes on with the frames above::

    slave → master AUTH_REQUEST, 18 bytes
    0       1     kind          AUTH_REQUEST (5)
    1       1     version       HANDSHAKE_VERSION (1)
    2       16    slave_nonce   random, fresh per connection

    master → slave CHALLENGE, 50 bytes
    0       1     kind          CHALLENGE (6)
    1       1     version       the master's HANDSHAKE_VERSION; NO_HANDSHAKE (0): the master has
                                no inner credential (nonce and proof are then zero)
    2       16    master_nonce  random, fresh per connection
    18      32    proof         master_proof(credential, slave_nonce, master_nonce)

    slave → master AUTH_HELLO, 49 bytes (the HELLO of an authenticated connection)
    0       1     kind          AUTH_HELLO (7)
    1       8     epoch         as in HELLO
    9       8     max_offset    as in HELLO
    17      32    proof         slave_proof(credential, master_nonce, slave_nonce,
                                            epoch, max_offset)

Proofs are HMAC-SHA256 keyed by the UTF-8 secret key over a direction label, the access key
(length-prefixed) and the fields (``_mac``); the two labels differ, so neither side's proof can
be reflected as the other's. A recorded AUTH_HELLO is useless: it covers the master's nonce of
its own connection. Version mismatches fail at both ends with both versions named.

Invariants: ``body_size`` never exceeds the reader's cap (``decode_transfer_header`` refuses a
larger one as a protocol error, so a corrupt or hostile peer cannot make us allocate), offsets
and epochs are never negative, every slave → master frame has a fixed size known from its first
byte (``slave_frame_bytes``; a FETCHED's body follows its fixed header, bounded by the cap).
"""

from __future__ import annotations

import dataclasses
import enum
import hashlib
import hmac
import struct


class FrameError(ValueError):
    """A frame that breaks the layout: unknown kind, negative field or oversize body."""


class Kind(enum.IntEnum):
    """The first byte of every frame."""

    HELLO = 1
    REPORT = 2
    TRANSFER = 3
    TRUNCATE = 4
    AUTH_REQUEST = 5
    CHALLENGE = 6
    AUTH_HELLO = 7
    FETCH = 8
    FETCHED = 9
    IDENT = 10


_REPORT = struct.Struct(">Bqq")
_TRANSFER = struct.Struct(">BqqqiI")
_FETCHED = struct.Struct(">Bqi")
_IDENT = struct.Struct(">Bq")

REPORT_BYTES = _REPORT.size
"""Size of a slave → master frame (17)."""
TRANSFER_HEADER_BYTES = _TRANSFER.size
"""Size of a master → slave header (33)."""
FETCHED_HEADER_BYTES = _FETCHED.size
IDENT_BYTES = _IDENT.size
"""Size of a slave → master IDENT (9)."""
"""Size of a slave → master FETCHED header (13)."""

HANDSHAKE_VERSION = 1
"""The authenticated handshake this build speaks."""
NO_HANDSHAKE = 0
"""CHALLENGE version of a master without an inner credential (it cannot authenticate)."""
NONCE_BYTES = 16
"""Size of each side's nonce."""
PROOF_BYTES = 32
"""Size of an HMAC-SHA256 proof."""

_AUTH_REQUEST = struct.Struct(f">BB{NONCE_BYTES}s")
_CHALLENGE = struct.Struct(f">BB{NONCE_BYTES}s{PROOF_BYTES}s")
_AUTH_HELLO = struct.Struct(f">Bqq{PROOF_BYTES}s")
AUTH_REQUEST_BYTES = _AUTH_REQUEST.size
"""Size of an AUTH_REQUEST (18)."""
CHALLENGE_BYTES = _CHALLENGE.size
"""Size of a CHALLENGE (50)."""
AUTH_HELLO_BYTES = _AUTH_HELLO.size
"""Size of an AUTH_HELLO (49)."""

_MASTER_LABEL = b"ariane-ha/1 master proof"
_SLAVE_LABEL = b"ariane-ha/1 slave hello"


@dataclasses.dataclass(frozen=True, slots=True)
class Report:
    """A slave's HELLO or REPORT: its epoch and max CommitLog offset."""

    kind: Kind
    epoch: int
    max_offset: int


@dataclasses.dataclass(frozen=True, slots=True)
class TransferHeader:
    """A master's TRANSFER or TRUNCATE header (the body, if any, follows on the wire)."""

    kind: Kind
    epoch: int
    epoch_start_offset: int
    offset: int
    body_size: int


def encode_ident(broker_id: int) -> bytes:
    """An IDENT frame naming the slave's ``broker_id`` (above 0)."""
    assert broker_id > 0, "a slave's broker id is above 0"
    return _IDENT.pack(Kind.IDENT, broker_id)


def decode_ident(data: bytes | memoryview) -> int:
    """The broker id of exactly ``IDENT_BYTES`` bytes.

    Raises:
        FrameError: wrong length or kind, or a broker id not above 0.
    """
    if len(data) != IDENT_BYTES:
        raise FrameError(f"an IDENT is {IDENT_BYTES} bytes, not {len(data)}")
    kind, broker_id = _IDENT.unpack(data)
    if kind != Kind.IDENT or broker_id <= 0:
        raise FrameError(f"bad IDENT: kind={kind} broker_id={broker_id}")
    return int(broker_id)


def encode_report(report: Report) -> bytes:
    """The 17 bytes of a HELLO or REPORT frame."""
    assert report.kind in (Kind.HELLO, Kind.REPORT), "a slave sends HELLO or REPORT"
    assert report.epoch >= 0 and report.max_offset >= 0
    return _REPORT.pack(report.kind, report.epoch, report.max_offset)


def decode_report(data: bytes | memoryview) -> Report:
    """Decode exactly ``REPORT_BYTES`` bytes.

    Raises:
        FrameError: wrong length, unknown kind or a negative field.
    """
    if len(data) != REPORT_BYTES:
        raise FrameError(f"a report is {REPORT_BYTES} bytes, not {len(data)}")
    kind, epoch, max_offset = _REPORT.unpack(data)
    if kind not in (Kind.HELLO, Kind.REPORT) or epoch < 0 or max_offset < 0:
        raise FrameError(f"bad report: kind={kind} epoch={epoch} max_offset={max_offset}")
    return Report(Kind(kind), epoch, max_offset)


def encode_transfer(header: TransferHeader, body: bytes | memoryview = b"") -> bytes:
    """A TRANSFER (with ``body``), TRUNCATE or FETCH frame, header and body in one buffer."""
    assert header.kind in (Kind.TRANSFER, Kind.TRUNCATE, Kind.FETCH), "not a master frame"
    assert header.body_size == len(body), "body_size must match the body"
    assert min(header.epoch, header.epoch_start_offset, header.offset) >= 0
    packed = _TRANSFER.pack(
        header.kind, header.epoch, header.epoch_start_offset, header.offset, header.body_size, 0
    )
    return packed + bytes(body)


def decode_transfer_header(data: bytes | memoryview, *, body_bytes_max: int) -> TransferHeader:
    """Decode exactly ``TRANSFER_HEADER_BYTES`` bytes.

    Args:
        data: the header bytes.
        body_bytes_max: the largest body the reader accepts, bytes.

    Raises:
        FrameError: wrong length, unknown kind, negative field, body over ``body_bytes_max``,
            or a TRUNCATE or FETCH with a body.
    """
    if len(data) != TRANSFER_HEADER_BYTES:
        raise FrameError(f"a transfer header is {TRANSFER_HEADER_BYTES} bytes, not {len(data)}")
    kind, epoch, epoch_start, offset, size, _reserved = _TRANSFER.unpack(data)
    if kind not in (Kind.TRANSFER, Kind.TRUNCATE, Kind.FETCH):
        raise FrameError(f"unknown master frame kind {kind}")
    if min(epoch, epoch_start, offset, size) < 0:
        raise FrameError("negative field in a transfer header")
    if size > body_bytes_max:
        raise FrameError(f"body of {size} bytes exceeds the cap of {body_bytes_max}")
    if kind in (Kind.TRUNCATE, Kind.FETCH) and size:
        raise FrameError(f"a {Kind(kind).name} frame carries no body")
    return TransferHeader(Kind(kind), epoch, epoch_start, offset, size)


def encode_fetched(offset: int, body: bytes | memoryview) -> bytes:
    """A slave's FETCHED frame: its record at ``offset`` (``b""``: none sound there)."""
    assert offset >= 0
    return _FETCHED.pack(Kind.FETCHED, offset, len(body)) + bytes(body)


def decode_fetched_header(data: bytes | memoryview, *, body_bytes_max: int) -> tuple[int, int]:
    """(offset, body_size) of exactly ``FETCHED_HEADER_BYTES`` bytes.

    Raises:
        FrameError: wrong length or kind, a negative field or a body over ``body_bytes_max``.
    """
    if len(data) != FETCHED_HEADER_BYTES:
        raise FrameError(f"a FETCHED header is {FETCHED_HEADER_BYTES} bytes, not {len(data)}")
    kind, offset, size = _FETCHED.unpack(data)
    if kind != Kind.FETCHED or offset < 0 or not 0 <= size <= body_bytes_max:
        raise FrameError(f"bad FETCHED header: kind={kind} offset={offset} size={size}")
    return offset, size


def slave_frame_bytes(kind: int) -> int:
    """Size of the slave → master frame whose first byte is ``kind``.

    Raises:
        FrameError: ``kind`` is not a slave → master frame.
    """
    sizes = {
        Kind.HELLO: REPORT_BYTES,
        Kind.REPORT: REPORT_BYTES,
        Kind.AUTH_REQUEST: AUTH_REQUEST_BYTES,
        Kind.AUTH_HELLO: AUTH_HELLO_BYTES,
        Kind.FETCHED: FETCHED_HEADER_BYTES,
        Kind.IDENT: IDENT_BYTES,
    }
    try:
        return sizes[Kind(kind)]
    except (ValueError, KeyError):
        raise FrameError(f"unknown slave frame kind {kind}") from None


@dataclasses.dataclass(frozen=True, slots=True)
class Credential:
    """The inner credential both ends of the HA port prove (RocketMQ
    ``innerClientAuthenticationCredentials``); the secret never appears in a ``repr``."""

    access_key: str
    secret_key: str = dataclasses.field(repr=False)

    def __post_init__(self) -> None:
        assert self.access_key and self.secret_key, "a credential has both keys"


@dataclasses.dataclass(frozen=True, slots=True)
class AuthRequest:
    """A slave's opening of an authenticated connection."""

    version: int
    nonce: bytes


@dataclasses.dataclass(frozen=True, slots=True)
class Challenge:
    """The master's nonce and its own proof (all zero with ``NO_HANDSHAKE`` or a refusal)."""

    version: int
    nonce: bytes
    proof: bytes


@dataclasses.dataclass(frozen=True, slots=True)
class AuthHello:
    """The HELLO of an authenticated connection, with the slave's proof."""

    epoch: int
    max_offset: int
    proof: bytes


def _mac(credential: Credential, label: bytes, *parts: bytes) -> bytes:
    access_key = credential.access_key.encode("utf-8")
    data = b"".join((label, struct.pack(">H", len(access_key)), access_key, *parts))
    return hmac.new(credential.secret_key.encode("utf-8"), data, hashlib.sha256).digest()


def master_proof(credential: Credential, slave_nonce: bytes, master_nonce: bytes) -> bytes:
    """The master's proof of the credential for one connection (32 bytes)."""
    return _mac(credential, _MASTER_LABEL, slave_nonce, master_nonce)


def slave_proof(
    credential: Credential, master_nonce: bytes, slave_nonce: bytes, epoch: int, max_offset: int
) -> bytes:
    """The slave's proof over both nonces and its HELLO fields (32 bytes)."""
    fields = struct.pack(">qq", epoch, max_offset)
    return _mac(credential, _SLAVE_LABEL, master_nonce, slave_nonce, fields)


def proofs_equal(expected: bytes, received: bytes) -> bool:
    """Constant-time comparison of two proofs."""
    return hmac.compare_digest(expected, received)


def encode_auth_request(request: AuthRequest) -> bytes:
    """The 18 bytes of an AUTH_REQUEST."""
    assert 0 <= request.version <= 255 and len(request.nonce) == NONCE_BYTES
    return _AUTH_REQUEST.pack(Kind.AUTH_REQUEST, request.version, request.nonce)


def decode_auth_request(data: bytes | memoryview) -> AuthRequest:
    """Decode exactly ``AUTH_REQUEST_BYTES`` bytes (any version: the caller compares).

    Raises:
        FrameError: wrong length or kind.
    """
    if len(data) != AUTH_REQUEST_BYTES:
        raise FrameError(f"an auth request is {AUTH_REQUEST_BYTES} bytes, not {len(data)}")
    kind, version, nonce = _AUTH_REQUEST.unpack(data)
    if kind != Kind.AUTH_REQUEST:
        raise FrameError(f"expected AUTH_REQUEST, got kind {kind}")
    return AuthRequest(version, nonce)


def encode_challenge(challenge: Challenge) -> bytes:
    """The 50 bytes of a CHALLENGE."""
    assert 0 <= challenge.version <= 255
    assert len(challenge.nonce) == NONCE_BYTES and len(challenge.proof) == PROOF_BYTES
    return _CHALLENGE.pack(Kind.CHALLENGE, challenge.version, challenge.nonce, challenge.proof)


def refusal_challenge(version: int) -> bytes:
    """A CHALLENGE that only names ``version`` (nonce and proof zero): what a master answers
    before closing a handshake it cannot take: ``HANDSHAKE_VERSION`` to a slave of another
    version, ``NO_HANDSHAKE`` when it has no credential."""
    return encode_challenge(Challenge(version, bytes(NONCE_BYTES), bytes(PROOF_BYTES)))


def decode_challenge(data: bytes | memoryview) -> Challenge:
    """Decode exactly ``CHALLENGE_BYTES`` bytes (any version: the caller compares).

    Raises:
        FrameError: wrong length or kind.
    """
    if len(data) != CHALLENGE_BYTES:
        raise FrameError(f"a challenge is {CHALLENGE_BYTES} bytes, not {len(data)}")
    kind, version, nonce, proof = _CHALLENGE.unpack(data)
    if kind != Kind.CHALLENGE:
        raise FrameError(f"expected CHALLENGE, got kind {kind}")
    return Challenge(version, nonce, proof)


def encode_auth_hello(hello: AuthHello) -> bytes:
    """The 49 bytes of an AUTH_HELLO."""
    assert hello.epoch >= 0 and hello.max_offset >= 0 and len(hello.proof) == PROOF_BYTES
    return _AUTH_HELLO.pack(Kind.AUTH_HELLO, hello.epoch, hello.max_offset, hello.proof)


def decode_auth_hello(data: bytes | memoryview) -> AuthHello:
    """Decode exactly ``AUTH_HELLO_BYTES`` bytes.

    Raises:
        FrameError: wrong length or kind, or a negative field.
    """
    if len(data) != AUTH_HELLO_BYTES:
        raise FrameError(f"an auth hello is {AUTH_HELLO_BYTES} bytes, not {len(data)}")
    kind, epoch, max_offset, proof = _AUTH_HELLO.unpack(data)
    if kind != Kind.AUTH_HELLO or epoch < 0 or max_offset < 0:
        raise FrameError(f"bad auth hello: kind={kind} epoch={epoch} max_offset={max_offset}")
    return AuthHello(epoch, max_offset, proof)
