"""The HA port's authenticated handshake codec (``store.ha.frames``) without sockets: every frame
round-trips, bad frames are refused, each proof verifies only for the credential, nonces and
fields it was made over (so a recorded AUTH_HELLO is useless on another connection), the two
directions' proofs never coincide, and the slave frame sizes are known from the first byte."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ariane.store.ha import frames

LONGS = st.integers(min_value=0, max_value=2**63 - 1)
FIELDS = st.integers(min_value=0, max_value=2**62)
NONCES = st.binary(min_size=frames.NONCE_BYTES, max_size=frames.NONCE_BYTES)
PROOFS = st.binary(min_size=frames.PROOF_BYTES, max_size=frames.PROOF_BYTES)
VERSIONS = st.integers(min_value=0, max_value=255)
CREDENTIAL = frames.Credential("ariane-inner", "inner-secret-1")


@given(version=VERSIONS, nonce=NONCES)
def test_auth_request_round_trips(version: int, nonce: bytes) -> None:
    """Proves AUTH_REQUEST encodes to 18 bytes and decodes back, whatever its version."""
    request = frames.AuthRequest(version, nonce)
    data = frames.encode_auth_request(request)
    assert len(data) == frames.AUTH_REQUEST_BYTES == 18
    assert frames.decode_auth_request(data) == request


@given(version=VERSIONS, nonce=NONCES, proof=PROOFS)
def test_challenge_round_trips(version: int, nonce: bytes, proof: bytes) -> None:
    """Proves CHALLENGE encodes to 50 bytes and decodes back."""
    challenge = frames.Challenge(version, nonce, proof)
    data = frames.encode_challenge(challenge)
    assert len(data) == frames.CHALLENGE_BYTES == 50
    assert frames.decode_challenge(data) == challenge


@given(epoch=LONGS, offset=LONGS, proof=PROOFS)
def test_auth_hello_round_trips(epoch: int, offset: int, proof: bytes) -> None:
    """Proves AUTH_HELLO encodes to 49 bytes and decodes back."""
    hello = frames.AuthHello(epoch, offset, proof)
    data = frames.encode_auth_hello(hello)
    assert len(data) == frames.AUTH_HELLO_BYTES == 49
    assert frames.decode_auth_hello(data) == hello


def test_bad_handshake_frames_are_refused() -> None:
    """Proves wrong lengths, wrong kinds and negative fields are FrameErrors."""
    request = frames.encode_auth_request(frames.AuthRequest(1, bytes(16)))
    with pytest.raises(frames.FrameError, match="18 bytes"):
        frames.decode_auth_request(request[:-1])
    with pytest.raises(frames.FrameError, match="AUTH_REQUEST"):
        frames.decode_auth_request(b"\x01" + request[1:])
    with pytest.raises(frames.FrameError, match="CHALLENGE"):
        frames.decode_challenge(b"\x05" + bytes(49))
    hello = bytearray(frames.encode_auth_hello(frames.AuthHello(1, 2, bytes(32))))
    hello[1] = 0x80  # epoch < 0
    with pytest.raises(frames.FrameError, match="bad auth hello"):
        frames.decode_auth_hello(bytes(hello))
    with pytest.raises(frames.FrameError, match="49 bytes"):
        frames.decode_auth_hello(bytes(48))


def test_slave_frame_sizes_follow_the_first_byte() -> None:
    """Proves the master can size every slave frame from its kind and refuses other kinds."""
    assert frames.slave_frame_bytes(frames.Kind.HELLO) == frames.REPORT_BYTES
    assert frames.slave_frame_bytes(frames.Kind.REPORT) == frames.REPORT_BYTES
    assert frames.slave_frame_bytes(frames.Kind.AUTH_REQUEST) == frames.AUTH_REQUEST_BYTES
    assert frames.slave_frame_bytes(frames.Kind.AUTH_HELLO) == frames.AUTH_HELLO_BYTES
    assert frames.slave_frame_bytes(frames.Kind.FETCHED) == frames.FETCHED_HEADER_BYTES
    for kind in (0, frames.Kind.TRANSFER, frames.Kind.CHALLENGE, 200):
        with pytest.raises(frames.FrameError, match="unknown slave frame kind"):
            frames.slave_frame_bytes(kind)


@given(master_nonce=NONCES, slave_nonce=NONCES, other=NONCES, epoch=FIELDS, offset=FIELDS)
def test_slave_proof_binds_credential_nonces_and_fields(
    master_nonce: bytes, slave_nonce: bytes, other: bytes, epoch: int, offset: int
) -> None:
    """Proves a slave proof verifies only with the same credential, both nonces and the HELLO
    fields: a proof recorded on one connection fails under another master nonce (replay)."""
    proof = frames.slave_proof(CREDENTIAL, master_nonce, slave_nonce, epoch, offset)
    assert len(proof) == frames.PROOF_BYTES
    same = frames.slave_proof(CREDENTIAL, master_nonce, slave_nonce, epoch, offset)
    assert frames.proofs_equal(proof, same)
    variants = [
        frames.slave_proof(
            frames.Credential("ariane-inner", "other"), master_nonce, slave_nonce, epoch, offset
        ),
        frames.slave_proof(
            frames.Credential("other-key", "inner-secret-1"),
            master_nonce,
            slave_nonce,
            epoch,
            offset,
        ),
        frames.slave_proof(CREDENTIAL, master_nonce, slave_nonce, epoch + 1, offset),
        frames.slave_proof(CREDENTIAL, master_nonce, slave_nonce, epoch, offset + 1),
    ]
    if other != master_nonce:
        variants.append(frames.slave_proof(CREDENTIAL, other, slave_nonce, epoch, offset))
    if other != slave_nonce:
        variants.append(frames.slave_proof(CREDENTIAL, master_nonce, other, epoch, offset))
    assert not any(frames.proofs_equal(proof, v) for v in variants)


@given(first=NONCES, second=NONCES)
def test_master_and_slave_proofs_never_coincide(first: bytes, second: bytes) -> None:
    """Proves the direction labels keep a master proof from passing as a slave proof (no
    reflection), and a master proof changes with either nonce."""
    master = frames.master_proof(CREDENTIAL, first, second)
    assert not frames.proofs_equal(master, frames.slave_proof(CREDENTIAL, second, first, 0, 0))
    if first != second:
        assert not frames.proofs_equal(master, frames.master_proof(CREDENTIAL, second, first))


def test_refusal_challenge_names_only_a_version() -> None:
    """Proves the refusal CHALLENGE carries the version and zero nonce and proof."""
    for version in (frames.NO_HANDSHAKE, frames.HANDSHAKE_VERSION):
        challenge = frames.decode_challenge(frames.refusal_challenge(version))
        assert challenge == frames.Challenge(version, bytes(16), bytes(32))


def test_credential_secret_stays_out_of_repr() -> None:
    """Proves a credential's repr names the access key, never the secret."""
    assert "inner-secret-1" not in repr(CREDENTIAL) and "ariane-inner" in repr(CREDENTIAL)


def test_record_repair_frames_round_trip_and_are_bounded() -> None:
    """Proves a FETCH (no body) and a FETCHED (header then the record) round-trip, and that a
    FETCHED over the reader's cap, a FETCH with a body or another kind is refused."""
    fetch = frames.TransferHeader(frames.Kind.FETCH, 2, 100, 4_096, 0)
    raw = frames.encode_transfer(fetch)
    assert frames.decode_transfer_header(raw, body_bytes_max=0) == fetch
    with pytest.raises(frames.FrameError, match="FETCH frame carries no body"):
        frames.decode_transfer_header(
            raw[:25] + (5).to_bytes(4, "big") + raw[29:], body_bytes_max=9
        )
    fetched = frames.encode_fetched(4_096, b"record")
    header = fetched[: frames.FETCHED_HEADER_BYTES]
    assert frames.decode_fetched_header(header, body_bytes_max=6) == (4_096, 6)
    assert fetched[frames.FETCHED_HEADER_BYTES :] == b"record"
    with pytest.raises(frames.FrameError, match="bad FETCHED"):
        frames.decode_fetched_header(header, body_bytes_max=5)
    with pytest.raises(frames.FrameError, match="bad FETCHED"):
        frames.decode_fetched_header(bytes([frames.Kind.REPORT]) + header[1:], body_bytes_max=6)
