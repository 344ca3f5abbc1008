"""Helpers for TLS tests with real processes: the ``[tls]`` TOML of a process, raw Remoting
requests over TLS or plaintext, and the fingerprint of the certificate a port serves."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import ssl
import time

from ariane.common import tls
from ariane.remoting import codes, command, message_codec, transport
from ariane.security import ca

RQ = codes.RequestCode
RC = codes.ResponseCode
DEADLINE_S = 30.0


def tls_toml(files: ca.LocalTlsFiles, mode: str, *, reload_ms: int = 500) -> str:
    """The ``[tls]`` table of a broker or name server serving ``files`` in ``mode``."""
    return (
        "[tls]\n"
        f'server_mode = "{mode}"\n'
        f'cert_path = "{files.cert_path}"\n'
        f'key_path = "{files.key_path}"\n'
        f'trust_cert_path = "{files.ca_path}"\n'
        "handshake_timeout_ms = 3000\n"
        f"reload_check_interval_ms = {reload_ms}\n"
    )


def client_context(files: ca.LocalTlsFiles) -> ssl.SSLContext:
    """A client context that verifies the local CA (host names checked)."""
    return tls.client_context(str(files.ca_path))


def call(
    addr: str,
    code: int,
    ext: dict[str, str] | None = None,
    body: bytes = b"",
    *,
    context: ssl.SSLContext | None,
    timeout_s: float = 10.0,
) -> command.RemotingCommand:
    """One Remoting request on a fresh connection (TLS with ``context``, else plaintext).

    Raises:
        transport.TransportError: no answer (the server closed the connection).
    """

    async def go() -> command.RemotingCommand:
        client = transport.RemotingClient(ssl_context=context)
        try:
            return await client.invoke(addr, command.request(code, ext or {}, body), timeout_s)
        finally:
            await client.close()

    return asyncio.run(go())


def topic_header(topic: str) -> dict[str, str]:
    """UPDATE_AND_CREATE_TOPIC's header for ``topic`` with two queues."""
    return {
        "topic": topic,
        "defaultTopic": "TBW102",
        "readQueueNums": "2",
        "writeQueueNums": "2",
        "perm": "6",
        "topicFilterType": "SINGLE_TAG",
        "topicSysFlag": "0",
        "order": "false",
    }


def send_header(topic: str, key: str) -> dict[str, str]:
    """A SEND_MESSAGE_V2 header as Java 5.3.3 writes it, to queue 0 of ``topic``."""
    properties = message_codec.encode_properties({"UNIQ_KEY": key, "KEYS": key}).decode()
    return {
        **{"a": "tls-producer", "b": topic, "c": "TBW102", "d": "2", "e": "0", "f": "0"},
        **{"g": str(int(time.time() * 1000)), "h": "0", "i": properties, "j": "0"},
        **{"k": "false", "m": "false"},
    }


def served_fingerprint(port: int, files: ca.LocalTlsFiles) -> str:
    """SHA-256 (hex) of the leaf certificate a new TLS connection to ``127.0.0.1:port`` gets
    (verified against the local CA)."""

    async def go() -> str:
        _, writer = await asyncio.wait_for(
            asyncio.open_connection(
                "127.0.0.1", port, ssl=client_context(files), server_hostname="127.0.0.1"
            ),
            DEADLINE_S,
        )
        try:
            ssl_object = writer.get_extra_info("ssl_object")
            assert isinstance(ssl_object, ssl.SSLObject)
            der = ssl_object.getpeercert(binary_form=True)
            assert der is not None
            return hashlib.sha256(der).hexdigest()
        finally:
            writer.close()
            with contextlib.suppress(OSError, ssl.SSLError):
                await writer.wait_closed()

    return asyncio.run(go())


def file_fingerprint(files: ca.LocalTlsFiles) -> str:
    """SHA-256 (hex) of the leaf certificate in ``files.cert_path`` (DER)."""
    return hashlib.sha256(ssl.PEM_cert_to_DER_cert(files.cert_path.read_text())).hexdigest()


def closed_without_answer(addr: str, code: int, ext: dict[str, str]) -> bool:
    """Whether a plaintext request to ``addr`` is met by a closed connection (no answer)."""
    try:
        call(addr, code, ext, context=None, timeout_s=5.0)
    except transport.ConnectionClosedError:
        return True
    return False
