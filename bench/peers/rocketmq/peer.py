"""Apache RocketMQ 5.5.1 as a local benchmark peer: fetch, start on 127.0.0.1, create a topic, stop.

Role: the Java reference broker that Ariane's benchmarks are measured against (perf.md §1.1), run on
this machine under the same conditions (perf.md §2.1). ``rocketmq_peer`` fetches the jars with
``fetch.sh`` (Maven, cached under ``${ARIANE_CACHE:-~/.cache/ariane}``), starts a name server and
one broker with the gRPC proxy in LOCAL mode (``ProxyStartup -pm local``: broker and proxy share one
JVM), creates a topic with ``MQAdminStartup updateTopic``, waits until the proxy's gRPC
``QueryRoute`` (what the official clients call first) routes it, and yields the endpoints.

The version is ``pom.xml``'s ``<rocketmq.version>`` (the broker, store, remoting, common and
tiered store); the other modules (name server, proxy, tools, client, srvutil, filter, auth) are
``<rocketmq.companion.version>``, the newest release of theirs that the registry serves
(``version()``, ``module_versions()``; README "Versions").

Invariants:
- Everything listens for and sends to 127.0.0.1 only, on ports picked free at start. The name
  server and broker bind 127.0.0.1; the proxy's gRPC/remoting ports and the broker's HA port bind
  the wildcard address (RocketMQ has no bind setting for them) but only loopback traffic is sent.
- Every JVM is started here and stopped here by its PID (``ariane.dev.stop_process``: SIGTERM,
  then SIGKILL after ``stop_grace_s``); the temp dir (configs, store, logs) is removed afterwards.
- Heaps are fixed and modest (``-Xms`` = ``-Xmx``) with G1, since the machine has 2 shared cores.
- ``running_peer`` yields a ``RunningPeer`` whose broker+proxy JVM can be SIGKILLed and started
  again with the same command line on the same store (``kill_broker``, ``restart_broker``); the
  name server keeps running, and whatever JVMs run at the end are the ones stopped.

Script mode (not a test; not part of ``make test``)::

    python -m bench.peers.rocketmq.peer smoke [--flush async|sync] [--count N]
    python -m bench.peers.rocketmq.peer serve [--flush async|sync] [--seconds S]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import enum
import json
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import IO, Any

import grpc

from ariane import dev
from ariane.grpcwire import metadata, pb, rpc

log = logging.getLogger(__name__)

HERE = Path(__file__).resolve().parent
FETCH_SCRIPT = HERE / "fetch.sh"
POM = HERE / "pom.xml"
PREVIOUS_VERSION = "5.3.3"
"""The peer's version before 2026-11-29: results recorded without ``rocketmq_version`` ran it."""
REPO_ROOT = HERE.parents[2]
DRIVER = REPO_ROOT / "tests" / "conformance" / "official_py_driver.py"
LOOPBACK = "127.0.0.1"
CLUSTER_NAME = "DefaultCluster"
BROKER_NAME = "broker-a"
NAMESRV_MAIN = "org.apache.rocketmq.namesrv.NamesrvStartup"
PROXY_MAIN = "org.apache.rocketmq.proxy.ProxyStartup"
ADMIN_MAIN = "org.apache.rocketmq.tools.command.MQAdminStartup"
FETCH_TIMEOUT_S = 900.0
ADMIN_TIMEOUT_S = 60.0
ADMIN_HEAP_MB = 128
ROUTE_PROBE_TIMEOUT_S = 5.0
LOG_TAIL_BYTES = 4000
PORT_PICK_ATTEMPTS = 50
CONSUME_ATTEMPTS = 3


class PeerError(RuntimeError):
    """The peer could not be fetched, started or prepared (message carries the JVM's log tail)."""


class FlushMode(enum.Enum):
    """RocketMQ's ``flushDiskType``: Ariane's async flush and group-commit sync flush."""

    ASYNC = "ASYNC_FLUSH"
    SYNC = "SYNC_FLUSH"


@dataclasses.dataclass(frozen=True, slots=True)
class PeerSettings:
    """How the peer is run (the broker runs as ASYNC_MASTER, one broker, no slave)."""

    topic: str = "BenchTopic"
    """Topic created at start, NORMAL message type."""
    queue_count: int = 8
    """Read and write queues of the topic, 1..64."""
    namesrv_heap_mb: int = 256
    """Name server heap (-Xms = -Xmx), 128..1024 MiB."""
    broker_heap_mb: int = 768
    """Broker+proxy heap (-Xms = -Xmx), 512..1024 MiB."""
    start_timeout_s: float = 120.0
    """Bound on start-up: both JVMs listening, topic created and routed, 10..600 s."""
    stop_grace_s: float = 20.0
    """Time a JVM gets after SIGTERM before SIGKILL, 1..120 s (the proxy takes ~15 s)."""
    java: str = "java"
    """The java launcher (Java 17)."""
    keep_work_dir: bool = False
    """Keep the temp dir (configs, store, logs) after stopping, for inspection."""

    def __post_init__(self) -> None:
        assert 1 <= self.queue_count <= 64, self.queue_count
        assert 128 <= self.namesrv_heap_mb <= 1024, self.namesrv_heap_mb
        assert 512 <= self.broker_heap_mb <= 1024, self.broker_heap_mb
        assert 10.0 <= self.start_timeout_s <= 600.0, self.start_timeout_s
        assert 1.0 <= self.stop_grace_s <= 120.0, self.stop_grace_s


@dataclasses.dataclass(frozen=True, slots=True)
class Endpoints:
    """Where a running peer serves; ``grpc`` is what the official 5.x clients take."""

    grpc: str
    """Proxy gRPC endpoint, ``127.0.0.1:port``."""
    namesrv: str
    """Name server remoting address, ``127.0.0.1:port``."""
    broker: str
    """Broker remoting address, ``127.0.0.1:port``."""
    topic: str
    """The topic created at start."""
    version: str
    """RocketMQ version (its broker's), e.g. ``5.5.1``."""
    flush: FlushMode
    """The broker's flushDiskType."""
    work_dir: Path
    """Temp dir holding configs, store and logs (removed at stop unless kept)."""
    lib_dir: Path
    """Class path directory (the cache), for admin commands."""
    startup_s: float
    """Seconds from launching the name server to the topic being routable."""


@dataclasses.dataclass(frozen=True, slots=True)
class _Ports:
    namesrv: int
    broker: int
    grpc: int
    proxy_remoting: int

    @classmethod
    def pick(cls) -> _Ports:
        """Free loopback ports; the broker's also needs port-2 (fast) and port+1 (HA) free."""
        taken: set[int] = set()
        broker = _broker_port()
        taken.update((broker - 2, broker, broker + 1))
        others = [_free_port(taken) for _ in range(3)]
        return cls(namesrv=others[0], broker=broker, grpc=others[1], proxy_remoting=others[2])


@dataclasses.dataclass(frozen=True, slots=True)
class _Jvm:
    name: str
    proc: subprocess.Popen[bytes]
    log_path: Path
    cmd: list[str]


def _port_is_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((LOOPBACK, port))
        except OSError:
            return False
    return True


def _free_port(taken: set[int]) -> int:
    for _ in range(PORT_PICK_ATTEMPTS):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind((LOOPBACK, 0))
            port: int = sock.getsockname()[1]
        if port not in taken:
            taken.add(port)
            return port
    raise PeerError("no free loopback port")


def _broker_port() -> int:
    for _ in range(PORT_PICK_ATTEMPTS):
        port = _free_port(set())
        if port > 1100 and _port_is_free(port - 2) and _port_is_free(port + 1):
            return port
    raise PeerError("no free loopback port triple for the broker")


def _pom_property(name: str) -> str:
    text = POM.read_text()
    start = text.index(f"<{name}>") + len(name) + 2
    return text[start : text.index(f"</{name}>", start)]


def version() -> str:
    """The RocketMQ version the peer runs (its broker and store), from ``pom.xml``: ``5.5.1``."""
    return _pom_property("rocketmq.version")


def module_versions() -> dict[str, str]:
    """The version of each RocketMQ module the peer runs, as ``pom.xml`` pins them:
    ``{"broker": "5.5.1", "store": ..., "namesrv": "5.5.0", ...}``."""
    main, companion = version(), _pom_property("rocketmq.companion.version")
    mains = ("broker", "store", "remoting", "common", "tiered-store")
    companions = ("namesrv", "controller", "proxy", "tools", "client", "srvutil", "filter", "auth")
    return {**dict.fromkeys(mains, main), **dict.fromkeys(companions, companion)}


def fetch() -> Path:
    """Run ``fetch.sh`` (Maven into the cache; a no-op when the stamp matches).

    Returns:
        The lib directory holding every jar of the class path.

    Raises:
        PeerError: Maven failed or is missing.
    """
    try:
        done = subprocess.run(
            ["bash", str(FETCH_SCRIPT)],
            check=True,
            stdout=subprocess.PIPE,
            text=True,
            timeout=FETCH_TIMEOUT_S,
        )
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as exc:
        raise PeerError(f"fetch.sh failed: {exc}") from exc
    return Path(done.stdout.strip().splitlines()[-1])


def _write_configs(work: Path, ports: _Ports, flush: FlushMode) -> tuple[Path, Path, Path]:
    namesrv_conf = work / "namesrv.conf"
    namesrv_conf.write_text(f"listenPort={ports.namesrv}\nbindAddress={LOOPBACK}\n")
    store = work / "store"
    broker_conf = work / "broker.conf"
    lines = {
        "brokerClusterName": CLUSTER_NAME,
        "brokerName": BROKER_NAME,
        "brokerId": "0",
        "brokerRole": "ASYNC_MASTER",
        "flushDiskType": flush.value,
        "brokerIP1": LOOPBACK,
        "bindAddress": LOOPBACK,
        "listenPort": str(ports.broker),
        "namesrvAddr": f"{LOOPBACK}:{ports.namesrv}",
        "storePathRootDir": str(store),
        "storePathCommitLog": str(store / "commitlog"),
        "autoCreateTopicEnable": "false",
        "autoCreateSubscriptionGroup": "true",
    }
    broker_conf.write_text("".join(f"{k}={v}\n" for k, v in lines.items()))
    proxy_conf = work / "rmq-proxy.json"
    proxy = {
        "rocketMQClusterName": CLUSTER_NAME,
        "namesrvAddr": f"{LOOPBACK}:{ports.namesrv}",
        "proxyMode": "LOCAL",
        "grpcServerPort": ports.grpc,
        "remotingListenPort": ports.proxy_remoting,
    }
    proxy_conf.write_text(json.dumps(proxy, indent=2))
    return namesrv_conf, broker_conf, proxy_conf


def _java_cmd(
    settings: PeerSettings, lib: Path, work: Path, heap_mb: int, main: str, args: Sequence[str]
) -> list[str]:
    return [
        settings.java,
        f"-Xms{heap_mb}m",
        f"-Xmx{heap_mb}m",
        "-XX:+UseG1GC",
        f"-Duser.home={work / 'home'}",  # RocketMQ's logs go to ${user.home}/logs
        f"-Drocketmq.home.dir={work}",
        "-cp",
        f"{lib}/*",
        main,
        *args,
    ]


def _java_env(work: Path) -> dict[str, str]:
    return {**os.environ, "ROCKETMQ_HOME": str(work)}


def _spawn(name: str, cmd: list[str], work: Path) -> _Jvm:
    log_path = work / f"{name}.out"
    with log_path.open("wb") as out:
        proc = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=_java_env(work),
            start_new_session=True,  # a terminal's Ctrl-C reaches us; we stop the JVM by PID
        )
    log.info("started %s pid=%d", name, proc.pid)
    return _Jvm(name=name, proc=proc, log_path=log_path, cmd=cmd)


def _tail(path: Path) -> str:
    try:
        data = path.read_bytes()
    except OSError:
        return "<no log>"
    return data[-LOG_TAIL_BYTES:].decode("utf-8", "replace")


def _wait_listening(jvm: _Jvm, port: int, deadline: float) -> None:
    """Poll a TCP connect to the port until it succeeds, the JVM exits or the deadline passes."""
    while True:
        code = jvm.proc.poll()
        if code is not None:
            raise PeerError(f"{jvm.name} exited with {code}:\n{_tail(jvm.log_path)}")
        with contextlib.suppress(OSError):
            socket.create_connection((LOOPBACK, port), timeout=1.0).close()
            return
        if time.monotonic() > deadline:
            raise PeerError(f"{jvm.name} not listening on {port}:\n{_tail(jvm.log_path)}")
        time.sleep(0.2)


def admin(peer: Endpoints, args: Sequence[str], java: str = "java") -> str:
    """Run one ``mqadmin`` command (``MQAdminStartup``) against the peer; return its output.

    ``MQAdminStartup`` exits 0 even when the command failed, so callers check the text.

    Raises:
        PeerError: The command did not finish within ``ADMIN_TIMEOUT_S``.
    """
    cmd = [
        java,
        f"-Xmx{ADMIN_HEAP_MB}m",
        "-XX:+UseSerialGC",
        "-XX:TieredStopAtLevel=1",  # a short-lived client: start fast, compile little
        f"-Duser.home={peer.work_dir / 'home'}",
        "-cp",
        f"{peer.lib_dir}/*",
        ADMIN_MAIN,
        *args,
    ]
    try:
        done = subprocess.run(
            cmd,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            env=_java_env(peer.work_dir),
            timeout=ADMIN_TIMEOUT_S,
        )
    except subprocess.TimeoutExpired as exc:
        raise PeerError(f"mqadmin {args[0]} timed out") from exc
    return done.stdout + done.stderr


def create_topic(
    peer: Endpoints, topic: str, queue_count: int, message_type: str = "NORMAL"
) -> None:
    """Create a topic on the broker (``mqadmin updateTopic -b``) with a message type attribute.

    Args:
        peer: The running peer.
        topic: Topic name.
        queue_count: Read and write queue count.
        message_type: ``NORMAL``, ``FIFO``, ``DELAY`` or ``TRANSACTION`` (5.x topic attribute).

    Raises:
        PeerError: The broker did not confirm the creation.
    """
    queues = str(queue_count)
    attribute = f"+message.type={message_type}"
    args = ["updateTopic", "-b", peer.broker, "-t", topic, "-r", queues, "-w", queues]
    out = admin(peer, [*args, "-a", attribute])
    if "success" not in out:
        raise PeerError(f"updateTopic {topic} failed:\n{out[-LOG_TAIL_BYTES:]}")


async def query_route(grpc_endpoint: str, topic: str) -> tuple[str, int]:
    """One gRPC ``QueryRoute`` (as the official 5.x clients send first) to any v2 endpoint.

    Returns:
        The status code's name and the number of message queues routed.

    Raises:
        grpc.aio.AioRpcError: The endpoint did not answer within ``ROUTE_PROBE_TIMEOUT_S``.
    """
    host, port = grpc_endpoint.rsplit(":", 1)
    address = pb.v2.Address(host=host, port=int(port))
    request = pb.v2_service.QueryRouteRequest(
        topic=pb.v2.Resource(name=topic),
        endpoints=pb.v2.Endpoints(scheme=pb.v2.AddressScheme.IPv4, addresses=[address]),
    )
    async with grpc.aio.insecure_channel(grpc_endpoint) as channel:
        response = await rpc.unary_call(
            channel,
            pb.MESSAGING_SERVICE,
            "QueryRoute",
            request,
            pb.v2_service.QueryRouteResponse,
            timeout_s=ROUTE_PROBE_TIMEOUT_S,
            metadata=[(metadata.CLIENT_ID, "ariane-peer-probe"), (metadata.PROTOCOL, "v2")],
        )
    return pb.v2.Code.Name(response.status.code), len(response.message_queues)


def topic_max_offset_total(peer: Endpoints, topic: str) -> int:
    """Sum over the topic's queues of the max offset (``mqadmin topicStatus``): messages stored.

    Raises:
        PeerError: The output held no queue line.
    """
    out = admin(peer, ["topicStatus", "-n", peer.namesrv, "-t", topic])
    total, lines = 0, 0
    for line in out.splitlines():
        fields = line.split()
        # "#Broker Name  #QID  #Min Offset  #Max Offset  #Last Updated"
        if len(fields) >= 4 and fields[0] == BROKER_NAME and fields[1].isdigit():
            total += int(fields[3])
            lines += 1
    if not lines:
        raise PeerError(f"topicStatus {topic} gave no queues:\n{out[-LOG_TAIL_BYTES:]}")
    return total


def _wait_namesrv_routes(peer: Endpoints, topic: str, deadline: float) -> None:
    """Poll ``mqadmin topicRoute`` until the name server routes the topic to our broker.

    The proxy caches a "no route" answer for ``topicRouteServiceCacheRefreshSeconds`` (20 s by
    default), so it is asked only once the name server knows the topic.
    """
    while True:
        out = admin(peer, ["topicRoute", "-n", peer.namesrv, "-t", topic])
        if peer.broker in out:
            return
        if time.monotonic() > deadline:
            raise PeerError(f"name server never routed {topic}:\n{out[-LOG_TAIL_BYTES:]}")
        time.sleep(0.2)


def wait_routed(peer: Endpoints, topic: str, deadline: float) -> None:
    """Poll the proxy's gRPC ``QueryRoute`` (as the official clients do) until the topic routes.

    Asks the name server first (``_wait_namesrv_routes``). This proves the gRPC endpoint serves
    the v2 protocol and routes the topic.

    Raises:
        PeerError: The deadline passed first.
    """
    _wait_namesrv_routes(peer, topic, deadline)
    last = "no answer"
    while True:
        try:
            code, queues = asyncio.run(query_route(peer.grpc, topic))
        except grpc.aio.AioRpcError as exc:
            last = f"gRPC {exc.code().name}"
        else:
            if code == "OK" and queues > 0:
                return
            last = f"{code}, {queues} queues"
        if time.monotonic() > deadline:
            raise PeerError(f"topic {topic} never routed through {peer.grpc}: {last}")
        time.sleep(0.2)


def _start(
    settings: PeerSettings, flush: FlushMode, lib: Path, work: Path, jvms: list[_Jvm]
) -> Endpoints:
    started = time.monotonic()
    deadline = started + settings.start_timeout_s
    ports = _Ports.pick()
    namesrv_conf, broker_conf, proxy_conf = _write_configs(work, ports, flush)
    namesrv = f"{LOOPBACK}:{ports.namesrv}"
    jvms.append(
        _spawn(
            "namesrv",
            _java_cmd(
                settings,
                lib,
                work,
                settings.namesrv_heap_mb,
                NAMESRV_MAIN,
                ["-c", str(namesrv_conf)],
            ),
            work,
        )
    )
    _wait_listening(jvms[-1], ports.namesrv, deadline)
    log.info("name server listens after %.1f s", time.monotonic() - started)
    proxy_args = ["-pm", "local", "-pc", str(proxy_conf), "-bc", str(broker_conf), "-n", namesrv]
    jvms.append(
        _spawn(
            "broker-proxy",
            _java_cmd(settings, lib, work, settings.broker_heap_mb, PROXY_MAIN, proxy_args),
            work,
        )
    )
    _wait_listening(jvms[-1], ports.grpc, deadline)
    log.info("gRPC port %d serves after %.1f s", ports.grpc, time.monotonic() - started)
    peer = Endpoints(
        grpc=f"{LOOPBACK}:{ports.grpc}",
        namesrv=namesrv,
        broker=f"{LOOPBACK}:{ports.broker}",
        topic=settings.topic,
        version=lib.parent.name.removeprefix("rocketmq-"),
        flush=flush,
        work_dir=work,
        lib_dir=lib,
        startup_s=0.0,
    )
    create_topic(peer, settings.topic, settings.queue_count)
    log.info("topic %s created after %.1f s", settings.topic, time.monotonic() - started)
    wait_routed(peer, settings.topic, deadline)
    log.info(
        "topic %s routed by the proxy after %.1f s", settings.topic, time.monotonic() - started
    )
    return dataclasses.replace(peer, startup_s=time.monotonic() - started)


@dataclasses.dataclass(slots=True)
class RunningPeer:
    """A started peer and its JVMs, so that the broker+proxy JVM can be killed and restarted on
    the same store (the recovery benchmark); ``running_peer`` stops whatever runs at the end.

    Attributes:
        endpoints: where it serves.
        jvms: the name server and the broker+proxy JVM (replaced by ``restart_broker``).
    """

    endpoints: Endpoints
    jvms: list[_Jvm]

    @property
    def broker_pid(self) -> int:
        """PID of the JVM holding broker + LOCAL-mode proxy."""
        return self.jvms[-1].proc.pid

    def kill_broker(self) -> None:
        """SIGKILL the broker+proxy JVM (by its handle) and reap it; the store dir stays."""
        proc = self.jvms[-1].proc
        proc.kill()
        proc.wait(timeout=ADMIN_TIMEOUT_S)
        log.info("broker-proxy (pid %d) killed", proc.pid)

    def restart_broker(self) -> None:
        """Start the broker+proxy JVM again with the same command line, configs and store
        (RocketMQ recovers abnormally: the ``abort`` file is still there). Returns at once."""
        old = self.jvms[-1]
        assert old.proc.poll() is not None, "kill_broker first"
        work = self.endpoints.work_dir
        self.jvms[-1] = _spawn("broker-proxy-restart", old.cmd, work)

    @property
    def grpc_port(self) -> int:
        """The proxy's gRPC port."""
        return int(self.endpoints.grpc.rsplit(":", 1)[1])

    def broker_exited(self) -> bool:
        """Whether the current broker+proxy JVM has exited."""
        return self.jvms[-1].proc.poll() is not None


@contextlib.contextmanager
def rocketmq_peer(
    flush: FlushMode = FlushMode.ASYNC, settings: PeerSettings | None = None
) -> Iterator[Endpoints]:
    """``running_peer`` yielding only the endpoints (see there)."""
    with running_peer(flush, settings) as running:
        yield running.endpoints


@contextlib.contextmanager
def running_peer(
    flush: FlushMode = FlushMode.ASYNC, settings: PeerSettings | None = None
) -> Iterator[RunningPeer]:
    """Fetch (cached), start and prepare a RocketMQ name server + broker + LOCAL-mode proxy.

    Mirrors ``mqnamesrv`` and ``mqbroker --enable-proxy`` of the RocketMQ distribution, on
    127.0.0.1 with free ports and a temp store.

    Args:
        flush: The broker's flushDiskType (ASYNC_FLUSH or SYNC_FLUSH).
        settings: Topic, heaps and time bounds; defaults when None.

    Yields:
        The running peer; its topic exists and is routable.

    Raises:
        PeerError: Java is missing, or fetching or starting failed (with the JVM's log tail).
    """
    settings = settings or PeerSettings()
    if shutil.which(settings.java) is None:
        raise PeerError(f"{settings.java!r} not found: the RocketMQ peer needs Java 17")
    lib = fetch()
    work = Path(tempfile.mkdtemp(prefix="ariane-rocketmq-"))
    jvms: list[_Jvm] = []
    keep = settings.keep_work_dir
    try:
        try:
            peer = _start(settings, flush, lib, work, jvms)
        except PeerError:
            keep = True  # the logs under work/home/logs tell why
            raise
        yield RunningPeer(peer, jvms)
    finally:
        for jvm in reversed(jvms):
            stopping = time.monotonic()
            dev.stop_process(jvm.proc, grace_s=settings.stop_grace_s)
            log.info(
                "%s (pid %d) stopped after %.1f s",
                jvm.name,
                jvm.proc.pid,
                time.monotonic() - stopping,
            )
        if keep:
            log.info("kept %s (configs, store, logs)", work)
        else:
            shutil.rmtree(work, ignore_errors=True)


@dataclasses.dataclass(frozen=True, slots=True)
class _DriverRun:
    events: list[dict[str, Any]]
    seconds: float
    exit_code: int
    stderr: str


def _run_driver(args: Sequence[str], timeout_s: float) -> _DriverRun:
    """Run the official Python client driver in its own process; parse its JSON lines."""
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, str(DRIVER), *args],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout_s,
        cwd=REPO_ROOT,
    )
    events = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    return _DriverRun(events, time.monotonic() - started, done.returncode, done.stderr[-2000:])


def _emit(out: IO[str], **fields: object) -> None:
    out.write(json.dumps(fields, default=str) + "\n")
    out.flush()


def _acked_bodies(run: _DriverRun) -> list[str]:
    acked = {e["message_id"] for e in run.events if e["event"] == "acked"}
    return [e["body"] for e in run.events if e["event"] == "received" and e["message_id"] in acked]


def _consume(peer: Endpoints, count: int, out: IO[str]) -> tuple[list[str], float, int]:
    """Simple-consume ``count`` messages; rerun for the rest when the client fails.

    The official client may send its first ReceiveMessage before the proxy has its settings, and
    the proxy answers with an NPE (apache/rocketmq#8714); such a run is retried, at most
    ``CONSUME_ATTEMPTS`` times, and every retry is reported.

    Returns:
        Acked bodies, total seconds, attempts used.
    """
    bodies: list[str] = []
    seconds = 0.0
    for attempt in range(1, CONSUME_ATTEMPTS + 1):
        args = ["--endpoints", peer.grpc, "--topic", peer.topic, "--group", "smoke"]
        run = _run_driver(
            ["simple-consume", *args, "--count", str(count - len(bodies)), "--deadline-s", "60"],
            120.0,
        )
        bodies += _acked_bodies(run)
        seconds += run.seconds
        if run.exit_code == 0 and len(bodies) >= count:
            return bodies, seconds, attempt
        last = run.stderr.strip().splitlines()[-1:] or [""]
        _emit(out, event="consume-retry", attempt=attempt, exit_code=run.exit_code, error=last[0])
    return bodies, seconds, CONSUME_ATTEMPTS


def _describe(peer: Endpoints) -> dict[str, object]:
    return {
        "event": "started",
        "version": peer.version,
        "flush": peer.flush.value,
        "grpc": peer.grpc,
        "namesrv": peer.namesrv,
        "topic": peer.topic,
        "startup_s": round(peer.startup_s, 2),
    }


def smoke(flush: FlushMode, count: int, out: IO[str]) -> int:
    """Start the peer, send and receive ``count`` messages with the official client, stop.

    Returns:
        0 when every sent body came back exactly once (acked), 1 otherwise.
    """
    t0 = time.monotonic()
    with rocketmq_peer(flush) as peer:
        _emit(out, **_describe(peer), with_fetch_s=round(time.monotonic() - t0, 2))
        produce = ["--endpoints", peer.grpc, "--topic", peer.topic, "--count", str(count)]
        sent = _run_driver(["produce", *produce, "--prefix", "smoke"], 120.0)
        got, consume_s, attempts = _consume(peer, count, out)
        stopping = time.monotonic()
    stop_s = time.monotonic() - stopping
    sent_bodies = sorted(e["body"] for e in sent.events if e["event"] == "sent")
    ok = len(sent_bodies) == count and sent_bodies == sorted(got)
    _emit(
        out,
        event="produced",
        messages=len(sent_bodies),
        seconds=round(sent.seconds, 2),
        exit_code=sent.exit_code,
    )
    _emit(out, event="consumed", messages=len(got), seconds=round(consume_s, 2), attempts=attempts)
    _emit(out, event="stopped", stop_s=round(stop_s, 2), ok=ok)
    if not ok:
        out.write(f"producer stderr:\n{sent.stderr}\n")
    return 0 if ok else 1


def serve(flush: FlushMode, seconds: float, out: IO[str]) -> int:
    """Run the peer for at most ``seconds`` (or until Ctrl-C or SIGTERM); print its endpoints."""
    with rocketmq_peer(flush) as peer:
        _emit(out, **_describe(peer))
        with contextlib.suppress(KeyboardInterrupt):
            threading.Event().wait(seconds)
    _emit(out, event="stopped")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: ``smoke`` or ``serve`` (see the module docstring)."""
    parser = argparse.ArgumentParser(prog="python -m bench.peers.rocketmq.peer")
    sub = parser.add_subparsers(dest="command", required=True)
    for name in ("smoke", "serve"):
        p = sub.add_parser(name)
        p.add_argument("--flush", choices=("async", "sync"), default="async")
        if name == "smoke":
            p.add_argument("--count", type=int, default=100)
        else:
            p.add_argument("--seconds", type=float, default=600.0)
    args = parser.parse_args(argv)
    # SIGTERM unwinds like Ctrl-C, so the JVMs are stopped and the temp dir removed.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    flush = FlushMode.SYNC if args.flush == "sync" else FlushMode.ASYNC
    if args.command == "smoke":
        assert 1 <= args.count <= 100_000, args.count
        return smoke(flush, args.count, sys.stdout)
    assert 1.0 <= args.seconds <= 86_400.0, args.seconds
    return serve(flush, args.seconds, sys.stdout)


if __name__ == "__main__":
    sys.exit(main())
