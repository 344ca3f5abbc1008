"""Lite topics (RocketMQ 5.5, RIP-83) in-process: the LITE type on every admin surface, lite
sends into their parent's queue with the lite topic's hash in the ConsumeQueue tag slot, the
name rules and quotas with their codes, SyncLiteSubscription's four actions, a lite consumer
receiving only its lite topics, and TTL expiry that never drops a lite topic a subscriber has
not consumed; over a real store in a temp dir (small segments) and a manual clock."""

from __future__ import annotations

import argparse
import asyncio
import pathlib
import zlib
from collections.abc import Iterator

import pytest

import broker_harness
from ariane import admin_cli
from ariane.broker.grpc import lite_rpc, messaging, routes, settings_reply
from ariane.broker.remoting import admin_bodies
from ariane.broker.services import lite_expiry
from ariane.broker.tables import clients, lite_settings
from ariane.common import errors, hashing, ids, message
from ariane.grpcwire import channel_pool, codes, convert, messages, pb
from broker_harness import FakeCallContext, incoming

PARENT = ids.TopicName("sessions")
GROUP = "agents"
LITE = message.MessageType.LITE
P = message.Property
QUEUES = 4
TTL_MS = 1_000


class Broker:
    """A MessagingService over a harness runtime with small lite quotas."""

    def __init__(self, root: pathlib.Path, lite: lite_settings.LiteSettings) -> None:
        self.harness = broker_harness.BrokerHarness(root, lite=lite)
        runtime = self.harness.runtime
        runtime.advertise("127.0.0.1:18081")
        self.sessions = clients.ClientRegistry(time=self.harness.clock, expired_ms=120_000)
        lookup = routes.RouteLookup(runtime, channel_pool.ChannelPool(channels_max=1))
        processors = self.harness.processors
        self.service = messaging.MessagingService(
            runtime, processors.sender, processors.consumer, lookup, self.sessions,
            processors.puller,
        )  # fmt: skip
        self.table = runtime.lite_topics
        self.harness.create_topic(PARENT, queues=QUEUES, kind=LITE)

    def send(self, *lite_topics: str | None, topic: str = PARENT) -> list[str]:
        """Send one LITE message per lite topic (body ``<lite>-<i>``); the message ids."""
        batch = [
            _lite_message(f"{name}-{i}".encode(), name, topic) for i, name in enumerate(lite_topics)
        ]
        outcomes = asyncio.run(self.harness.processors.sender.send(batch, born_ip="10.1.2.3"))
        return [o.message_id for o in outcomes]

    def settings(self, client_id: str, kind: pb.v2.ClientType) -> pb.v2.Settings:
        """The reply to a lite consumer's Telemetry settings report."""
        reported = pb.v2.Settings(
            client_type=kind,
            subscription=pb.v2.Subscription(
                group=pb.v2.Resource(name=GROUP),
                subscriptions=[pb.v2.SubscriptionEntry(topic=pb.v2.Resource(name=PARENT))],
            ),
        )
        return asyncio.run(
            settings_reply.merged_settings(
                self.service._settings,
                self.table,
                ids.ClientId(client_id),
                reported,
                FakeCallContext(client_id),
            )
        )

    def sync(
        self, client_id: str, action: pb.v2.LiteSubscriptionAction, *names: str, topic: str = PARENT
    ) -> int:
        """SyncLiteSubscription as the client; the answered code."""
        request = pb.v2_service.SyncLiteSubscriptionRequest(
            action=action,
            topic=pb.v2.Resource(name=topic),
            group=pb.v2.Resource(name=GROUP),
            lite_topic_set=list(names),
        )
        try:
            answer = asyncio.run(
                self.service.sync_lite_subscription(request, FakeCallContext(client_id))
            )
        except errors.ArianeError as exc:  # the rpc guard answers its code
            return int(exc.code)
        return int(codes.code_of(answer.status))

    def receive(self, client_id: str) -> list[pb.v2.Message]:
        """One ReceiveMessage of the client on the parent (filter ``*``); an empty one polls
        the 5 s minimum on the manual clock, advanced 100 ms every 10 ms."""
        request = pb.v2_service.ReceiveMessageRequest(
            group=pb.v2.Resource(name=GROUP),
            message_queue=pb.v2.MessageQueue(topic=pb.v2.Resource(name=PARENT), id=0),
            filter_expression=pb.v2.FilterExpression(type=pb.v2.FilterType.TAG, expression="*"),
            batch_size=32,
            invisible_duration=messages.duration(300_000),
            long_polling_timeout=messages.duration(0),
        )

        async def tick() -> None:  # the manual clock ends the receive's 5 s minimum poll
            while True:
                await asyncio.sleep(0.01)
                self.harness.clock.advance_ms(100)

        async def collect() -> list[pb.v2.Message]:
            ticker = asyncio.create_task(tick())
            try:
                stream = self.service.receive_message(request, FakeCallContext(client_id))
                return [r.message async for r in stream if r.WhichOneof("content") == "message"]
            finally:
                ticker.cancel()

        return asyncio.run(collect())


def _lite_message(
    body: bytes, lite_topic: str | None, topic: str = PARENT
) -> message.IncomingMessage:
    plain = incoming(topic, body)
    return message.IncomingMessage(
        **{
            f: getattr(plain, f) for f in plain.__slots__ if f not in ("message_type", "lite_topic")
        },
        message_type="LITE",
        lite_topic=lite_topic,
    )


@pytest.fixture
def broker(tmp_path: pathlib.Path) -> Iterator[Broker]:
    settings = lite_settings.LiteSettings(lite_topics_max=5, subscription_quota=3, ttl_ms=TTL_MS)
    made = Broker(tmp_path, settings)
    yield made
    made.harness.close()


A = pb.v2.LiteSubscriptionAction
SIMPLE = pb.v2.ClientType.LITE_SIMPLE_CONSUMER
OK = int(errors.Code.OK)


def test_the_lite_type_is_on_every_admin_surface_and_in_routes() -> None:
    """LITE is a topic type of ``ariane admin topic create --type``, of the Remoting
    ``+message.type=LITE`` attribute and of the admin/registry protos; its route accepts LITE
    messages only and MIXED does not accept them (RocketMQ's RouteActivity)."""
    parser = argparse.ArgumentParser()
    admin_cli.add_arguments(parser)
    assert parser.parse_args(["topic", "create", "s", "--type", "LITE"]).type is LITE
    assert admin_bodies._message_type("+message.type=LITE", message.MessageType.NORMAL) is LITE
    wire = convert.topic_message_type(LITE)
    assert wire == pb.topic.TopicMessageType.TOPIC_MESSAGE_TYPE_LITE
    assert convert.message_type_of(wire) is LITE
    assert convert.accept_message_types(LITE) == [pb.v2.MessageType.LITE]
    assert pb.v2.MessageType.LITE not in convert.accept_message_types(message.MessageType.MIXED)


def test_a_lite_message_is_stored_in_its_parents_queue_with_its_name_and_hash(
    broker: Broker,
) -> None:
    """A lite message lands in the parent's queue crc32(lite) % queues with ``__LITE_TOPIC``,
    its ConsumeQueue unit holds the lite topic's Java hash in the tag slot, its lite topic is
    created with the queue offset of its latest message, and a consumer sees ``lite_topic`` and
    message type LITE."""
    broker.send("chat-1", "chat-2", "chat-1")
    store = broker.harness.runtime.store
    for name, count in (("chat-1", 2), ("chat-2", 1)):
        queue = ids.QueueId(zlib.crc32(name.encode()) % QUEUES)
        got = store.get_messages(PARENT, queue, ids.QueueOffset(0), max_count=10, max_bytes=1 << 20)
        mine = [m for m in got.messages if m.properties.get(P.LITE_TOPIC) == name]
        assert len(mine) == count
        units = store.consume_queues.get(PARENT, queue).read(ids.QueueOffset(0), 10)  # type: ignore[union-attr]
        hashes = {u.queue_offset: hashing.to_int32(u.tag_hash) for u in units}
        assert {hashes[m.queue_offset] for m in mine} == {hashing.java_string_hash(name)}
        record = broker.table.get(PARENT, name)
        assert record is not None
        assert (record.queue_id, record.last_offset) == (queue, mine[-1].queue_offset)
        wire = messages.outgoing(mine[0], message.Delivery("h", 1_000, 1))
        assert wire.system_properties.lite_topic == name
        assert wire.system_properties.message_type == pb.v2.MessageType.LITE


@pytest.mark.parametrize("name", ["", "   ", "x" * 65, "a.b", "ü", None])
def test_a_bad_lite_topic_name_answers_illegal_lite_topic(broker: Broker, name: str | None) -> None:
    """Blank, longer than 64 bytes, outside ``[a-zA-Z0-9_-]`` or missing: ILLEGAL_LITE_TOPIC
    (40020) for the whole request, nothing stored (RocketMQ 5.5 ``validateLiteTopic``)."""
    with pytest.raises(errors.IllegalLiteTopicError) as raised:
        broker.send("ok", name)
    assert raised.value.code == errors.Code.ILLEGAL_LITE_TOPIC
    assert len(broker.table) == 0


def test_lite_types_and_the_lite_topic_quota_answer_their_codes(broker: Broker) -> None:
    """A LITE message to a NORMAL topic is MESSAGE_PROPERTY_CONFLICT_WITH_TYPE; the sixth new
    lite topic on a broker whose quota is five answers LITE_TOPIC_QUOTA_EXCEEDED (42901) while
    the five existing ones still take messages."""
    broker.harness.create_topic("plain")
    with pytest.raises(errors.MessageTypeConflictError):
        broker.send("x", topic="plain")
    broker.send("s1", "s2", "s3", "s4", "s5")
    with pytest.raises(errors.LiteTopicQuotaExceededError) as raised:
        broker.send("s6")
    assert raised.value.code == errors.Code.LITE_TOPIC_QUOTA_EXCEEDED
    broker.send("s1", "s5")
    assert len(broker.table) == 5


def test_sync_lite_subscription_adds_removes_and_replaces_like_rocketmq(broker: Broker) -> None:
    """PARTIAL_ADD adds, PARTIAL_REMOVE removes, COMPLETE_ADD replaces the client's set,
    COMPLETE_REMOVE empties it; a set beyond the quota (3) answers
    LITE_SUBSCRIPTION_QUOTA_EXCEEDED (42902) and changes nothing; a bad name answers
    ILLEGAL_LITE_TOPIC, a parent that is not LITE ILLEGAL_TOPIC, a missing one TOPIC_NOT_FOUND."""
    broker.harness.create_topic("plain")

    def held() -> set[str]:
        return set(broker.table.subscribed(ids.ClientId("c1"), GROUP, PARENT))

    assert broker.sync("c1", A.PARTIAL_ADD, "a", "b") == OK and held() == {"a", "b"}
    assert broker.sync("c1", A.PARTIAL_ADD, "c") == OK and held() == {"a", "b", "c"}
    assert broker.sync("c1", A.PARTIAL_ADD, "d") == errors.Code.LITE_SUBSCRIPTION_QUOTA_EXCEEDED
    assert held() == {"a", "b", "c"}
    assert broker.sync("c1", A.PARTIAL_REMOVE, "a") == OK and held() == {"b", "c"}
    assert broker.sync("c1", A.COMPLETE_ADD, "d") == OK and held() == {"d"}
    assert broker.sync("c1", A.COMPLETE_ADD, "1", "2", "3", "4") == (
        errors.Code.LITE_SUBSCRIPTION_QUOTA_EXCEEDED
    )
    assert broker.sync("c1", A.PARTIAL_ADD, "bad name") == errors.Code.ILLEGAL_LITE_TOPIC
    assert held() == {"d"}
    assert broker.sync("c1", A.COMPLETE_REMOVE) == OK and held() == set()
    assert broker.sync("c1", A.PARTIAL_ADD, "a", topic="plain") == errors.Code.ILLEGAL_TOPIC
    assert broker.sync("c1", A.PARTIAL_ADD, "a", topic="nope") == errors.Code.TOPIC_NOT_FOUND


def test_a_lite_consumer_gets_its_quota_and_receives_only_its_lite_topics(broker: Broker) -> None:
    """A LITE_SIMPLE_CONSUMER's settings reply carries ``lite_subscription_quota`` and
    ``max_lite_topic_size``; its receives on the parent deliver the lite topics its group
    subscribes to (from the subscription on), each with its ``lite_topic``, and no other."""
    reply = broker.settings("c1", SIMPLE)
    assert (reply.subscription.lite_subscription_quota, reply.subscription.max_lite_topic_size) == (
        3,
        64,
    )
    assert broker.sync("c1", A.PARTIAL_ADD, "chat-1") == OK
    broker.send("chat-1", "chat-2", "chat-1")
    got = broker.receive("c1")
    assert sorted((m.system_properties.lite_topic, m.body) for m in got) == [
        ("chat-1", b"chat-1-0"),
        ("chat-1", b"chat-1-2"),
    ]
    assert broker.receive("c1") == []
    assert broker.sync("c1", A.PARTIAL_ADD, "chat-2") == OK
    broker.send("chat-2")
    assert [m.body for m in broker.receive("c1")] == [b"chat-2-0"]


def test_idle_lite_topics_expire_but_never_while_a_subscriber_has_lag(broker: Broker) -> None:
    """After the TTL an unsubscribed lite topic expires; a subscribed one whose message the
    group has not acked stays, and expires once acked, its subscriber told to drop it by a
    NotifyUnsubscribeLiteCommand and its subscription gone; a pass looks at most
    ``expiry_scan_max`` lite topics."""
    broker.settings("c1", SIMPLE)
    assert broker.sync("c1", A.PARTIAL_ADD, "kept") == OK
    broker.send("idle", "kept")
    (delivered,) = broker.receive("c1")
    notified: list[tuple[str, str]] = []
    runtime = broker.harness.runtime

    def notify(client_id: ids.ClientId, name: str) -> bool:
        notified.append((client_id, name))
        return True

    def expiry(scan_max: int) -> lite_expiry.LiteExpiryService:
        return lite_expiry.LiteExpiryService(
            table=broker.table,
            settings=lite_settings.LiteSettings(ttl_ms=TTL_MS, expiry_scan_max=scan_max),
            lagging=lite_expiry.pop_lag(runtime.pop_service),
            notify=notify,
            time=broker.harness.clock,
        )

    assert expiry(10).run_once() == 0  # nothing idle yet
    broker.harness.clock.advance_ms(TTL_MS)
    assert expiry(1).run_once() == 1 and broker.table.names(PARENT) == ["kept"]  # "idle"
    assert expiry(10).run_once() == 0  # "kept" is not acked yet
    ack = pb.v2_service.AckMessageRequest(
        group=pb.v2.Resource(name=GROUP),
        topic=pb.v2.Resource(name=PARENT),
        entries=[
            pb.v2_service.AckMessageEntry(
                message_id=delivered.system_properties.message_id,
                receipt_handle=delivered.system_properties.receipt_handle,
            )
        ],
    )
    acked = asyncio.run(broker.service.ack_message(ack, FakeCallContext("c1")))
    assert codes.code_of(acked.status) == errors.Code.OK
    assert expiry(10).run_once() == 1 and len(broker.table) == 0
    assert notified == [("c1", "kept")]
    assert broker.table.subscribed(ids.ClientId("c1"), GROUP, PARENT) == frozenset()
    command = lite_rpc.unsubscribe_command("kept")
    assert command.notify_unsubscribe_lite_command.lite_topic == "kept"


def test_a_client_that_goes_away_loses_its_lite_subscriptions(broker: Broker) -> None:
    """``drop_client`` (the client registry's removal listener) empties the client's sets and
    its group's view, so the group's receives stop matching them."""
    assert broker.sync("c1", A.PARTIAL_ADD, "a", "b") == OK
    assert broker.sync("c2", A.PARTIAL_ADD, "b") == OK
    broker.table.drop_client(ids.ClientId("c1"))
    view = broker.table.view(ids.GroupName(GROUP), PARENT)
    assert dict(view.names) == {"b": 1}
    assert set(view.hashes) == {hashing.java_string_hash("b")}


def test_deleting_a_lite_parent_drops_its_lite_topics_and_subscriptions(broker: Broker) -> None:
    """Deleting a LITE parent empties its lite topics, its clients' sets and its groups' views
    (a receive's filter holding the view matches nothing), leaves another parent's alone, and
    the parent created again starts with none."""
    broker.harness.create_topic("other", queues=QUEUES, kind=LITE)
    broker.send("chat-1", "chat-2")
    broker.send("chat-9", topic="other")
    assert broker.sync("c1", A.PARTIAL_ADD, "chat-1", "chat-2") == OK
    assert broker.sync("c2", A.PARTIAL_ADD, "chat-9", topic="other") == OK
    view = broker.table.view(ids.GroupName(GROUP), PARENT)

    broker.harness.processors.admin.delete_topic(PARENT)
    assert (len(broker.table), broker.table.names(PARENT)) == (1, [])
    assert broker.table.subscribed(ids.ClientId("c1"), GROUP, PARENT) == frozenset()
    assert (view.names, view.hashes, view.clients) == ({}, {}, set())
    assert broker.table.subscribing_groups(PARENT, "chat-1") == []
    assert broker.table.subscribed(ids.ClientId("c2"), GROUP, "other") == {"chat-9"}
    broker.harness.create_topic(PARENT, queues=QUEUES, kind=LITE)
    assert broker.table.names(PARENT) == []
