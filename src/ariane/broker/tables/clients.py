"""Live client sessions of one broker, keyed by client id (grpc-v2.md §4, §6.2, §6.7).

A session is created by the first call of a client (a Telemetry settings report, a Heartbeat,
any RPC over gRPC; a heartbeat over Remoting) and dropped by NotifyClientTermination
(``remove``), by the close of the channel it came from (``close_channel``: the end of its
Telemetry stream, a Remoting connection closing), or after ``expired_ms`` of silence
(``expire``: the proxy's and ``ClientHousekeepingService``'s 120 s ``channelExpiredTimeout``).
It remembers the client's type, group, topics and channel so that producers of a topic can be
found later (transaction checks) and so the admin API can list connections.

Removal listeners (``add_removal_listener``) hear of every dropped session, whichever way it
went: the consumer registry and the queue lock table (``consumers``, ``queue_locks``) forget the
client through them. The table is bounded by ``clients_max``; the listeners by
``REMOVAL_LISTENERS_MAX``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from ariane.common import clock, errors, ids

CLIENTS_MAX = 100_000
"""Most client sessions tracked at once."""

CLIENT_EXPIRED_MS = 120_000
"""Silence after which a session is dropped (proxy ``channelExpiredTimeout``)."""

REMOVAL_LISTENERS_MAX = 8
"""Most removal listeners (a handful of tables listen; more is a wiring mistake)."""

RemovalListener = Callable[[ids.ClientId], None]
"""Called with the id of a dropped session, after it is gone from the table."""


@dataclasses.dataclass(slots=True)
class ClientSession:
    """What the broker knows of one client.

    Attributes:
        client_id: the ``x-mq-client-id`` (gRPC) or ``clientID`` (Remoting heartbeat).
        client_type: the v2 ClientType name (``PRODUCER``, ``SIMPLE_CONSUMER`` …), "" if unknown.
        group: the consumer group, or ``None`` for producers.
        topics: topics the client publishes or subscribes to.
        last_seen_ms: monotonic ms of its last call.
        channel: an opaque handle of the channel the client talks over (its open Telemetry
            stream, its Remoting connection), compared by identity; ``None`` until known.
    """

    client_id: ids.ClientId
    client_type: str = ""
    group: ids.GroupName | None = None
    topics: frozenset[str] = frozenset()
    last_seen_ms: int = 0
    channel: object | None = None


class ClientRegistry:
    """The bounded table of client sessions.

    Args:
        time: monotonic time source for expiry.
        clients_max: most sessions kept.
        expired_ms: silence after which ``expire`` drops a session.
    """

    def __init__(
        self,
        *,
        time: clock.Clock,
        clients_max: int = CLIENTS_MAX,
        expired_ms: int = CLIENT_EXPIRED_MS,
    ) -> None:
        self._clock = time
        self._clients_max = clients_max
        self._expired_ms = expired_ms
        self._sessions: dict[ids.ClientId, ClientSession] = {}
        self._listeners: list[RemovalListener] = []

    def __len__(self) -> int:
        return len(self._sessions)

    @property
    def expired_ms(self) -> int:
        """Silence after which ``expire`` drops a session, ms."""
        return self._expired_ms

    def add_removal_listener(self, listener: RemovalListener) -> None:
        """Call ``listener`` with the id of every session dropped from now on."""
        assert len(self._listeners) < REMOVAL_LISTENERS_MAX, "too many removal listeners"
        self._listeners.append(listener)

    def touch(self, client_id: ids.ClientId) -> ClientSession:
        """The session of ``client_id`` (created if new), marked as seen now.

        Raises:
            TooManyRequestsError: a new session would exceed ``clients_max``.
        """
        session = self._sessions.get(client_id)
        if session is None:
            if len(self._sessions) >= self._clients_max:
                self.expire()
            if len(self._sessions) >= self._clients_max:
                raise errors.TooManyRequestsError("too many clients connected to this broker")
            session = ClientSession(client_id)
            self._sessions[client_id] = session
        session.last_seen_ms = self._clock.monotonic_ms()
        return session

    def get(self, client_id: ids.ClientId) -> ClientSession | None:
        """The session, or ``None``."""
        return self._sessions.get(client_id)

    def remove(self, client_id: ids.ClientId) -> bool:
        """Forget a client (NotifyClientTermination, Remoting UNREGISTER_CLIENT).

        Returns:
            Whether there was a session to drop.
        """
        if self._sessions.pop(client_id, None) is None:
            return False
        self._removed(client_id)
        return True

    def close_channel(self, channel: object) -> list[ids.ClientId]:
        """Forget the clients whose channel is ``channel`` (the stream or connection closed);
        a client that moved to a newer channel stays. Returns their ids."""
        gone = [cid for cid, s in self._sessions.items() if s.channel is channel]
        for client_id in gone:
            del self._sessions[client_id]
            self._removed(client_id)
        return gone

    def expire(self) -> list[ids.ClientId]:
        """Drop sessions silent for more than ``expired_ms``; returns their ids."""
        cutoff = self._clock.monotonic_ms() - self._expired_ms
        gone = [cid for cid, s in self._sessions.items() if s.last_seen_ms < cutoff]
        for client_id in gone:
            del self._sessions[client_id]
            self._removed(client_id)
        return gone

    def sessions(self) -> list[ClientSession]:
        """Every live session."""
        return list(self._sessions.values())

    def _removed(self, client_id: ids.ClientId) -> None:
        for listener in self._listeners:
            listener(client_id)
