"""The one place POP consumption reads messages from the store: ``QueueReader``.

Every message read of the POP path goes through it: a receive's scan from a group's cursor and
its redeliveries (``receiver.PopReceiver``), the message a receipt handle names (nack, DLQ
forwarding, a receive-attempt replay) and the background revive (``service.PopReviveService``).
Two reads, both one queue's:

* ``scan``: up to ``max_count`` messages from one offset, optionally pre-filtered by tag hash
  (RocketMQ ``DefaultMessageStore.getMessage`` with a ``MessageFilter``), status as the store
  answers it (the caller corrects its cursor on OFFSET_TOO_SMALL etc.);
* ``at``: the messages at given offsets (redeliveries), in ranges of at most
  ``READ_SPAN_MAX`` offsets with one ``get_messages`` call each.

Invariants: it holds no state but the store and the byte bound; every read is bounded by
``max_bytes`` (the receive's ``message_bytes_max``) and a count.
"""

from __future__ import annotations

from ariane.common import ids, message
from ariane.store import message_store, queue_read
from ariane.store import results as store_results

READ_SPAN_MAX = 256
"""Most queue offsets one batched read of redeliveries covers (one ``get_messages`` call)."""


class QueueReader:
    """Message reads of the POP path over one store.

    Args:
        store: the message store.
        max_bytes: most bytes one read returns (at least one message is always returned).
    """

    def __init__(self, store: message_store.MessageStore, *, max_bytes: int) -> None:
        assert max_bytes > 0, "max_bytes must be > 0"
        self._store = store
        self._max_bytes = max_bytes

    def scan(
        self,
        topic: ids.TopicName,
        queue_id: ids.QueueId,
        start: ids.QueueOffset,
        *,
        max_count: int,
        prefilter: queue_read.TagFilter | None = None,
    ) -> store_results.GetMessageResult:
        """Up to ``max_count`` (> 0) messages of one queue from ``start``; units whose tag hash
        ``prefilter`` rejects are passed over (absent from ``messages``, inside the range up
        to ``next_begin_offset``)."""
        return self._store.get_messages(
            topic,
            queue_id,
            start,
            max_count=max_count,
            max_bytes=self._max_bytes,
            tag_filter=prefilter,
        )

    def at(
        self, topic: ids.TopicName, queue_id: ids.QueueId, wanted: list[ids.QueueOffset]
    ) -> dict[int, message.StoredMessage]:
        """The messages at ``wanted`` (ascending offsets of one queue), read in ranges of at
        most ``READ_SPAN_MAX`` offsets with one ``get_messages`` call each; offsets deleted
        by retention or unreadable are absent from the result."""
        found: dict[int, message.StoredMessage] = {}
        at = 0
        while at < len(wanted):
            start = wanted[at]
            span = min(wanted[-1] - start + 1, READ_SPAN_MAX)
            result = self.scan(topic, queue_id, start, max_count=span)
            found.update((m.queue_offset, m) for m in result.messages)
            upto = max(result.next_begin_offset, start + 1)
            while at < len(wanted) and wanted[at] < upto:
                at += 1
        return {o: found[o] for o in wanted if o in found}
