"""Real ``ariane namesrv`` and ``ariane broker`` processes serve RocketMQ-named ``/metrics``.

Under load sent and consumed through ``ariane.client``, a scrape over HTTP shows the traffic,
the group's lag (total and per queue), storage and disk series with the values the load implies,
the front-end worker's forwarded calls, the call latency and message size histograms, the
messages never delivered and their age, and the name server's route counts and call latency.
"""

from __future__ import annotations

import asyncio
import pathlib

import pytest

from metrics_testing import Samples, cluster, load, scrape, value

pytestmark = pytest.mark.slow

SENT, CONSUMED = 40, 15


def test_broker_and_namesrv_metrics_show_the_load(tmp_path: pathlib.Path) -> None:
    """After 40 sends and 15 acks, the broker's and name server's series say so."""
    with cluster(tmp_path, workers=1) as running:
        asyncio.run(load(running.namesrv, "metered", "meter-g", sent=SENT, consumed=CONSUMED))
        broker = scrape(running.broker_metrics)
        namesrv = scrape(running.namesrv_metrics)
    me = {"cluster": "DefaultCluster", "node_type": "broker", "node_id": "broker-m-0"}
    assert value(broker, "rocketmq_messages_in_total", **me) == SENT
    assert value(broker, "rocketmq_throughput_in_total", **me) >= SENT * 2
    assert value(broker, "rocketmq_messages_out_total", **me) >= CONSUMED
    assert value(broker, "rocketmq_throughput_out_total", **me) >= CONSUMED * 2
    assert value(broker, "rocketmq_producer_offset", topic="metered") == SENT
    pair = {"topic": "metered", "consumer_group": "meter-g"}
    assert value(broker, "rocketmq_consumer_lag_messages", **pair) == SENT - CONSUMED
    assert value(broker, "rocketmq_consumer_offset", **pair) == CONSUMED
    assert value(broker, "rocketmq_consumer_inflight_messages", **pair) == 0
    assert value(broker, "rocketmq_consumer_lag_latency", **pair) > 0
    per_queue = [
        value(broker, "ariane_consumer_queue_lag_messages", **pair, queue_id=str(q))
        for q in range(2)
    ]
    assert sum(per_queue) == SENT - CONSUMED
    assert value(broker, "ariane_metrics_lag_pairs_truncated") == 0
    assert value(broker, "rocketmq_topic_number") >= 1
    assert value(broker, "rocketmq_consumer_group_number") >= 1
    assert value(broker, "rocketmq_storage_size") > 0
    assert value(broker, "rocketmq_storage_dispatch_behind_bytes") >= 0
    assert 0 < value(broker, "rocketmq_brokeruntime_commitlog_disk_ratio") < 1
    assert value(broker, "ariane_storage_disk_watermark_ratio", level="reject_writes") == 0.9
    assert value(broker, "ariane_broker_role", role="ASYNC_MASTER") == 1
    assert value(broker, "ariane_broker_writable") == 1
    assert value(broker, "ariane_frontend_calls_total", worker="0") >= SENT
    assert value(namesrv, "ariane_namesrv_broker_group_master", broker_name="broker-m") == 1
    assert value(namesrv, "ariane_namesrv_brokers", broker_cluster="DefaultCluster") == 1
    assert value(namesrv, "ariane_namesrv_topics") >= 1
    assert value(namesrv, "ariane_namesrv_topics", node_type="nameserver") >= 1
    _assert_histograms(broker, namesrv)
    assert 0 < value(broker, "rocketmq_consumer_ready_messages", **pair) <= SENT - CONSUMED
    assert value(broker, "rocketmq_consumer_queueing_latency", **pair) > 0


def _assert_histograms(broker: Samples, namesrv: Samples) -> None:
    """Sends, receives and registrations are timed where answered; every stored body is sized."""
    sends = {"protocol_type": "grpc", "request_code": "send_message", "response_code": "ok"}
    assert value(broker, "rocketmq_rpc_latency_count", **sends) >= 1
    assert value(broker, "rocketmq_rpc_latency_bucket", **sends, le="+Inf") == value(
        broker, "rocketmq_rpc_latency_count", **sends
    )
    assert value(broker, "rocketmq_rpc_latency_sum", **sends) > 0
    receives = {"request_code": "receive_message", "response_code": "ok"}
    assert value(broker, "rocketmq_rpc_latency_count", **receives) >= 1
    assert value(namesrv, "rocketmq_rpc_latency_count", request_code="register_broker") >= 1
    normal = {"message_type": "normal"}
    assert value(broker, "rocketmq_message_size_count", **normal) == SENT
    assert value(broker, "rocketmq_message_size_bucket", **normal, le="1024.0") == SENT
    assert value(broker, "rocketmq_message_size_sum", **normal) == sum(
        len(f"m{i}") for i in range(SENT)
    )
    assert value(broker, "rocketmq_message_size_count", message_type="fifo") == 0
