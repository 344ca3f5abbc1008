"""``BrokerRuntime``: the state one broker process serves from, shared by its gRPC services.

It owns the store (CommitLog, ConsumeQueues, IndexFile), the topic / subscription-group /
consumer-offset tables, the POP service (per-group POP state and its journal), long polling and
the counters the admin API and metrics read. The ``…Service`` classes (messaging, admin) hold a
reference and never keep state of their own that another service needs.

Invariants: everything here is used from the broker's one event loop (the store's own flusher
threads excepted); POP state and its invariants are ``pop_service``'s.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import socket
from collections.abc import Callable

from ariane.broker import settings as broker_settings
from ariane.broker.pop import service as pop_service
from ariane.broker.processors import long_polling
from ariane.broker.schedule import service as schedule_service
from ariane.broker.tables import (
    lite_rebuild,
    lite_topics,
    offsets,
    persistence,
    subscriptions,
    topic_config,
    traffic_stats,
)
from ariane.common import clock, histogram, ids, message, route
from ariane.grpcwire import server as grpc_server
from ariane.security import metadata_store
from ariane.store import index_file, message_store, retention
from ariane.store import settings as store_settings
from ariane.store.ha import settings as ha_settings

_log = logging.getLogger(__name__)

AUTH_DIR_NAME = "auth"
"""The users and ACLs' directory under the store's ``config`` (RocketMQ: ``config/users``,
``config/acls``)."""


def _rebuild_lite(
    table: lite_topics.LiteTopicTable,
    settings: broker_settings.BrokerSettings,
    store: message_store.MessageStore,
    topic_table: topic_config.TopicConfigManager,
    time: clock.Clock,
) -> lite_rebuild.Report:
    """Put back into ``table`` the lite topics of the LITE topics of ``topic_table`` the store
    holds messages of from the last TTL (``tables.lite_rebuild``)."""
    parents = [t.name for t in topic_table.list_all() if t.message_type is message.MessageType.LITE]
    return lite_rebuild.rebuild(
        table,
        store,
        parents,
        ttl_ms=settings.lite.ttl_ms,
        units_max=settings.lite.rebuild_units_max,
        time=time,
    )


def _lite_table(
    settings: broker_settings.BrokerSettings,
    store: message_store.MessageStore,
    topic_table: topic_config.TopicConfigManager,
    time: clock.Clock,
) -> lite_topics.LiteTopicTable:
    """The lite-topic table, with what the store holds put back (lite topics survive a
    restart)."""
    table = lite_topics.LiteTopicTable.of(settings.lite)
    _rebuild_lite(table, settings, store, topic_table, time)
    return table


def _size_histograms() -> dict[message.MessageType, histogram.Histogram]:
    return {
        kind: histogram.Histogram(histogram.MESSAGE_SIZE_BOUNDS_BYTES)
        for kind in message.MessageType
        if kind is not message.MessageType.MIXED
    }


@dataclasses.dataclass(slots=True)
class Counters:
    """Totals since start, read by the admin API (``rocketmq_messages_in/out_total``) and the
    metrics (``message_size_bytes``: body sizes of stored messages per message type,
    ``rocketmq_message_size``); ``traffic``: the same traffic per topic and group over the last
    minute, hour and day (``mqadmin statsAll``, ``topicStatus``, ``consumerProgress``)."""

    messages_in: int = 0
    bytes_in: int = 0
    messages_out: int = 0
    bytes_out: int = 0
    sent_to_dlq: int = 0
    message_size_bytes: dict[message.MessageType, histogram.Histogram] = dataclasses.field(
        default_factory=_size_histograms
    )
    traffic: traffic_stats.TrafficStats = dataclasses.field(
        default_factory=traffic_stats.TrafficStats
    )


@dataclasses.dataclass(frozen=True, slots=True)
class QueueProgress:
    """A group's progress on one queue.

    Attributes:
        broker_offset: the queue's max offset (next offset to be written).
        consumer_offset: the group's committed (or resume) offset.
        inflight: messages received and not yet acked or expired.
        scan_offset: the first offset never delivered to the group (its POP scan offset;
            the consumer offset when the group does not track the queue).
    """

    broker_offset: ids.QueueOffset
    consumer_offset: ids.QueueOffset
    inflight: int
    scan_offset: ids.QueueOffset

    @property
    def lag(self) -> int:
        """Messages not yet consumed (never negative)."""
        return max(0, self.broker_offset - self.consumer_offset)

    @property
    def ready(self) -> int:
        """Messages stored but never delivered (RocketMQ's "ready"/unpulled; never negative)."""
        return max(0, self.broker_offset - self.scan_offset)


def open_auth_metadata(
    settings: broker_settings.BrokerSettings,
) -> metadata_store.AuthMetadataStore:
    """The broker's users and ACLs under ``<store_dir>/config/auth``, with the ``[auth]``
    bootstrap Super users created if absent (RocketMQ ``initUser``).

    Raises:
        errors.AuthMetadataError: the metadata file is corrupt.
        OSError: it cannot be read or written.
    """
    directory = settings.store_dir / persistence.CONFIG_DIR_NAME / AUTH_DIR_NAME
    store = metadata_store.AuthMetadataStore.open(directory, users_max=settings.auth.users_max)
    created = store.init_users(settings.auth)
    if created:
        _log.info("auth: created bootstrap super users %s", ", ".join(created))
    return store


class BrokerRuntime:
    """Open the store and tables of one broker under ``settings.store_dir``.

    Args:
        settings: the validated broker settings.
        time: the clock (store timestamps, invisible-time deadlines).

    Raises:
        OSError: if the store cannot be opened (``retention.VolumeTooSmallError`` when its
            volume cannot hold CommitLog segments; segments and IndexFiles are sized to the
            volume).
        CorruptMetadataError: if a config file exists but does not parse.
    """

    def __init__(self, settings: broker_settings.BrokerSettings, *, time: clock.Clock) -> None:
        self.settings = settings
        self.clock = time
        root = settings.store_dir
        root.mkdir(parents=True, exist_ok=True)
        self.store = message_store.MessageStore.open(
            root,
            _store_settings(settings),
            clock=time,
            index=index_file.settings_for_volume(root, settings.index),
        )
        self.index = self.store.key_index  # query by key and by client message id
        core = settings.core
        self.topics = topic_config.TopicConfigManager(
            persistence.config_path(root, topic_config.FILE_NAME),
            topic_settings=core.topics,
            time=time,
        )
        self.groups = subscriptions.SubscriptionGroupManager(
            persistence.config_path(root, subscriptions.FILE_NAME),
            group_settings=core.subscriptions,
            time=time,
        )
        self.offsets = offsets.ConsumerOffsetManager(
            persistence.config_path(root, offsets.FILE_NAME), offset_settings=core.offsets
        )
        self.clamp_offsets("start-up", role=settings.ha.role)
        self.polling = long_polling.LongPolling(core.long_polling)
        self.lite_topics = _lite_table(settings, self.store, self.topics, time)  # RocketMQ 5.5
        self.counters = Counters()
        self.start_timestamp_ms = time.now_ms()
        self.pop_service = pop_service.PopService.open(
            root,
            store=self.store,
            offset_table=self.offsets,
            core=core,
            receive=settings.receive,
            time=time,
        )
        """Every group's POP state and the POP journal (``broker.pop_service``)."""
        self.schedule = schedule_service.ScheduleService.open(
            root,
            store=self.store,
            settings=settings.schedule,
            time=time,
            notify=self.polling.notify_many,
        )
        """Delay-level and timer messages (``broker.schedule``)."""
        self.client_endpoint = settings.client_endpoint(0)
        """``HOST:PORT`` advertised to clients; ``advertise`` sets it once the port is bound."""
        self.route_changed = asyncio.Event()
        """Set when topics or write permission change; registration then re-registers at once."""
        self.broker_id = settings.broker_id
        """This broker's id now (0 = master); a promotion or demotion changes it."""
        self.ha_address = ""
        """``HOST:PORT`` of this broker's HA port, registered with the name servers."""
        self.remoting_address = ""
        """``HOST:PORT`` classic (Remoting) clients dial, registered with the name servers; ""
        while the broker serves no Remoting (name servers then leave it out of Remoting routes)."""
        self.master_ha_address = settings.ha.master_ha
        """A slave's master HA address: configured, or as the name servers report it."""
        self.metadata_synced_offset = 0
        """On a slave: the master's CommitLog end read before the listing of the last applied
        metadata sync round (0 before any); a promotion adopts topics lacking a config only
        if they hold messages at or above it (``services.orphan_topics``)."""
        self.master_online: Callable[[], bool] = lambda: False
        """On a slave: whether its HA stream from the master is up (``ReplicationService``
        sets it); a slave then sends caught-up classic consumers back to the master."""
        self.auth_metadata = open_auth_metadata(settings)
        """Users and ACLs (``config/auth/auth.json``), with the ``[auth]`` bootstrap users."""

    @property
    def broker_name(self) -> ids.BrokerName:
        """This broker group's name."""
        return self.settings.broker_name

    def rebuild_lite_topics(self) -> lite_rebuild.Report:
        """Put back the lite topics the store holds messages of from the last TTL
        (``tables.lite_rebuild``): at start, and at a promotion."""
        return _rebuild_lite(self.lite_topics, self.settings, self.store, self.topics, self.clock)

    def close(self) -> None:
        """Persist offsets, close the POP journal and close the store cleanly (removes its
        ``abort`` marker)."""
        self.pop_service.close()
        self.schedule.close()
        self.persist_offsets()
        self.store.close()

    def advertise(self, endpoint: str) -> None:
        """Advertise ``endpoint`` (``HOST:PORT``, known once the port is bound) to clients and
        write it as the STOREHOST of new records, so offset message ids name this broker.

        A host name is resolved once; if it does not resolve, records keep the previous
        STOREHOST and a warning says so.
        """
        self.client_endpoint = endpoint
        self.advertise_store_host(endpoint)

    def advertise_store_host(self, endpoint: str) -> None:
        """Write ``endpoint`` (``HOST:PORT``) as the STOREHOST of new records: offset message
        ids then name it (the classic protocol's address when it is served, because classic
        clients dial the address inside an offset message id).

        A host name is resolved once; if it does not resolve, records keep the previous
        STOREHOST and a warning says so.
        """
        host, port = grpc_server.parse_listen(endpoint)
        try:
            ip = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][4][0]
        except (OSError, IndexError):
            _log.warning(
                "STOREHOST: %s does not resolve; offset message ids keep %s",
                host,
                self.store.commit_log.store_host,
            )
            return
        self.store.set_store_host(message.HostAddress(str(ip), port))

    def clamp_offsets(self, why: str, *, role: ha_settings.BrokerRole | None = None) -> int:
        """Pull committed consumer offsets above their queue's end back to it and persist the
        table at once (``ConsumerOffsetManager.clamp_to``; ``why``: the occasion, logged);
        called when this broker becomes master or its queues were cut, before any new write,
        and at start (a recovery may have cut the queues) unless ``role``, the start-up role,
        is SLAVE: a slave's copy of its master's offsets may lead its data, which is no fault,
        and is clamped if it is promoted.

        Returns:
            how many offsets were pulled back.

        Raises:
            OSError: the table could not be persisted (the clamp holds in memory).
        """
        if role is not None and not role.is_master:
            return 0
        clamped = self.offsets.clamp_to(self.store.max_queue_offset, why=why)
        if clamped:
            self.persist_offsets()  # a crash after new writes must not bring the old ones back
        return sum(clamped.values())

    def persist_offsets(self) -> None:
        """Write committed consumer offsets if they changed (atomic file replace)."""
        if self.offsets.persist():
            _log.debug("consumer offsets persisted")

    # -- consumer groups ----------------------------------------------------------------------

    def unconsumed_positions(self) -> dict[tuple[ids.TopicName, ids.QueueId], ids.QueueOffset]:
        """Per queue of a topic some group consumes: the lowest offset not every one of those
        groups has consumed (what retention must not delete under disk pressure).

        A group consumes a topic when it has a committed offset on one of its queues (it has
        received and acked there; the table is persisted, so the rule survives restarts and a
        consumer that is briefly away). On a queue where such a group never committed, it
        counts from where it would start (``start_offset``: the min offset under the default
        FIRST_OFFSET). Topics no group consumes are absent: nobody waits for their messages,
        so they are deleted by age or under disk pressure as RocketMQ does.
        """
        positions: dict[tuple[ids.TopicName, ids.QueueId], ids.QueueOffset] = {}
        groups_of: dict[ids.TopicName, tuple[ids.GroupName, ...]] = {}
        for topic, queue_id in self.store.topic_queues():
            if topic not in groups_of:
                groups_of[topic] = self.offsets.groups_of_topic(topic)
            groups = groups_of[topic]
            if groups:
                positions[(topic, queue_id)] = min(
                    self.pop_service.start_offset(group, topic, queue_id) for group in groups
                )
        return positions

    def topic_retention_hours(self) -> dict[str, int]:
        """Topics with their own ``retention_hours`` (the admin API's and the ``Topic`` CRD's
        ``retentionHours``), for the store's clean service; the others use the broker's
        ``file_reserved_hours``."""
        return {
            t.name: t.retention_hours
            for t in self.topics.list_all()
            if t.retention_hours != topic_config.RETENTION_BROKER_DEFAULT
        }

    def queue_progress(
        self, group: ids.GroupName, topic: ids.TopicName, queue_id: ids.QueueId
    ) -> QueueProgress:
        """Where ``group`` stands on one queue (RocketMQ ``OffsetWrapper`` of
        ``GET_CONSUME_STATS``): its POP state's committed offset and in-flight count when it
        tracks the queue, else where it would resume with nothing in flight."""
        state = self.pop_service.existing_state(group)
        if state is not None and state.is_open(topic, queue_id):
            consumer = state.committed_offset(topic, queue_id)
            inflight = state.in_flight_count(topic, queue_id)
            scan = state.scan_offset(topic, queue_id)
        else:
            consumer, inflight = self.pop_service.start_offset(group, topic, queue_id), 0
            scan = consumer
        top = self.store.max_queue_offset(topic, queue_id)
        return QueueProgress(top, consumer, inflight, scan)

    # -- routes -------------------------------------------------------------------------------

    def queue_datas(self) -> list[tuple[topic_config.TopicConfig, route.QueueData]]:
        """Every topic of this broker with its QueueData (what registration sends)."""
        return [(t, t.queue_data(self.broker_name)) for t in self.topics.list_all()]


def _store_settings(settings: broker_settings.BrokerSettings) -> store_settings.StoreSettings:
    """The store's settings: its segments fitted to the volume, and a slave's store repairing
    a damaged CommitLog from its master (``StoreSettings.repair_from_master``)."""
    slave = not settings.ha.role.is_master
    fitted = retention.store_settings_for_volume(settings.store_dir, settings.store)
    return dataclasses.replace(fitted, repair_from_master=slave)
