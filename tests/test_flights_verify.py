"""The flights job's verdict catches loss, duplicates and reordering within a plane."""

from __future__ import annotations

from examples.flights import verify


def _r(fid: int, tail: str, seq: int, ns: int) -> verify.Received:
    return verify.Received(flight_id=fid, tailnum=tail, seq=seq, received_ns=ns)


def test_clean_run_is_ok() -> None:
    """Every id once, each plane in seq order by receive time: ok."""
    events = [_r(1, "N1", 0, 10), _r(3, "N2", 0, 11), _r(2, "N1", 1, 12), _r(4, "N2", 1, 13)]
    report = verify.verify([1, 2, 3, 4], reversed(events))
    assert report.ok
    assert report.delivered == 4


def test_missing_and_duplicate_flights_are_reported() -> None:
    """A lost flight and a twice-delivered one both fail the run, with their ids."""
    report = verify.verify([1, 2, 3], [_r(1, "N1", 0, 1), _r(1, "N1", 0, 2), _r(3, "N1", 1, 3)])
    assert not report.ok
    assert (report.missing_count, report.missing) == (1, (2,))
    assert (report.duplicated_count, report.duplicated) == (1, (1,))


def test_a_plane_received_out_of_departure_order_fails() -> None:
    """Seq 1 received before seq 0 of the same plane breaks order; other planes are fine."""
    events = [_r(1, "N1", 1, 5), _r(2, "N1", 0, 6), _r(3, "N2", 0, 7)]
    report = verify.verify([1, 2, 3], events)
    assert not report.ok
    assert report.out_of_order_planes == ("N1",)
    assert report.missing_count == report.duplicated_count == 0
