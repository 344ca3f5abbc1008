"""``HAClient``: the slave side of replication (RocketMQ ``DefaultHAClient``).

It connects to the master's HA port, sends HELLO (its epoch and max CommitLog offset), obeys a
TRUNCATE (cuts its CommitLog and epoch history, HELLOs again), and appends every TRANSFER body
byte-identical at its own max offset (``MessageStore.append_replicated``, which dispatches the
slave's own ConsumeQueues and index). After each batch, and at least every heartbeat interval,
it REPORTs its max offset; under SYNC_FLUSH it syncs before reporting, so what a SYNC_MASTER
acknowledges is on two disks. A dropped or silent connection (``housekeeping_interval_ms``) is
reconnected after ``reconnect_interval_ms``.

Invariant: the slave's CommitLog is always a prefix of the master's of the same epochs; a frame
at any other offset than the slave's max is a protocol error and drops the connection.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from ariane.common import ids
from ariane.store import message_store
from ariane.store import settings as store_settings
from ariane.store.ha import epochs, frames
from ariane.store.ha import settings as ha_settings

_log = logging.getLogger(__name__)


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
    """

    def __init__(
        self,
        store: message_store.MessageStore,
        history: epochs.EpochHistory,
        config: ha_settings.HASettings,
        master_address: Callable[[], str],
        *,
        on_truncate: Callable[[int], object] | None = None,
    ) -> None:
        self._store = store
        self._on_truncate = on_truncate
        self._history = history
        self._settings = config
        self._master_address = master_address
        self.connected = False
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
                except (
                    OSError,
                    ValueError,
                    asyncio.IncompleteReadError,
                    TimeoutError,
                ) as exc:
                    _log.info("HA connection to %s ended: %s", address, exc)
                finally:
                    self.connected = False
            await asyncio.sleep(pause_s)

    def _report(self, kind: frames.Kind) -> bytes:
        max_offset = self._store.max_commit_log_offset
        return frames.encode_report(frames.Report(kind, self._history.last_epoch, max_offset))

    async def _session(self, address: str) -> None:
        host, port = ha_settings.split_address(address)
        timeout_s = self._settings.housekeeping_interval_ms / 1000
        reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout_s)
        self.connected = True
        self.sessions += 1
        _log.info("replicating from %s at offset %d", address, self._store.max_commit_log_offset)
        try:
            writer.write(self._report(frames.Kind.HELLO))
            await writer.drain()
            async with asyncio.TaskGroup() as tasks:
                beat = tasks.create_task(self._heartbeat(writer))
                try:
                    await self._receive(reader, writer)
                finally:
                    beat.cancel()
        except* (OSError, asyncio.IncompleteReadError, TimeoutError, ValueError) as group:
            raise group.exceptions[0] from None
        finally:
            writer.close()

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
