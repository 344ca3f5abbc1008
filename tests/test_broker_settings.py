"""The broker's one settings tree loads every group from TOML, converting and refusing by path."""

from __future__ import annotations

import pathlib

import pytest

from ariane.broker import settings
from ariane.store import settings as store_settings

TOML = """
store_dir = "STORE"
namesrv = "127.0.0.1:9876"
offset_persist_interval_ms = 1000
[store]
flush_disk_type = "SYNC_FLUSH"
[receive]
consume_from_where = "LAST_OFFSET"
[core.topics]
auto_create_topic_enable = true
[core.pop]
inflight_messages_max = 7
"""


def test_every_group_of_the_tree_loads_from_toml(tmp_path: pathlib.Path) -> None:
    """Top-level keys, [store], [receive] (an enum) and [core.*] tables all reach their fields."""
    path = tmp_path / "broker.toml"
    path.write_text(TOML.replace("STORE", str(tmp_path / "store")))
    loaded = settings.load_toml(path, broker_id=None, listen="127.0.0.1:0")
    assert loaded.store_dir == tmp_path / "store"
    assert loaded.namesrv_addrs == ("127.0.0.1:9876",)
    assert loaded.listen == "127.0.0.1:0"
    assert loaded.store.flush_disk_type is store_settings.FlushDiskType.SYNC_FLUSH
    assert loaded.receive.consume_from_where is settings.ConsumeFromWhere.LAST_OFFSET
    assert loaded.core.topics.auto_create_topic_enable is True
    assert loaded.core.pop.inflight_messages_max == 7
    assert loaded.core.offsets.persist_interval_ms == 1000


@pytest.mark.parametrize(
    ("raw", "named"),
    [
        ({"core": {"pop": {"inflight_messages_mx": 1}}}, "core.pop.inflight_messages_mx"),
        ({"receive": {"consume_from_where": "NEWEST"}}, "receive.consume_from_where"),
        ({"receive": {"poll_slice_ms": "1000"}}, "receive.poll_slice_ms"),
        ({"core": {"topics": {"queue_nums_max": 0}}}, "queue_nums_max"),
        ({"core": "topics"}, "core"),
        ({"colour": "blue"}, "colour"),
    ],
)
def test_bad_settings_are_refused_naming_their_path(raw: dict[str, object], named: str) -> None:
    """An unknown key, a bad enum value, a wrong type or an out-of-range value is a ValueError
    whose message names the setting."""
    with pytest.raises(ValueError, match=named.replace(".", r"\.")):
        settings.from_mapping({"store_dir": "/tmp/unused", **raw})


def test_remoting_listen_defaults_to_rocketmq_port_and_knows_when_it_was_set() -> None:
    """The classic protocol defaults to RocketMQ's 10911 (not explicit: a taken port is then
    skipped); set in the file or by a flag, it is explicit (a taken port is fatal)."""
    default = settings.from_mapping({"store_dir": "/tmp/x"})
    assert default.remoting_listen == "127.0.0.1:10911" and not default.remoting_listen_explicit
    in_file = settings.from_mapping({"store_dir": "/tmp/x", "remoting_listen": "0.0.0.0:0"})
    assert in_file.remoting_listen == "0.0.0.0:0" and in_file.remoting_listen_explicit
    flagged = settings.from_mapping({"store_dir": "/tmp/x"}, remoting_listen="")
    assert flagged.remoting_listen == "" and flagged.remoting_listen_explicit
    with pytest.raises(ValueError, match=r"remoting_listen|HOST:PORT|port"):
        settings.from_mapping({"store_dir": "/tmp/x", "remoting_listen": "no-port"})
