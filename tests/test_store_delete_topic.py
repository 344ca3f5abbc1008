"""Deleting a topic in the store (RocketMQ ``deleteTopics``): its ConsumeQueues go, a topic
re-created under the name starts at queue offset 0 with nothing old readable, also after an
unclean restart that re-dispatches the whole CommitLog."""

from __future__ import annotations

from ariane.common import ids
from ariane.store import PutMessageStatus, deleted_topics
from store_testing import ROOT, MemoryStore, T, read, request

U = ids.TopicName("U")


def _bodies(mem: MemoryStore, topic: ids.TopicName = T) -> list[bytes]:
    return [m.body for m in read(mem.store, topic=topic, max_count=100).messages]


def test_recreated_topic_starts_empty_across_an_unclean_restart() -> None:
    """After delete_topic, T reads nothing and restarts at offset 0; other topics keep their
    messages; a crash without checkpoint (full re-dispatch) does not bring the old ones back."""
    mem = MemoryStore.open()
    old = mem.store.put_messages_sync([request(body=b"old%d" % i) for i in range(3)])
    assert all(r.status is PutMessageStatus.PUT_OK for r in old)
    mem.store.put_message(request(topic="U", body=b"other"))
    assert mem.store.delete_topic(T) == 1
    assert _bodies(mem) == []
    assert mem.store.max_queue_offset(T, ids.QueueId(0)) == 0
    assert (T, ids.QueueId(0)) not in mem.store.topic_queues()
    assert mem.store.put_message(request(body=b"new0")).queue_offset == 0
    mem.store.commit_log.flush()
    mem.crash()
    mem.layer.remove(ROOT / "checkpoint")  # recovery then re-dispatches every record
    mem.reopen()
    assert mem.store.recovery_report.redispatched_records >= 5
    assert _bodies(mem) == [b"new0"]
    assert _bodies(mem, U) == [b"other"]
    assert mem.store.put_message(request(body=b"new1")).queue_offset == 1
    mem.store.close()
    mem.reopen()
    assert _bodies(mem) == [b"new0", b"new1"]


def test_floor_is_forgotten_once_retention_passed_it() -> None:
    """A floor at or below the CommitLog's min offset is dropped when the floors load."""
    floors: dict[str, int] = {}
    mem = MemoryStore.open()
    table = deleted_topics.DeletedTopics(ROOT, mem.layer, floors)
    table.add("gone", 100, 0)
    table.add("kept", 500, 0)
    reloaded: dict[str, int] = {}
    deleted_topics.DeletedTopics(ROOT, mem.layer, reloaded).load(100)
    assert reloaded == {"kept": 500}
