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

from ariane.broker import (
    config,
    long_polling,
    offsets,
    persistence,
    pop_service,
    subscriptions,
    topic_config,
)
from ariane.common import clock, ids, route
from ariane.store import index_file, message_store

_log = logging.getLogger(__name__)


@dataclasses.dataclass(slots=True)
class Counters:
    """Totals since start, read by the admin API (``rocketmq_messages_in/out_total``)."""

    messages_in: int = 0
    bytes_in: int = 0
    messages_out: int = 0
    bytes_out: int = 0
    sent_to_dlq: int = 0


class BrokerRuntime:
    """Open the store and tables of one broker under ``settings.store_dir``.

    Args:
        settings: the validated broker settings.
        time: the clock (store timestamps, invisible-time deadlines).

    Raises:
        OSError: if the store cannot be opened.
        CorruptMetadataError: if a config file exists but does not parse.
    """

    def __init__(self, settings: config.BrokerSettings, *, time: clock.Clock) -> None:
        self.settings = settings
        self.clock = time
        root = settings.store_dir
        root.mkdir(parents=True, exist_ok=True)
        self.index = index_file.IndexService(
            root / index_file.INDEX_DIR_NAME, settings.index, clock=time
        )
        self.store = message_store.MessageStore.open(
            root, settings.store, clock=time, key_index=self.index
        )
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
        self.polling = long_polling.LongPolling(core.long_polling)
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
        self.client_endpoint = settings.client_endpoint(0)
        """``HOST:PORT`` advertised to clients; the server sets it once the port is bound."""
        self.route_changed = asyncio.Event()
        """Set when topics or write permission change; registration then re-registers at once."""

    @property
    def broker_name(self) -> ids.BrokerName:
        """This broker group's name."""
        return self.settings.broker_name

    def close(self) -> None:
        """Persist offsets, close the POP journal and close the store cleanly (removes its
        ``abort`` marker)."""
        self.pop_service.close()
        self.persist_offsets()
        self.store.close()
        self.index.close()

    def persist_offsets(self) -> None:
        """Write committed consumer offsets if they changed (atomic file replace)."""
        if self.offsets.persist():
            _log.debug("consumer offsets persisted")

    # -- routes -------------------------------------------------------------------------------

    def queue_datas(self) -> list[tuple[topic_config.TopicConfig, route.QueueData]]:
        """Every topic of this broker with its QueueData (what registration sends)."""
        return [(t, t.queue_data(self.broker_name)) for t in self.topics.list_all()]
