"""``ariane admin dlq list|resend GROUP``: a group's dead letters listed and written back to their
origin topics through the admin API, by a real ``ariane admin`` process."""

from __future__ import annotations

import asyncio
import json
import pathlib

from admin_testing import append_request, cluster
from ariane.broker import assembly
from ariane.common import ids, message
from test_admin_cli import ariane_admin

ORDERS = ids.TopicName("orders")
QUEUE = ids.QueueId(0)


def test_dlq_list_and_resend_through_the_admin_process(tmp_path: pathlib.Path) -> None:
    """Two dead letters of group g are listed with id, origin topic, attempts and store time;
    `resend --id` writes one back to `orders` with its id and reconsume times 0, an unknown id
    exits 1 with MESSAGE_NOT_FOUND, and `resend --all` writes both."""

    async def main() -> None:
        async with cluster(tmp_path) as found:
            broker = found.brokers["broker-a"]
            status, _, err = await ariane_admin(found, "topic", "create", "orders", "--queues", "1")
            assert status == 0, err
            retrier = assembly.retry_processor(broker)
            for n in (1, 2):
                request = append_request(ORDERS, uniq_key=f"ID-{n}", body=f"order {n}".encode())
                await broker.store.put_messages([request])
            sent = broker.store.get_messages(
                ORDERS, QUEUE, ids.QueueOffset(0), max_count=2, max_bytes=1 << 20
            )
            for attempts, stored in zip((17, 3), sent.messages, strict=True):
                await retrier.dead_letter(ids.GroupName("g"), stored, attempts=attempts)

            status, out, err = await ariane_admin(found, "--json", "dlq", "list", "g")
            assert status == 0, err
            rows = json.loads(out)
            assert [(r["message_id"], r["origin_topic"], r["attempts"]) for r in rows] == [
                ("ID-1", "orders", 17),
                ("ID-2", "orders", 3),
            ]
            assert all(r["stored"].endswith("Z") and r["store_timestamp_ms"] > 0 for r in rows)
            status, out, err = await ariane_admin(found, "dlq", "list", "g")
            assert status == 0 and "ID-1" in out and "orders" in out, err

            status, out, err = await ariane_admin(found, "dlq", "resend", "g", "--id", "ID-2")
            assert status == 0, err
            assert "ID-2" in out and "1 dead letters of g resent" in out
            back = broker.store.get_messages(
                ORDERS, QUEUE, ids.QueueOffset(2), max_count=8, max_bytes=1 << 20
            )
            (resent,) = back.messages
            assert (message.message_id_of(resent), resent.body) == ("ID-2", b"order 2")
            assert resent.reconsume_times == 0
            assert message.Property.DLQ_ORIGIN_TOPIC not in resent.properties

            status, out, err = await ariane_admin(found, "dlq", "resend", "g", "--id", "nope")
            assert status == 1 and "MESSAGE_NOT_FOUND" in err, (out, err)
            status, out, err = await ariane_admin(found, "--json", "dlq", "resend", "g", "--all")
            assert status == 0, err
            assert sorted(r["message_id"] for r in json.loads(out)) == ["ID-1", "ID-2"]
            assert broker.store.max_queue_offset(ORDERS, QUEUE) == 5

    asyncio.run(main())
