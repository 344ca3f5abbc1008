"""``ariane admin``: argument parsing, exit codes, rendering, and real runs of the process."""

from __future__ import annotations

import argparse
import asyncio
import datetime
import io
import json
import os
import pathlib
import sys
import time

import pytest
from rich import console as rich_console

from admin_testing import Cluster, append_request, cluster
from ariane import admin_cli, cli, client
from ariane.common import errors
from ariane.dev import free_port

REPO = pathlib.Path(__file__).resolve().parents[1]


def parse(*argv: str) -> argparse.Namespace:
    """Parse ``ariane admin …``."""
    return cli.build_parser().parse_args(["admin", *argv])


def run_captured(args: argparse.Namespace) -> tuple[int, str, str]:
    """Run a parsed command in-process; (exit status, stdout, stderr)."""
    out = rich_console.Console(file=io.StringIO(), width=200)
    err = rich_console.Console(file=io.StringIO(), width=200)
    status = admin_cli.run(args, out=out, err=err)
    assert isinstance(out.file, io.StringIO) and isinstance(err.file, io.StringIO)
    return status, out.file.getvalue(), err.file.getvalue()


def test_options_work_before_and_after_the_sub_command(monkeypatch: pytest.MonkeyPatch) -> None:
    """Common options are accepted on either side of the sub-command, with defaults."""
    monkeypatch.setenv("NAMESRV_ADDR", "10.0.0.1:9876")
    args = parse("topic", "create", "orders", "--queues", "4", "--type", "fifo", "--json")
    assert (args.noun, args.verb, args.name, args.queues) == ("topic", "create", "orders", 4)
    assert args.type.value == "FIFO" and args.json and args.timeout == 10.0
    assert args.endpoints == "10.0.0.1:9876"
    args = parse("--endpoints", "h:1", "--timeout", "3", "group", "create", "billing", "--fifo")
    assert (args.endpoints, args.timeout, args.fifo, args.json) == ("h:1", 3.0, True, False)
    args = parse("group", "create", "g", "--retry-delays", "250ms,5s,1m,2h")
    assert args.retry_delays == (250, 5_000, 60_000, 7_200_000)
    args = parse("group", "create", "g", "--allocate-strategy", "CONFIG", "--allocate-queue",
                 "orders/broker-a/3", "--allocate-queue", "orders/broker-b/0")  # fmt: skip
    assert args.allocate_strategy == "CONFIG"
    assert args.allocate_queue == [("orders", "broker-a", 3), ("orders", "broker-b", 0)]
    args = parse("group", "reset-offset", "g", "--topic", "t", "--timestamp", "1700000000000")
    assert args.timestamp == 1_700_000_000_000 and not args.earliest


@pytest.mark.parametrize(
    "argv",
    [
        ["topic", "create", "t", "--queues", "0"],
        ["topic", "create", "t", "--type", "LOUD"],
        ["topic", "create", "t", "--perm", "5"],
        ["message", "get", "--topic", "t"],
        ["message", "get", "--id", "x", "--key", "k"],
        ["group", "reset-offset", "g", "--topic", "t"],
        ["group", "reset-offset", "g", "--topic", "t", "--timestamp", "yesterday"],
        ["group", "create", "g", "--retry-delays", "5 seconds"],
        ["group", "create", "g", "--allocate-strategy", "RANDOM"],
        ["group", "create", "g", "--allocate-queue", "orders/broker-a"],
        ["topic", "frobnicate"],
    ],
)
def test_usage_errors_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    """Arguments argparse can check are refused with exit status 2 and a message."""
    with pytest.raises(SystemExit) as exited:
        parse(*argv)
    assert exited.value.code == 2
    assert "error:" in capsys.readouterr().err


def test_timestamps_parse_as_ms_or_iso_8601() -> None:
    """Resets take ms since the epoch, or ISO 8601 with or without a zone (local time)."""
    assert admin_cli.parse_timestamp_ms("2024-05-01T12:00:00Z") == 1_714_564_800_000
    assert admin_cli.parse_timestamp_ms("2024-05-01T14:00:00+02:00") == 1_714_564_800_000
    local = datetime.datetime(2024, 5, 1, 12, 0).astimezone()
    assert admin_cli.parse_timestamp_ms("2024-05-01T12:00:00") == int(local.timestamp() * 1000)


def test_errors_found_after_parsing_exit_2_or_3(monkeypatch: pytest.MonkeyPatch) -> None:
    """No endpoints or nonsense combinations exit 2; an unreachable name server exits 3."""
    monkeypatch.delenv("NAMESRV_ADDR", raising=False)
    status, _, err = run_captured(parse("topic", "list"))
    assert status == 2 and "NAMESRV_ADDR" in err
    status, _, err = run_captured(parse("--endpoints", "nohost", "topic", "list"))
    assert status == 2 and "host:port" in err
    closed = f"127.0.0.1:{free_port()}"
    status, _, err = run_captured(parse("--endpoints", closed, "message", "get", "--key", "k"))
    assert status == 2 and "--key needs --topic" in err
    status, _, err = run_captured(parse("--endpoints", closed, "topic", "update", "t"))
    assert status == 2 and "nothing to change" in err
    status, out, err = run_captured(parse("--endpoints", closed, "--timeout", "2", "topic", "list"))
    assert (status, out) == (3, "")
    assert "cannot reach a name server" in err and closed in err and "fix:" in err


def test_render_tables_and_json() -> None:
    """Tables show every row; JSON keeps the rows with bytes as base64 and enums as values."""
    result = admin_cli.Result(
        "things",
        (("name", "name"), ("flag", "flag"), ("data", "data")),
        [{"name": "a", "flag": True, "data": b"\x00\x01"}, {"name": "b", "flag": False}],
        note="2 rows",
    )
    out = rich_console.Console(file=io.StringIO(), width=120)
    admin_cli.render(result, as_json=False, out=out)
    assert isinstance(out.file, io.StringIO)
    text = out.file.getvalue()
    assert "things" in text and "yes" in text and "no" in text and "2 rows" in text
    out = rich_console.Console(file=io.StringIO(), width=120)
    admin_cli.render(result, as_json=True, out=out)
    assert isinstance(out.file, io.StringIO)
    assert json.loads(out.file.getvalue()) == [
        {"name": "a", "flag": True, "data": "AAE="},
        {"name": "b", "flag": False},
    ]


async def ariane_admin(found: Cluster, *argv: str) -> tuple[int, str, str]:
    """Run ``python -m ariane admin --endpoints <namesrv> …`` as a real process."""
    env = {**os.environ, "PYTHONPATH": str(REPO / "src"), "COLUMNS": "200"}
    env.pop("NAMESRV_ADDR", None)
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "ariane",
        "admin",
        "--endpoints",
        found.namesrv,
        *argv,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=env,
    )
    out, err = await asyncio.wait_for(process.communicate(), timeout=60)
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


async def registered(found: Cluster, topic: str) -> None:
    """Wait until the name server routes ``topic`` (the broker re-registers asynchronously)."""
    async with client.AdminClient(found.namesrv) as admin:
        deadline = time.monotonic() + 10
        while True:
            try:
                await admin.topic_masters(topic)
                return
            except errors.TopicNotFoundError:
                assert time.monotonic() < deadline, f"{topic} never registered"
                await asyncio.sleep(0.02)


def test_the_admin_process_against_a_name_server_and_broker(tmp_path: pathlib.Path) -> None:
    """`python -m ariane admin` creates, lists and finds things through a real name server."""

    async def main() -> None:
        async with cluster(tmp_path) as found:
            status, out, err = await ariane_admin(
                found, "topic", "create", "orders", "--queues", "2", "--type", "fifo"
            )
            assert status == 0, err
            assert "orders" in out and "broker-a" in out and "FIFO" in out
            await registered(found, "orders")
            status, out, _ = await ariane_admin(found, "--json", "topic", "list")
            rows = json.loads(out)
            assert [(r["name"], r["read_queue_nums"], r["message_type"]) for r in rows] == [
                ("orders", 2, "FIFO")
            ]
            status, out, _ = await ariane_admin(
                found, "group", "create", "billing", "--fifo", "--max-delivery-attempts", "4"
            )
            assert status == 0 and "billing" in out
            groups = json.loads((await ariane_admin(found, "group", "list", "--json"))[1])
            assert [
                (g["name"], g["consume_orderly"], g["max_delivery_attempts"]) for g in groups
            ] == [("billing", True, 4)]
            broker = found.brokers["broker-a"]
            await broker.store.put_messages(
                [append_request("orders", uniq_key="ID-7", keys="order-7", body=b"pay 7 EUR")]
            )
            status, out, err = await ariane_admin(
                found, "message", "get", "--topic", "orders", "--key", "order-7"
            )
            assert status == 0, err
            assert "ID-7" in out and "pay 7 EUR" in out and "order-7" in out
            status, out, err = await ariane_admin(found, "topic", "delete", "nope")
            assert (status, out) == (1, "")
            assert "TOPIC_NOT_FOUND" in err and "fix:" in err

    asyncio.run(main())


def test_flights_example_passes_a_secret_key_starting_with_a_dash() -> None:
    """A generated secret key may start with "-" (``secrets.token_urlsafe``): the flights
    example's ``ariane admin`` flags still parse to that key (as separate words argparse took it
    for an option and the pipeline failed with "expected one argument", CI 2026-11-29)."""
    from examples.flights import access

    flags = access.Access("127.0.0.1:9876", access_key="app", secret_key="-xY_z").admin_args()
    args = parse(*flags, "topic", "list")
    assert (args.access_key, args.secret_key) == ("app", "-xY_z")
