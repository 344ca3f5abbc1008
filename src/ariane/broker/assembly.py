"""Builds the protocol-neutral processors of one broker from its ``BrokerRuntime``.

The composition root (``broker.server``) calls ``build`` once and hands the processors to the
gRPC adapters; the classic Remoting adapter will take the same ones, and the processor unit
tests (``tests/broker_harness.py``) build them over a store in a temporary directory with a
fake clock. Invariant: this is the one place that knows which runtime attribute feeds which
processor dependency; processors never see the runtime (import-linter).
"""

from __future__ import annotations

import dataclasses

from ariane.broker import runtime as runtime_mod
from ariane.broker.processors import (
    admin,
    admin_deps,
    consume,
    idempotency,
    pull,
    retry,
    send,
    slave_read,
)
from ariane.broker.transaction import processor as transaction
from ariane.common import clock, process


@dataclasses.dataclass(frozen=True, slots=True)
class Processors:
    """The processors one broker serves requests with.

    Attributes:
        sender: the sends of both protocols (RocketMQ ``SendMessageProcessor``): v2
            ``SendMessage`` and classic ``SEND_MESSAGE``/``V2``/``BATCH``.
        consumer: receive/ack/change-invisible/DLQ (``PopMessageProcessor`` and friends).
        admin: the admin API (``AdminBrokerProcessor``).
        puller: pull by offset, offsets and offset queries (``PullMessageProcessor``,
            ``ConsumerManageProcessor``).
        transactions: half messages and EndTransaction (``TransactionalMessageServiceImpl``,
            ``EndTransactionProcessor``), rebuilt from the CommitLog.
        retry: retry copies in ``%RETRY%<group>`` and dead letters (the consume path's
            nack/revive/DLQ forwarding; the classic CONSUMER_SEND_MSG_BACK).
        read_role: the broker's role as the pull adapters see it (``slaveReadEnable``, its
            id, whether a slave's master is online).
    """

    sender: send.SendProcessor
    consumer: consume.ConsumeProcessor
    admin: admin.AdminProcessor
    puller: pull.PullProcessor
    transactions: transaction.TransactionalMessageService
    retry: retry.RetryProcessor
    read_role: slave_read.ReadRole


def build(broker: runtime_mod.BrokerRuntime, *, time: clock.Clock) -> Processors:
    """The processors over ``broker``'s store, tables, POP service and counters."""
    settings = broker.settings
    transactions = transaction.TransactionalMessageService.open(
        store=broker.store,
        offset_table=broker.offsets,
        settings=settings.transaction,
        broker_name=broker.broker_name,
        time=time,
        master=settings.ha.role.is_master,
    )
    retrier = retry_processor(broker, time=time)
    return Processors(
        sender=send_processor(broker, transactions, time=time),
        consumer=consume.ConsumeProcessor(
            pop_service=broker.pop_service,
            topic_table=broker.topics,
            group_table=broker.groups,
            polling=broker.polling,
            counters=broker.counters,
            retrier=retrier,
            receive=settings.receive,
            broker_name=broker.broker_name,
            time=time,
        ),
        admin=admin_processor(broker),
        puller=pull.PullProcessor(
            store=broker.store,
            topic_table=broker.topics,
            group_table=broker.groups,
            offset_table=broker.offsets,
            pop_service=broker.pop_service,
            polling=broker.polling,
            counters=broker.counters,
            receive=settings.receive,
            time=time,
            in_memory_window_bytes=slave_read.in_memory_window_bytes(
                settings.receive.physical_memory_bytes or process.physical_memory_bytes(),
                settings.receive.access_message_in_memory_max_ratio_percent,
            ),
        ),
        read_role=slave_read.ReadRole(
            slave_read_enable=settings.slave_read_enable,
            broker_id=lambda: broker.broker_id,
            master_online=lambda: broker.master_online(),
        ),
        transactions=transactions,
        retry=retrier,
    )


def send_processor(
    broker: runtime_mod.BrokerRuntime,
    transactions: transaction.TransactionalMessageService,
    *,
    time: clock.Clock,
) -> send.SendProcessor:
    """The send processor of both protocols over ``broker``'s store, with idempotent sends
    found in its key index (``idempotency``)."""
    settings = broker.settings
    return send.SendProcessor(
        store=broker.store,
        topics=broker.topics,
        polling=broker.polling,
        counters=broker.counters,
        store_settings=settings.store,
        schedule=broker.schedule,
        half_messages=transactions,
        idempotency_window=idempotency.IdempotencyWindow(
            store=broker.store,
            index=broker.index,
            window_ms=settings.idempotency_window_ms,
            time=time,
        ),
        time=time,
        lite=broker.lite_topics,
    )


def retry_processor(
    broker: runtime_mod.BrokerRuntime, *, time: clock.Clock | None = None
) -> retry.RetryProcessor:
    """The retry/DLQ processor over ``broker``'s store, topics and schedule (``time``: the
    runtime's clock when ``None``)."""
    return retry.RetryProcessor(
        store=broker.store,
        topic_table=broker.topics,
        group_table=broker.groups,
        schedule=broker.schedule,
        polling=broker.polling,
        counters=broker.counters,
        route_changed=broker.route_changed,
        time=broker.clock if time is None else time,
    )


def admin_processor(broker: runtime_mod.BrokerRuntime) -> admin.AdminProcessor:
    """The admin processor over ``broker``'s tables, POP service and store."""
    settings = broker.settings
    return admin.AdminProcessor(
        admin_deps.AdminDependencies(
            topic_table=broker.topics,
            group_table=broker.groups,
            offset_table=broker.offsets,
            pop_service=broker.pop_service,
            store=broker.store,
            key_index=broker.index,
            queue_progress=broker.queue_progress,
            persist_offsets=broker.persist_offsets,
            route_changed=broker.route_changed,
            broker_name=settings.broker_name,
            broker_id=lambda: broker.broker_id,
            default_queue_nums=settings.core.topics.default_queue_nums,
            query_results_max=settings.index.query_results_max,
            counters=broker.counters,
            store_dir=settings.store_dir,
            lite_topics=broker.lite_topics,
        )
    )
