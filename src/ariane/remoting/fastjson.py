"""JSON bodies as Java's fastjson writes and reads them, pure.

RocketMQ's classic protocol carries JSON bodies (TopicRouteData, ClusterInfo, ConsumeStats …)
written by fastjson, and its readers (Java fastjson, Go's ``encoding/json`` plus hand-written
splitting) depend on details that Python's defaults get wrong (remark.md §2, §5):

* compact separators: Go splits ``brokerAddrs`` on ``,`` and the first ``:``, so ``", "`` or
  ``": "`` corrupt addresses;
* bean fields sorted by name and ``null`` fields omitted (fastjson's defaults); a ``None`` value
  in a dict given to ``dumps`` is dropped for that reason;
* ``Map<MessageQueue, …>`` keys written as JSON objects,
  ``{{"brokerName":"b","queueId":0,"topic":"t"}:{…}}`` (issues apache/rocketmq #1506, #3389),
  which is not JSON: ``mqadmin`` parses exactly that, and ``loads`` reads it back.

Invariant: ``loads(dumps(v)) == v`` for values made of dicts (string or ``MessageQueue`` keys,
no ``None`` values), lists, strings, integers, floats and booleans.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from typing import Any

NESTING_DEPTH_MAX = 64
"""Deepest nesting ``loads`` follows before refusing the input (RocketMQ bodies nest < 6)."""


class JsonError(ValueError):
    """A body that is not (fastjson's) JSON, or a value ``dumps`` cannot write."""


@dataclasses.dataclass(frozen=True, slots=True, order=True)
class MessageQueue:
    """A RocketMQ ``MessageQueue`` as a JSON map key or value.

    Attributes:
        topic: the topic.
        broker_name: the broker name (``brokerName``).
        queue_id: the queue id (``queueId``).
    """

    topic: str
    broker_name: str
    queue_id: int

    def to_json(self) -> dict[str, object]:
        """The bean's JSON fields, as fastjson names them."""
        return {"brokerName": self.broker_name, "queueId": self.queue_id, "topic": self.topic}


def dumps(value: object) -> bytes:
    """Write ``value`` as fastjson would (UTF-8).

    Args:
        value: dicts (keys ``str``, ``int`` or ``MessageQueue``; ``None`` values dropped;
            string keys sorted, other keys in the dict's order), lists/tuples, ``MessageQueue``
            values, strings, integers, floats, booleans, ``None``.

    Raises:
        JsonError: a value of another type (or a float that is not finite).
    """
    out: list[str] = []
    _write(value, out)
    return "".join(out).encode("utf-8", "surrogatepass")


def _write(value: object, out: list[str]) -> None:
    if value is None or isinstance(value, (bool, int, str)):
        out.append(json.dumps(value, ensure_ascii=False))
    elif isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise JsonError(f"{value} has no JSON form")
        out.append(repr(value))
    elif isinstance(value, MessageQueue):
        _write(value.to_json(), out)
    elif isinstance(value, Mapping):
        _write_object(value, out)
    elif isinstance(value, (list, tuple)):
        out.append("[")
        for i, item in enumerate(value):
            if i:
                out.append(",")
            _write(item, out)
        out.append("]")
    else:
        raise JsonError(f"cannot write {type(value).__name__} as JSON")


def _write_object(value: Mapping[Any, object], out: list[str]) -> None:
    items = [(k, v) for k, v in value.items() if v is not None]
    if all(isinstance(k, str) for k, _ in items):
        items.sort(key=lambda item: str(item[0]))
    out.append("{")
    for i, (key, item) in enumerate(items):
        if i:
            out.append(",")
        if isinstance(key, MessageQueue):
            _write(key, out)
        elif isinstance(key, (str, int)) and not isinstance(key, bool):
            out.append(json.dumps(str(key), ensure_ascii=False))
        else:
            raise JsonError(f"cannot write a {type(key).__name__} map key")
        out.append(":")
        _write(item, out)
    out.append("}")


def loads(data: bytes | str) -> Any:
    """Read fastjson's JSON: standard JSON plus object keys and bare keys (``{0:"a"}``).

    An object key with exactly the fields ``brokerName``, ``queueId`` and ``topic`` becomes a
    ``MessageQueue``; any other object key is refused. A bare key (``0``, ``abc``) becomes its
    text, as a Java ``Map<Long, …>`` or ``Map<String, …>`` reads it.

    Raises:
        JsonError: anything else, nesting deeper than ``NESTING_DEPTH_MAX``, trailing bytes.
    """
    try:
        text = data.decode("utf-8") if isinstance(data, bytes) else data
    except UnicodeDecodeError as exc:
        raise JsonError(f"not UTF-8: {exc}") from exc
    reader = _Reader(text)
    value = reader.value(0)
    reader.skip_space()
    if reader.pos != len(text):
        raise JsonError(f"trailing data at {reader.pos}")
    return value


_DECODER = json.JSONDecoder()
_SPACE = " \t\r\n"


class _Reader:
    """A recursive-descent reader for objects and arrays; scalars go to ``json``'s decoder."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def skip_space(self) -> None:
        while self.pos < len(self.text) and self.text[self.pos] in _SPACE:
            self.pos += 1

    def peek(self) -> str:
        self.skip_space()
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def expect(self, char: str) -> None:
        if self.peek() != char:
            raise JsonError(f"expected {char!r} at {self.pos}")
        self.pos += 1

    def value(self, depth: int) -> Any:
        if depth > NESTING_DEPTH_MAX:
            raise JsonError(f"nesting deeper than {NESTING_DEPTH_MAX}")
        char = self.peek()
        if char == "{":
            return self.object(depth)
        if char == "[":
            return self.array(depth)
        try:
            value, self.pos = _DECODER.raw_decode(self.text, self.pos)
        except json.JSONDecodeError as exc:
            raise JsonError(f"bad JSON value at {self.pos}: {exc.msg}") from exc
        return value

    def array(self, depth: int) -> list[Any]:
        self.expect("[")
        items: list[Any] = []
        if self.peek() == "]":
            self.pos += 1
            return items
        while True:
            items.append(self.value(depth + 1))
            if self.peek() == ",":
                self.pos += 1
                continue
            self.expect("]")
            return items

    def object(self, depth: int) -> dict[Any, Any]:
        self.expect("{")
        result: dict[Any, Any] = {}
        if self.peek() == "}":
            self.pos += 1
            return result
        while True:
            key = self.key(depth)
            self.expect(":")
            result[key] = self.value(depth + 1)
            if self.peek() == ",":
                self.pos += 1
                continue
            self.expect("}")
            return result

    def key(self, depth: int) -> str | MessageQueue:
        char = self.peek()
        if char == '"':
            key = self.value(depth + 1)
            assert isinstance(key, str)
            return key
        if char == "{":
            return _message_queue(self.object(depth + 1))
        start = self.pos
        while self.pos < len(self.text) and (
            self.text[self.pos].isalnum() or self.text[self.pos] in "_-."
        ):
            self.pos += 1
        if start == self.pos:
            raise JsonError(f"expected a key at {start}")
        return self.text[start : self.pos]


def _message_queue(fields: dict[Any, Any]) -> MessageQueue:
    topic, broker, queue_id = fields.get("topic"), fields.get("brokerName"), fields.get("queueId")
    if (
        set(fields) != {"topic", "brokerName", "queueId"}
        or not isinstance(topic, str)
        or not isinstance(broker, str)
        or not isinstance(queue_id, int)
        or isinstance(queue_id, bool)
    ):
        raise JsonError(f"object key is not a MessageQueue: {fields!r}")
    return MessageQueue(topic=topic, broker_name=broker, queue_id=queue_id)
