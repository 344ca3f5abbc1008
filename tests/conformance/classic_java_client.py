"""The one classic Java driver: the official classic Java client ``rocketmq-client`` 5.3.3
(Remoting) and mqadmin's library ``rocketmq-tools`` 5.3.3, unmodified, as a test driver.

``build`` fetches both from Maven Central and compiles ``classic_java/`` (``ClassicDriver.java``,
which hands the admin scenarios to ``ClassicAdmin.java``) against them (``java/fetch.sh``, cached
in ``~/.cache/ariane`` by a stamp); ``ClassicJava`` runs the driver's scenarios, each in its own
JVM, against a name server, each printing one JSON event per line, and runs the official
``mqadmin`` main class (``org.apache.rocketmq.tools.command.MQAdminStartup``) as
``distribution/bin/mqadmin`` does. Client logs and BROADCASTING offsets go to the test's
directory, not under ``$HOME``.

Invariant: every JVM started here is bounded (``RUN_TIMEOUT_S`` or the caller's timeout), gets
only ``JAVA_ENV`` as its environment and ``JAVA_PROPERTIES`` and the driver's client timeout
(``CLIENT_TIMEOUT_S``, stretched on a loaded machine) among its system properties.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import os
import pathlib
import subprocess
from collections.abc import Mapping

from e2e.testenv import processes

import jvm_testing
from conformance import polyglot

HERE = pathlib.Path(__file__).resolve().parent
PROJECT = HERE / "classic_java"
"""The driver project: ``pom.xml`` (the pinned client and tools), ``ClassicDriver.java``,
``ClassicAdmin.java``."""
JAVA_ENV = {"PATH": "/usr/bin:/bin"}
"""The driver JVM's whole environment."""
JAVA_PROPERTIES = {"java.net.preferIPv4Stack": "true"}
"""System properties of every driver JVM. The client resolves its IP in every ``ClientConfig``
(``NetworkUtil.getLocalAddress``: it lists the network interfaces, then asks each for its flags)
and dies with ``NullPointerException: ... "localHost" is null`` when one vanished in between;
the real test node adds and deletes a veth per pod on this machine. With the IPv4 stack only,
the JVM lists only interfaces with an IPv4 address, which those veths never have (their bridge
holds the node's); the tests reach the servers on 127.0.0.1 (``test_classic_java_host.py``)."""
CLIENT_TIMEOUT_S = 15.0
"""The driver's client timeouts (a send's whole budget, one call's) on an idle machine; every
driver JVM gets ``processes.loaded_timeout_s`` of it as ``-Ddriver.timeoutMs``: a cold JVM
sharing the 2-core machine with ~20 runnable tasks took longer than 15 s for its first route
fetch and send ("sendDefaultImpl call timeout")."""
RUN_TIMEOUT_S = 180.0
"""Longest run of one scenario or mqadmin command."""
MQADMIN_MAIN = "org.apache.rocketmq.tools.command.MQAdminStartup"
TRAINING = (MQADMIN_MAIN, "topicList", "-n", "127.0.0.1:1")
"""The run that trains the class path's class-data-sharing archive (``jvm_testing.jvm_flags``):
mqadmin's commands and the client's connection, retry and error classes (nothing listens on
port 1; it ends in seconds)."""
_RUNS = itertools.count(1)
"""Numbers the runs' stderr files."""


class DriverRun(subprocess.Popen[str]):
    """A started scenario's JVM; ``log`` is the file that gets its stderr."""

    log: pathlib.Path


@dataclasses.dataclass(frozen=True, slots=True)
class ClassicJava:
    """The built classic driver, bound to one name server.

    Args:
        classpath: the client's and tools' jars and the compiled driver (``build()``).
        namesrv: ``HOST:PORT`` of the name server every scenario and mqadmin command starts
            from (``on`` gives a copy bound to another one).
        logs: where the client logs, BROADCASTING offsets and each run's stderr go.
        properties: extra ``-D`` system properties of every driver JVM (client tunables).
    """

    classpath: str
    namesrv: str
    logs: pathlib.Path
    properties: Mapping[str, str] = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:
        self.logs.mkdir(parents=True, exist_ok=True)

    def on(self, namesrv: str) -> ClassicJava:
        """The same driver bound to another name server (``HOST:PORT``)."""
        return dataclasses.replace(self, namesrv=namesrv)

    def java(self, main: str, *jvm_args: str) -> list[str]:
        """The ``java`` argv prefix that runs class ``main`` with this driver's class path (and
        ``jvm_testing.jvm_flags``, its class-data-sharing archive built on first use)."""
        timeout_ms = round(processes.loaded_timeout_s(CLIENT_TIMEOUT_S) * 1000)
        return [
            "java",
            *jvm_testing.jvm_flags(self.classpath, TRAINING),
            f"-Drocketmq.client.localOffsetStoreDir={self.logs / 'offsets'}",
            f"-Drocketmq.client.logRoot={self.logs}",
            f"-Ddriver.timeoutMs={timeout_ms}",
            *(f"-D{key}={value}" for key, value in {**JAVA_PROPERTIES, **self.properties}.items()),
            *jvm_args,
            *("-cp", self.classpath, main),
        ]

    @property
    def command(self) -> tuple[str, ...]:
        """The argv prefix of a driver scenario (``SCENARIO --namesrv ... ARGS`` follow)."""
        return tuple(self.java("ClassicDriver"))

    def start(self, scenario: str, *args: str, jvm_args: tuple[str, ...] = ()) -> DriverRun:
        """Start a scenario in the background (its stderr in a numbered file under ``logs``)."""
        path = self.logs / f"{next(_RUNS):02d}-{scenario}.log"
        with path.open("w") as log:
            run = DriverRun(  # the child keeps its own copy of the log's descriptor
                [
                    *self.java("ClassicDriver", *jvm_args),
                    scenario,
                    "--namesrv",
                    self.namesrv,
                    *args,
                ],
                stdout=subprocess.PIPE,
                stderr=log,
                text=True,
                env=JAVA_ENV,
            )
        run.log = path
        return run

    def outcome(self, run: DriverRun, timeout_s: float = RUN_TIMEOUT_S) -> polyglot.Outcome:
        """Wait for a started scenario: its exit code, JSON events and the tail of its stderr."""
        out, _ = run.communicate(timeout=timeout_s)
        events = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
        return polyglot.Outcome(run.returncode, events, run.log.read_text()[-3000:])

    def finish(self, run: DriverRun, timeout_s: float = RUN_TIMEOUT_S) -> polyglot.Outcome:
        """Wait for a started scenario; raises if it crashed (an exit code other than 0 or 3)."""
        outcome = self.outcome(run, timeout_s)
        assert outcome.code in (0, 3), f"classic driver failed ({outcome.code}): {outcome.events}"
        return outcome

    def run(self, scenario: str, *args: str) -> polyglot.Outcome:
        """Run a scenario to its end; raises if it crashed."""
        return self.finish(self.start(scenario, *args))

    def attempt(
        self, scenario: str, *args: str, jvm_args: tuple[str, ...] = ()
    ) -> polyglot.Outcome:
        """Run a scenario to its end, whatever its exit code (the admin scenarios exit 4 with
        an ``error`` event when the server answers an error code)."""
        return self.outcome(self.start(scenario, *args, jvm_args=jvm_args))

    def mqadmin(self, command: str, *args: str) -> str:
        """Run ``mqadmin COMMAND ARGS -n NAMESRV``; its stdout and stderr, joined.

        mqadmin exits 0 even when the command failed (it prints the exception), so callers
        assert on the text, including the absence of ``Exception``.
        """
        done = subprocess.run(
            [*self.java(MQADMIN_MAIN), command, *args, "-n", self.namesrv],
            capture_output=True,
            text=True,
            timeout=RUN_TIMEOUT_S,
            check=False,
            env=JAVA_ENV,
        )
        return done.stdout + done.stderr


def build() -> str:
    """Fetch and compile the driver (a no-op when the cache's stamp matches); its class path."""
    env = {
        **os.environ,
        "FETCH_PROJECT_DIR": str(PROJECT),
        "FETCH_DRIVER": "ClassicDriver",
        "FETCH_CACHE_NAME": "classic-client",
    }
    built = subprocess.run(
        ["bash", str(HERE / "java" / "fetch.sh")],
        capture_output=True,
        text=True,
        timeout=polyglot.FETCH_TIMEOUT_S,
        check=True,
        env=env,
    )
    return built.stdout.strip().splitlines()[-1]
