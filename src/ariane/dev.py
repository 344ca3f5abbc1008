"""``ariane dev``: a local cluster of processes (one name server, one broker) for newcomers.

It starts ``ariane namesrv`` and ``ariane broker`` as child processes with their data under
``--data-dir`` (with ``--slaves N``, the broker is the master of a group, ``--broker-role``
ASYNC_MASTER by default, and N ``SLAVE`` brokers replicate it, each with its own store
``store-slave-<id>`` and log ``broker-slave-<id>.log``), waits until all accept connections
and the broker has registered, prints the endpoints (human-readable on stderr, one JSON line
on stdout for scripts), and on Ctrl-C / SIGTERM stops exactly the children it started, by
PID: SIGTERM first, SIGKILL after ``stop_grace_s``.

With ``--inner-credential`` (``ACCESS_KEY:SECRET_KEY``, or no value for a generated one) the
name server, the master and every slave get the same ``[auth]
inner_client_authentication_credentials`` through their config files (mode 0600, never on a
command line): registrations are then signed and checked, and the HA port serves only slaves
that prove the credential.

With ``--secure`` (``dev_cluster(secure=True)``) the cluster is what a security team would
accept (issue 21's laptop path): a CA generated in ``<data-dir>/tls/`` (``ca.pem``; reused on
the next start) issues the servers' certificate (SANs ``localhost``, ``127.0.0.1``, ``::1``);
every port — gRPC, Remoting, HA — serves TLS ``enforcing``; authentication and authorization
are on; the Super user of ``[auth.init_authentication_user]`` is written to
``<data-dir>/credentials.json`` (``{"access_key": ..., "secret_key": ...}``, mode 0600, reused
on the next start since the store keeps the user it bootstrapped); an inner credential is
generated unless given; a slave is started unless ``slaves`` says otherwise.

Invariant: no child outlives ``run_dev_cluster``; every wait is bounded.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
import os
import pathlib
import random
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterator, Sequence

import grpc

from ariane.grpcwire import registry_client
from ariane.security import ca, keys

log = logging.getLogger(__name__)

READY_TIMEOUT_S = 30.0
"""How long a child may take to accept connections before the cluster start fails."""

SLAVES_MAX = 8
"""Most slaves ``ariane dev --slaves`` starts (each is a process with its own store)."""

STOP_GRACE_S = 10.0
"""How long a child gets to exit after SIGTERM before it is killed."""

DEV_BROKER_TOML = """\
# Written by `ariane dev`: laptop-sized files instead of RocketMQ's production defaults
# (1 GiB CommitLog segments, a 420 MB IndexFile).
[store]
commit_log_file_size_bytes = 134217728
consume_queue_file_entries = 100000
flush_disk_type = "{flush_disk_type}"

[index]
hash_slot_count = 500000
index_count_max = 2000000
"""


INNER_CREDENTIAL_TOML = """
[auth.inner_client_authentication_credentials]
access_key = "{access_key}"
secret_key = "{secret_key}"
"""

GENERATED_ACCESS_KEY = "ariane-inner"
"""Access key of a generated inner credential."""

SECURE_TOML = """
[tls]
server_mode = "enforcing"
cert_path = "{cert_path}"
key_path = "{key_path}"
trust_cert_path = "{ca_path}"
"""

SECURE_BROKER_AUTH_TOML = """
[auth]
authentication_enabled = true
authorization_enabled = true

[auth.init_authentication_user]
username = "{access_key}"
password = "{secret_key}"
"""

SUPER_USER = "admin"
"""Access key of the Super user ``ariane dev --secure`` generates."""

SECURE_SLAVES_DEFAULT = 1
"""Slaves ``ariane dev --secure`` starts unless ``--slaves`` says otherwise."""


@dataclasses.dataclass(frozen=True, slots=True)
class DevSecurity:
    """What ``--secure`` generated: the CA clients trust and the Super user's credentials."""

    ca_path: pathlib.Path
    """The CA certificate (``<data-dir>/tls/ca.pem``): clients verify the servers with it."""

    credentials_path: pathlib.Path
    """``<data-dir>/credentials.json``, the Super user's ``access_key``/``secret_key``."""

    files: ca.LocalTlsFiles
    """Every PEM file written (the servers' certificate and key, a client certificate)."""

    super_user: tuple[str, str] = dataclasses.field(repr=False)
    """``(access_key, secret_key)`` of the Super user."""

    inner: tuple[str, str] = dataclasses.field(repr=False)
    """The inner credential every server signs with."""


def prepare_security(data_dir: pathlib.Path, inner: tuple[str, str] | None) -> DevSecurity:
    """Generate (or reuse) the CA, the servers' certificate and the Super user under
    ``data_dir``; ``inner``: the inner credential (``None``: generated).

    Raises:
        OSError: ``data_dir`` is not writable.
        ValueError: an existing ``credentials.json`` or CA does not load.
    """
    files = ca.write_local(data_dir / "tls")
    credentials_path = data_dir / "credentials.json"
    if credentials_path.exists():
        try:
            saved = json.loads(credentials_path.read_text())
            user = (str(saved["access_key"]), str(saved["secret_key"]))
        except (ValueError, KeyError, TypeError) as exc:
            raise ValueError(
                f'{credentials_path} is not {{"access_key": ..., "secret_key": ...}}: {exc}'
                " (remove it and the store to start over)"
            ) from None
    else:
        user = (SUPER_USER, keys.generate_secret_key(24))
        _write_private(
            credentials_path, json.dumps({"access_key": user[0], "secret_key": user[1]}) + "\n"
        )
    return DevSecurity(
        ca_path=files.ca_path,
        credentials_path=credentials_path,
        files=files,
        super_user=user,
        inner=inner if inner is not None else inner_credential(""),
    )


def inner_credential(text: str) -> tuple[str, str]:
    """``ACCESS_KEY:SECRET_KEY`` → the pair; ``""`` → a generated pair (random secret).

    Raises:
        ValueError: no ``:``, an empty part, or a character a TOML basic string cannot hold
            as is (quote, backslash, control).
    """
    if not text:
        return GENERATED_ACCESS_KEY, keys.generate_secret_key(24)
    access_key, sep, secret_key = text.partition(":")
    if not sep or not access_key or not secret_key:
        raise ValueError("--inner-credential takes ACCESS_KEY:SECRET_KEY")
    if any(c in '"\\' or not c.isprintable() for c in text):
        raise ValueError("--inner-credential: no quotes, backslashes or control characters")
    return access_key, secret_key


def _write_private(path: pathlib.Path, text: str) -> None:
    """Write ``text`` to ``path`` readable by this user only (it may hold a secret)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(text)
    os.chmod(path, 0o600)


@dataclasses.dataclass(frozen=True, slots=True)
class DevEndpoints:
    """Where the local cluster listens.

    Attributes:
        namesrv: ``host:port`` of the name server: the access point clients use.
        broker: ``host:port`` of the broker's gRPC endpoint.
        data_dir: the root of the broker's store.
        namesrv_remoting: ``host:port`` classic (Remoting) clients and ``mqadmin`` use as the
            name server (``-n``); the same port as ``namesrv`` (one port serves both).
        namesrv_metrics: URL of the name server's Prometheus ``/metrics``.
        broker_metrics: URL of the broker's Prometheus ``/metrics``.
        broker_role: the broker's role (``""``: a lone broker without HA port).
        master_ha: ``host:port`` of the master's HA port (with slaves).
        slaves: ``host:port`` of each slave's gRPC endpoint, by broker id 1..N.
        slave_data_dirs: each slave's store root, in the same order.
        broker_remoting: ``host:port`` of the broker's classic protocol (Remoting: classic Java
            and Go clients dial it after the name server routes them there).
        ca_path: with ``--secure``, the CA certificate clients verify the servers with ("": plain).
        credentials_path: with ``--secure``, the Super user's credentials file ("": plain).
    """

    namesrv: str
    broker: str
    data_dir: str
    namesrv_remoting: str = ""
    namesrv_metrics: str = ""
    broker_metrics: str = ""
    broker_role: str = ""
    master_ha: str = ""
    slaves: tuple[str, ...] = ()
    slave_data_dirs: tuple[str, ...] = ()
    broker_remoting: str = ""
    ca_path: str = ""
    credentials_path: str = ""


FREE_PORT_FLOOR = 10_000
"""Lowest port ``free_port`` hands out (above the well-known and common service ports)."""
DEFAULT_SERVER_PORTS: frozenset[int] = frozenset({10909, 10911, 10912})
"""Ports above ``FREE_PORT_FLOOR`` that a server started without an explicit address binds
(RocketMQ's broker defaults, which Ariane's broker keeps: VIP channel 10909, Remoting 10911,
HA 10912): ``free_port`` never hands them out, so a port drawn for one test is never the one
another test's default-configured broker is binding."""
FREE_PORT_TRIES = 64
"""Random ports ``free_port`` tries before it falls back to the OS's pick."""
PORT_RANGE_ENV = "ARIANE_PORT_RANGE"
"""Environment variable ``LOW-HIGH`` (half-open, within [``FREE_PORT_FLOOR``, 65536)): the ports
``free_port`` draws from instead of the whole room below the ephemeral range. The test suite
gives each pytest-xdist worker its own slice (``worker_port_range``, set in tests/conftest.py)
so two workers never hand out the same port; child processes inherit it."""
_EPHEMERAL_RANGE_FILE = pathlib.Path("/proc/sys/net/ipv4/ip_local_port_range")
_ports_given: set[int] = set()
_port_picker = random.Random()  # its own generator: a test seeding ``random`` does not repeat ports


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port on ``host`` that was free a moment ago, below the kernel's ephemeral range.

    The OS's own pick (binding port 0) comes from the ephemeral range
    (``net.ipv4.ip_local_port_range``, 32768-60999 here), where any outgoing connection on the
    machine may take it between this call and the caller's bind: seen as "Address already in
    use" at a server's start on a loaded machine. So the port is drawn at random from
    ``port_range()`` ([``FREE_PORT_FLOOR``, the range's start), or ``$ARIANE_PORT_RANGE``),
    skipping ports this process handed out before and ``DEFAULT_SERVER_PORTS``, and checked
    by binding it; after
    ``FREE_PORT_TRIES`` misses (or with fewer than 1,024 ports of room) the OS picks.
    """
    low, high = port_range()
    for _ in range(FREE_PORT_TRIES if high - low >= 1024 else 0):
        port = _port_picker.randrange(low, high)
        if port in _ports_given or port in DEFAULT_SERVER_PORTS:
            continue
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            try:
                sock.bind((host, port))
            except OSError:
                continue
        _ports_given.add(port)
        return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def port_range() -> tuple[int, int]:
    """``[low, high)``: the ports ``free_port`` draws from.

    ``$ARIANE_PORT_RANGE`` (``LOW-HIGH``) when set and valid (``FREE_PORT_FLOOR <= LOW < HIGH
    <= 65536``), else [``FREE_PORT_FLOOR``, the start of the kernel's ephemeral range).
    """
    raw = os.environ.get(PORT_RANGE_ENV, "")
    low_text, _, high_text = raw.partition("-")
    if low_text.isdigit() and high_text.isdigit():
        low, high = int(low_text), int(high_text)
        if FREE_PORT_FLOOR <= low < high <= 65536:
            return low, high
    return FREE_PORT_FLOOR, _ephemeral_low()


def worker_port_range(index: int, count: int) -> str:
    """``LOW-HIGH`` for ``$ARIANE_PORT_RANGE``: slice ``index`` of ``count`` equal, disjoint
    slices of [``FREE_PORT_FLOOR``, the ephemeral range's start) (one per parallel test worker).

    Raises:
        ValueError: ``index`` not in [0, ``count``).
    """
    if not 0 <= index < count:
        raise ValueError(f"worker {index} of {count}")
    room = _ephemeral_low() - FREE_PORT_FLOOR
    width = room // count
    low = FREE_PORT_FLOOR + index * width
    return f"{low}-{low + width}"


def _ephemeral_low() -> int:
    try:
        return int(_EPHEMERAL_RANGE_FILE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768  # Linux's default start of the range


def wait_until_listening(
    host: str, port: int, *, process: subprocess.Popen[bytes], timeout_s: float
) -> None:
    """Poll until ``host:port`` accepts a TCP connection.

    Raises:
        RuntimeError: if ``process`` exits first or ``timeout_s`` passes.
    """

    def accepts() -> bool:
        with contextlib.suppress(OSError), socket.create_connection((host, port), timeout=0.5):
            return True
        return False

    _wait_for(accepts, process, timeout_s, f"{host}:{port} did not accept connections")


def _wait_for(
    ready: Callable[[], bool],
    process: subprocess.Popen[bytes],
    timeout_s: float,
    failure: str,
) -> None:
    """Poll ``ready`` every 50 ms until it is true.

    Raises:
        RuntimeError: if ``process`` exits first, or with ``failure`` after ``timeout_s``.
    """
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{process.args!r} exited with {process.returncode} while starting")
        if ready():
            return
        time.sleep(0.05)
    raise RuntimeError(f"{failure} within {timeout_s} s")


async def _registered(namesrv: str, broker_name: str, ca_pem: bytes | None) -> bool:
    channel = (
        grpc.aio.insecure_channel(namesrv)
        if ca_pem is None
        else grpc.aio.secure_channel(namesrv, grpc.ssl_channel_credentials(ca_pem))
    )
    async with channel:
        info = await registry_client.RegistryClient(channel, timeout_s=2.0).get_cluster_info()
    return any(g.broker_name == broker_name and g.members for g in info.broker_groups)


def wait_until_registered(
    namesrv: str,
    broker_name: str,
    *,
    process: subprocess.Popen[bytes],
    timeout_s: float,
    ca_path: pathlib.Path | None = None,
) -> None:
    """Poll the name server until ``broker_name`` is registered with it (over TLS verified by
    ``ca_path`` when given).

    A broker accepts connections (its front-end workers listen) a moment before it registers;
    clients that start from the name server need the registration.

    Raises:
        RuntimeError: if ``process`` exits first or ``timeout_s`` passes.
    """

    ca_pem = None if ca_path is None else ca_path.read_bytes()

    def registered() -> bool:
        with contextlib.suppress(grpc.RpcError):
            return asyncio.run(_registered(namesrv, broker_name, ca_pem))
        return False

    _wait_for(
        registered, process, timeout_s, f"broker {broker_name} did not register with {namesrv}"
    )


def stop_process(process: subprocess.Popen[bytes], *, grace_s: float = STOP_GRACE_S) -> int:
    """Stop a child we started: SIGTERM, wait ``grace_s``, then SIGKILL. Returns its exit code."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            log.warning("pid %d ignored SIGTERM for %.0f s; killing it", process.pid, grace_s)
            process.kill()
            process.wait(timeout=grace_s)
    return process.returncode


def _ariane(args: Sequence[str], log_path: pathlib.Path) -> subprocess.Popen[bytes]:
    log_file = log_path.open("ab")
    try:
        return subprocess.Popen(
            [sys.executable, "-m", "ariane", *args],
            stdout=log_file,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
    finally:
        log_file.close()


@contextlib.contextmanager
def dev_cluster(
    data_dir: pathlib.Path,
    *,
    namesrv_port: int = 9876,
    broker_port: int = 0,
    broker_name: str = "broker-a",
    flush_disk_type: str = "ASYNC_FLUSH",
    workers: int | None = None,
    slaves: int = 0,
    broker_role: str = "",
    inner: tuple[str, str] | None = None,
    secure: bool = False,
) -> Iterator[DevEndpoints]:
    """Run a name server and a broker as children for the duration of the ``with`` block.

    Args:
        data_dir: root for the broker store and the logs (``namesrv.log``, ``broker.log``).
        namesrv_port: name-server port on 127.0.0.1 (0 = pick a free one).
        broker_port: broker gRPC port on 127.0.0.1 (0 = pick a free one).
        broker_name: the broker group name.
        flush_disk_type: ``ASYNC_FLUSH`` or ``SYNC_FLUSH``.
        workers: the broker's front-end worker processes (``None``: the broker's default,
            the CPU count; 0: none).
        slaves: SLAVE brokers replicating the broker (0..``SLAVES_MAX``); their front ends
            run without workers.
        broker_role: the broker's role (``SYNC_MASTER``/``ASYNC_MASTER``); empty = a lone
            broker, or ASYNC_MASTER when ``slaves`` is above 0.
        inner: the inner credential ``(access_key, secret_key)`` every child gets; ``None``:
            none (registration and the HA port are open), or a generated one with ``secure``.
        secure: TLS enforcing on every port with a generated CA, ACL 2.0 on, a generated Super
            user (``prepare_security``; the module docstring).

    Yields:
        The endpoints, once both children accept connections.

    Raises:
        RuntimeError: if a child fails to start in ``READY_TIMEOUT_S``.
        ValueError: ``slaves`` out of range.
    """
    role = _group_role(slaves, broker_role)
    data_dir.mkdir(parents=True, exist_ok=True)
    security = prepare_security(data_dir, inner) if secure else None
    plan = _plan(data_dir, namesrv_port, broker_port, role, slaves, security)
    children: list[subprocess.Popen[bytes]] = []
    namesrv_config = _write_configs(data_dir, flush_disk_type, inner, security)
    try:
        namesrv_metrics = urllib.parse.urlsplit(plan.namesrv_metrics).netloc
        _start_namesrv(data_dir, children, plan.namesrv, namesrv_metrics, namesrv_config)
        broker_metrics = urllib.parse.urlsplit(plan.broker_metrics).netloc
        flags = ["--metrics-listen", broker_metrics, "--remoting-listen", plan.broker_remoting]
        flags += [] if workers is None else ["--workers", str(workers)]
        flags += ["--broker-role", role, "--ha-listen", plan.master_ha] if role else []
        group = (plan.namesrv, broker_name)
        ca_path = security.ca_path if security else None
        _start_master(data_dir, children, group, plan.broker, flags=flags, ca_path=ca_path)
        slave_addrs = _start_slaves(
            data_dir, children, group, count=slaves, master_ha=plan.master_ha
        )
        yield dataclasses.replace(plan, slaves=tuple(slave_addrs))
    finally:
        for child in reversed(children):
            stop_process(child)


def _plan(
    data_dir: pathlib.Path,
    namesrv_port: int,
    broker_port: int,
    role: str,
    slaves: int,
    security: DevSecurity | None,
) -> DevEndpoints:
    """The cluster's addresses on 127.0.0.1 (free ports where 0), before anything starts
    (``slaves`` is filled in once they run)."""

    def address(port: int = 0) -> str:
        return f"127.0.0.1:{port or free_port()}"

    scheme = "https" if security else "http"  # /metrics follows [tls] enforcing
    namesrv = address(namesrv_port)
    return DevEndpoints(
        namesrv=namesrv,
        namesrv_remoting=namesrv,
        broker=address(broker_port),
        data_dir=str(data_dir),
        namesrv_metrics=f"{scheme}://{address()}/metrics",  # not 5557
        broker_metrics=f"{scheme}://{address()}/metrics",
        broker_role=role,
        master_ha=address() if role else "",
        slave_data_dirs=tuple(str(data_dir / f"store-slave-{i}") for i in range(1, slaves + 1)),
        broker_remoting=address(),
        ca_path=str(security.ca_path) if security else "",
        credentials_path=str(security.credentials_path) if security else "",
    )


def _start_namesrv(
    data_dir: pathlib.Path,
    children: list[subprocess.Popen[bytes]],
    listen: str,
    metrics_listen: str,
    config: pathlib.Path,
) -> None:
    """Start ``ariane namesrv`` (appended to ``children``) and wait until it listens."""
    args = ["namesrv", "--listen", listen, "--metrics-listen", metrics_listen]
    namesrv = _ariane([*args, "--config", str(config)], data_dir / "namesrv.log")
    children.append(namesrv)
    host, port = listen.rsplit(":", 1)
    wait_until_listening(host, int(port), process=namesrv, timeout_s=READY_TIMEOUT_S)


def _write_configs(
    data_dir: pathlib.Path,
    flush_disk_type: str,
    inner: tuple[str, str] | None,
    security: DevSecurity | None = None,
) -> pathlib.Path:
    """Write ``broker.toml`` (shared by every broker) and ``namesrv.toml``, both with the inner
    credential when given (and ``[tls]`` and, for brokers, ``[auth]`` with ``security``, whose
    inner credential wins); returns the name server's."""
    if security is not None:
        inner = security.inner
    auth_toml = (
        ""
        if inner is None
        else INNER_CREDENTIAL_TOML.format(access_key=inner[0], secret_key=inner[1])
    )
    tls_toml = ""
    broker_auth = ""
    if security is not None:
        files = security.files
        tls_toml = SECURE_TOML.format(
            cert_path=files.cert_path, key_path=files.key_path, ca_path=files.ca_path
        )
        user, secret = security.super_user
        broker_auth = SECURE_BROKER_AUTH_TOML.format(access_key=user, secret_key=secret)
    namesrv_config = data_dir / "namesrv.toml"
    _write_private(namesrv_config, tls_toml + auth_toml)
    broker_toml = DEV_BROKER_TOML.format(flush_disk_type=flush_disk_type)
    _write_private(data_dir / "broker.toml", broker_toml + tls_toml + broker_auth + auth_toml)
    return namesrv_config


def _start_broker(
    data_dir: pathlib.Path, *, flags: list[str], name: str = ""
) -> subprocess.Popen[bytes]:
    """Start ``ariane broker`` over ``data_dir/store[-NAME]`` with the dev TOML
    (``broker.toml``, written by ``dev_cluster``) and ``flags``, logging to
    ``broker[-NAME].log``."""
    config_path = data_dir / "broker.toml"
    suffix = f"-{name}" if name else ""
    store = str(data_dir / f"store{suffix}")
    return _ariane(
        ["broker", "--config", str(config_path), "--store-dir", store, *flags],
        data_dir / f"broker{suffix}.log",
    )


_Group = tuple[str, str]
"""(name server ``HOST:PORT``, broker group name) of the brokers started."""


def _group_role(slaves: int, broker_role: str) -> str:
    """The master's role: ``broker_role``, else ASYNC_MASTER with slaves, else "" (lone).

    Raises:
        ValueError: ``slaves`` outside 0..``SLAVES_MAX``.
    """
    if not 0 <= slaves <= SLAVES_MAX:
        raise ValueError(f"slaves must be 0..{SLAVES_MAX}, not {slaves}")
    return broker_role or ("ASYNC_MASTER" if slaves else "")


def _start_master(
    data_dir: pathlib.Path,
    children: list[subprocess.Popen[bytes]],
    group: _Group,
    broker_addr: str,
    *,
    flags: list[str],
    ca_path: pathlib.Path | None = None,
) -> None:
    """Start the (master) broker, appended to ``children``; wait until it listens and has
    registered with the name server (asked over TLS verified by ``ca_path`` when given)."""
    namesrv_addr, broker_name = group
    broker = _start_broker(
        data_dir,
        flags=[
            *("--namesrv", namesrv_addr, "--listen", broker_addr, "--broker-name", broker_name),
            *flags,
        ],
    )
    children.append(broker)
    _, port = broker_addr.rsplit(":", 1)
    wait_until_listening("127.0.0.1", int(port), process=broker, timeout_s=READY_TIMEOUT_S)
    wait_until_registered(
        namesrv_addr, broker_name, process=broker, timeout_s=READY_TIMEOUT_S, ca_path=ca_path
    )


def _start_slaves(
    data_dir: pathlib.Path,
    children: list[subprocess.Popen[bytes]],
    group: _Group,
    *,
    count: int,
    master_ha: str,
) -> list[str]:
    """Start ``count`` SLAVE brokers (ids 1..count) of ``master_ha``, appending each to
    ``children`` as soon as it runs; returns their gRPC endpoints once all listen."""
    namesrv_addr, broker_name = group
    endpoints = []
    for broker_id in range(1, count + 1):
        port = free_port()
        slave = _start_broker(
            data_dir,
            name=f"slave-{broker_id}",
            flags=[
                *("--namesrv", namesrv_addr, "--broker-name", broker_name),
                *("--listen", f"127.0.0.1:{port}", "--broker-id", str(broker_id)),
                *("--broker-role", "SLAVE", "--master-ha", master_ha, "--workers", "0"),
                *("--ha-listen", f"127.0.0.1:{free_port()}"),
                *("--remoting-listen", f"127.0.0.1:{free_port()}"),
            ],
        )
        children.append(slave)
        wait_until_listening("127.0.0.1", port, process=slave, timeout_s=READY_TIMEOUT_S)
        endpoints.append(f"127.0.0.1:{port}")
    return endpoints


def _group_line(ends: DevEndpoints) -> str:
    slaves = ", ".join(
        f"slave {i} {addr} (data in {store})"
        for i, (addr, store) in enumerate(zip(ends.slaves, ends.slave_data_dirs, strict=True), 1)
    )
    return f"ariane dev: {ends.broker_role} {ends.broker} (HA {ends.master_ha}); {slaves}"


def run_dev_cluster(
    data_dir: pathlib.Path,
    *,
    namesrv_port: int,
    broker_port: int,
    workers: int | None = None,
    slaves: int = 0,
    broker_role: str = "",
    inner: tuple[str, str] | None = None,
    secure: bool = False,
) -> int:
    """The ``ariane dev`` command: start, print endpoints, wait for Ctrl-C/SIGTERM, stop."""
    stop = threading.Event()
    previous = signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        with dev_cluster(
            data_dir,
            namesrv_port=namesrv_port,
            broker_port=broker_port,
            workers=workers,
            slaves=slaves,
            broker_role=broker_role,
            inner=inner,
            secure=secure,
        ) as ends:
            print(json.dumps(dataclasses.asdict(ends)), flush=True)
            print(
                f"ariane dev: name server {ends.namesrv} (clients use this; classic Remoting"
                f" clients and mqadmin too: -n {ends.namesrv_remoting}), broker {ends.broker}"
                f" (classic protocol {ends.broker_remoting}),"
                f" data in {ends.data_dir}; metrics at {ends.namesrv_metrics} and"
                f" {ends.broker_metrics}; Ctrl-C stops both",
                file=sys.stderr,
                flush=True,
            )
            if ends.slaves:
                print(_group_line(ends), file=sys.stderr, flush=True)
            if secure:
                print(
                    f"ariane dev: TLS enforcing on every port (CA {ends.ca_path}), ACL on;"
                    f" Super user in {ends.credentials_path}; e.g. ariane admin --tls --ca-file"
                    f" {ends.ca_path} --access-key ... --secret-key ... --endpoints {ends.namesrv}",
                    file=sys.stderr,
                    flush=True,
                )
            elif inner is not None:
                print(
                    f"ariane dev: inner credential {inner[0]} (secret in {data_dir}/broker.toml)",
                    file=sys.stderr,
                    flush=True,
                )
            with contextlib.suppress(KeyboardInterrupt):
                while not stop.wait(timeout=1.0):
                    pass
    finally:
        signal.signal(signal.SIGTERM, previous)
    return 0
