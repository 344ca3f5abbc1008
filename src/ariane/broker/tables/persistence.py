"""JSON metadata files of the broker (topics, groups, offsets) and the ``DataVersion`` stamp.

Every file is one JSON object written whole through ``store.metadata.write_atomically``, so a
crash leaves the old or the new content. A file that exists but does not parse is an operating
error the operator must see: loading raises ``CorruptMetadataError`` instead of starting with an
empty table (which would silently drop topics or rewind offsets).

``DataVersion`` mirrors RocketMQ's ``DataVersion`` (timestamp + counter): the counter goes up on
every change of a table, and the name-server registration sends it so the name server can tell a
changed topic table from a heartbeat.
"""

from __future__ import annotations

import dataclasses
import json
import pathlib
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from ariane.common import clock, errors
from ariane.store import metadata

T = TypeVar("T")

CONFIG_DIR_NAME = "config"
"""Sub-directory of the store root holding the metadata files (RocketMQ ``config/``)."""


class CorruptMetadataError(errors.ArianeError):
    """A metadata file exists but is not the JSON object this broker wrote (INTERNAL_ERROR)."""


@dataclasses.dataclass(frozen=True, slots=True, order=True)
class DataVersion:
    """Version stamp of a config table (RocketMQ ``DataVersion``).

    Attributes:
        counter: number of changes since the table was created; only goes up.
        timestamp_ms: wall time of the last change, ms since the epoch.
    """

    counter: int = 0
    timestamp_ms: int = 0

    def next(self, now: clock.Clock) -> DataVersion:
        """The stamp after one more change, taken at ``now.now_ms()``."""
        return DataVersion(counter=self.counter + 1, timestamp_ms=now.now_ms())

    def to_json(self) -> dict[str, int]:
        """``{"counter": …, "timestamp_ms": …}``."""
        return {"counter": self.counter, "timestamp_ms": self.timestamp_ms}

    @staticmethod
    def from_json(raw: object) -> DataVersion:
        """Parse ``to_json`` output.

        Raises:
            CorruptMetadataError: if ``raw`` is not such an object.
        """
        obj = expect_object(raw, "data_version")
        return DataVersion(
            counter=expect_int(obj.get("counter"), "data_version.counter"),
            timestamp_ms=expect_int(obj.get("timestamp_ms"), "data_version.timestamp_ms"),
        )


def config_path(store_root: pathlib.Path, file_name: str) -> pathlib.Path:
    """``<store_root>/config/<file_name>``, where RocketMQ keeps its metadata files."""
    return store_root / CONFIG_DIR_NAME / file_name


def load_json(path: pathlib.Path) -> dict[str, Any] | None:
    """The JSON object stored at ``path``, or ``None`` when the file does not exist.

    Raises:
        CorruptMetadataError: if the file is not UTF-8 JSON holding an object, or too large.
        OSError: for read errors other than a missing file.
    """
    try:
        raw = metadata.read_optional(path)
    except ValueError as exc:
        raise CorruptMetadataError(str(exc)) from exc
    if raw is None:
        return None
    try:
        parsed = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CorruptMetadataError(f"{path} is not valid JSON: {exc}") from exc
    return expect_object(parsed, str(path))


def save_json(path: pathlib.Path, content: dict[str, Any]) -> None:
    """Replace ``path`` atomically with ``content`` as sorted, indented JSON.

    Raises:
        ValueError: if the encoded content exceeds ``metadata.METADATA_FILE_BYTES_MAX``.
        OSError: if the file system refuses the write.
    """
    data = json.dumps(content, indent=1, sort_keys=True).encode("utf-8")
    metadata.write_atomically(path, data)


def expect_object(raw: object, what: str) -> dict[str, Any]:
    """``raw`` if it is a JSON object, else ``CorruptMetadataError`` naming ``what``."""
    if not isinstance(raw, dict):
        raise CorruptMetadataError(f"{what}: expected a JSON object, got {type(raw).__name__}")
    return raw


def expect_int(raw: object, what: str) -> int:
    """``raw`` if it is a JSON integer (not a bool), else ``CorruptMetadataError``."""
    if isinstance(raw, bool) or not isinstance(raw, int):
        raise CorruptMetadataError(f"{what}: expected an integer, got {raw!r}")
    return raw


def expect_bool(raw: object, what: str) -> bool:
    """``raw`` if it is a JSON boolean, else ``CorruptMetadataError``."""
    if not isinstance(raw, bool):
        raise CorruptMetadataError(f"{what}: expected true/false, got {raw!r}")
    return raw


def expect_str(raw: object, what: str) -> str:
    """``raw`` if it is a JSON string, else ``CorruptMetadataError``."""
    if not isinstance(raw, str):
        raise CorruptMetadataError(f"{what}: expected a string, got {raw!r}")
    return raw


class VersionedTable(Generic[T]):
    """A name → config table stored whole in one JSON file, with a ``DataVersion``.

    The base of the topic and subscription-group managers. Every change writes the file before
    it returns; if the write fails the table is left as it was and the error propagates. The
    file holds ``{"data_version": {...}, "<section>": {name: value_json}}``.

    Args:
        path: the JSON file; loaded if it exists.
        section: the key of the table inside the file (``"topics"``, ``"groups"``).
        encode: value → JSON object.
        decode: JSON object → value; raises ``CorruptMetadataError`` on bad input.
        name_of: the name a value is stored under (checked against the key on load).
        time: the clock that stamps ``data_version``.

    Raises:
        CorruptMetadataError: if the file exists but does not hold a valid table.
    """

    def __init__(
        self,
        path: pathlib.Path,
        *,
        section: str,
        encode: Callable[[T], dict[str, Any]],
        decode: Callable[[object], T],
        name_of: Callable[[T], str],
        time: clock.Clock,
    ) -> None:
        self._path = path
        self._section = section
        self._encode = encode
        self._clock = time
        self._rows: dict[str, T] = {}
        self._version = DataVersion()
        content = load_json(path)
        if content is not None:
            self._version = DataVersion.from_json(content.get("data_version"))
            for name, raw in expect_object(content.get(section), section).items():
                value = decode(raw)
                if name_of(value) != name:
                    raise CorruptMetadataError(f"{path}: entry {name!r} holds {name_of(value)!r}")
                self._rows[name] = value

    @property
    def path(self) -> pathlib.Path:
        """The JSON file of the table."""
        return self._path

    @property
    def data_version(self) -> DataVersion:
        """Changes on every create, update and delete; survives restarts."""
        return self._version

    def __len__(self) -> int:
        return len(self._rows)

    def __contains__(self, name: str) -> bool:
        return name in self._rows

    def get(self, name: str) -> T | None:
        """The config stored under ``name``, or ``None``."""
        return self._rows.get(name)

    def list_all(self) -> tuple[T, ...]:
        """Every config, sorted by name."""
        return tuple(self._rows[name] for name in sorted(self._rows))

    def delete(self, name: str) -> bool:
        """Remove ``name`` and persist; ``False`` if it was absent.

        Raises:
            OSError, ValueError: the write failed; the table is unchanged.
        """
        previous = self._rows.pop(name, None)
        if previous is None:
            return False
        try:
            self._save()
        except BaseException:
            self._rows[name] = previous
            raise
        return True

    def _put(self, name: str, value: T, *, count_max: int) -> None:
        """Store ``value`` under ``name`` and persist; a no-op if it is already stored.

        Raises:
            TooManyRequestsError: ``name`` is new and the table holds ``count_max`` rows.
            OSError, ValueError: the write failed; the table is unchanged.
        """
        previous = self._rows.get(name)
        if previous == value:
            return
        if previous is None and len(self._rows) >= count_max:
            raise errors.TooManyRequestsError(
                f"cannot add {name!r}: {self._path.name} already holds {len(self._rows)} "
                f"{self._section} (the configured maximum)"
            )
        self._rows[name] = value
        try:
            self._save()
        except BaseException:
            if previous is None:
                del self._rows[name]
            else:
                self._rows[name] = previous
            raise

    def _save(self) -> None:
        version = self._version.next(self._clock)
        save_json(
            self._path,
            {
                "data_version": version.to_json(),
                self._section: {name: self._encode(v) for name, v in self._rows.items()},
            },
        )
        self._version = version
