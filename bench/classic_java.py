"""The official classic Java client (``rocketmq-client``, Remoting) as a benchmark driver.

``build()`` runs ``bench/java/fetch.sh``: Maven fetches the client pinned in ``bench/java/pom.xml``
from Maven Central into ``${ARIANE_CACHE:-~/.cache/ariane}`` and ``javac`` compiles
``bench/java/BenchDriver.java`` against it (``tools/fetch-java-driver.sh``, the one copy of the
Maven command that the conformance drivers share; a no-op when the cache's stamp matches).
``command()`` is the JVM's command line; the ``*_args`` functions are a scenario's arguments.
The driver speaks the protocol of the official Python client's driver (``ready``, ``go`` on
stdin, one ``done`` JSON line, then it waits for stdin to close), so ``bench.compare.run_drivers``
runs either; ``BenchDriver.java``'s header defines its scenarios.

Nothing here imports from ``tests/``: the conformance suite has its own drivers.
"""

from __future__ import annotations

import pathlib
import subprocess

HERE = pathlib.Path(__file__).resolve().parent / "java"
FETCH_SCRIPT = HERE / "fetch.sh"
POM = HERE / "pom.xml"
MAIN_CLASS = "BenchDriver"
FETCH_TIMEOUT_S = 900.0
"""Longest a cold fetch and compile may take (Maven Central, then javac)."""
HEAP_MB = 512
"""Each driver JVM's heap (-Xms = -Xmx), MiB: enough for 8 x 64 KiB batches and the latencies,
modest on the shared machine."""


class JavaClientError(RuntimeError):
    """The client could not be fetched or the driver not compiled (the message says why)."""


def client_version() -> str:
    """The ``rocketmq-client`` version pinned in ``bench/java/pom.xml``, e.g. ``5.3.3``."""
    text = POM.read_text()
    start = text.index("<client.version>") + len("<client.version>")
    return text[start : text.index("</client.version>", start)]


def build() -> str:
    """Fetch the client and compile the driver (cached); the JVM class path.

    Raises:
        JavaClientError: Maven, the JDK or Maven Central failed (with their output).
    """
    try:
        done = subprocess.run(
            ["bash", str(FETCH_SCRIPT)],
            capture_output=True,
            text=True,
            timeout=FETCH_TIMEOUT_S,
            check=True,
        )
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as exc:
        output = getattr(exc, "stderr", "") or ""
        raise JavaClientError(f"bench/java/fetch.sh failed: {exc}\n{output[-2000:]}") from exc
    return done.stdout.strip().splitlines()[-1]


def command(classpath: str, logs: pathlib.Path) -> list[str]:
    """The driver JVM's command line up to the scenario; client logs go under ``logs``."""
    return [
        "java",
        f"-Xms{HEAP_MB}m",
        f"-Xmx{HEAP_MB}m",
        f"-Drocketmq.client.logRoot={logs}",
        f"-Drocketmq.client.localOffsetStoreDir={logs / 'offsets'}",
        "-cp",
        classpath,
        MAIN_CLASS,
    ]


def produce_args(
    namesrv: str,
    topic: str,
    *,
    count: int,
    threads: int,
    batch: int,
    body_bytes: int,
    warmup: int,
    deadline_s: float,
) -> list[str]:
    """``produce``: ``threads`` threads of one producer send ``count`` messages in all,
    ``batch`` per synchronous call, after ``warmup`` untimed ones; waits for "go"."""
    assert 1 <= threads <= 64 and 1 <= batch <= 1024 and count >= 1, (threads, batch, count)
    args = ["produce", "--namesrv", namesrv, "--topic", topic, "--count", str(count)]
    args += ["--threads", str(threads), "--batch", str(batch), "--body-bytes", str(body_bytes)]
    args += ["--warmup", str(warmup), "--deadline-s", str(round(deadline_s)), "--wait-go"]
    return args


def push_args(
    namesrv: str, topic: str, *, group: str, count: int, threads: int, deadline_s: float
) -> list[str]:
    """``push``: a fresh-group push consumer reads ``count`` messages from the first offset."""
    assert 1 <= threads <= 64 and count >= 2, (threads, count)
    args = ["push", "--namesrv", namesrv, "--topic", topic, "--group", group]
    args += ["--count", str(count), "--threads", str(threads)]
    return [*args, "--deadline-s", str(round(deadline_s))]
