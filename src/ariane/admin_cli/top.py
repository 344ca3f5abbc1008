"""What ``ariane admin lag`` and ``ariane admin top`` show (``views`` runs them): consumer
progress summed per group and topic, and a live view of per-topic in/out rates and per-group lag.

Everything is read through ``client.AdminClient`` (RocketMQ ``mqadmin consumerProgress`` per
group), so the figures cover the topics some group has consumed: a topic no group ever read
has no consumer progress to report and does not appear. Rates are differences of two samples
(``in``: the topic's summed max queue offsets; ``out``: the groups' summed committed offsets)
over the seconds between them.

Invariants: ``top`` refreshes at most ``iterations`` times (``TOP_ITERATIONS_DEFAULT`` unless
told), sleeping ``interval_s`` between samples; a sample reads at most ``GROUPS_MAX`` groups.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Callable, Sequence

from rich import console as rich_console
from rich import live as rich_live
from rich import table as rich_table

from ariane.client import admin, admin_types
from ariane.common import errors

TOP_ITERATIONS_DEFAULT = 1_800
"""Refreshes of ``top`` when ``--iterations`` is absent (an hour at the default interval)."""

TOP_INTERVAL_S_DEFAULT = 2.0
"""Seconds between two samples of ``top``."""

GROUPS_MAX = 1_000
"""Most consumer groups one sample reads (one ``GetConsumerLag`` fan-out each)."""


@dataclasses.dataclass(frozen=True, slots=True)
class GroupTopicLag:
    """A group's progress on one topic, summed over the queues of every broker group.

    Attributes:
        group / topic: the pair. queues: queues counted. broker_offset: summed max offsets.
        consumer_offset: summed committed offsets. lag / inflight: summed messages.
    """

    group: str
    topic: str
    queues: int
    broker_offset: int
    consumer_offset: int
    lag: int
    inflight: int


def summarise(group: str, queues: Sequence[admin_types.QueueLag]) -> list[GroupTopicLag]:
    """Per-queue lag of ``group`` summed per topic, sorted by topic."""
    topics: dict[str, list[admin_types.QueueLag]] = {}
    for queue in queues:
        topics.setdefault(queue.topic, []).append(queue)
    return [
        GroupTopicLag(
            group,
            topic,
            len(qs),
            sum(q.broker_offset for q in qs),
            sum(q.consumer_offset for q in qs),
            sum(q.lag for q in qs),
            sum(q.inflight for q in qs),
        )
        for topic, qs in sorted(topics.items())
    ]


async def lag_summary(client: admin.AdminClient) -> list[GroupTopicLag]:
    """Every group's progress per topic (groups no master knows are skipped)."""
    names = sorted({g.name for g in await client.list_groups()})[:GROUPS_MAX]
    found: list[GroupTopicLag] = []
    for name in names:
        try:
            found += summarise(name, await client.consumer_lag(name))
        except errors.ConsumerGroupNotFoundError:
            continue  # deleted between the listing and the read
    return found


@dataclasses.dataclass(frozen=True, slots=True)
class TopicRate:
    """Messages per second into a topic and out of it (summed over its groups)."""

    topic: str
    in_per_s: float
    out_per_s: float


def rates(
    before: Sequence[GroupTopicLag], after: Sequence[GroupTopicLag], elapsed_s: float
) -> list[TopicRate]:
    """Per-topic rates between two samples ``elapsed_s`` apart (> 0), sorted by topic."""
    assert elapsed_s > 0, elapsed_s

    def totals(rows: Sequence[GroupTopicLag]) -> dict[str, tuple[int, int]]:
        found: dict[str, tuple[int, int]] = {}
        for row in rows:
            stored, consumed = found.get(row.topic, (0, 0))
            found[row.topic] = (max(stored, row.broker_offset), consumed + row.consumer_offset)
        return found

    old, new = totals(before), totals(after)
    return [
        TopicRate(
            topic,
            max(0, stored - old.get(topic, (stored, 0))[0]) / elapsed_s,
            max(0, consumed - old.get(topic, (0, consumed))[1]) / elapsed_s,
        )
        for topic, (stored, consumed) in sorted(new.items())
    ]


def view(topic_rates: Sequence[TopicRate], lags: Sequence[GroupTopicLag]) -> rich_table.Table:
    """One refresh of ``top``: a topic rate table above a group lag table."""
    grid = rich_table.Table.grid(padding=(1, 0))
    topics = rich_table.Table(title="topics (messages/s)")
    for header in ("topic", "in/s", "out/s"):
        topics.add_column(header, justify="left" if header == "topic" else "right")
    for rate in topic_rates:
        topics.add_row(rate.topic, f"{rate.in_per_s:.1f}", f"{rate.out_per_s:.1f}")
    groups = rich_table.Table(title="consumer groups")
    for header in ("group", "topic", "lag", "in flight"):
        groups.add_column(header, justify="right" if header in ("lag", "in flight") else "left")
    for lag in sorted(lags, key=lambda row: (-row.lag, row.group, row.topic)):
        groups.add_row(lag.group, lag.topic, str(lag.lag), str(lag.inflight))
    grid.add_row(topics)
    grid.add_row(groups)
    return grid


async def top(
    client: admin.AdminClient,
    out: rich_console.Console,
    *,
    interval_s: float = TOP_INTERVAL_S_DEFAULT,
    iterations: int = TOP_ITERATIONS_DEFAULT,
    clock: Callable[[], float] = time.monotonic,
) -> list[TopicRate]:
    """Refresh the live view ``iterations`` times; returns the last rates shown.

    On a terminal the view is redrawn in place (``rich.live``); otherwise each refresh is
    printed below the last, so the output can be read by a script or a test.

    Raises:
        ArianeError: a name server or broker refused or did not answer.
    """
    if not out.is_terminal:
        return await _refresh(client, out.print, interval_s, iterations, clock)
    with rich_live.Live(console=out, auto_refresh=False) as live:
        return await _refresh(
            client, lambda t: live.update(t, refresh=True), interval_s, iterations, clock
        )


async def _refresh(
    client: admin.AdminClient,
    show: Callable[[rich_table.Table], None],
    interval_s: float,
    iterations: int,
    clock: Callable[[], float],
) -> list[TopicRate]:
    before, then = await lag_summary(client), clock()
    shown: list[TopicRate] = []
    for _ in range(iterations):
        await asyncio.sleep(interval_s)
        after, now = await lag_summary(client), clock()
        shown = rates(before, after, max(now - then, 1e-3))
        show(view(shown, after))
        before, then = after, now
    return shown
