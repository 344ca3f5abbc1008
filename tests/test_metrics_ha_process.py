"""A SYNC_MASTER and its slave, real processes, show their replication on ``/metrics``: the live
role, the epoch, the in-sync slave count, the slave's acked offset and its lag in bytes and
seconds while it is stopped, and, after a ChangeRole promotion and demotion, the new roles and
epoch.

Own cluster: the slave is stopped and the pair promoted and demoted."""

from __future__ import annotations

import asyncio
import os
import pathlib
import signal
from collections.abc import Iterator

import pytest

import ha_testing as ht
from ariane import dev
from ariane.common import errors
from ariane.grpcwire import pb
from metrics_testing import Samples, scrape, value

pytestmark = pytest.mark.slow

OK = int(errors.Code.OK)
TOPIC = "ha-metered"
ROLES = ("ASYNC_MASTER", "SYNC_MASTER", "SLAVE")


class Metered:
    """A broker of the pair and the URL of its ``/metrics``."""

    def __init__(self, tmp: pathlib.Path, name: str) -> None:
        self.broker = ht.new_broker(tmp, name)
        self.url = ""
        self._port = dev.free_port()

    def start(self, tmp: pathlib.Path, namesrv: str, role: str, **kwargs: object) -> None:
        config = tmp / "small.toml"
        config.write_text(
            "[store]\ncommit_log_file_size_bytes = 1048576\nsync_flush_timeout_ms = 1000\n"
            "[ha]\nheartbeat_interval_ms = 200\nhousekeeping_interval_ms = 30000\n"
            "[slave_sync]\ninterval_ms = 200\n"
        )
        extra = ("--config", str(config), "--metrics-listen", f"127.0.0.1:{self._port}")
        self.broker.start(tmp, namesrv, role, extra=extra, **kwargs)  # type: ignore[arg-type]
        self.url = f"http://127.0.0.1:{self._port}/metrics"
        process = self.broker.process
        assert process is not None
        dev.wait_until_listening("127.0.0.1", self._port, process=process, timeout_s=ht.DEADLINE_S)

    def scrape(self) -> Samples:
        return scrape(self.url)


@pytest.fixture
def pair(tmp_path: pathlib.Path) -> Iterator[tuple[Metered, Metered]]:
    with ht.running_namesrv(tmp_path) as namesrv:
        master, slave = Metered(tmp_path, "master"), Metered(tmp_path, "slave")
        try:
            master.start(tmp_path, namesrv, "SYNC_MASTER", broker_id=0)
            slave.start(tmp_path, namesrv, "SLAVE", broker_id=1, master_ha=master.broker.ha)
            ht.create_topic(master.broker.endpoint, TOPIC)
            ht.poll(
                lambda: ht.send(master.broker.endpoint, TOPIC, b"warm") == OK, "an in-sync slave"
            )
            yield master, slave
        finally:
            master.broker.stop()
            slave.broker.stop()


def _role(samples: Samples) -> str:
    """The one role ``ariane_broker_role`` says is 1."""
    found = [r for r in ROLES if _has(samples, "ariane_broker_role", role=r)]
    assert len(found) == 1, found
    return found[0]


def _has(samples: Samples, name: str, **labels: str) -> bool:
    want = set(labels.items())
    return any(n == name and want <= got and v == 1 for (n, got), v in samples.items())


def _topics(endpoint: str) -> set[str]:
    request = pb.admin.ListTopicsRequest()
    listed = asyncio.run(ht._admin(endpoint, "ListTopics", request, pb.admin.ListTopicsResponse))
    return {t.name for t in listed.topics}


def _slave_series(samples: Samples, name: str) -> list[float]:
    return [v for (n, _), v in samples.items() if n == name]


def test_pair_shows_live_role_epoch_in_sync_and_lag(pair: tuple[Metered, Metered]) -> None:
    """Proves the master says SYNC_MASTER, epoch 1, one in-sync slave at its own end offset;
    a stopped slave shows lag in bytes and seconds that goes back to 0 once it runs again."""
    master, slave = pair
    end = ht.stats(master.broker.endpoint).commit_log_max_offset
    ht.poll(
        lambda: _slave_series(master.scrape(), "ariane_ha_slave_ack_offset") == [end],
        "the slave's ack at the master's end",
    )
    seen = master.scrape()
    assert _role(seen) == "SYNC_MASTER"
    assert value(seen, "ariane_ha_epoch") == 1
    assert value(seen, "ariane_ha_in_sync_slaves") == 1
    assert value(seen, "rocketmq_brokeruntime_commitlog_maxoffset") == end
    assert _slave_series(seen, "ariane_ha_slave_lag_bytes") == [0]
    assert _slave_series(seen, "ariane_ha_slave_in_sync") == [1]
    replica = slave.scrape()
    assert _role(replica) == "SLAVE"
    assert value(replica, "ariane_ha_epoch") == 1
    assert value(replica, "ariane_ha_master_connected") == 1
    assert value(replica, "rocketmq_brokeruntime_commitlog_maxoffset") == end

    process = slave.broker.process
    assert process is not None
    os.kill(process.pid, signal.SIGSTOP)
    try:
        assert ht.send(master.broker.endpoint, TOPIC, b"unacked") != OK  # FLUSH_SLAVE_TIMEOUT
        ht.poll(
            lambda: _slave_series(master.scrape(), "ariane_ha_slave_lag_seconds")[0] >= 1,
            "a lag of a second",
        )
        behind = master.scrape()
        assert _slave_series(behind, "ariane_ha_slave_lag_bytes")[0] > 0
        assert _slave_series(behind, "ariane_ha_slave_ack_offset") == [end]
    finally:
        os.kill(process.pid, signal.SIGCONT)
    ht.poll(
        lambda: _slave_series(master.scrape(), "ariane_ha_slave_lag_seconds") == [0],
        "the slave caught up",
    )
    assert _slave_series(master.scrape(), "ariane_ha_slave_lag_bytes") == [0]


def test_role_series_follow_a_promotion_and_a_demotion(pair: tuple[Metered, Metered]) -> None:
    """Proves ``ariane_broker_role`` and ``ariane_ha_epoch`` follow ChangeRole: the promoted
    slave says SYNC_MASTER at epoch 2 with no in-sync slave, the demoted master says SLAVE and
    replicates from it."""
    master, slave = pair
    ht.poll(lambda: TOPIC in _topics(slave.broker.endpoint), "the topic synced to the slave")
    ht.change_role(slave.broker.endpoint, "SYNC_MASTER", epoch=2, broker_id=0)
    promoted = slave.scrape()
    assert _role(promoted) == "SYNC_MASTER"
    assert value(promoted, "ariane_ha_epoch") == 2
    assert value(promoted, "ariane_ha_in_sync_slaves") == 0

    ht.change_role(master.broker.endpoint, "SLAVE", epoch=2, broker_id=1, master_ha=slave.broker.ha)
    assert _role(master.scrape()) == "SLAVE"
    ht.poll(lambda: ht.send(slave.broker.endpoint, TOPIC, b"after") == OK, "acks at epoch 2")
    ht.poll(lambda: value(master.scrape(), "ariane_ha_epoch") == 2, "the old master at epoch 2")
    ht.poll(
        lambda: value(slave.scrape(), "ariane_ha_in_sync_slaves") == 1,
        "the old master in sync with the new one",
    )
    assert value(master.scrape(), "ariane_ha_master_connected") == 1
