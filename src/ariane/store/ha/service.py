"""``HAService``: the master side of replication (RocketMQ ``DefaultHAService``, ``HAConnection``
and ``GroupTransferService`` in one asyncio service).

It listens on the HA port. Each slave connection opens with a HELLO (the slave's epoch and max
CommitLog offset); if the slave's tail diverged (``epochs.truncation_point``) it is told to cut
(TRUNCATE) and HELLOs again; then the master streams CommitLog bytes from the slave's offset in
TRANSFER frames of at most ``transfer_batch_bytes``, never crossing a segment end or an epoch
boundary, with an empty TRANSFER as heartbeat when idle. The slave REPORTs its offset after each
batch and at least every heartbeat interval.

The ack rule (``ReplicationGate``), in two steps. Before an append (``refusal``, under the
store's put lock, for a whole batch at once): a SLAVE, a master that met a newer epoch (fenced: a
slave showed it on the HA port, or a name server refused the master's registration or
heartbeat), or a master whose lease ran out (``lease``, when it keeps one) refuses with
SERVICE_NOT_AVAILABLE, which clients retry on another broker; a SYNC_MASTER with fewer in-sync
replicas than ``min_in_sync_replicas`` (itself plus the connected slaves within
``max_gap_not_in_sync_bytes`` of its end) refuses with IN_SYNC_REPLICAS_NOT_ENOUGH. Nothing is
stored then, so a client that retries a refused send makes no copy. This is RocketMQ's
controller-mode check (``CommitLog.asyncPutMessage``: ``inSyncReplicasNums <
minInSyncReplicas`` before the put); its classic mode stores first and answers
SLAVE_NOT_AVAILABLE, a "failure" that holds the message, which the official clients' three
retries turned into about three copies of every send after a failover left a SYNC_MASTER
alone. After the append (``replicated``): an append that reaches its ack after the master was
fenced or its lease lapsed answers SLAVE_NOT_AVAILABLE; an ASYNC_MASTER acks at once; a
SYNC_MASTER acks once ``min_in_sync_replicas - 1`` in-sync slaves (at least one while any is in
sync) reported its end, and the store turns a wait past ``sync_flush_timeout_ms`` into
FLUSH_SLAVE_TIMEOUT.

The race edge, stated honestly: the check and the wait are not one atomic step. A slave that
drops (or falls out of sync) after an append passed the check leaves that append stored and
waiting; unless enough slaves report its end within ``sync_flush_timeout_ms`` it is answered
FLUSH_SLAVE_TIMEOUT (v2 ``SLAVE_PERSISTENCE_TIMEOUT``), stored, as RocketMQ answers. Only the
appends already past the check when the slave went can end so; every later one is refused.
With ``min_in_sync_replicas = 1`` such a waiter is acked instead once no slave is in sync (a
lone master acks alone). A fenced master fails its waiters with SLAVE_NOT_AVAILABLE. Never a
silent success.

The in-sync report (``in_sync_report``, issue 25): every connected slave with the broker id
its IDENT named (``frames``; 0 from an older slave), whether it is in sync and its acked
offset, plus this master's end and ``_replicated_max``, the highest append end ever answered
PUT_OK as replicated (never lowered while the process lives; capped at the CommitLog end when
reported). The registration service sends it with every registration and heartbeat, and at
once when ``replicas_changed`` is set (a slave connected or came within the in-sync gap), and a
failover promotes only a slave that holds what it says (``common.promotion.in_sync_by_report``).

Who may connect (Ariane's addition; RocketMQ's HA port is plain and open, security.md §8.1):
with an inner credential (``credential``), a peer must pass the authenticated handshake
(``frames``: nonce challenge, HMAC proofs both ways) before the master sends it one CommitLog
byte, lets its epoch fence this master, or counts it as a replica; a plain HELLO, a wrong proof
or another handshake version is refused (rate-limited log line, connection closed). Without a
credential the port is open (as RocketMQ's), but whatever the credentials: a REPORT beyond the
bytes this connection was sent is a protocol violation (closed, never counted), and an
unauthenticated epoch more than ``EPOCH_GAP_PLAUSIBLE_MAX`` above this master's is refused
instead of fencing it. At most ``CONNECTIONS_MAX`` connections are served at once.

Record repair (``fetch_record``, Ariane's addition: ``store.record_repair``): a read that met a
damaged record asks an in-sync slave holding it for its copy with a FETCH frame on that slave's
connection, which is as authenticated as the stream; the FETCHED answer is checked by the store
before a byte is rewritten, and only a record it asked for is.

TLS (``server_tls``, Ariane's addition: RocketMQ's HA port is plain NIO): the port serves by the
process's ``[tls]`` mode through ``common.tls_listener``; the handshake above runs inside TLS,
unchanged.

Threading: ``run`` and the connections live on the broker's event loop; ``replicated`` may be
called from any thread (waiters are guarded by a lock, wake-ups go through
``call_soon_threadsafe``).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import dataclasses
import heapq
import itertools
import logging
import os
import threading

from ariane.common import log_limits, promotion, tls, tls_listener
from ariane.store import commit_log, message_store
from ariane.store.ha import epochs, frames, lease
from ariane.store.ha import settings as ha_settings

_log = logging.getLogger(__name__)

Status = commit_log.PutMessageStatus

_UNBOUNDED_OFFSET = 1 << 62
"""``acked_offset`` when no slave report is needed: above every CommitLog offset."""

EPOCH_GAP_PLAUSIBLE_MAX = 1_024
"""Largest epoch lead over this master's own an unauthenticated peer may show and fence it
with (one epoch per promotion: a lead beyond this is forged or corrupt, and is refused)."""

CONNECTIONS_MAX = 64
"""Most HA connections served at once (slaves of one group plus handshakes in progress)."""

REFUSAL_LOG_INTERVAL_S = 30.0
"""Least time between two refusal lines for the same peer host and reason, s."""


def _done(status: Status) -> concurrent.futures.Future[Status]:
    future: concurrent.futures.Future[Status] = concurrent.futures.Future()
    future.set_result(status)
    return future


@dataclasses.dataclass(slots=True)
class SlaveProgress:
    """One connected slave: where it is, as it last reported."""

    address: str
    acked_offset: int
    epoch: int
    sent_offset: int = 0
    """The CommitLog end this connection has sent (a REPORT above it is a violation)."""
    broker_id: int = 0
    """The broker id its IDENT named (0: none, a slave of an older build)."""


class HAService:
    """Replication from this broker to its slaves, and the ack rule of its role.

    Args:
        store: the broker's store.
        history: the store's epoch history (a master always has one entry at least).
        config: the HA settings (``broker_role`` is the role at start).
        credential: the inner credential slaves must prove; ``None``: an open HA port.
        server_tls: the process's TLS (``[tls]``): the HA port then serves by its mode (an
            ``enforcing`` port closes a plaintext connection before its first frame is read);
            ``None``: plaintext.
    """

    def __init__(
        self,
        store: message_store.MessageStore,
        history: epochs.EpochHistory,
        config: ha_settings.HASettings,
        credential: frames.Credential | None = None,
        *,
        server_tls: tls.ServerTls | None = None,
    ) -> None:
        self._server_tls = server_tls
        self.role = config.role
        self.fenced = False
        """Set once a peer showed a newer epoch: this old master refuses writes."""
        self.lease: lease.MasterLease | None = None
        """The master's write lease, when it keeps one (writes need ``lease.held()``)."""
        self.port: int | None = None
        """The bound HA port, once ``run`` listens."""
        self._store = store
        self._history = history
        self._settings = config
        self._credential = credential
        self._refusals = log_limits.LineLimiter(key_interval_s=REFUSAL_LOG_INTERVAL_S)
        self._connections = 0
        self._slaves: dict[int, SlaveProgress] = {}
        self._writers: dict[int, asyncio.StreamWriter] = {}
        self._ids = itertools.count()
        self._lock = threading.Lock()
        self._waiters: list[tuple[int, int, concurrent.futures.Future[Status]]] = []
        self._replicated_max = 0
        """The highest append end acknowledged as replicated (guarded by ``_lock``)."""
        self._loop: asyncio.AbstractEventLoop | None = None
        self._appended: asyncio.Event | None = None
        self.listening = asyncio.Event()
        self.replicas_changed = asyncio.Event()
        """Set when a slave connects or comes within the in-sync gap: the registration
        service reports the in-sync set at once instead of at the next heartbeat."""

    # -- the ack rule (store.message_store.ReplicationGate) --------------------------------

    def refuses_writes(self) -> bool:
        """True for a slave, a fenced old master, and a master without a held lease."""
        if self.fenced or not self.role.is_master:
            return True
        return self.lease is not None and not self.lease.held()

    def refusal(self) -> Status | None:
        """See ``ReplicationGate.refusal``: SERVICE_NOT_AVAILABLE for a slave or a fenced
        master, IN_SYNC_REPLICAS_NOT_ENOUGH for a SYNC_MASTER with fewer than
        ``min_in_sync_replicas`` in-sync replicas (RocketMQ controller mode's check before the
        put), else ``None`` (append)."""
        if self.refuses_writes():
            return Status.SERVICE_NOT_AVAILABLE
        if (
            self.role is ha_settings.BrokerRole.SYNC_MASTER
            and self.in_sync_replicas() < self._settings.min_in_sync_replicas
        ):
            return Status.IN_SYNC_REPLICAS_NOT_ENOUGH
        return None

    def replicated(self, end_offset: int) -> concurrent.futures.Future[Status]:
        """See ``ReplicationGate.replicated``; also wakes the connections to stream.

        A SYNC_MASTER append whose end the required slaves have not reported yet waits (at
        most ``sync_waiters_max`` at once, beyond → OS_PAGE_CACHE_BUSY), also when the slaves
        went since ``refusal`` let it in (the race edge of the module docstring). An append
        that passed ``refusal`` but reaches its ack after the master was fenced or its lease
        lapsed (a pause in between) answers SLAVE_NOT_AVAILABLE: stored here, but maybe not in
        the group's newer epoch, so never a plain OK.
        """
        self._wake()
        if self.refuses_writes():
            return _done(Status.SLAVE_NOT_AVAILABLE)
        if self.role is not ha_settings.BrokerRole.SYNC_MASTER:
            return _done(Status.PUT_OK)
        with self._lock:
            if self.acked_offset() >= end_offset:
                self._replicated_max = max(self._replicated_max, end_offset)
                return _done(Status.PUT_OK)
            if len(self._waiters) >= self._settings.sync_waiters_max:
                return _done(Status.OS_PAGE_CACHE_BUSY)
            future: concurrent.futures.Future[Status] = concurrent.futures.Future()
            heapq.heappush(self._waiters, (end_offset, next(self._ids), future))
            return future

    def in_sync_replicas(self) -> int:
        """This master plus its connected in-sync slaves (RocketMQ ``inSyncReplicasNums``)."""
        return 1 + len(self._in_sync_slaves())

    def acked_offset(self) -> int:
        """The CommitLog end that enough in-sync slaves reported for a SYNC_MASTER ack: the
        ``k``-th highest report, ``k = min_in_sync_replicas - 1`` (at least 1 while a slave is
        in sync); -1 when fewer are in sync; unbounded when none is needed (``k = 0``)."""
        reports = sorted((s.acked_offset for s in self._in_sync_slaves()), reverse=True)
        needed = max(self._settings.min_in_sync_replicas - 1, min(len(reports), 1))
        if needed == 0:
            return _UNBOUNDED_OFFSET
        return reports[needed - 1] if len(reports) >= needed else -1

    def slaves(self) -> list[SlaveProgress]:
        """The connected slaves (a snapshot)."""
        return [dataclasses.replace(s) for s in list(self._slaves.values())]

    def in_sync(self, slave: SlaveProgress) -> bool:
        """Whether ``slave`` (one of ``slaves()``) counts for a SYNC_MASTER's acks now: within
        ``max_gap_not_in_sync_bytes`` of the CommitLog's end (read-only, for metrics)."""
        floor = self._store.max_commit_log_offset - self._settings.max_gap_not_in_sync_bytes
        return slave.acked_offset >= floor

    def _in_sync_slaves(self) -> list[SlaveProgress]:
        # list(): the table changes on the event loop while appends read it from other threads.
        floor = self._store.max_commit_log_offset - self._settings.max_gap_not_in_sync_bytes
        return [s for s in list(self._slaves.values()) if s.acked_offset >= floor]

    def in_sync_report(self) -> promotion.InSyncReport:
        """This master's in-sync set now, for the name servers (``common.promotion``)."""
        end = self._store.max_commit_log_offset
        replicas = tuple(
            (s.address, s.broker_id, self.in_sync(s), s.acked_offset)
            for s in list(self._slaves.values())
        )
        replicated = min(self._replicated_max, end)
        return promotion.InSyncReport(self._history.last_epoch, end, replicated, replicas)

    def _release_waiters(self) -> None:
        with self._lock:
            acked = self.acked_offset()
            while self._waiters and self._waiters[0][0] <= acked:
                end, _, future = heapq.heappop(self._waiters)
                self._replicated_max = max(self._replicated_max, end)
                with contextlib.suppress(concurrent.futures.InvalidStateError):
                    future.set_result(Status.PUT_OK)

    def fence(self, reason: str, *, log: bool = True) -> None:
        """Refuse writes from now on (a newer epoch exists); pending sends fail. ``log``:
        say so in an ERROR line (the caller logs a demotion itself otherwise)."""
        if not self.fenced and log:
            _log.error("fenced: %s; this broker refuses writes", reason)
        self.fenced = True
        if self.lease is not None:
            self.lease.revoke()
        with self._lock:
            waiters, self._waiters = self._waiters, []
        for _, _, future in waiters:
            with contextlib.suppress(concurrent.futures.InvalidStateError):
                future.set_result(Status.SLAVE_NOT_AVAILABLE)

    def fetch_record(self, offset: int) -> bool:
        """Ask the in-sync slave furthest ahead that holds ``offset`` for its record there (a
        FETCH; the answer goes to ``store.repairs.apply``); any thread.

        Returns:
            whether a slave was asked (False: not a master, or no in-sync slave holds it).
        """
        loop = self._loop
        if loop is None or self.fenced or not self.role.is_master:
            return False
        floor = self._store.max_commit_log_offset - self._settings.max_gap_not_in_sync_bytes
        holders = [
            (s.acked_offset, key)
            for key, s in list(self._slaves.items())
            if s.acked_offset > offset and s.acked_offset >= floor
        ]
        if not holders:
            return False
        key = max(holders)[1]
        entry = self._history.entry_at(offset)
        header = frames.TransferHeader(
            frames.Kind.FETCH, entry.epoch, entry.start_offset, offset, 0
        )
        loop.call_soon_threadsafe(self._send, key, frames.encode_transfer(header))
        return True

    def _send(self, key: int, frame: bytes) -> None:
        """Write one whole frame on a connection (on the loop: never inside another frame)."""
        writer = self._writers.get(key)
        if writer is not None and not writer.is_closing():
            writer.write(frame)

    def _wake(self) -> None:
        loop, event = self._loop, self._appended
        if loop is None or event is None:
            return
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            event.set()
        else:
            loop.call_soon_threadsafe(event.set)

    # -- serving ----------------------------------------------------------------------------

    async def run(self) -> None:
        """Listen on ``ha_listen`` and serve slaves until cancelled.

        Raises:
            OSError: the HA port cannot be bound.
        """
        self._loop = asyncio.get_running_loop()
        self._appended = asyncio.Event()
        host, port = ha_settings.split_address(self._settings.ha_listen)
        server = await tls_listener.create_server(
            tls_listener.stream_server_protocol(self._connection), host, port, self._server_tls
        )
        self.port = server.sockets[0].getsockname()[1]
        _log.info("HA port listening on %s:%d", host, self.port)
        self.listening.set()
        async with server:
            await server.serve_forever()

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        host, port = writer.get_extra_info("peername")[:2]
        peer = f"{host}:{port}"
        key = next(self._ids)
        if self._connections >= CONNECTIONS_MAX:
            self._refuse(peer, f"more than {CONNECTIONS_MAX} HA connections")
            writer.close()
            return
        self._connections += 1
        try:
            opened = await self._open(reader, writer, peer)
            if opened is None:
                return
            first, trusted, broker_id = opened
            hello = await self._handshake(reader, writer, first, trusted)
            if hello is None:
                return
            self._slaves[key] = SlaveProgress(
                peer, hello.max_offset, hello.epoch, hello.max_offset, broker_id
            )
            self._writers[key] = writer
            _log.info("slave %s connected at offset %d", peer, hello.max_offset)
            self.replicas_changed.set()
            async with asyncio.TaskGroup() as tasks:
                tasks.create_task(self._read_reports(reader, key, trusted=trusted))
                tasks.create_task(self._stream(writer, key, hello.max_offset))
        except* (OSError, asyncio.IncompleteReadError, frames.FrameError, TimeoutError) as group:
            _log.info("slave %s disconnected: %s", peer, group.exceptions[0])
        finally:
            self._connections -= 1
            self._slaves.pop(key, None)
            self._writers.pop(key, None)
            self._release_waiters()  # a lone master (min_in_sync_replicas = 1) acks alone
            writer.close()

    def _refuse(self, peer: str, reason: str) -> None:
        """Log a refused peer (at most once per host and reason per interval)."""
        if self._refusals.allow((peer.rpartition(":")[0], reason)):
            _log.warning("refused HA peer %s: %s", peer, reason)

    async def _read_exactly(self, reader: asyncio.StreamReader, size: int) -> bytes:
        timeout_s = self._settings.housekeeping_interval_ms / 1000
        return await asyncio.wait_for(reader.readexactly(size), timeout_s)

    async def _read_report(self, reader: asyncio.StreamReader) -> frames.Report:
        return frames.decode_report(await self._read_exactly(reader, frames.REPORT_BYTES))

    async def _open(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, peer: str
    ) -> tuple[frames.Report, bool, int] | None:
        """The peer's first HELLO, whether it proved the credential and the broker id its
        IDENT named (0: none); ``None``: refused (logged; nothing but a CHALLENGE was sent)."""
        kind = (await self._read_exactly(reader, 1))[0]
        rest = await self._read_exactly(reader, frames.slave_frame_bytes(kind) - 1)
        broker_id = 0
        if kind == frames.Kind.IDENT:
            broker_id = frames.decode_ident(bytes([kind]) + rest)
            kind = (await self._read_exactly(reader, 1))[0]
            rest = await self._read_exactly(reader, frames.slave_frame_bytes(kind) - 1)
        if kind == frames.Kind.AUTH_REQUEST:
            found = await self._authenticate(reader, writer, peer, bytes([kind]) + rest)
            return None if found is None else (*found, broker_id)
        if self._credential is not None:
            self._refuse(peer, "no inner credential (this HA port requires it)")
            return None
        hello = frames.decode_report(bytes([kind]) + rest)
        if hello.kind is not frames.Kind.HELLO:
            raise frames.FrameError("a connection opens with HELLO")
        return hello, False, broker_id

    async def _authenticate(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, peer: str, data: bytes
    ) -> tuple[frames.Report, bool] | None:
        """The authenticated handshake after the peer's AUTH_REQUEST ``data`` (``frames``)."""
        request = frames.decode_auth_request(data)
        credential = self._credential
        if credential is None or request.version != frames.HANDSHAKE_VERSION:
            version = frames.NO_HANDSHAKE if credential is None else frames.HANDSHAKE_VERSION
            writer.write(frames.refusal_challenge(version))
            await writer.drain()
            reason = (
                "it authenticates but this master has no inner credential"
                if credential is None
                else f"HA handshake version {request.version}, this master speaks {version}"
            )
            self._refuse(peer, reason)
            return None
        nonce = os.urandom(frames.NONCE_BYTES)
        proof = frames.master_proof(credential, request.nonce, nonce)
        writer.write(frames.encode_challenge(frames.Challenge(request.version, nonce, proof)))
        await writer.drain()
        try:
            data = await self._read_exactly(reader, frames.AUTH_HELLO_BYTES)
        except asyncio.IncompleteReadError:  # the slave did not accept this master's proof
            self._refuse(peer, "left after the challenge (another inner credential?)")
            return None
        hello = frames.decode_auth_hello(data)
        expected = frames.slave_proof(
            credential, nonce, request.nonce, hello.epoch, hello.max_offset
        )
        if not frames.proofs_equal(expected, hello.proof):
            self._refuse(peer, "wrong inner credential")
            return None
        return frames.Report(frames.Kind.HELLO, hello.epoch, hello.max_offset), True

    def _check_epoch(self, epoch: int, *, trusted: bool) -> None:
        """Refuse an implausible epoch lead from an unauthenticated peer (never fence on it)."""
        own = self._history.last_epoch
        if not trusted and epoch > own + EPOCH_GAP_PLAUSIBLE_MAX:
            raise frames.FrameError(
                f"implausible epoch {epoch} (this master's is {own}) from an unauthenticated "
                "peer; not fencing"
            )

    async def _handshake(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        hello: frames.Report,
        trusted: bool,
    ) -> frames.Report | None:
        """``hello``, then TRUNCATE + HELLO until the slave's tail agrees; ``None``: refused."""
        for attempt in range(3):
            if attempt:
                hello = await self._read_report(reader)
                if hello.kind is not frames.Kind.HELLO:
                    raise frames.FrameError("a TRUNCATE is answered with HELLO")
            if not self.role.is_master or self.fenced:
                return None
            self._check_epoch(hello.epoch, trusted=trusted)
            history = self._history
            try:
                end = self._store.max_commit_log_offset
                cut = epochs.truncation_point(history.entries, end, hello.epoch, hello.max_offset)
            except epochs.StaleEpochError as exc:
                self.fence(str(exc))
                return None
            if cut >= hello.max_offset:
                return hello
            entry = history.entry_at(cut)
            header = frames.TransferHeader(
                frames.Kind.TRUNCATE, entry.epoch, entry.start_offset, cut, 0
            )
            writer.write(frames.encode_transfer(header))
            await writer.drain()
        raise frames.FrameError("the slave did not converge after TRUNCATE")

    async def _read_reports(self, reader: asyncio.StreamReader, key: int, *, trusted: bool) -> None:
        body_max = self._store.commit_log.record_bytes_max
        while True:
            kind = (await self._read_exactly(reader, 1))[0]
            frame = bytes([kind]) + await self._read_exactly(
                reader, frames.slave_frame_bytes(kind) - 1
            )
            if kind == frames.Kind.FETCHED:
                offset, size = frames.decode_fetched_header(frame, body_bytes_max=body_max)
                record = await self._read_exactly(reader, size)
                self._store.repairs.apply(offset, record)
                continue
            report = frames.decode_report(frame)
            if report.kind is not frames.Kind.REPORT:
                raise frames.FrameError(f"unexpected {report.kind.name} after the handshake")
            self._check_epoch(report.epoch, trusted=trusted)
            if report.epoch > self._history.last_epoch:
                self.fence(f"slave reports epoch {report.epoch}")
                raise frames.FrameError("stale master")
            progress = self._slaves[key]
            if report.max_offset > progress.sent_offset:
                raise frames.FrameError(
                    f"slave reports offset {report.max_offset} beyond the "
                    f"{progress.sent_offset} this master sent it; not counted"
                )
            was_in_sync = self.in_sync(progress)
            progress.acked_offset, progress.epoch = report.max_offset, report.epoch
            if not was_in_sync and self.in_sync(progress):
                self.replicas_changed.set()
            self._release_waiters()

    async def _stream(self, writer: asyncio.StreamWriter, key: int, start: int) -> None:
        appended = self._appended
        assert appended is not None
        heartbeat_s = self._settings.heartbeat_interval_ms / 1000
        position = start
        wait_s = 0.0  # the first frame at once: a slave's IDENT was understood (``frames``)
        while True:
            if self.fenced or not self.role.is_master:
                raise frames.FrameError("no longer a master")
            frame, size = self._next_frame(position)
            if frame is None:
                appended.clear()
                if self._store.max_commit_log_offset > position:
                    continue
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(appended.wait(), wait_s)
                if self._store.max_commit_log_offset > position:
                    continue
                entry = self._history.entry_at(position)
                frame = frames.encode_transfer(
                    frames.TransferHeader(
                        frames.Kind.TRANSFER, entry.epoch, entry.start_offset, position, 0
                    )
                )
            position, wait_s = position + size, heartbeat_s
            self._slaves[key].sent_offset = position  # before the write: a report may follow
            writer.write(frame)
            await writer.drain()

    def _next_frame(self, position: int) -> tuple[bytes | None, int]:
        """The TRANSFER frame of the bytes from ``position``, and its body size."""
        log = self._store.commit_log.log
        end = self._store.max_commit_log_offset
        segment = log.find(position)
        if position >= end or segment is None:
            return None, 0
        entry = self._history.entry_at(position)
        limit = min(end, segment.end_offset, position + self._settings.transfer_batch_bytes)
        next_epoch = self._history.next_start_after(entry.epoch)
        if next_epoch is not None and next_epoch > position:
            limit = min(limit, next_epoch)
        body = segment.read(position - segment.start_offset, limit - position)
        if not body:
            return None, 0
        header = frames.TransferHeader(
            frames.Kind.TRANSFER, entry.epoch, entry.start_offset, position, len(body)
        )
        return frames.encode_transfer(header, body), len(body)
