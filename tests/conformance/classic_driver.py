"""Runs ``classic/ClassicDriver.java`` (the official classic Java client ``rocketmq-client`` and
``rocketmq-tools`` 5.3.3, unmodified, fetched by ``classic/fetch.sh`` into ``~/.cache/ariane``).

``build`` fetches and compiles once (cached by a stamp); ``ClassicJava.run(scenario, ...)``
runs one scenario in its own JVM and returns its exit code and JSON events. Scenarios live in
``ClassicDriver.java`` (``SCENARIOS``); add producer and consumer scenarios there.
``ClassicJava.mqadmin(command, ...)`` runs the official ``mqadmin`` main class
(``org.apache.rocketmq.tools.command.MQAdminStartup``, from the same fetched ``rocketmq-tools``)
as ``distribution/bin/mqadmin`` does and returns what it printed.
"""

from __future__ import annotations

import dataclasses
import json
import pathlib
import subprocess
from typing import Any

from conformance import polyglot

HERE = pathlib.Path(__file__).resolve().parent
RUN_TIMEOUT_S = 120.0
MQADMIN_MAIN = "org.apache.rocketmq.tools.command.MQAdminStartup"


@dataclasses.dataclass(frozen=True, slots=True)
class ClassicJava:
    """A compiled classic driver: its class path and the directory for its logs."""

    classpath: str
    log_dir: pathlib.Path

    def run(
        self, scenario: str, *args: str, namesrv: str, jvm_args: tuple[str, ...] = ()
    ) -> tuple[int, list[dict[str, Any]], str]:
        """Run ``ClassicDriver SCENARIO ARGS --namesrv NAMESRV``; (exit code, events, stderr)."""
        done = subprocess.run(
            [
                "java",
                f"-Drocketmq.client.logRoot={self.log_dir}",
                *jvm_args,
                "-cp",
                self.classpath,
                "ClassicDriver",
                scenario,
                *args,
                "--namesrv",
                namesrv,
            ],
            capture_output=True,
            text=True,
            timeout=RUN_TIMEOUT_S,
            check=False,
        )
        events = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
        return done.returncode, events, done.stderr[-3000:]

    def mqadmin(self, command: str, *args: str, namesrv: str) -> str:
        """Run ``mqadmin COMMAND ARGS -n NAMESRV``; its stdout and stderr, joined.

        mqadmin exits 0 even when the command failed (it prints the exception), so callers
        assert on the text, including the absence of ``Exception``.
        """
        done = subprocess.run(
            [
                "java",
                f"-Drocketmq.client.logRoot={self.log_dir}",
                "-cp",
                self.classpath,
                MQADMIN_MAIN,
                command,
                *args,
                "-n",
                namesrv,
            ],
            capture_output=True,
            text=True,
            timeout=RUN_TIMEOUT_S,
            check=False,
        )
        return done.stdout + done.stderr


def build(log_dir: pathlib.Path) -> ClassicJava:
    """Fetch the classic client and compile the driver (cached); logs go to ``log_dir``."""
    log_dir.mkdir(parents=True, exist_ok=True)
    return ClassicJava(polyglot.script_output(HERE / "classic" / "fetch.sh"), log_dir)
