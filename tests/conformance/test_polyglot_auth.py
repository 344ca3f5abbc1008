"""ACL 2.0 over TLS with the official Java v5 (5.0.8), Go v5 (v5.1.3) and Node v5 (1.0.8) clients
and the classic Go client (Remoting; the pseudo-version v2.1.3-0.20251226070945-2173d070fd1b of its
unreleased master, the first with TLS), unmodified, against a real ``ariane namesrv`` +
``ariane broker`` pair with authentication and authorization on (``acl_cluster``), reached
through the name server as a user's application does. Each client signs as its own API takes
credentials (security.md §8.3): Java ``StaticSessionCredentialsProvider``, Go
``Config.Credentials``, Node ``sessionCredentials``, classic Go ``WithCredentials``. Each test
makes its own users, topics and groups; each client is one parameter of the module's tests, and
its options are built in one place (``Driver.options``).

Transport (TLS + ACL is the production configuration, so there is no plaintext rerun):

Every client runs against one cluster with TLS **enforcing** on every port of the name server
and the broker, so a client that did not speak TLS could not pass a single test (each test fails
against a plaintext-only cluster: the TLS client's handshake meets a plaintext server; and a
plaintext client meets closed connections here, which ``test_classic_go_without_tls_is_refused``
shows). The switches:

* Java ``enableSsl(true)`` and Go v5 ``EnableSsl = true`` trust any certificate: they prove the
  wire, not verification.
* Node ``sslEnabled: true`` verifies chain and host name with grpc-js's default roots, pointed at
  the cluster's CA by ``GRPC_DEFAULT_SSL_ROOTS_FILE_PATH`` (grpc-js ``tls-helpers`` reads it;
  checked here).
* Classic Go ``producer/consumer.WithTls(true)`` (apache/rocketmq-client-go#951). Its last
  release, v2.1.2, has no TLS at all, so the driver pins the module proxy's pseudo-version of
  the unreleased master; ``test_classic_go.py`` passes unchanged on it (its one source change:
  ``UnknowState`` was renamed ``UnkonwnState``). The client dials with
  ``tls.Config{InsecureSkipVerify: true}`` (``internal/remote/tcp_conn.go``) and no client
  certificate, as RocketMQ's classic clients trust all by default: it too proves the wire, not
  verification. Ariane's own inner traffic (broker → name server, HA) still verifies its peers.

What each client shows of a refusal, read from its sources:

* Node turns the status into ``UnauthorizedException`` / ``ForbiddenException`` with ``code``.
* Classic Go answers a send with ``CODE: 16, DESC: <remark>`` and logs its consumer's refused
  heartbeat with ``responseCode=16`` and the remark.
* Go v5 never surfaces it: ``Start`` waits without bound for the broker's settings over
  Telemetry (``client.go`` "wait for sync settings finish"), and a refused Telemetry is answered
  with a status and no settings (as RocketMQ's proxy answers it: ``GrpcMessagingApplication``
  writes ``TelemetryCommand{status}``). The client logs each refused heartbeat ("failed to send
  heartbeat, code=UNAUTHORIZED, status message=[…]"): the test reads that log, and the driver
  bounds ``Start`` with its deadline.
* Java v5 5.0.8 neither: ``ClientSessionImpl.onNext`` logs a status-only TelemetryCommand as
  "unrecognized command" and the start-up fails when its settings future times out
  (``IllegalStateException``, no ``ClientException`` in the chain), and this client's logging is
  a no-op logger here. The test reads the refusal in the broker's audit line. Against RocketMQ's
  proxy these two clients would see 40100/40300 earlier, on QueryRoute (Topic: Pub or Sub);
  Ariane's name server answers QueryRoute without ACL (it holds no users), so the broker's
  Telemetry is the first call that meets the credentials.
"""

from __future__ import annotations

import dataclasses
import json
import os
import pathlib
import subprocess
import time
from collections.abc import Iterator
from typing import Any

import pytest

from conformance import acl_cluster, polyglot
from conformance.acl_cluster import AclCluster

pytestmark = pytest.mark.slow

HERE = pathlib.Path(__file__).resolve().parent
CLIENTS = ("java", "go", "node", "go-classic")
COUNT = 3
"""Messages per round trip."""
ROUND_TRIP_DEADLINE_S = 60
REFUSAL_DEADLINE_S = 10
"""How long a refused client may try: Go v5's ``Start`` and a classic Go consumer never give
up by themselves."""
RUN_TIMEOUT_S = 150.0
LOG_DEADLINE_S = 10.0
PLAINTEXT_DEADLINE_S = 5
"""How long classic Go without TLS may try: its first dial already meets the closed connection
(it would keep retrying its route lookup until the deadline)."""


@dataclasses.dataclass(frozen=True, slots=True)
class Outcome:
    """One driver run: exit code, JSON events and the client's own log (stderr, log files)."""

    code: int
    events: list[dict[str, Any]]
    log: str

    def of(self, event: str) -> list[dict[str, Any]]:
        """The events named ``event``, in print order."""
        return [e for e in self.events if e["event"] == event]

    def error(self) -> dict[str, Any]:
        """The run's ``error`` event (fails when there is none)."""
        found = self.of("error")
        assert found, f"no error event (exit {self.code}): {self.events}\n{self.log[-2000:]}"
        return found[0]


def _events(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


class Driver:
    """One official client's driver, run as the ``round_trip`` every test uses: send ``COUNT``
    messages to a topic, then consume them in a group, signed as a user. ``tls=False`` leaves
    the client's TLS switch off (to show that the enforcing cluster refuses it)."""

    def __init__(
        self, name: str, cluster: AclCluster, logs: pathlib.Path, *, tls: bool = True
    ) -> None:
        self.name = name
        self.cluster = cluster
        self.logs = logs
        self.tls = tls
        self._runs = 0
        if name in ("java", "go"):
            self._built = polyglot.build(name, logs)
        elif name == "node":
            self._node = polyglot.node_driver()
        else:
            self._classic = polyglot.script_output(HERE / "go_classic" / "build.sh")

    def options(self, credentials: tuple[str, str]) -> list[str]:
        """The client's connection options: credentials, and its TLS switch when the cluster
        enforces TLS and ``tls`` is on (Java ``enableSsl``, Go ``EnableSsl``, Node
        ``sslEnabled``, classic Go ``WithTls``)."""
        signed = ["--access-key", credentials[0], "--secret-key", credentials[1]]
        if not self.tls or self.cluster.tls_mode != "enforcing":
            return signed
        switch = {"java": ["--tls", "true"], "go": ["--tls"], "node": ["--tls"]}
        return [*signed, *switch.get(self.name, ["--tls"])]

    def round_trip(
        self, topic: str, group: str, credentials: tuple[str, str], *, deadline_s: int
    ) -> Outcome:
        """Send ``COUNT`` messages to ``topic`` and consume them in ``group``; the outcome
        (exit 0 done, 3 deadline, 2 a client error)."""
        self._runs += 1
        run_dir = self.logs / f"{self._runs:02d}"
        run_dir.mkdir()
        if self.name == "go-classic":
            return self._classic_round_trip(topic, group, credentials, deadline_s, run_dir)
        if self.name == "node":
            done = subprocess.run(
                ["node", str(self._node), self.cluster.namesrv, topic, group, str(COUNT),
                 *self.options(credentials)],
                capture_output=True, text=True, timeout=RUN_TIMEOUT_S, check=False,
                env={**os.environ, **self.cluster.client_env()},
            )  # fmt: skip
            assert done.returncode in (0, 2, 3), done.stderr[-3000:]
            return Outcome(done.returncode, _events(done.stdout), done.stderr)
        got = self._built.run(
            "send-consume", "--topic", topic, "--group", group, "--count", str(COUNT),
            "--deadline-s", str(deadline_s), *self.options(credentials),
            endpoints=self.cluster.namesrv, timeout_s=RUN_TIMEOUT_S, exit_codes=(0, 2, 3),
            env={"rocketmq.client.logRoot": str(run_dir)},
        )  # fmt: skip
        files = "".join(p.read_text(errors="replace") for p in sorted(run_dir.rglob("*.log")))
        return Outcome(got.code, got.events, got.stderr + files)

    def _classic_run(
        self, scenario: str, args: list[str], deadline_s: int, run_dir: pathlib.Path
    ) -> Outcome:
        """One classic Go scenario (its stdin stays open until it ends by itself)."""
        out, log = run_dir / f"{scenario}.out", run_dir / f"{scenario}.log"
        argv = [self._classic, scenario, "--endpoints", self.cluster.namesrv, *args]
        with out.open("w") as stdout, log.open("w") as stderr:
            process = subprocess.Popen(
                [*argv, "--deadline-s", str(deadline_s)],
                stdin=subprocess.PIPE, stdout=stdout, stderr=stderr,
            )  # fmt: skip
            try:
                process.wait(timeout=RUN_TIMEOUT_S)
            finally:
                assert process.stdin is not None
                process.stdin.close()
                if process.poll() is None:
                    process.kill()
                    process.wait()
        return Outcome(process.returncode, _events(out.read_text()), log.read_text())

    def _classic_round_trip(
        self,
        topic: str,
        group: str,
        credentials: tuple[str, str],
        deadline_s: int,
        run_dir: pathlib.Path,
    ) -> Outcome:
        sent = self._classic_run(
            "send", ["--topic", topic, "--count", str(COUNT), *self.options(credentials)],
            deadline_s, run_dir,
        )  # fmt: skip
        if sent.code != 0:
            return sent
        pushed = self._classic_run(
            "push", ["--topic", topic, "--group", group, "--count", str(COUNT),
                     *self.options(credentials)],
            deadline_s, run_dir,
        )  # fmt: skip
        return Outcome(pushed.code, sent.events + pushed.events, sent.log + pushed.log)


@pytest.fixture(scope="module")
def tls_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AclCluster]:
    """The ACL name server + broker with TLS enforcing on every port; stopped by PID after."""
    with acl_cluster.running(tmp_path_factory.mktemp("acl-tls"), "enforcing") as made:
        yield made


@pytest.fixture(scope="module", params=CLIENTS)
def driver(
    request: pytest.FixtureRequest,
    tls_cluster: AclCluster,
    tmp_path_factory: pytest.TempPathFactory,
) -> Driver:
    """One client's driver, fetched and built (cached by a stamp), its logs in a temp dir, on
    the enforcing cluster."""
    name: str = request.param
    return Driver(name, tls_cluster, tmp_path_factory.mktemp(f"{name}-logs"))


@pytest.fixture
def cluster(driver: Driver) -> AclCluster:
    """The cluster of this test's client."""
    return driver.cluster


def _names(driver: Driver, test: str) -> tuple[str, str, str]:
    """This test's user, topic and group for ``driver`` (each test has its own)."""
    base = f"{driver.name}-{test}"
    return f"u-{base}", f"t-{base}", f"g-{base}"


def _wait_logged(cluster: AclCluster, text: str) -> None:
    """Poll the broker's log until it holds ``text`` (an audit line), with a deadline."""
    deadline = time.monotonic() + LOG_DEADLINE_S
    while text not in cluster.log.read_text(errors="replace"):
        assert time.monotonic() < deadline, f"broker log never said {text!r}"
        time.sleep(0.1)  # polling the broker's log file, with a deadline


def test_user_with_pub_and_sub_sends_and_receives(cluster: AclCluster, driver: Driver) -> None:
    """A Normal user with Pub,Sub on its topic and Sub on its group sends three messages and
    consumes each of them."""
    name, topic, group = _names(driver, "ok")
    user = cluster.provision(topic, name, (f"Topic:{topic}", "Pub,Sub"), (f"Group:{group}", "Sub"))
    got = driver.round_trip(topic, group, user, deadline_s=ROUND_TRIP_DEADLINE_S)
    assert got.code == 0, f"{got.events}\n{got.log[-3000:]}"
    sent = {e["message_id"] for e in got.of("sent")}
    assert len(sent) == COUNT
    assert {e["message_id"] for e in got.of("received")} == sent


def test_wrong_secret_is_refused_as_unauthenticated(cluster: AclCluster, driver: Driver) -> None:
    """The same round trip with a wrong secret sends nothing: the broker refuses the user as
    unauthenticated ("check signature failed.", 40100 / Remoting 16), as the client reports it
    (Node: UnauthorizedException 40100; classic Go: CODE 16; Go v5: its log's heartbeat
    code=UNAUTHORIZED) and the broker's audit line records it."""
    name, topic, group = _names(driver, "wrong")
    cluster.provision(topic, name, (f"Topic:{topic}", "Pub,Sub"), (f"Group:{group}", "Sub"))
    got = driver.round_trip(topic, group, (name, "not-the-secret"), deadline_s=REFUSAL_DEADLINE_S)
    assert got.code == 2 and not got.of("sent"), got.events
    reason = f"User:{name} check signature failed."
    error = got.error()
    if driver.name == "node":
        assert (error["type"], error["code"]) == ("UnauthorizedException", 40100), error
        assert reason in error["message"]
    elif driver.name == "go-classic":
        assert error["message"] == f"CODE: 16, DESC: {reason}", error
    elif driver.name == "go":
        assert f"code=UNAUTHORIZED, status message=[{reason}]" in got.log, got.log[-3000:]
    _wait_logged(cluster, f"User:{name} is authenticated failed ({reason})")


def test_user_without_sub_on_the_group_is_forbidden(cluster: AclCluster, driver: Driver) -> None:
    """A user with Pub,Sub on the topic but no Sub on the group sends, and its consumer is
    refused as forbidden naming the group (40300 / Remoting 16), receiving nothing."""
    name, topic, group = _names(driver, "nogroup")
    user = cluster.provision(topic, name, (f"Topic:{topic}", "Pub,Sub"))
    got = driver.round_trip(topic, group, user, deadline_s=REFUSAL_DEADLINE_S)
    assert len(got.of("sent")) == COUNT and not got.of("received"), got.events
    denial = f"User:{name} has no permission to access Group:{group}"
    if driver.name == "go-classic":
        assert got.code == 3, got.events  # its consumer retries until the deadline
        assert "responseCode=16" in got.log and denial in got.log, got.log[-3000:]
    else:
        assert got.code == 2, got.events
    if driver.name == "node":
        error = got.error()
        assert (error["type"], error["code"]) == ("ForbiddenException", 40300), error
        assert denial in error["message"]
    elif driver.name == "go":
        assert f"code=FORBIDDEN, status message=[{denial}" in got.log, got.log[-3000:]
    _wait_logged(cluster, denial)


def test_node_verifies_the_server_against_its_roots(
    tls_cluster: AclCluster, tmp_path: pathlib.Path
) -> None:
    """Node v5 with ``sslEnabled`` verifies the server: without
    ``GRPC_DEFAULT_SSL_ROOTS_FILE_PATH`` (grpc-js's default roots, which lack the cluster's CA)
    it sends nothing and fails with
    UNAVAILABLE on the untrusted chain; the round trips above pass only because that variable
    names the CA."""
    topic, group = "t-node-roots", "g-node-roots"
    user = tls_cluster.provision(topic, "u-node-roots", (f"Topic:{topic}", "Pub,Sub"))
    env = {k: v for k, v in os.environ.items() if k != "GRPC_DEFAULT_SSL_ROOTS_FILE_PATH"}
    done = subprocess.run(
        ["node", str(polyglot.node_driver()), tls_cluster.namesrv, topic, group, "1",
         "--access-key", user[0], "--secret-key", user[1], "--tls"],
        capture_output=True, text=True, timeout=RUN_TIMEOUT_S, check=False, env=env, cwd=tmp_path,
    )  # fmt: skip
    got = Outcome(done.returncode, _events(done.stdout), done.stderr)
    assert got.code == 2 and not got.of("sent"), got.events
    error = got.error()
    assert error["code"] == 14, error  # UNAVAILABLE: the handshake failed
    assert "self-signed certificate in certificate chain" in error["message"], error


def test_classic_go_without_tls_is_refused(tls_cluster: AclCluster, tmp_path: pathlib.Path) -> None:
    """Classic Go with its TLS switch off (plaintext, as v2.1.2 always dials) sends nothing to
    the enforcing cluster: the name server closes each plaintext connection, so the client never
    learns a route; the classic Go round trips above pass only because ``WithTls`` is on."""
    topic = "t-go-classic-plain"
    user = tls_cluster.provision(topic, "u-go-classic-plain", (f"Topic:{topic}", "Pub,Sub"))
    plain = Driver("go-classic", tls_cluster, tmp_path, tls=False)
    assert "--tls" not in plain.options(user)
    got = plain.round_trip(topic, "g-go-classic-plain", user, deadline_s=PLAINTEXT_DEADLINE_S)
    assert got.code in (2, 3) and not got.of("sent"), got.events
    closed = [line for line in got.log.splitlines() if "conn error, close connection" in line]
    assert any(tls_cluster.namesrv in line for line in closed), got.log[-3000:]
