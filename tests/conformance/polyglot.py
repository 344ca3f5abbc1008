"""Run the official Java and Go clients, unmodified, each in its own process, on a scenario.

Each client is fetched and built by its own script into ``~/.cache/ariane`` (or
``$ARIANE_CACHE``): ``java/fetch.sh VERSION`` (``rocketmq-client-java`` of each of
``JAVA_VERSIONS`` from Maven Central, the one ``Driver.java`` compiled with ``javac`` against
each: clients ``java-5.0.8`` and ``java-5.2.0``; plain ``java`` is the first) and
``go/build.sh`` (``github.com/apache/rocketmq-clients/golang/v5`` from the Go module proxy,
``main.go`` built with ``go``). Both scripts keep a stamp, so a warm run costs well under a
second. The drivers take the same arguments and print the same JSON events:

* ``sent`` (``i``, ``message_id``; Java also ``body`` and ``priority``), ``received`` /
  ``consumed`` (``message_id``, ``body``, ``tag``, ``keys``, ``group``, ``attempt``, ``n``,
  ``at_ms``, ``due_ms``, ``result``; Java 5.2.0 also ``priority`` when the message has one),
  ``checked`` (a transaction check-back), ``recalled``, ``done`` (``received``), ``error``
  (``message``; Java also ``type``, the exception's class), Java's ``step`` and, in a batch,
  ``end``.
* Exit codes: 0 done, 3 the deadline passed before the expected messages arrived, 2 a client
  error (its ``error`` event and stack on stderr).

Scenarios: ``send-consume`` (send ``count``, then a SimpleConsumer receives ``expect`` and keeps
receiving ``linger-s`` more to catch extras), ``push-redelivery`` (a PushConsumer fails each
message's first attempt), ``transaction`` (commit, rollback and unknown-then-checked-back),
``recall`` (Java only; two delayed messages, the first recalled), ``lite-push`` (Java 5.2.0's
LitePushConsumer: subscribe to a lite topic, send to it, consume; ``step`` events say how far it
got) and ``push-fail`` (Java only, never in a batch: send, then a PushConsumer fails every
delivery until ``count`` failed, lingers ``linger-s`` and the process ends with it open: a closing
Java PushConsumer waits for its long polls and would consume the retry). ``--priority`` (or
``--priorities P0,P1,..``: message i gets ``P[i % len(P)]``) and ``--lite-topic`` set 5.2.0's
message priority and lite topic; the Java 5.0.8 client lacks both (the driver's ``error`` event
then has ``type`` ``UnsupportedOperationException``). Java's ``--prefix B`` names bodies ``B-i``
(default ``m``) and ``--batch N`` caps a SimpleConsumer receive (default 16).

The Java driver also runs several scenarios in one JVM (``Client.run_batch``): a JVM start costs
seconds, and the scenarios' waits (check-backs, delays, redeliveries) then overlap.

Every client JVM the tests start (these drivers, the classic driver, ``mqadmin``) runs with
``jvm_testing.jvm_flags`` (C1 only, the serial collector, a class-data-sharing archive).
"""

from __future__ import annotations

import dataclasses
import fcntl
import json
import os
import pathlib
import re
import shutil
import subprocess
from collections.abc import Mapping
from typing import Any

import jvm_testing

HERE = pathlib.Path(__file__).resolve().parent

FETCH_TIMEOUT_S = 900
"""Longest cold fetch + build of one client (downloads and a Go build on a busy 2-core machine)."""

JAVA_VERSIONS = ("5.0.8", "5.2.0")
"""The official Java v5 client versions under test (``rocketmq-client-java``; the first is
``java/pom.xml``'s pin and plain ``java``'s): the oldest 5.0.x the tests have always run and the
newest on Maven Central (priority messages and lite topics)."""

JAVA_CLIENTS = tuple(f"java-{version}" for version in JAVA_VERSIONS)
CLIENTS = (*JAVA_CLIENTS, "go")
RESPONSE_CODE = re.compile(r"response-code=(\d+)")
"""Where a Java ``ClientException``'s text names the access point's status code."""
NODE_DIR = HERE / "node"
NPM_TIMEOUT_S = 600


@dataclasses.dataclass(frozen=True, slots=True)
class Outcome:
    """What a driver run printed: its exit code, events and the tail of its stderr."""

    code: int
    events: list[dict[str, Any]]
    stderr: str

    def of(self, event: str) -> list[dict[str, Any]]:
        """The events named ``event``, in print order."""
        return [e for e in self.events if e["event"] == event]

    def sent_ids(self) -> list[str]:
        """Message ids of the ``sent`` events, in send order."""
        return [e["message_id"] for e in self.of("sent")]

    def error(self) -> tuple[str, int | None]:
        """The ``error`` event's exception class and the status code its text names (``None``
        when it names none, e.g. an API the client version lacks).

        Raises:
            AssertionError: the run printed no ``error`` event.
        """
        errors = self.of("error")
        assert errors, f"no error event: {self.events}"
        found = RESPONSE_CODE.search(errors[0]["message"])
        return errors[0]["type"], int(found.group(1)) if found else None


@dataclasses.dataclass(frozen=True, slots=True)
class Client:
    """A built official client: the command that starts its driver.

    Args:
        name: ``java-<version>`` (``JAVA_CLIENTS``), ``java`` (the first of them) or ``go``.
        command: the argv prefix before the scenario.
        env: the environment of the driver process.
    """

    name: str
    command: tuple[str, ...]
    env: dict[str, str]

    @property
    def slug(self) -> str:
        """``name`` fit for topic and group names (no dots): ``java-508``, ``go``."""
        return self.name.replace(".", "")

    def run_batch(
        self,
        plan: Mapping[str, tuple[str, ...]],
        *,
        endpoints: str,
        timeout_s: float = 300,
    ) -> dict[str, Outcome]:
        """Run every ``plan`` entry (run name -> scenario and its arguments) at once in one Java
        driver process; each run's outcome has its own events and its ``end`` event's code (2
        when it printed none), and the process's stderr tail.

        Raises:
            AssertionError: not a Java client, an argument with a tab or newline, or the
                process failed as a whole (its stderr tail).
            subprocess.TimeoutExpired: the driver outlived ``timeout_s``.
        """
        assert self.name.startswith("java"), f"{self.name} has no batch mode"
        fields = [(run, *steps) for run, steps in plan.items()]
        assert not any(set(f) & {"\t", "\n"} for line in fields for f in line), plan
        done = subprocess.run(
            [*self.command, "batch", "--endpoints", endpoints],
            input="".join("\t".join(line) + "\n" for line in fields),
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
            env=self.env,
        )
        if done.returncode != 0:
            raise AssertionError(
                f"{self.name} batch failed ({done.returncode}): {done.stderr[-3000:]}"
            )
        events = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
        outcomes = {}
        for run in plan:
            mine = [e for e in events if e.get("run") == run]
            ends = [e["code"] for e in mine if e["event"] == "end"]
            outcomes[run] = Outcome(ends[0] if ends else 2, mine, done.stderr[-3000:])
        return outcomes

    def run(
        self,
        scenario: str,
        *args: str,
        endpoints: str,
        timeout_s: float = 180,
        exit_codes: tuple[int, ...] = (0, 3),
        env: dict[str, str] | None = None,
    ) -> Outcome:
        """Run one scenario against ``endpoints``; raises if the process crashed or hung.

        ``exit_codes`` are the outcomes the caller reads (2, a client error, when it expects a
        refusal); ``env`` is added to the client's environment.

        Raises:
            AssertionError: an exit code not in ``exit_codes``, with the stderr tail.
            subprocess.TimeoutExpired: the driver outlived ``timeout_s``.
        """
        done = subprocess.run(
            [*self.command, scenario, "--endpoints", endpoints, *args],
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
            env={**self.env, **(env or {})},
        )
        events = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
        if done.returncode not in exit_codes:
            raise AssertionError(
                f"{self.name} driver {scenario} {args} failed ({done.returncode}): "
                f"{done.stderr[-3000:]}"
            )
        return Outcome(done.returncode, events, done.stderr[-3000:])


def script_output(script: pathlib.Path, *args: str) -> str:
    """The last stdout line of a fetch/build script run with ``args`` (its product); progress
    goes to stderr."""
    done = subprocess.run(
        ["bash", str(script), *args],
        capture_output=True,
        text=True,
        timeout=FETCH_TIMEOUT_S,
        check=False,
    )
    if done.returncode != 0:
        raise AssertionError(f"{script} failed ({done.returncode}): {done.stderr[-3000:]}")
    return done.stdout.strip().splitlines()[-1]


def build(name: str, log_dir: pathlib.Path) -> Client:
    """Fetch and build the official ``name`` client (cached); its logs go to ``log_dir``."""
    log_dir.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    if name.startswith("java"):
        version = JAVA_VERSIONS[0] if name == "java" else name.removeprefix("java-")
        assert version in JAVA_VERSIONS, name
        classpath = script_output(HERE / "java" / "fetch.sh", version)
        flags = jvm_testing.jvm_flags(classpath)
        command = ("java", *flags, f"-Drocketmq.log.root={log_dir}", "-cp", classpath, "Driver")
        return Client(name, command, env)
    assert name == "go", name
    binary = script_output(HERE / "go" / "build.sh")
    env["rocketmq.client.logRoot"] = str(log_dir)
    return Client(name, (binary,), env)


def node_driver() -> pathlib.Path:
    """``node/driver.mjs`` with its pinned dependencies installed (``npm ci`` when missing; one
    install at a time: an flock on ``node_modules.lock`` beside it keeps parallel pytest workers
    off each other)."""
    npm = shutil.which("npm")
    assert npm is not None, "npm is required (Node 20 is part of this machine's toolchain)"
    with (NODE_DIR / "node_modules.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (NODE_DIR / "node_modules" / "rocketmq-client-nodejs").is_dir():
            subprocess.run(
                [npm, "ci", "--no-audit", "--no-fund"],
                cwd=NODE_DIR,
                check=True,
                timeout=NPM_TIMEOUT_S,
                capture_output=True,
            )
    return NODE_DIR / "driver.mjs"
