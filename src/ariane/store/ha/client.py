"""``HAClient``: the slave side of replication (RocketMQ ``DefaultHAClient``).

It connects to the master's HA port, sends HELLO (its epoch and max CommitLog offset), obeys a
TRUNCATE (cuts its CommitLog and epoch history, HELLOs again), and appends every TRANSFER body
byte-identical at its own max offset (``MessageStore.append_replicated``, which dispatches the
slave's own ConsumeQueues and index). After each batch, and at least every heartbeat interval,
it REPORTs its max offset; under SYNC_FLUSH it syncs before reporting, so what a SYNC_MASTER
acknowledges is on two disks. A dropped or silent connection (``housekeeping_interval_ms``) is
reconnected after ``reconnect_interval_ms``.

The reconnect loop (``run``) ends only when cancelled: a session that ends with any other
exception is logged and retried. ``_session`` ends with one plain exception, never an exception
group: a plain ``except BaseExceptionGroup`` unwraps its TaskGroup's group. (``raise`` inside an
``except*`` clause is not used: Python 3.11.0-3.11.3, e.g. Debian bookworm's 3.11.2 in the
image, wrap that exception in a new ``ExceptionGroup`` — CPython gh-103590 — which no
``except OSError`` catches: the loop died at the master's first disconnect and the slave never
replicated again, so every SYNC_MASTER write of the group was refused.)

With an inner credential the slave opens with the authenticated handshake (``frames``): it
sends AUTH_REQUEST with a fresh nonce, checks the master's proof in its CHALLENGE (a master
that cannot prove the credential, has none, or speaks another handshake version is left, with
the reason logged), and sends its HELLO as an AUTH_HELLO carrying its own proof. It never falls
back to an unauthenticated HELLO.

With ``broker_id`` the slave opens each connection with IDENT (its broker id, ``frames``), so
that its master's in-sync report names it. A connection that sent IDENT and ended before the
master's first frame (a master of an older build refuses the kind) is followed by one without
it, and the next after that tries IDENT again; a master of this build sends its first frame at
once.

With ``tls_context`` (the broker's ``[tls] server_mode = "enforcing"``) the connection is TLS:
the master's certificate is verified against ``trust_cert_path`` and its host name, and this
broker's certificate is presented; the handshake above then runs inside TLS. A certificate the
slave cannot verify is an ``ssl.SSLError`` (an ``OSError``): logged, retried.

Invariant: the slave's CommitLog is always a prefix of the master's of the same epochs; a frame
at any other offset than the slave's max is a protocol error and drops the connection.
"""

from __future__ import annotations

import asyncio
import logging
import os
import ssl
from collections.abc import Callable

from ariane.common import ids, log_limits
from ariane.store import message_store, record_repair
from ariane.store import settings as store_settings
from ariane.store.ha import epochs, frames
from ariane.store.ha import settings as ha_settings

_log = logging.getLogger(__name__)

REFUSAL_LOG_INTERVAL_S = 30.0
"""Least time between two identical "refused" lines (a slave retries every second), s."""
SESSION_ENDED = (OSError, asyncio.IncompleteReadError, TimeoutError, ValueError)
"""The exceptions that end a session in the ordinary way (the connection dropped or went silent,
a malformed frame): logged at INFO, then reconnected."""


class HAClient:
    """Replicates a master's CommitLog into this broker's store.

    Args:
        store: this slave's store.
        history: this store's epoch history.
        config: the HA settings.
        master_address: returns the master's HA ``HOST:PORT`` ("" while unknown); asked
            before every connection, so a new master is followed.
        on_truncate: called with the offset after a TRUNCATE cut this store's diverged tail
            (state derived from the cut bytes, e.g. the broker's schedule, starts over).
        credential: the inner credential to prove to the master; ``None``: a plain HELLO.
        tls_context: builds the client context of each connection (``common.tls.
            peer_client_context``: verifies the master against the trust file, presents this
            broker's certificate; built per connection so rotated files are used); ``None``:
            plaintext.
        broker_id: this slave's current broker id, sent as IDENT; ``None``: no IDENT.
    """

    def __init__(
        self,
        store: message_store.MessageStore,
        history: epochs.EpochHistory,
        config: ha_settings.HASettings,
        master_address: Callable[[], str],
        *,
        on_truncate: Callable[[int], object] | None = None,
        credential: frames.Credential | None = None,
        tls_context: Callable[[], ssl.SSLContext | None] | None = None,
        broker_id: Callable[[], int] | None = None,
    ) -> None:
        self._tls_context = tls_context
        self._broker_id = broker_id
        self._send_ident = True
        self._frames_seen = 0
        """Master frames received since start (tells whether a connection got any)."""
        self._store = store
        self._credential = credential
        self._on_truncate = on_truncate
        self._history = history
        self._settings = config
        self._master_address = master_address
        self._refusals = log_limits.LineLimiter(key_interval_s=REFUSAL_LOG_INTERVAL_S)
        self.connected = False
        self.link_address = ""
        """The local ``host:port`` of the latest connection to the master (as the master sees
        this slave; kept after it ends, so the name servers can match the master's last
        in-sync report); "" before the first."""
        self.sessions = 0
        """Connections made since start (for tests and stats)."""

    async def run(self) -> None:
        """Replicate until cancelled, reconnecting after failures."""
        pause_s = self._settings.reconnect_interval_ms / 1000
        while True:
            address = self._master_address()
            if address:
                try:
                    await self._session(address)
                except (frames.FrameError, ssl.SSLError) as exc:  # refused: say so
                    if self._refusals.allow(str(exc)):
                        _log.warning("HA connection to %s refused: %s", address, exc)
                except SESSION_ENDED as exc:
                    _log.info("HA connection to %s ended: %s", address, exc)
                except Exception:  # a slave that stops replicating fails every SYNC write
                    _log.exception("HA connection to %s failed; reconnecting", address)
                finally:
                    self.connected = False
            await asyncio.sleep(pause_s)

    def _report(self, kind: frames.Kind) -> bytes:
        max_offset = self._store.max_commit_log_offset
        return frames.encode_report(frames.Report(kind, self._history.last_epoch, max_offset))

    async def _session(self, address: str) -> None:
        host, port = ha_settings.split_address(address)
        timeout_s = self._settings.housekeeping_interval_ms / 1000
        context = self._tls_context() if self._tls_context is not None else None
        reader, writer = await asyncio.wait_for(
            asyncio.open_connection(
                host, port, ssl=context, server_hostname=host if context is not None else None
            ),
            timeout_s,
        )
        self.connected = True
        self.sessions += 1
        local = writer.get_extra_info("sockname")
        self.link_address = f"{local[0]}:{local[1]}" if local else ""
        _log.info("replicating from %s at offset %d", address, self._store.max_commit_log_offset)
        ident = self._broker_id() if self._broker_id is not None and self._send_ident else 0
        seen = self._frames_seen
        try:
            if ident > 0:
                writer.write(frames.encode_ident(ident))
            await self._hello(reader, writer)
            async with asyncio.TaskGroup() as tasks:
                beat = tasks.create_task(self._heartbeat(writer))
                try:
                    await self._receive(reader, writer)
                finally:
                    beat.cancel()
        except BaseExceptionGroup as group:  # not except*: see the module docstring
            raise _first_leaf(group) from None
        finally:
            writer.close()
            # Nothing came back: an older master may have refused IDENT; toggle it.
            self._send_ident = not ident if self._frames_seen == seen else True

    async def _hello(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Send HELLO, through the authenticated handshake when this slave has a credential.

        Raises:
            frames.FrameError: the master has no credential, speaks another handshake version
                or failed to prove the credential.
        """
        credential = self._credential
        if credential is None:
            writer.write(self._report(frames.Kind.HELLO))
            await writer.drain()
            return
        nonce = os.urandom(frames.NONCE_BYTES)
        writer.write(
            frames.encode_auth_request(frames.AuthRequest(frames.HANDSHAKE_VERSION, nonce))
        )
        await writer.drain()
        timeout_s = self._settings.housekeeping_interval_ms / 1000
        raw = await asyncio.wait_for(reader.readexactly(frames.CHALLENGE_BYTES), timeout_s)
        challenge = frames.decode_challenge(raw)
        if challenge.version == frames.NO_HANDSHAKE:
            raise frames.FrameError("the master has no inner credential; not replicating")
        if challenge.version != frames.HANDSHAKE_VERSION:
            raise frames.FrameError(
                f"the master speaks HA handshake version {challenge.version}, "
                f"this slave {frames.HANDSHAKE_VERSION}"
            )
        expected = frames.master_proof(credential, nonce, challenge.nonce)
        if not frames.proofs_equal(expected, challenge.proof):
            raise frames.FrameError("the master failed to prove the inner credential")
        epoch, max_offset = self._history.last_epoch, self._store.max_commit_log_offset
        proof = frames.slave_proof(credential, challenge.nonce, nonce, epoch, max_offset)
        writer.write(frames.encode_auth_hello(frames.AuthHello(epoch, max_offset, proof)))
        await writer.drain()

    async def _heartbeat(self, writer: asyncio.StreamWriter) -> None:
        while True:
            await asyncio.sleep(self._settings.heartbeat_interval_ms / 1000)
            writer.write(self._report(frames.Kind.REPORT))
            await writer.drain()

    async def _receive(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        timeout_s = self._settings.housekeeping_interval_ms / 1000
        body_max = self._settings.transfer_batch_bytes
        store, history = self._store, self._history
        sync_flush = store.settings.flush_disk_type is store_settings.FlushDiskType.SYNC_FLUSH
        while True:
            raw = await asyncio.wait_for(
                reader.readexactly(frames.TRANSFER_HEADER_BYTES), timeout_s
            )
            header = frames.decode_transfer_header(raw, body_bytes_max=body_max)
            self._frames_seen += 1
            if header.kind is frames.Kind.FETCH:  # the master repairs a damaged record
                found = record_repair.record_bytes(store.commit_log, header.offset)
                writer.write(frames.encode_fetched(header.offset, found))
                await writer.drain()
                continue
            if header.kind is frames.Kind.TRUNCATE:
                store.truncate_replica(ids.CommitLogOffset(header.offset))
                history.truncate(header.offset)
                if self._on_truncate is not None:
                    self._on_truncate(header.offset)
                writer.write(self._report(frames.Kind.HELLO))
                await writer.drain()
                continue
            body = await asyncio.wait_for(reader.readexactly(header.body_size), timeout_s)
            if not body:
                continue  # a heartbeat
            if header.epoch > history.last_epoch:
                history.append(header.epoch, header.epoch_start_offset)
            store.append_replicated(ids.CommitLogOffset(header.offset), body)
            if sync_flush:
                store.commit_log.flush()
            writer.write(self._report(frames.Kind.REPORT))
            await writer.drain()


def _first_leaf(group: BaseExceptionGroup[BaseException]) -> BaseException:
    """The first exception of ``group`` that is no group itself (depth first): the one a
    TaskGroup's session ended with, raised plainly so ``run`` can tell how it ended."""
    first = group.exceptions[0]
    while isinstance(first, BaseExceptionGroup):
        first = first.exceptions[0]
    return first
