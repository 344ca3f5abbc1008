"""The HA port with real ``ariane namesrv`` and ``ariane broker`` processes: with an inner
credential a raw TCP peer that sends a HELLO gets no byte and cannot fence the master, a slave
with the credential replicates byte-identically while one with a wrong credential gets nothing;
without a credential (the port is open) a hello with an implausible epoch still cannot fence the
master and a fake slave reporting offset 2^62 never makes a SYNC_MASTER acknowledge a send.

Own cluster: master/slave pairs with and without an inner credential, fenced at by raw peers."""

from __future__ import annotations

import pathlib
import socket
import time
from collections.abc import Iterator

import pytest

import ha_testing as ht
from ariane.common import errors
from ariane.store.ha import frames

pytestmark = pytest.mark.slow

OK = int(errors.Code.OK)
TOPIC = "ha-auth-topic"
CREDENTIAL = (
    "[auth.inner_client_authentication_credentials]\n"
    'access_key = "ariane-inner"\n'
    'secret_key = "{secret}"\n'
)
SECRET = "inner-secret-1"
INNER = frames.Credential("ariane-inner", SECRET)
NONCE = bytes(range(frames.NONCE_BYTES))
HUGE_EPOCH = 1 << 62
READ_DEADLINE_S = 5.0
"""How long a raw peer listens for what the master sends (a master that streams sends at once;
one that refuses closes at once)."""


@pytest.fixture
def namesrv(tmp_path: pathlib.Path) -> Iterator[str]:
    with ht.running_namesrv(tmp_path) as endpoint:
        yield endpoint


def _config(tmp: pathlib.Path, name: str, secret: str | None, extra: str = "") -> tuple[str, ...]:
    auth = CREDENTIAL.format(secret=secret) if secret is not None else ""
    return ht.small_store_config(tmp, name, extra + auth)


def _exchange(address: str, *sent: bytes) -> bytes:
    """Connect to ``address`` as a raw peer, send ``sent``, and return every byte received
    until the master closes the connection or ``READ_DEADLINE_S`` passes."""
    host, port = address.rsplit(":", 1)
    received = bytearray()
    deadline = time.monotonic() + READ_DEADLINE_S
    with socket.create_connection((host, int(port)), timeout=READ_DEADLINE_S) as sock:
        for data in sent:
            sock.sendall(data)
        while (left_s := deadline - time.monotonic()) > 0:
            sock.settimeout(left_s)
            try:
                chunk = sock.recv(65536)
            except (TimeoutError, ConnectionResetError):
                break
            if not chunk:
                break
            received += chunk
    return bytes(received)


def _read(sock: socket.socket, size: int) -> bytes:
    """Exactly ``size`` bytes from ``sock`` (its timeout bounds each wait)."""
    data = bytearray()
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        assert chunk, f"closed after {len(data)} of {size} bytes"
        data += chunk
    return bytes(data)


def _auth_request(version: int = frames.HANDSHAKE_VERSION) -> bytes:
    return frames.encode_auth_request(frames.AuthRequest(version, NONCE))


def _recorded_hello(address: str) -> bytes:
    """A real handshake with the credential (the master proves it and streams CommitLog bytes
    after it); returns the AUTH_HELLO sent, as an eavesdropper would record it."""
    host, port = address.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=READ_DEADLINE_S) as sock:
        sock.sendall(_auth_request())
        challenge = frames.decode_challenge(_read(sock, frames.CHALLENGE_BYTES))
        expected = frames.master_proof(INNER, NONCE, challenge.nonce)
        assert frames.proofs_equal(expected, challenge.proof)
        proof = frames.slave_proof(INNER, challenge.nonce, NONCE, 1, 0)
        hello = frames.encode_auth_hello(frames.AuthHello(1, 0, proof))
        sock.sendall(hello)
        raw = _read(sock, frames.TRANSFER_HEADER_BYTES)
        header = frames.decode_transfer_header(raw, body_bytes_max=1 << 20)
        assert header.kind is frames.Kind.TRANSFER and header.body_size > 0
    return hello


def _hello(epoch: int, offset: int) -> bytes:
    return frames.encode_report(frames.Report(frames.Kind.HELLO, epoch, offset))


def _fill(master: ht.Broker, count: int) -> int:
    ht.create_topic(master.endpoint, TOPIC)
    for i in range(count):
        assert ht.send(master.endpoint, TOPIC, f"m-{i}".encode()) == OK
    return ht.stats(master.endpoint).commit_log_max_offset


def test_raw_hello_to_an_authenticated_ha_port_gets_nothing_and_fences_nothing(
    tmp_path: pathlib.Path, namesrv: str
) -> None:
    """Proves a peer without the credential that sends HELLOs (one with a huge epoch) receives
    0 bytes and leaves the master's epoch and writability unchanged, that an AUTH_HELLO recorded
    from a real handshake gets no CommitLog byte when replayed, and that another handshake
    version is answered with this master's version only."""
    master = ht.new_broker(tmp_path, "master")
    try:
        master.start(
            tmp_path, namesrv, "ASYNC_MASTER", broker_id=0, extra=_config(tmp_path, "m", SECRET)
        )
        end = _fill(master, 10)
        assert end > 0
        assert _exchange(master.ha, _hello(0, 0)) == b""
        assert _exchange(master.ha, _hello(HUGE_EPOCH, 0)) == b""
        recorded = _recorded_hello(master.ha)
        replayed = _exchange(master.ha, _auth_request(), recorded)
        assert len(replayed) == frames.CHALLENGE_BYTES, "a replayed AUTH_HELLO got more"
        wrong_version = _exchange(master.ha, _auth_request(version=9))
        assert wrong_version == frames.refusal_challenge(frames.HANDSHAKE_VERSION)
        stats = ht.stats(master.endpoint)
        assert stats.epoch == 1 and stats.writable
        assert ht.send(master.endpoint, TOPIC, b"still-writable") == OK
    finally:
        master.stop()


def test_implausible_epoch_on_an_open_ha_port_does_not_fence(
    tmp_path: pathlib.Path, namesrv: str
) -> None:
    """Proves that without a credential (an open HA port) a HELLO with epoch 2^62 is a protocol
    violation, not a fence: the master stays writable at its epoch; a slave asking to
    authenticate is told the master has no credential (NO_HANDSHAKE)."""
    master = ht.new_broker(tmp_path, "master")
    try:
        master.start(
            tmp_path, namesrv, "ASYNC_MASTER", broker_id=0, extra=_config(tmp_path, "m", None)
        )
        _fill(master, 3)
        _exchange(master.ha, _hello(HUGE_EPOCH, 0))
        no_credential = _exchange(master.ha, _auth_request())
        assert no_credential == frames.refusal_challenge(frames.NO_HANDSHAKE)
        stats = ht.stats(master.endpoint)
        assert stats.epoch == 1 and stats.writable
        assert ht.send(master.endpoint, TOPIC, b"still-writable") == OK
    finally:
        master.stop()


def test_fake_slave_reporting_beyond_the_end_never_makes_a_sync_master_ack(
    tmp_path: pathlib.Path, namesrv: str
) -> None:
    """Proves a fake slave on an open HA port that reports offset 2^62 never makes the
    SYNC_MASTER (no real slave) acknowledge a send while it stays connected."""
    master = ht.new_broker(tmp_path, "master")
    try:
        master.start(
            tmp_path, namesrv, "SYNC_MASTER", broker_id=0, extra=_config(tmp_path, "m", None)
        )
        ht.create_topic(master.endpoint, TOPIC)
        assert ht.send(master.endpoint, TOPIC, b"alone") == int(errors.Code.HA_NOT_AVAILABLE)
        stats = ht.stats(master.endpoint)
        report = frames.encode_report(frames.Report(frames.Kind.REPORT, stats.epoch, HUGE_EPOCH))
        host, port = master.ha.rsplit(":", 1)
        with socket.create_connection((host, int(port)), timeout=READ_DEADLINE_S) as fake:
            fake.sendall(_hello(stats.epoch, stats.commit_log_max_offset) + report)
            assert ht.send(master.endpoint, TOPIC, b"no-replica-holds-this") != OK
    finally:
        master.stop()


def test_slave_with_the_credential_replicates_and_one_with_a_wrong_credential_gets_nothing(
    tmp_path: pathlib.Path, namesrv: str
) -> None:
    """Proves a slave holding the inner credential replicates byte-identically under a
    SYNC_MASTER that checks it, while a slave with a wrong secret is refused and holds 0 bytes."""
    master, good, bad = (ht.new_broker(tmp_path, n) for n in ("master", "good", "bad"))
    try:
        master.start(
            tmp_path, namesrv, "SYNC_MASTER", broker_id=0, extra=_config(tmp_path, "m", SECRET)
        )
        good.start(
            tmp_path,
            namesrv,
            "SLAVE",
            broker_id=1,
            master_ha=master.ha,
            extra=_config(tmp_path, "g", SECRET),
        )
        bad.start(
            tmp_path,
            namesrv,
            "SLAVE",
            broker_id=2,
            master_ha=master.ha,
            extra=_config(tmp_path, "b", "wrong-secret"),
        )
        ht.create_topic(master.endpoint, TOPIC)
        ht.poll(lambda: ht.send(master.endpoint, TOPIC, b"warm-up") == OK, "a slave in sync")
        for i in range(10):
            assert ht.send(master.endpoint, TOPIC, f"m-{i}".encode()) == OK
        end = ht.stats(master.endpoint).commit_log_max_offset
        assert ht.stats(good.endpoint).commit_log_max_offset >= end
        assert ht.commit_log_bytes(good.store, end) == ht.commit_log_bytes(master.store, end)
        log = tmp_path / "master.log"
        ht.poll(
            lambda: (
                "refused HA peer" in log.read_text()
                or ht.stats(bad.endpoint).commit_log_max_offset > 0
            ),
            "the bad slave's attempt",
        )
        assert ht.stats(bad.endpoint).commit_log_max_offset == 0, "a wrong credential replicated"
        assert SECRET not in log.read_text() and "wrong-secret" not in log.read_text()
    finally:
        for broker in (master, good, bad):
            broker.stop()
