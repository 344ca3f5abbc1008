"""A slave's ``HAClient`` against a master that drops the connection, runnable by any Python.

``python tests/ha_client_probe.py STORE_DIR`` (``PYTHONPATH`` holding ``src``) opens a small
store as a slave and runs ``HAClient.run`` against a stand-in master on 127.0.0.1: it reads the
slave's HELLO and closes the connection (as a master pod deleted with ``kubectl delete pod``
does), then keeps the second connection open. It prints one JSON line, ``{"sessions": N,
"run_ended": ERROR_OR_NULL}``, once the slave connected a second time or ``run`` ended, or after
``DEADLINE_S``.

A separate script (stdlib and ``ariane`` only, no pytest) so a test can run it under another
interpreter: the exception semantics of ``except*`` differ between Python 3.11 patch releases
(CPython gh-103590, fixed in 3.11.4), and the broker image's Python is Debian's 3.11.2.

Invariant: every wait is bounded by ``DEADLINE_S``; the store is closed before it prints.
"""

from __future__ import annotations

import asyncio
import json
import pathlib
import sys

from ariane.common import clock
from ariane.store import message_store
from ariane.store import settings as store_settings
from ariane.store.ha import client, epochs
from ariane.store.ha import settings as ha_settings

DEADLINE_S = 15.0
"""Bound on the whole probe, s."""


async def _probe(store_dir: pathlib.Path) -> dict[str, object]:
    connections: list[asyncio.StreamWriter] = []
    reconnected = asyncio.Event()

    async def master(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connections.append(writer)
        await reader.read(64)  # the slave's HELLO
        if len(connections) == 1:
            writer.close()  # the master goes away mid-stream
        else:
            reconnected.set()

    server = await asyncio.start_server(master, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    settings = store_settings.StoreSettings(
        commit_log_file_size_bytes=64 * 1024, consume_queue_file_entries=64
    )
    store = message_store.MessageStore.open(store_dir, settings, clock=clock.SystemClock())
    config = ha_settings.HASettings(
        broker_role=ha_settings.BrokerRole.SLAVE, reconnect_interval_ms=50
    )
    slave = client.HAClient(
        store, epochs.EpochHistory(store_dir / "ha"), config, lambda: f"127.0.0.1:{port}"
    )
    task = asyncio.create_task(slave.run())
    waiter = asyncio.create_task(reconnected.wait())
    await asyncio.wait([task, waiter], timeout=DEADLINE_S, return_when=asyncio.FIRST_COMPLETED)
    waiter.cancel()
    ended = None
    if task.done():
        error = task.exception()
        ended = repr(error) if error is not None else "returned"
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    server.close()
    for writer in connections:
        writer.close()
    store.close()
    return {"sessions": slave.sessions, "run_ended": ended}


def main(argv: list[str]) -> int:
    """Run the probe in ``argv[1]`` (a directory) and print its JSON line."""
    print(json.dumps(asyncio.run(_probe(pathlib.Path(argv[1])))))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
