"""The Spark connector's pure parts: offset-map ranges, partition splitting, the proportional
``maxOffsetsPerTrigger`` cap, data-loss handling and option validation."""

from __future__ import annotations

import pytest

from ariane.connectors.spark import broker_io, options, ranges


def _opts(**extra: str) -> options.ReadOptions:
    return options.read_options(
        {"endpoints": "127.0.0.1:1", "topics": "t", **extra}, streaming=True
    )


def test_between_and_split_cover_every_offset_once() -> None:
    """``split`` cuts by ``maxRecordsPerPartition`` then halves up to ``minPartitions``, and
    the pieces cover the input ranges exactly."""
    start = {"t": {"b:0": 0, "b:1": 5}}
    end = {"t": {"b:0": 10, "b:1": 5, "b:2": 3}}
    found = ranges.between(start, end)
    assert found == [ranges.QueueRange("t", "b", 0, 0, 10), ranges.QueueRange("t", "b", 2, 0, 3)]
    cut = ranges.split(found, min_partitions=6, max_records=4)
    assert len(cut) == 6
    covered = sorted((r.queue_id, o) for r in cut for o in range(r.start, r.end))
    assert covered == [(0, o) for o in range(10)] + [(2, o) for o in range(3)]
    assert ranges.split(found, min_partitions=None, max_records=None) == found


def test_cap_splits_the_limit_in_proportion_to_each_backlog() -> None:
    """``cap`` gives each queue ``limit * backlog // total`` and hands the remainder out in
    queue order (Kafka's rule); below the limit the end stays."""
    start = {"t": {"b:0": 0, "b:1": 0}}
    end = {"t": {"b:0": 20, "b:1": 10}}
    assert ranges.cap(start, end, 16) == {"t": {"b:0": 11, "b:1": 5}}
    assert ranges.cap(start, end, 100) == end
    assert ranges.backlog(start, ranges.cap(start, end, 7)) == 7


def test_check_loss_fails_or_skips_by_fail_on_data_loss() -> None:
    """A start below a queue's min offset raises DataLossError naming failOnDataLoss, or is
    moved to the min offset when failOnDataLoss is false."""
    start = {"t": {"b:0": 3}}
    low = {"t": {"b:0": 7, "b:1": 0}}
    with pytest.raises(broker_io.DataLossError, match="failOnDataLoss"):
        broker_io.check_loss(_opts(), start, low)
    lenient = _opts(failOnDataLoss="false")
    assert broker_io.check_loss(lenient, start, low) == {"t": {"b:0": 7}}


@pytest.mark.parametrize(
    ("given", "named"),
    [
        ({"topics": "t", "bogus": "1"}, "unknown option 'bogus'"),
        ({"topics": "t", "assign": '{"t": [0]}'}, "exactly one of the options topics"),
        ({}, "exactly one of the options topics"),
        ({"topics": "t", "startingOffsets": "{nope"}, "option startingOffsets"),
        ({"topics": "t", "startingOffsets": '{"t": {"0": 1}}'}, "<broker>:<queueId>"),
        ({"topics": "t", "endingOffsets": '{"t": {"b:0": -2}}'}, "option endingOffsets"),
        ({"topics": "t", "minPartitions": "zero"}, "option minPartitions"),
        ({"topics": "t", "failOnDataLoss": "yes"}, "option failOnDataLoss"),
        ({"topics": "t", "commitOffsetsToBroker": "true"}, "needs option consumerGroup"),
        ({"topics": "t", "pullBatchSize": "5000"}, "option pullBatchSize"),
        ({"topics": "t", "maxTriggerDelay": "5 parsecs"}, "option maxTriggerDelay"),
        ({"topics": "t", "fetchOffset.numRetries": "-1"}, "option fetchOffset.numRetries"),
        ({"topics": "t", "startingOffsetsByTimestamp": "{x"}, "option startingOffsetsByTimestamp"),
        ({"topics": "t", "endingOffsetsByTimestamp": '{"t": {"b:0": -5}}'}, "ms since the epoch"),
        ({"topics": "t", "startingOffsetsByTimestamp": '{"t": {"0": 1}}'}, "<broker>:<queueId>"),
        (
            {"topics": "t", "startingOffsetsByTimestampStrategy": "earliest"},
            "give error or latest",
        ),
        ({"topics": "t", "includeHeaders": "1"}, "option includeHeaders"),
    ],
)
def test_bad_options_name_the_option_and_the_fix(given: dict[str, str], named: str) -> None:
    """Each malformed, unknown or conflicting option raises OptionError naming it."""
    with pytest.raises(options.OptionError, match=named.replace("{", r"\{").replace("(", r"\(")):
        options.read_options({"endpoints": "127.0.0.1:1", **given}, streaming=False)


def test_streaming_defaults_to_latest_and_refuses_ending_offsets() -> None:
    """A stream starts at latest unless told (Kafka's default) and has no end options."""
    assert _opts().starting == "latest"
    for ending in ("endingOffsets", "endingTimestamp", "endingOffsetsByTimestamp"):
        with pytest.raises(options.OptionError, match="batch reads only"):
            _opts(**{ending: '{"t": {"b:0": 1}}'})


def test_timestamp_options_parse_per_queue_with_kafka_defaults() -> None:
    """startingOffsetsByTimestamp/endingOffsetsByTimestamp parse to per-queue times, the
    strategy defaults to Kafka's error, includeHeaders to false."""
    opts = options.read_options(
        {
            "endpoints": "127.0.0.1:1",
            "topics": "t",
            "startingOffsetsByTimestamp": '{"t": {"b:0": 1000, "b:1": 0}}',
            "endingOffsetsByTimestamp": '{"t": {"b:1": 2000}}',
            "StartingOffsetsByTimestampStrategy": "LATEST",
            "includeheaders": "true",
        },
        streaming=False,
    )
    assert opts.starting_by_timestamp == {"t": {"b:0": 1000, "b:1": 0}}
    assert opts.ending_by_timestamp == {"t": {"b:1": 2000}}
    assert (opts.starting_timestamp_strategy, opts.include_headers) == ("latest", True)
    assert (_opts().starting_timestamp_strategy, _opts().include_headers) == ("error", False)
    assert options.include_headers({"INCLUDEHEADERS": "true", "other": "x"})


def test_offsets_behind_latest_from_a_progress_entry() -> None:
    """A progress source's latestOffset minus its endOffset, per queue (a queue new since the
    end counts from 0), with Kafka's min/max/avg metric names; a progress without offsets is
    refused."""
    entry = {
        "endOffset": {"t": {"b:0": 5, "b:1": 9}},
        "latestOffset": '{"t": {"b:0": 12, "b:1": 9, "b:2": 2}}',
    }
    lag = ranges.offsets_behind_latest(entry)
    assert lag.per_queue == {"t": {"b:0": 7, "b:1": 0, "b:2": 2}}
    assert lag.metrics() == {
        "minOffsetsBehindLatest": "0",
        "maxOffsetsBehindLatest": "7",
        "avgOffsetsBehindLatest": "3.0",
    }
    with pytest.raises(ValueError, match="latestOffset"):
        ranges.offsets_behind_latest({"endOffset": {"t": {"b:0": 1}}, "latestOffset": None})


def test_max_trigger_delay_reads_kafka_durations_and_retries_default_to_a_restart() -> None:
    """maxTriggerDelay takes Kafka's duration strings (bare numbers are ms; default 15 min), and
    fetchOffset.numRetries 0 means a single try."""
    assert _opts().max_trigger_delay_ms == 15 * 60 * 1000
    given = {"1500": 1500, "250ms": 250, "5s": 5000, "15m": 900_000, "1h": 3_600_000}
    assert {k: _opts(maxTriggerDelay=k).max_trigger_delay_ms for k in given} == given
    assert _opts().fetch_retries == options.FETCH_RETRIES_DEFAULT
    assert _opts(**{"fetchOffset.numRetries": "0"}).fetch_retries == 0
