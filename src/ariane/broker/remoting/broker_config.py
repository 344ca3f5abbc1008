"""``mqadmin getBrokerConfig`` / ``updateBrokerConfig``: the broker's settings under RocketMQ's
``BrokerConfig``/``MessageStoreConfig`` names, and the few that change while it runs.

* ``GET_BROKER_CONFIG`` (26): the body is a Java ``Properties`` text (``key=value`` lines,
  what ``MixAll.string2Properties`` reads) of the settings Ariane has a RocketMQ name for
  (``BrokerConfigHandler.config_values``), from the running broker (its id now, its Remoting
  port). RocketMQ lists every field of its config classes; keys of RocketMQ features Ariane
  configures differently (TOML, ``broker.toml``) are left out rather than shown with a
  meaningless value.
* ``UPDATE_BROKER_CONFIG`` (25): the body is a ``Properties`` text (``MixAll.properties2String``).
  Only ``LIVE_KEYS`` change, at once, for the next request: the topic and subscription-group
  auto-create switches and the queues of an auto-created topic. Any other key, known or not,
  refuses the whole update with NO_PERMISSION (16) and a remark naming the keys (RocketMQ's
  answer to a key of its ``configBlackList``; for keys it does not know RocketMQ answers
  SUCCESS and changes nothing, which reads as if it worked); a value that does not parse or is
  out of range answers INVALID_PARAMETER (29); nothing is changed by a refused update. A change
  lasts until the broker restarts (RocketMQ rewrites its ``broker.conf``; Ariane does not
  rewrite the operator's TOML): put it in the configuration file to keep it.

Invariant: an update is validated in full (every key live, every value parsed, the new
settings built) before the first table sees it.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Mapping

from ariane.broker import runtime as runtime_mod
from ariane.broker import settings as broker_settings
from ariane.broker.remoting import replies
from ariane.remoting import codes, command

_log = logging.getLogger(__name__)

RC = codes.ResponseCode
Reply = command.RemotingCommand

BODY_BYTES_MAX = 64 * 1024
"""Largest ``updateBrokerConfig`` body read, bytes (a few keys are a few hundred bytes)."""

LIVE_KEYS = ("autoCreateTopicEnable", "autoCreateSubscriptionGroup", "defaultTopicQueueNums")
"""The keys ``updateBrokerConfig`` may change while the broker runs."""


def _flag(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered not in ("true", "false"):
        raise ValueError(f"{text!r} is not true or false")
    return lowered == "true"


def properties_text(values: Mapping[str, str]) -> bytes:
    """``values`` as Java ``Properties`` text, sorted by key (backslashes and line breaks
    escaped as ``Properties.load`` unescapes them)."""
    lines = []
    for key in sorted(values):
        value = values[key].replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r")
        lines.append(f"{key}={value}\n")
    return "".join(lines).encode()


def parse_properties(body: bytes) -> dict[str, str]:
    """The ``key=value`` pairs of a ``Properties`` text (``MixAll.properties2String``'s; ``#``
    and ``!`` lines are comments, ``:`` also separates).

    Raises:
        HeaderError: more than ``BODY_BYTES_MAX`` bytes, not UTF-8, or a line without a key.
    """
    if len(body) > BODY_BYTES_MAX:
        raise replies.HeaderError(f"a broker config update carries at most {BODY_BYTES_MAX} B")
    try:
        text = body.decode()
    except UnicodeDecodeError:
        raise replies.HeaderError("the broker config update is not UTF-8") from None
    pairs: dict[str, str] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        cut = min((i for i in (line.find("="), line.find(":")) if i >= 0), default=-1)
        key, value = (line, "") if cut < 0 else (line[:cut].strip(), line[cut + 1 :].strip())
        if not key:
            raise replies.HeaderError(f"line {raw[:40]!r} of the update has no key")
        pairs[key] = value
    return pairs


class BrokerConfigHandler:
    """Serves 26 and 25 over the running broker.

    Args:
        broker: the broker's runtime (its settings, tables, id and Remoting address).
    """

    def __init__(self, broker: runtime_mod.BrokerRuntime) -> None:
        self._broker = broker

    def config_values(self) -> dict[str, str]:
        """RocketMQ key -> value of the running broker."""
        b, s = self._broker, self._broker.settings
        host, _, port = b.remoting_address.rpartition(":")
        topic_now, group_now = b.topics.table_settings, b.groups.table_settings
        return {
            "brokerClusterName": s.cluster,
            "brokerName": s.broker_name,
            "brokerId": str(b.broker_id),
            "brokerIP1": host,
            "listenPort": port,
            "namesrvAddr": ";".join(s.namesrv_addrs),
            "storePathRootDir": str(s.store_dir),
            "flushDiskType": s.store.flush_disk_type.value,
            "brokerRole": s.ha.role.value,
            "slaveReadEnable": str(s.slave_read_enable).lower(),
            "registerNameServerPeriod": str(s.register_interval_ms),
            "autoCreateTopicEnable": str(topic_now.auto_create_topic_enable).lower(),
            "defaultTopicQueueNums": str(topic_now.default_queue_nums),
            "autoCreateSubscriptionGroup": str(group_now.auto_create_subscription_group).lower(),
        }

    async def get_config(self, request: Reply) -> Reply:
        """26: the running broker's config as ``Properties`` text."""
        return replies.ok(request, body=properties_text(self.config_values()))

    async def update_config(self, request: Reply) -> Reply:
        """25: change ``LIVE_KEYS``; any other key refuses the whole update by name."""
        try:
            wanted = parse_properties(request.body)
        except replies.HeaderError as exc:
            return replies.error(request, exc)
        frozen = sorted(k for k in wanted if k not in LIVE_KEYS)
        if frozen:
            remark = (
                f"cannot change {', '.join(frozen)} while the broker runs (live keys: "
                f"{', '.join(LIVE_KEYS)}); set it in the broker's configuration and restart"
            )
            return replies.failed(request, RC.NO_PERMISSION, remark[:1024])
        try:
            topic_new, group_new = self._changed(wanted)
        except ValueError as exc:
            return replies.failed(request, RC.INVALID_PARAMETER, str(exc)[:512])
        self._broker.topics.apply_settings(topic_new)
        self._broker.groups.apply_settings(group_new)
        _log.warning("broker config changed live by mqadmin: %s", wanted)
        return replies.ok(request)

    def _changed(
        self, wanted: Mapping[str, str]
    ) -> tuple[broker_settings.TopicSettings, broker_settings.SubscriptionSettings]:
        """The table settings with ``wanted`` applied (ValueError names a bad value)."""
        topic_new, group_new = (
            self._broker.topics.table_settings,
            self._broker.groups.table_settings,
        )
        parse: dict[str, Callable[[str], object]] = {
            "autoCreateTopicEnable": _flag,
            "autoCreateSubscriptionGroup": _flag,
            "defaultTopicQueueNums": int,
        }
        values = {}
        for key, text in wanted.items():
            try:
                values[key] = parse[key](text)
            except ValueError:
                raise ValueError(f"{key}={text[:40]!r} does not parse") from None
        if "autoCreateTopicEnable" in values:
            topic_new = dataclasses.replace(
                topic_new, auto_create_topic_enable=bool(values["autoCreateTopicEnable"])
            )
        if "defaultTopicQueueNums" in values:
            queues = values["defaultTopicQueueNums"]
            assert isinstance(queues, int)
            topic_new = dataclasses.replace(topic_new, default_queue_nums=queues)
        if "autoCreateSubscriptionGroup" in values:
            group_new = dataclasses.replace(
                group_new,
                auto_create_subscription_group=bool(values["autoCreateSubscriptionGroup"]),
            )
        return topic_new, group_new
