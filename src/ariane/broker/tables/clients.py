"""Live client sessions of one broker, keyed by ``x-mq-client-id`` (grpc-v2.md §4, §6.2, §6.7).

A session is created by the first Telemetry settings or Heartbeat of a client and dropped by
NotifyClientTermination, by the end of its Telemetry stream, or after ``client_expired_ms`` of
silence (the proxy's 120 s channel expiry). It remembers the client's type, group and topics so
that producers of a topic can be found later (transaction checks) and so the admin API can list
connections. The table is bounded by ``clients_max``.
"""

from __future__ import annotations

import dataclasses

from ariane.common import clock, errors, ids

CLIENTS_MAX = 100_000
"""Most client sessions tracked at once."""

CLIENT_EXPIRED_MS = 120_000
"""Silence after which a session is dropped (proxy ``channelExpiredTimeout``)."""


@dataclasses.dataclass(slots=True)
class ClientSession:
    """What the broker knows of one client.

    Attributes:
        client_id: the ``x-mq-client-id``.
        client_type: the v2 ClientType name (``PRODUCER``, ``SIMPLE_CONSUMER`` …), "" if unknown.
        group: the consumer group, or ``None`` for producers.
        topics: topics the client publishes or subscribes to.
        last_seen_ms: monotonic ms of its last call.
    """

    client_id: ids.ClientId
    client_type: str = ""
    group: ids.GroupName | None = None
    topics: frozenset[str] = frozenset()
    last_seen_ms: int = 0


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

    def __len__(self) -> int:
        return len(self._sessions)

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

    def remove(self, client_id: ids.ClientId) -> None:
        """Forget a client (termination or end of its telemetry stream)."""
        self._sessions.pop(client_id, None)

    def expire(self) -> list[ids.ClientId]:
        """Drop sessions silent for ``expired_ms``; returns their ids."""
        cutoff = self._clock.monotonic_ms() - self._expired_ms
        gone = [cid for cid, s in self._sessions.items() if s.last_seen_ms <= cutoff]
        for client_id in gone:
            del self._sessions[client_id]
        return gone

    def sessions(self) -> list[ClientSession]:
        """Every live session."""
        return list(self._sessions.values())
