"""Lite topics (RocketMQ 5.5, RIP-83) of one broker: the lite topics under their LITE parents,
and which consumers subscribe to which.

**Storage layout.** RocketMQ gives every lite topic its own queue (an LMQ) and keeps those
queues in RocksDB. Ariane keeps no per-lite-topic queue at all. A lite message is stored in the
CommitLog once, under its LITE *parent* topic, in the parent's queue ``crc32(lite topic) %
write queues`` (so one lite topic is one ordered sequence, like a FIFO message group), with the
name in the ``__LITE_TOPIC`` property; its ConsumeQueue unit carries the Java hash of the lite
topic name in the tag-code slot (``store.commit_log.tags_code_of``). A lite consumer's receive
reads the parent's queues through the ordinary POP path with a ``filters.LiteFilter`` over the
lite topics its group subscribes to: units are prefiltered on the tag-code slot without reading
the CommitLog, then the name is checked on the message (hash collisions). So 10^5 lite topics
cost no file, no ConsumeQueue and no offset table each; what one costs is its ``LiteTopic``
record here (the queue it hashes to, the queue offset of its latest message, when that was
stored: a slotted object in a dict keyed by name, a few hundred bytes, ``bench/lite_topics.py``).
Group offsets stay those of the parent's few queues, kept by the POP state as for any topic.
Subscribing starts from the subscription on: a group's scan passes over units of lite topics
it does not subscribe to (RocketMQ's default for a new lite subscription is the lite topic's
end too; ``offset_option`` is not honoured).

**Rules.** Names are checked by ``common.topics.validate_lite_topic`` (ILLEGAL_LITE_TOPIC). A
send creates its lite topic on first use; one beyond ``lite_topics_max`` answers
LITE_TOPIC_QUOTA_EXCEEDED. A client's subscriptions (per group and parent) change by
SyncLiteSubscription's four actions, as RocketMQ's proxy applies them: PARTIAL_ADD adds,
PARTIAL_REMOVE removes, COMPLETE_ADD replaces the client's whole set (the clients resend it
every 30 s), COMPLETE_REMOVE drops it; a set beyond ``subscription_quota`` answers
LITE_SUBSCRIPTION_QUOTA_EXCEEDED and changes nothing. A group's view is the union of its
clients' sets, with a count per name and per hash so a filter sees changes at once.

**Expiry.** ``expiry_candidates`` hands the expiry loop (``services.lite_expiry``) up to a
bound of lite topics idle longer than the TTL, resuming where the last pass stopped; the loop
keeps those a subscribed group still has to consume and ``remove``s the others, returning who
subscribed so they can be told to drop them (``NotifyUnsubscribeLiteCommand``). Deleting a
LITE parent (every path that deletes a topic on a broker) ``drop_parent``s its lite topics and
subscriptions at once, as RocketMQ 5.5 does.

Invariants: ``len(self)`` is the number of records over all parents and never exceeds
``lite_topics_max``; a client's set is never larger than ``subscription_quota``; a group view's
counts equal the number of its clients' sets holding each name (and hash). Used from the
broker's event loop only.

**Restarts and failover.** No file of its own: the lite topic records are derived from the
store when the broker opens it and when a slave is promoted (``lite_rebuild``: the parents'
ConsumeQueues read backwards over the last TTL, one CommitLog read per lite topic), so a lite
topic with a message stored within the TTL is listed, counted against ``lite_topics_max`` and
expired as before the restart (RocketMQ 5.5 keeps them in RocksDB). Subscriptions are not
stored: clients resend their complete sets within 30 s.
"""

from __future__ import annotations

import dataclasses
import enum
import itertools
from collections.abc import Iterable, Sequence

from ariane.broker.tables import lite_settings
from ariane.common import errors, hashing, ids, topics


class SyncAction(enum.Enum):
    """``apache.rocketmq.v2.LiteSubscriptionAction``."""

    PARTIAL_ADD = 0
    PARTIAL_REMOVE = 1
    COMPLETE_ADD = 2
    COMPLETE_REMOVE = 3


@dataclasses.dataclass(slots=True)
class LiteTopic:
    """One lite topic (mutable: every send updates it).

    Attributes:
        queue_id: the parent queue its messages go to.
        last_offset: queue offset of its latest stored message in that queue, -1 before one.
        last_active_ms: when it was created or its latest message stored (monotonic), ms.
        last_stored_ms: STORETIMESTAMP of its latest stored message (wall clock, ms since the
            epoch), 0 before one.
    """

    queue_id: int
    last_offset: int
    last_active_ms: int
    last_stored_ms: int = 0


@dataclasses.dataclass(slots=True)
class GroupView:
    """What one group subscribes to under one parent: the union of its clients' sets.

    Attributes:
        names: lite topic name → how many of the group's clients subscribe it.
        hashes: Java hash of a subscribed name → how many (client, name) pairs have it.
        clients: the clients with a set here.
    """

    names: dict[str, int] = dataclasses.field(default_factory=dict)
    hashes: dict[int, int] = dataclasses.field(default_factory=dict)
    clients: set[ids.ClientId] = dataclasses.field(default_factory=set)

    def add(self, name: str) -> None:
        """Count one more client subscribing ``name``."""
        self.names[name] = self.names.get(name, 0) + 1
        code = hashing.java_string_hash(name)
        self.hashes[code] = self.hashes.get(code, 0) + 1

    def discard(self, name: str) -> None:
        """Count one client fewer subscribing ``name``."""
        left = self.names[name] - 1
        if left:
            self.names[name] = left
        else:
            del self.names[name]
        code = hashing.java_string_hash(name)
        left = self.hashes[code] - 1
        if left:
            self.hashes[code] = left
        else:
            del self.hashes[code]


_SubKey = tuple[ids.ClientId, ids.GroupName, ids.TopicName]
_ViewKey = tuple[ids.GroupName, ids.TopicName]


class LiteTopicTable:
    """The lite topics and lite subscriptions of one broker (module docstring).

    Args:
        lite_topics_max: most lite topics over all parents.
        subscription_quota: most lite topics in one client's set.
        name_bytes_max: longest lite topic name, UTF-8 bytes.
    """

    def __init__(
        self, *, lite_topics_max: int, subscription_quota: int, name_bytes_max: int
    ) -> None:
        self._max = lite_topics_max
        self.subscription_quota = subscription_quota
        self.name_bytes_max = name_bytes_max
        self._parents: dict[ids.TopicName, dict[str, LiteTopic]] = {}
        self._count = 0
        self._sets: dict[_SubKey, set[str]] = {}
        self._views: dict[_ViewKey, GroupView] = {}
        self._scan_at = 0

    @classmethod
    def of(cls, settings: lite_settings.LiteSettings) -> LiteTopicTable:
        """An empty table with the quotas of ``settings``."""
        return cls(
            lite_topics_max=settings.lite_topics_max,
            subscription_quota=settings.subscription_quota,
            name_bytes_max=settings.name_bytes_max,
        )

    def __len__(self) -> int:
        return self._count

    @property
    def lite_topics_max(self) -> int:
        """The most lite topics this table holds, a count."""
        return self._max

    # -- lite topics -------------------------------------------------------------------------

    def get(self, parent: str, name: str) -> LiteTopic | None:
        """The record of ``name`` under ``parent``, or ``None``."""
        under = self._parents.get(ids.TopicName(parent))
        return None if under is None else under.get(name)

    def names(self, parent: str) -> list[str]:
        """The lite topics under ``parent``, in creation order."""
        return list(self._parents.get(ids.TopicName(parent), ()))

    def listing(self, parent: str, limit: int) -> tuple[list[tuple[str, LiteTopic]], int]:
        """Up to ``limit`` ``(name, record)`` under ``parent`` in the table's order, and how
        many it has (the ``ListLiteTopics`` admin RPC)."""
        under = self._parents.get(ids.TopicName(parent), {})
        return list(itertools.islice(under.items(), limit)), len(under)

    def touch(self, parent: ids.TopicName, name: str, queue_id: int, now_ms: int) -> LiteTopic:
        """The record of a lite topic a send is about to store into, created on first use.

        Raises:
            IllegalLiteTopicError: a bad name. LiteTopicQuotaExceededError: a new lite topic
                beyond ``lite_topics_max``.
        """
        under = self._parents.get(parent)
        found = None if under is None else under.get(name)
        if found is not None:
            found.last_active_ms = now_ms
            return found
        topics.validate_lite_topic(name, bytes_max=self.name_bytes_max)
        if self._count >= self._max:
            raise errors.LiteTopicQuotaExceededError(
                f"this broker holds {self._count} lite topics, its quota (lite_topics_max); "
                f"lite topic {name!r} was not created"
            )
        if under is None:
            under = self._parents[parent] = {}
        found = under[name] = LiteTopic(queue_id, -1, now_ms)
        self._count += 1
        return found

    def touch_all(self, entries: Sequence[tuple[ids.TopicName, str, int]], now_ms: int) -> None:
        """``touch`` every ``(parent, name, queue id)`` of one send request, all or none.

        Raises:
            LiteTopicQuotaExceededError: the request's new lite topics do not all fit under
                ``lite_topics_max`` (none is created). IllegalLiteTopicError: a bad name.
        """
        new = {(p, n) for p, n, _ in entries if self.get(p, n) is None}
        if self._count + len(new) > self._max:
            raise errors.LiteTopicQuotaExceededError(
                f"this broker holds {self._count} lite topics and its quota (lite_topics_max) "
                f"is {self._max}; {len(new)} new lite topics were not created"
            )
        for parent, name, queue_id in entries:
            self.touch(parent, name, queue_id, now_ms)

    def stored(
        self,
        parent: ids.TopicName,
        name: str,
        queue_offset: int,
        now_ms: int,
        store_timestamp_ms: int,
    ) -> None:
        """Record where a lite topic's latest message went and when it was stored (wall
        clock, ms; ``now_ms`` monotonic); a no-op if it expired meanwhile."""
        found = self.get(parent, name)
        if found is not None and queue_offset > found.last_offset:
            found.last_offset = queue_offset
            found.last_active_ms = now_ms
            found.last_stored_ms = store_timestamp_ms

    def restore(self, parent: ids.TopicName, name: str, record: LiteTopic) -> bool:
        """Put back a lite topic found in the store at start or promotion (``lite_rebuild``):
        a new one is added while under ``lite_topics_max``, a known one takes the newer
        message's offset and times. Returns whether the table holds it now."""
        found = self.get(parent, name)
        if found is not None:
            if record.last_offset > found.last_offset:
                found.queue_id, found.last_offset = record.queue_id, record.last_offset
                found.last_stored_ms = record.last_stored_ms
                found.last_active_ms = max(found.last_active_ms, record.last_active_ms)
            return True
        if self._count >= self._max:
            return False
        self._parents.setdefault(parent, {})[name] = record
        self._count += 1
        return True

    def expiry_candidates(
        self, now_ms: int, ttl_ms: int, scan_max: int
    ) -> list[tuple[ids.TopicName, str, LiteTopic]]:
        """Lite topics idle for ``ttl_ms`` or more among the next ``scan_max`` records, going
        on from where the previous call stopped (all of them once per ``len / scan_max``
        calls)."""
        everything = ((p, n, t) for p, under in self._parents.items() for n, t in under.items())
        if self._scan_at >= self._count:
            self._scan_at = 0
        window = list(itertools.islice(everything, self._scan_at, self._scan_at + scan_max))
        self._scan_at += len(window)
        return [(p, n, t) for p, n, t in window if now_ms - t.last_active_ms >= ttl_ms]

    def remove(self, parent: ids.TopicName, name: str) -> list[tuple[ids.ClientId, _ViewKey]]:
        """Forget a lite topic and every subscription to it; returns (client, (group,
        parent)) of each client that subscribed it."""
        under = self._parents.get(parent)
        if under is None or under.pop(name, None) is None:
            return []
        self._count -= 1
        if not under:
            del self._parents[parent]
        dropped: list[tuple[ids.ClientId, _ViewKey]] = []
        for (group, view_parent), view in list(self._views.items()):
            if view_parent != parent or name not in view.names:
                continue
            for client_id in list(view.clients):
                held = self._sets[(client_id, group, parent)]
                if name in held:
                    held.discard(name)
                    view.discard(name)
                    dropped.append((client_id, (group, parent)))
        return dropped

    def drop_parent(self, parent: ids.TopicName) -> int:
        """Forget every lite topic under ``parent`` and every lite subscription to it: the
        parent was deleted (RocketMQ 5.5 ``AbstractLiteLifecycleManager.cleanByParentTopic``).
        The groups' views are emptied in place (a receive's filter holding one matches
        nothing), no client is notified; a parent created again under the name starts empty.
        Returns how many lite topics went (their quota is free again)."""
        dropped = len(self._parents.pop(parent, {}))
        self._count -= dropped
        for key in [k for k in self._sets if k[2] == parent]:
            del self._sets[key]
        for (_, view_parent), view in self._views.items():
            if view_parent == parent:
                view.names.clear()
                view.hashes.clear()
                view.clients.clear()
        return dropped

    # -- subscriptions -----------------------------------------------------------------------

    def sync(
        self,
        client_id: ids.ClientId,
        group: ids.GroupName,
        parent: ids.TopicName,
        action: SyncAction,
        names: Iterable[str],
    ) -> None:
        """Apply one SyncLiteSubscription (module docstring).

        Raises:
            IllegalLiteTopicError: a bad name (nothing changes).
            LiteSubscriptionQuotaExceededError: the resulting set would exceed
                ``subscription_quota`` (nothing changes).
        """
        wanted = {topics.validate_lite_topic(n, bytes_max=self.name_bytes_max) for n in names}
        key = (client_id, group, parent)
        held = self._sets.get(key, set())
        if action is SyncAction.PARTIAL_ADD:
            after = held | wanted
        elif action is SyncAction.PARTIAL_REMOVE:
            after = held - wanted
        elif action is SyncAction.COMPLETE_ADD:
            after = wanted
        else:
            after = set()
        if len(after) > self.subscription_quota and len(after) > len(held):
            raise errors.LiteSubscriptionQuotaExceededError(
                f"{len(after)} lite subscriptions for client {client_id}; the quota is "
                f"{self.subscription_quota}"
            )
        view = self._views.setdefault((group, parent), GroupView())
        for name in held - after:
            view.discard(name)
        for name in after - held:
            view.add(name)
        if after:
            self._sets[key] = after
            view.clients.add(client_id)
        else:  # the view stays (a receive's filter may hold it); at most groups x parents
            self._sets.pop(key, None)
            view.clients.discard(client_id)

    def view(self, group: ids.GroupName, parent: ids.TopicName) -> GroupView:
        """The live view of what ``group`` subscribes under ``parent`` (created empty, so a
        filter made before the first subscription sees it)."""
        return self._views.setdefault((group, parent), GroupView())

    def subscribed(self, client_id: ids.ClientId, group: str, parent: str) -> frozenset[str]:
        """The set one client holds (empty when none)."""
        key = (client_id, ids.GroupName(group), ids.TopicName(parent))
        return frozenset(self._sets.get(key, ()))

    def subscribing_groups(self, parent: ids.TopicName, name: str) -> list[ids.GroupName]:
        """The groups with at least one client subscribing ``name`` under ``parent``."""
        return [
            group
            for (group, view_parent), view in self._views.items()
            if view_parent == parent and name in view.names
        ]

    def drop_client(self, client_id: ids.ClientId) -> None:
        """Forget every set of a client that went away (terminated or expired)."""
        for key in [k for k in self._sets if k[0] == client_id]:
            self.sync(client_id, key[1], key[2], SyncAction.COMPLETE_REMOVE, ())
