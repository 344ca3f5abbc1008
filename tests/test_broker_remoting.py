"""The broker's classic protocol (``broker.remoting``) over real sockets on 127.0.0.1.

Each test starts a ``RemotingService`` over the processors of an in-process broker
(``broker_harness``: real store, manual clock) and talks to it with the codec's
``RemotingClient``, frame by frame as the classic Java client does (remoting.md §3-§4).
"""

from __future__ import annotations

import asyncio
import dataclasses
import pathlib
import struct
from collections.abc import Awaitable, Callable
from typing import TypeVar

import broker_harness
from ariane.broker.remoting import rates
from ariane.broker.remoting import service as remoting_service
from ariane.broker.transaction import check_service
from ariane.common import idempotency, ids, route
from ariane.remoting import codes, command, fastjson, message_codec, transport

RQ = codes.RequestCode
RC = codes.ResponseCode
TOPIC = "classic-topic"
TIMEOUT_S = 10.0


class Peer:
    """A classic client: one connection to the broker and the requests the broker pushed."""

    def __init__(self, client: transport.RemotingClient, addr: str) -> None:
        self.client = client
        self.addr = addr
        self.pushed: asyncio.Queue[command.RemotingCommand] = asyncio.Queue(maxsize=100)

    async def call(
        self, code: int, ext: dict[str, str] | None = None, body: bytes = b""
    ) -> command.RemotingCommand:
        return await self.client.invoke(
            self.addr, command.request(code, ext or {}, body), TIMEOUT_S
        )

    async def oneway(self, code: int, ext: dict[str, str], body: bytes = b"") -> None:
        await self.client.invoke_oneway(self.addr, command.request(code, ext, body, oneway=True))


@dataclasses.dataclass
class Ctx:
    """What a scenario gets: the in-process broker, its classic service, a way to connect."""

    h: broker_harness.BrokerHarness
    service: remoting_service.RemotingService
    connect: Callable[[], Awaitable[Peer]]


Scenario = Callable[[Ctx], Awaitable[None]]


def run(tmp_path: pathlib.Path, scenario: Scenario) -> None:
    """Run ``scenario`` against a broker serving the classic protocol on a free port."""

    async def main() -> None:
        harness = broker_harness.BrokerHarness(tmp_path)
        harness.create_topic(TOPIC, queues=4)
        counters = harness.runtime.counters
        service = remoting_service.RemotingService(
            harness.processors,
            time=harness.clock,
            cluster=harness.runtime.settings.cluster,
            tps=rates.TpsSampler(lambda: (counters.messages_in, counters.messages_out)),
            traffic=counters.traffic,
        )
        host, port = await service.start("127.0.0.1", 0)
        runner = asyncio.ensure_future(service.run())
        clients: list[transport.RemotingClient] = []

        async def connect() -> Peer:
            holder: list[Peer] = []

            async def pushed(
                _c: transport.Connection, request: command.RemotingCommand
            ) -> command.RemotingCommand | None:
                holder[0].pushed.put_nowait(request)
                return None

            client = transport.RemotingClient(
                {RQ.NOTIFY_CONSUMER_IDS_CHANGED: pushed, RQ.CHECK_TRANSACTION_STATE: pushed}
            )
            clients.append(client)
            holder.append(Peer(client, f"{host}:{port}"))
            return holder[0]

        try:
            await scenario(Ctx(harness, service, connect))
        finally:
            for client in clients:
                await client.close()
            runner.cancel()
            await service.close()
            harness.close()

    asyncio.run(main())


T = TypeVar("T")


async def until(probe: Callable[[], Awaitable[T]], done: Callable[[T], bool]) -> T:
    """``probe()`` again every 20 ms until ``done`` holds for its value or ``TIMEOUT_S``
    passes; returns the last value (the caller asserts on it)."""
    deadline = asyncio.get_running_loop().time() + TIMEOUT_S
    value = await probe()
    while not done(value) and asyncio.get_running_loop().time() < deadline:
        await asyncio.sleep(0.02)  # polling the broker, with a deadline
        value = await probe()
    return value


def send_header(
    topic: str = TOPIC, queue_id: int = 1, properties: str = "", **more: str
) -> dict[str, str]:
    """A SEND_MESSAGE_V2 header as Java 5.3.3 writes it (one letter per field)."""
    header = {
        "a": "producer-group",
        "b": topic,
        "c": "TBW102",
        "d": "4",
        "e": str(queue_id),
        "f": "0",
        "g": "1700000000000",
        "h": "0",
        "i": properties,
        "j": "0",
        "k": "false",
        "m": "false",
    }
    header.update(more)
    return header


def props(**values: str) -> str:
    return message_codec.encode_properties(values).decode()


def pull_header(
    queue_id: int,
    offset: int,
    *,
    sys_flag: int = 0x4,
    suspend_ms: int = 0,
    subscription: str = "*",
    group: str = "classic-group",
) -> dict[str, str]:
    return {
        "consumerGroup": group,
        "topic": TOPIC,
        "queueId": str(queue_id),
        "queueOffset": str(offset),
        "maxMsgNums": "32",
        "sysFlag": str(sys_flag),
        "commitOffset": "0",
        "suspendTimeoutMillis": str(suspend_ms),
        "subscription": subscription,
        "subVersion": "0",
        "expressionType": "TAG",
    }


def test_send_v2_honours_queue_and_pull_returns_the_stored_record(tmp_path: pathlib.Path) -> None:
    """A SEND_MESSAGE_V2 lands on the queue the client chose, the reply carries every field
    Java unboxes, and a pull returns it as a stored record with its properties and an
    added UNIQ_KEY."""

    async def scenario(ctx: Ctx) -> None:
        connect = ctx.connect
        peer = await connect()
        reply = await peer.call(
            RQ.SEND_MESSAGE_V2,
            send_header(queue_id=2, properties=props(TAGS="a", KEYS="k1 k2", color="red")),
            b"hello",
        )
        assert reply.code == RC.SUCCESS, reply.remark
        ext = reply.ext_fields
        assert (ext["queueId"], ext["queueOffset"]) == ("2", "0")
        assert ext["MSG_REGION"] == "DefaultRegion" and ext["TRACE_ON"] == "true"
        host_offset = message_codec.decode_offset_message_id(ext["msgId"])
        assert host_offset is not None and len(ext["msgId"]) == 32
        pulled = await peer.call(RQ.PULL_MESSAGE, pull_header(2, 0))
        assert pulled.code == RC.SUCCESS, pulled.remark
        assert pulled.ext_fields["nextBeginOffset"] == "1"
        assert pulled.ext_fields["maxOffset"] == "1" and pulled.ext_fields["minOffset"] == "0"
        (stored,) = message_codec.decode_stored(pulled.body)
        assert stored.body == b"hello" and stored.queue_id == 2
        assert stored.commit_log_offset == host_offset[1]
        assert stored.properties["TAGS"] == "a" and stored.properties["KEYS"] == "k1 k2"
        assert stored.properties["color"] == "red" and stored.properties["UNIQ_KEY"]

    run(tmp_path, scenario)


def test_send_refusals_carry_classic_codes(tmp_path: pathlib.Path) -> None:
    """An out-of-range queue id answers INVALID_PARAMETER (29), an unknown topic
    TOPIC_NOT_EXIST (17), an empty body MESSAGE_ILLEGAL (13), a header without topic 29."""

    async def scenario(ctx: Ctx) -> None:
        connect = ctx.connect
        peer = await connect()
        assert (await peer.call(RQ.SEND_MESSAGE_V2, send_header(queue_id=4), b"x")).code == 29
        assert (await peer.call(RQ.SEND_MESSAGE_V2, send_header("nope"), b"x")).code == 17
        assert (await peer.call(RQ.SEND_MESSAGE_V2, send_header(), b"")).code == 13
        no_topic = {k: v for k, v in send_header().items() if k != "b"}
        assert (await peer.call(RQ.SEND_MESSAGE, no_topic, b"x")).code == 29

    run(tmp_path, scenario)


def test_batch_send_and_oneway_send(tmp_path: pathlib.Path) -> None:
    """A SEND_BATCH_MESSAGE stores its messages on one queue with consecutive offsets and
    answers one offset msgId per message; a oneway send is stored and never answered."""

    async def scenario(ctx: Ctx) -> None:
        connect = ctx.connect
        peer = await connect()
        batch = message_codec.encode_batch(
            [message_codec.BatchMessage(f"m{i}".encode(), {"UNIQ_KEY": f"U{i}"}) for i in range(3)]
        )
        reply = await peer.call(RQ.SEND_BATCH_MESSAGE, send_header(queue_id=3, m="true"), batch)
        assert reply.code == RC.SUCCESS, reply.remark
        assert len(reply.ext_fields["msgId"].split(",")) == 3
        assert reply.ext_fields["queueOffset"] == "0"
        await peer.oneway(RQ.SEND_MESSAGE_V2, send_header(queue_id=3), b"oneway")
        pulled = await until(
            lambda: peer.call(RQ.PULL_MESSAGE, pull_header(3, 0)),
            lambda r: r.code == 0 and len(message_codec.decode_stored(r.body)) == 4,
        )
        records = message_codec.decode_stored(pulled.body)
        assert [r.body for r in records] == [b"m0", b"m1", b"m2", b"oneway"]
        assert [r.properties["UNIQ_KEY"] for r in records[:3]] == ["U0", "U1", "U2"]

    run(tmp_path, scenario)


def test_classic_properties_stored_as_sent_or_re_encoded_and_keyed_ids(
    tmp_path: pathlib.Path,
) -> None:
    """A batch message whose properties string repeats a name is stored with the properties it
    parses to (not the string as sent); a message with ``ARIANE_IDEMPOTENCY_KEY`` is stored
    with the id derived from the key in place of its UNIQ_KEY; an invalid key answers
    MESSAGE_ILLEGAL (13)."""

    async def scenario(ctx: Ctx) -> None:
        peer = await ctx.connect()
        raw = b"a\x01first\x02a\x01second\x02UNIQ_KEY\x01U1\x02"  # ``a`` twice
        size = 4 * 5 + 1 + 2 + len(raw)  # MessageDecoder.encodeMessage: head, body, properties
        body = struct.pack(">iiiii", size, 0, 0, 0, 1) + b"r" + struct.pack(">h", len(raw)) + raw
        reply = await peer.call(RQ.SEND_BATCH_MESSAGE, send_header(queue_id=0, m="true"), body)
        assert reply.code == RC.SUCCESS, reply.remark
        keyed = props(UNIQ_KEY="client-id", ARIANE_IDEMPOTENCY_KEY="k-1")
        reply = await peer.call(RQ.SEND_MESSAGE_V2, send_header(queue_id=0, properties=keyed), b"k")
        assert reply.code == RC.SUCCESS, reply.remark
        bad = props(UNIQ_KEY="x", ARIANE_IDEMPOTENCY_KEY="k" * (idempotency.KEY_CHARS_MAX + 1))
        reply = await peer.call(RQ.SEND_MESSAGE_V2, send_header(queue_id=0, properties=bad), b"b")
        assert reply.code == RC.MESSAGE_ILLEGAL, reply.remark
        pulled = await peer.call(RQ.PULL_MESSAGE, pull_header(0, 0))
        assert pulled.code == RC.SUCCESS, pulled.remark
        assert b"first" not in pulled.body
        first, second = message_codec.decode_stored(pulled.body)
        assert dict(first.properties) == {"a": "second", "UNIQ_KEY": "U1"}
        assert second.properties["UNIQ_KEY"] == idempotency.message_id_of("k-1")

    run(tmp_path, scenario)


def test_pull_long_polls_until_a_send_and_answers_19_and_21(tmp_path: pathlib.Path) -> None:
    """A suspended pull at the max offset is answered when a message arrives; without
    suspension it answers PULL_NOT_FOUND (19); beyond the max offset PULL_OFFSET_MOVED (21)
    with the corrected offset."""

    async def scenario(ctx: Ctx) -> None:
        h, connect = ctx.h, ctx.connect
        peer = await connect()
        assert (await peer.call(RQ.PULL_MESSAGE, pull_header(0, 0))).code == RC.PULL_NOT_FOUND
        moved = await peer.call(RQ.PULL_MESSAGE, pull_header(0, 7))
        assert moved.code == RC.PULL_OFFSET_MOVED and moved.ext_fields["nextBeginOffset"] == "0"
        parked = asyncio.ensure_future(
            peer.call(
                RQ.LITE_PULL_MESSAGE, pull_header(0, 0, sys_flag=0x4 | 0x2, suspend_ms=20_000)
            )
        )

        async def parked_count() -> int:
            return h.runtime.polling.parked

        await until(parked_count, lambda n: n > 0)
        assert h.runtime.polling.parked == 1 and not parked.done()
        sent = await peer.call(RQ.SEND_MESSAGE_V2, send_header(queue_id=0), b"wake")
        assert sent.code == RC.SUCCESS
        woken = await parked
        assert woken.code == RC.SUCCESS
        assert [r.body for r in message_codec.decode_stored(woken.body)] == [b"wake"]

    run(tmp_path, scenario)


def test_heartbeat_membership_retry_topic_and_filtered_pull(tmp_path: pathlib.Path) -> None:
    """A CLUSTERING heartbeat creates %RETRY%<group>, lists the client in 38, pushes 40 to the
    group when a second client joins or leaves, and its tag subscription filters a pull that
    carries none (20 when all are filtered out); a pull with no subscription answers 24."""

    def heartbeat(client_id: str, tags: str = "a") -> bytes:
        return fastjson.dumps(
            {
                "clientID": client_id,
                "producerDataSet": [],
                "consumerDataSet": [
                    {
                        "groupName": "g1",
                        "consumeType": "CONSUME_PASSIVELY",
                        "messageModel": "CLUSTERING",
                        "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET",
                        "unitMode": False,
                        "subscriptionDataSet": [
                            {
                                "topic": TOPIC,
                                "subString": tags,
                                "expressionType": "TAG",
                                "subVersion": 1,
                            }
                        ],
                    }
                ],
            }
        )

    async def scenario(ctx: Ctx) -> None:
        h, connect = ctx.h, ctx.connect
        first, second = await connect(), await connect()
        assert (
            await first.call(RQ.PULL_MESSAGE, pull_header(0, 0, sys_flag=0, group="g1"))
        ).code == 24
        assert (await first.call(RQ.HEART_BEAT, body=heartbeat("c1"))).code == RC.SUCCESS
        assert h.runtime.topics.get("%RETRY%g1") is not None
        listed = await first.call(RQ.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": "g1"})
        assert fastjson.loads(listed.body) == {"consumerIdList": ["c1"]}
        assert (await second.call(RQ.HEART_BEAT, body=heartbeat("c2"))).code == RC.SUCCESS
        notice = await asyncio.wait_for(first.pushed.get(), TIMEOUT_S)
        assert notice.code == RQ.NOTIFY_CONSUMER_IDS_CHANGED
        assert notice.ext_fields["consumerGroup"] == "g1"
        unregistered = await second.call(
            RQ.UNREGISTER_CLIENT, {"clientID": "c2", "consumerGroup": "g1"}
        )
        assert unregistered.code == RC.SUCCESS
        await asyncio.wait_for(first.pushed.get(), TIMEOUT_S)  # c2 left: 40 again
        for tag in ("b", "a"):
            sent = await first.call(
                RQ.SEND_MESSAGE_V2,
                send_header(queue_id=0, properties=props(TAGS=tag)),
                tag.encode(),
            )
            assert sent.code == RC.SUCCESS
        skipped = await first.call(RQ.PULL_MESSAGE, pull_header(0, 0, sys_flag=0, group="g1"))
        found = await first.call(RQ.PULL_MESSAGE, pull_header(0, 1, sys_flag=0, group="g1"))
        assert [r.body for r in message_codec.decode_stored(found.body)] == [b"a"]
        assert skipped.code in (RC.SUCCESS, RC.PULL_RETRY_IMMEDIATELY)
        if skipped.code == RC.SUCCESS:  # the filtered message was skipped inside one read
            assert [r.body for r in message_codec.decode_stored(skipped.body)] == [b"a"]

    run(tmp_path, scenario)


def test_offsets_query_update_and_queue_bounds(tmp_path: pathlib.Path) -> None:
    """QUERY_CONSUMER_OFFSET answers 22 before a commit; a oneway UPDATE_CONSUMER_OFFSET
    commits into the table gRPC consumers share; min/max/earliest/by-time answer."""

    async def scenario(ctx: Ctx) -> None:
        h, connect = ctx.h, ctx.connect
        peer = await connect()
        for body in (b"1", b"2"):
            assert (await peer.call(RQ.SEND_MESSAGE_V2, send_header(queue_id=1), body)).code == 0
        where = {"consumerGroup": "g2", "topic": TOPIC, "queueId": "1"}
        assert (await peer.call(RQ.QUERY_CONSUMER_OFFSET, where)).code == RC.QUERY_NOT_FOUND
        await peer.oneway(RQ.UPDATE_CONSUMER_OFFSET, {**where, "commitOffset": "2"})
        reply = await until(
            lambda: peer.call(RQ.QUERY_CONSUMER_OFFSET, where), lambda r: r.code == 0
        )
        assert reply.ext_fields["offset"] == "2"
        assert h.processors.puller.get_offset("g2", TOPIC, 1) == 2  # type: ignore[arg-type]
        queue = {"topic": TOPIC, "queueId": "1"}
        assert (await peer.call(RQ.GET_MAX_OFFSET, queue)).ext_fields["offset"] == "2"
        assert (await peer.call(RQ.GET_MIN_OFFSET, queue)).ext_fields["offset"] == "0"
        earliest = await peer.call(RQ.GET_EARLIEST_MSG_STORETIME, queue)
        assert earliest.ext_fields["timestamp"] == str(h.clock.now_ms())
        by_time = await peer.call(RQ.SEARCH_OFFSET_BY_TIMESTAMP, {**queue, "timestamp": "0"})
        assert by_time.ext_fields["offset"] == "0"

    run(tmp_path, scenario)


async def checked_back(ctx: Ctx, peer: Peer) -> command.RemotingCommand:
    """Let the one open half message come due, run one check pass and return the
    CHECK_TRANSACTION_STATE (39) it pushed to ``peer``."""
    h = ctx.h
    h.clock.advance_ms(h.runtime.settings.transaction.transaction_timeout_ms + 1)
    checker = check_service.TransactionCheckService(
        transactions=h.processors.transactions,
        listener=ctx.service.check_listener,
        time=h.clock,
    )
    assert await checker.check_once() == 1
    return await asyncio.wait_for(peer.pushed.get(), TIMEOUT_S)


def test_transaction_half_commit_rollback_and_check_back(tmp_path: pathlib.Path) -> None:
    """A TRAN_MSG send is invisible until END_TRANSACTION commits it; a rolled-back one never
    shows; an unresolved one is checked back over the producer group's connection (39)."""

    async def scenario(ctx: Ctx) -> None:
        connect = ctx.connect
        peer = await connect()
        beat = fastjson.dumps(
            {"clientID": "p1", "producerDataSet": [{"groupName": "pg"}], "consumerDataSet": []}
        )
        assert (await peer.call(RQ.HEART_BEAT, body=beat)).code == 0
        half_props = props(TRAN_MSG="true", PGROUP="pg", UNIQ_KEY="TX1")
        replies = []
        for key in ("TX1", "TX2", "TX3"):
            p = half_props.replace("TX1", key)
            replies.append(
                await peer.call(
                    RQ.SEND_MESSAGE_V2, send_header(queue_id=0, properties=p, f="4"), key.encode()
                )
            )
        assert all(r.code == 0 and r.ext_fields["transactionId"] for r in replies)
        assert (await peer.call(RQ.PULL_MESSAGE, pull_header(0, 0))).code == RC.PULL_NOT_FOUND
        for reply, key, verdict in ((replies[0], "TX1", "8"), (replies[1], "TX2", "12")):
            await peer.oneway(
                RQ.END_TRANSACTION,
                {
                    "producerGroup": "pg",
                    "tranStateTableOffset": reply.ext_fields["queueOffset"],
                    "commitLogOffset": "0",
                    "commitOrRollback": verdict,
                    "fromTransactionCheck": "false",
                    "msgId": key,
                    "transactionId": reply.ext_fields["transactionId"],
                    "topic": TOPIC,
                },
            )
        pulled = await until(
            lambda: peer.call(RQ.PULL_MESSAGE, pull_header(0, 0)), lambda r: r.code == 0
        )
        assert [r.body for r in message_codec.decode_stored(pulled.body)] == [b"TX1"]
        check = await checked_back(ctx, peer)
        assert check.code == RQ.CHECK_TRANSACTION_STATE
        assert check.ext_fields["transactionId"] == replies[2].ext_fields["transactionId"]
        assert check.ext_fields["msgId"] == "TX3"
        (half,) = message_codec.decode_stored(check.body)
        assert half.body == b"TX3" and half.properties["PGROUP"] == "pg"

    run(tmp_path, scenario)


def test_check_back_answer_naming_the_uniq_key_commits_by_commit_log_offset(
    tmp_path: pathlib.Path,
) -> None:
    """An END_TRANSACTION answering a check-back with the UNIQ_KEY as ``transactionId`` (what
    the Go client v2 sends) commits the half message at the check's ``commitLogOffset``, as
    RocketMQ finds it; an id that is neither ours nor backed by a half message is refused."""

    async def scenario(ctx: Ctx) -> None:
        peer = await ctx.connect()
        beat = fastjson.dumps(
            {"clientID": "go1", "producerDataSet": [{"groupName": "pg"}], "consumerDataSet": []}
        )
        assert (await peer.call(RQ.HEART_BEAT, body=beat)).code == 0
        half_props = props(TRAN_MSG="true", PGROUP="pg", UNIQ_KEY="GOTX")
        sent = await peer.call(
            RQ.SEND_MESSAGE, send_header(queue_id=0, properties=half_props, f="4"), b"GOTX"
        )
        assert sent.code == 0
        check = await checked_back(ctx, peer)
        answer = {
            "producerGroup": "pg",
            "tranStateTableOffset": check.ext_fields["tranStateTableOffset"],
            "commitOrRollback": "8",
            "fromTransactionCheck": "true",
            "msgId": "GOTX",
            "transactionId": "GOTX",
        }
        refused = await peer.call(RQ.END_TRANSACTION, {**answer, "commitLogOffset": "-1"})
        assert refused.code != 0
        done = await peer.call(
            RQ.END_TRANSACTION, {**answer, "commitLogOffset": check.ext_fields["commitLogOffset"]}
        )
        assert done.code == 0, done.remark
        pulled = await until(
            lambda: peer.call(RQ.PULL_MESSAGE, pull_header(0, 0)), lambda r: r.code == 0
        )
        assert [r.body for r in message_codec.decode_stored(pulled.body)] == [b"GOTX"]

    run(tmp_path, scenario)


def test_view_by_id_and_query_by_key(tmp_path: pathlib.Path) -> None:
    """VIEW_MESSAGE_BY_ID (33) answers the record at the offset inside the send's offset
    msgId; QUERY_MESSAGE (12) finds it by key and by UNIQ_KEY; misses answer 22."""

    async def scenario(ctx: Ctx) -> None:
        peer = await ctx.connect()
        p = props(KEYS="order-7", UNIQ_KEY="UK7")
        sent = await peer.call(RQ.SEND_MESSAGE_V2, send_header(properties=p), b"seven")
        decoded = message_codec.decode_offset_message_id(sent.ext_fields["msgId"])
        assert decoded is not None
        viewed = await peer.call(RQ.VIEW_MESSAGE_BY_ID, {"topic": TOPIC, "offset": str(decoded[1])})
        assert [r.body for r in message_codec.decode_stored(viewed.body)] == [b"seven"]
        missing = await peer.call(RQ.VIEW_MESSAGE_BY_ID, {"topic": TOPIC, "offset": "999999"})
        assert missing.code == RC.QUERY_NOT_FOUND
        query = {"topic": TOPIC, "maxNum": "32", "beginTimestamp": "0", "endTimestamp": "0"}
        by_key = await until(
            lambda: peer.call(RQ.QUERY_MESSAGE, {**query, "key": "order-7"}),
            lambda r: r.code == 0,
        )
        assert [r.body for r in message_codec.decode_stored(by_key.body)] == [b"seven"]
        assert by_key.ext_fields["indexLastUpdatePhyoffset"] == str(decoded[1])
        unique = {**query, "key": "UK7", "_UNIQUE_KEY_QUERY": "true"}
        by_id = await peer.call(RQ.QUERY_MESSAGE, unique)
        assert [r.body for r in message_codec.decode_stored(by_id.body)] == [b"seven"]
        absent = await peer.call(RQ.QUERY_MESSAGE, {**query, "key": "nothing"})
        assert absent.code == RC.QUERY_NOT_FOUND

    run(tmp_path, scenario)


def test_delay_level_parks_until_due(tmp_path: pathlib.Path) -> None:
    """A send with DELAY=3 (10 s) is not pullable at once and lands in its queue, with its
    properties, once the schedule delivers it after the delay."""

    async def scenario(ctx: Ctx) -> None:
        h, peer = ctx.h, await ctx.connect()
        sent = await peer.call(
            RQ.SEND_MESSAGE_V2,
            send_header(queue_id=1, properties=props(DELAY="3", TAGS="d")),
            b"later",
        )
        assert sent.code == RC.SUCCESS, sent.remark
        assert (await peer.call(RQ.PULL_MESSAGE, pull_header(1, 0))).code == RC.PULL_NOT_FOUND
        await h.runtime.schedule.run_once()
        assert (await peer.call(RQ.PULL_MESSAGE, pull_header(1, 0))).code == RC.PULL_NOT_FOUND
        h.clock.advance_ms(10_001)

        async def deliver_and_pull() -> command.RemotingCommand:
            await h.runtime.schedule.run_once()
            return await peer.call(RQ.PULL_MESSAGE, pull_header(1, 0))

        pulled = await until(deliver_and_pull, lambda r: r.code == 0)
        (record,) = message_codec.decode_stored(pulled.body)
        assert (
            record.body == b"later" and record.topic == TOPIC and record.properties["TAGS"] == "d"
        )

    run(tmp_path, scenario)


def test_unknown_code_and_bad_heartbeat(tmp_path: pathlib.Path) -> None:
    """An unsupported code answers REQUEST_CODE_NOT_SUPPORTED (3); a heartbeat whose body is
    no JSON answers INVALID_PARAMETER (29); a bad filter in 46 SUBSCRIPTION_PARSE_FAILED (23);
    END_TRANSACTION with an unknown transaction id INVALID_PARAMETER (29)."""

    async def scenario(ctx: Ctx) -> None:
        peer = await ctx.connect()
        assert (await peer.call(9999, {})).code == RC.REQUEST_CODE_NOT_SUPPORTED
        assert (await peer.call(RQ.HEART_BEAT, body=b"{not json")).code == RC.INVALID_PARAMETER
        bad_sql = fastjson.dumps(
            {"subscriptionData": {"topic": TOPIC, "subString": "a >", "expressionType": "SQL92"}}
        )
        assert (await peer.call(RQ.CHECK_CLIENT_CONFIG, body=bad_sql)).code == 23
        ended = await peer.call(
            RQ.END_TRANSACTION,
            {
                "producerGroup": "pg",
                "commitOrRollback": "8",
                "msgId": "X",
                "transactionId": "zz",
            },
        )
        assert ended.code == RC.INVALID_PARAMETER

    run(tmp_path, scenario)


def test_send_back_retries_through_retry_topic_then_dead_letters(tmp_path: pathlib.Path) -> None:
    """CONSUMER_SEND_MSG_BACK with level 0 puts a copy (reconsumeTimes + 1, RETRY_TOPIC, same
    UNIQ_KEY) in %RETRY%<group> after level 3's 10 s; once reconsumeTimes reaches
    maxReconsumeTimes the next send-back puts it in %DLQ%<group>; an unknown offset answers 22."""

    def retry_pull(topic: str) -> dict[str, str]:
        return {**pull_header(0, 0), "topic": topic, "consumerGroup": "rg"}

    async def scenario(ctx: Ctx) -> None:
        h, peer = ctx.h, await ctx.connect()
        p = props(UNIQ_KEY="UK-R", TAGS="t")
        assert (
            await peer.call(RQ.SEND_MESSAGE_V2, send_header(queue_id=0, properties=p), b"r")
        ).code == 0
        (first,) = message_codec.decode_stored(
            (await peer.call(RQ.PULL_MESSAGE, pull_header(0, 0))).body
        )
        back = {
            "group": "rg",
            "delayLevel": "0",
            "originMsgId": "UK-R",
            "originTopic": TOPIC,
            "maxReconsumeTimes": "1",
            "unitMode": "false",
        }
        sent_back = await peer.call(
            RQ.CONSUMER_SEND_MSG_BACK, {**back, "offset": str(first.commit_log_offset)}
        )
        assert sent_back.code == RC.SUCCESS, sent_back.remark
        assert (await peer.call(RQ.PULL_MESSAGE, retry_pull("%RETRY%rg"))).code == RC.PULL_NOT_FOUND
        h.clock.advance_ms(10_001)

        async def deliver_and_pull() -> command.RemotingCommand:
            await h.runtime.schedule.run_once()
            return await peer.call(RQ.PULL_MESSAGE, retry_pull("%RETRY%rg"))

        pulled = await until(deliver_and_pull, lambda r: r.code == 0)
        (retry,) = message_codec.decode_stored(pulled.body)
        assert retry.reconsume_times == 1 and retry.body == b"r"
        assert retry.properties["RETRY_TOPIC"] == TOPIC and retry.properties["UNIQ_KEY"] == "UK-R"
        dead = await peer.call(
            RQ.CONSUMER_SEND_MSG_BACK, {**back, "offset": str(retry.commit_log_offset)}
        )
        assert dead.code == RC.SUCCESS, dead.remark
        dlq = await peer.call(RQ.PULL_MESSAGE, retry_pull("%DLQ%rg"))
        (letter,) = message_codec.decode_stored(dlq.body)
        assert letter.reconsume_times == 2 and letter.properties["ORIGIN_MESSAGE_ID"] == "UK-R"
        missing = await peer.call(RQ.CONSUMER_SEND_MSG_BACK, {**back, "offset": "99999999"})
        assert missing.code == RC.QUERY_NOT_FOUND

    run(tmp_path, scenario)


def test_queue_locks_grant_refresh_expire_and_unlock(tmp_path: pathlib.Path) -> None:
    """LOCK_BATCH_MQ grants free queues, refuses queues another client holds until its lock is
    60 s old, and UNLOCK_BATCH_MQ (oneway) frees only the holder's queues."""

    def body(client_id: str, *queue_ids: int) -> bytes:
        mqs = [{"brokerName": "broker-a", "queueId": q, "topic": TOPIC} for q in queue_ids]
        return fastjson.dumps(
            {"consumerGroup": "og", "clientId": client_id, "onlyThisBroker": False, "mqSet": mqs}
        )

    def locked(reply: command.RemotingCommand) -> list[int]:
        assert reply.code == RC.SUCCESS, reply.remark
        return sorted(q["queueId"] for q in fastjson.loads(reply.body)["lockOKMQSet"])

    async def scenario(ctx: Ctx) -> None:
        h, peer = ctx.h, await ctx.connect()
        assert locked(await peer.call(RQ.LOCK_BATCH_MQ, body=body("c1", 0, 1))) == [0, 1]
        assert locked(await peer.call(RQ.LOCK_BATCH_MQ, body=body("c2", 1, 2))) == [2]
        h.clock.advance_ms(59_000)
        assert locked(await peer.call(RQ.LOCK_BATCH_MQ, body=body("c1", 0))) == [0]  # refreshed
        h.clock.advance_ms(2_000)  # c1's lock of queue 1 is 61 s old, queue 0's 2 s
        assert locked(await peer.call(RQ.LOCK_BATCH_MQ, body=body("c2", 0, 1))) == [1]
        await peer.oneway(RQ.UNLOCK_BATCH_MQ, {}, body("c2", 0, 1))  # 0 is c1's: kept
        granted = await until(
            lambda: peer.call(RQ.LOCK_BATCH_MQ, body=body("c3", 0, 1)),
            lambda r: locked(r) == [1],
        )
        assert locked(granted) == [1]
        bad = await peer.call(RQ.LOCK_BATCH_MQ, body=b'{"clientId":"c1"}')
        assert bad.code == RC.INVALID_PARAMETER

    run(tmp_path, scenario)


def test_classic_locks_share_the_broker_table_and_go_with_the_connection(
    tmp_path: pathlib.Path,
) -> None:
    """LOCK_BATCH_MQ locks in the broker's one RebalanceLockManager (a queue a gRPC client holds
    there is refused to a classic client), and a classic consumer's locks are released when
    its connection closes, not left to expire."""
    group = ids.GroupName("og")

    def lock_body(client_id: str, *queue_ids: int) -> bytes:
        mqs = [{"brokerName": "broker-a", "queueId": q, "topic": TOPIC} for q in queue_ids]
        return fastjson.dumps({"consumerGroup": group, "clientId": client_id, "mqSet": mqs})

    def queue(queue_id: int) -> route.MessageQueue:
        return route.MessageQueue(
            ids.TopicName(TOPIC), ids.BrokerName("broker-a"), ids.QueueId(queue_id)
        )

    beat = fastjson.dumps(
        {
            "clientID": "c1",
            "consumerDataSet": [
                {
                    "groupName": group,
                    "consumeType": "CONSUME_PASSIVELY",
                    "messageModel": "CLUSTERING",
                    "subscriptionDataSet": [{"topic": TOPIC, "subString": "*"}],
                }
            ],
        }
    )

    async def scenario(ctx: Ctx) -> None:
        shared, peer = ctx.service.locks, await ctx.connect()
        assert shared.lock_batch(group, [queue(2)], ids.ClientId("grpc-1")) == {queue(2)}
        assert (await peer.call(RQ.HEART_BEAT, body=beat)).code == RC.SUCCESS
        reply = await peer.call(RQ.LOCK_BATCH_MQ, body=lock_body("c1", 0, 2))
        assert [q["queueId"] for q in fastjson.loads(reply.body)["lockOKMQSet"]] == [0]
        assert shared.holder(group, queue(0)) == "c1"
        await peer.client.close()

        async def holder() -> ids.ClientId | None:
            return shared.holder(group, queue(0))

        assert await until(holder, lambda h: h is None) is None
        assert shared.holder(group, queue(2)) == "grpc-1"

    run(tmp_path, scenario)
