"""The official classic Java client (``rocketmq-client`` 5.3.3, Remoting) as a test driver.

``build`` fetches the client from Maven Central and compiles ``classic_java/ClassicDriver.java``
against it (``java/fetch.sh``, cached in ``~/.cache/ariane`` by a stamp); ``ClassicJava`` runs
the driver's scenarios in their own JVMs against a name server, each printing one JSON event per
line. Client logs and BROADCASTING offsets go to the test's directory, not under ``$HOME``.
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess

from conformance import polyglot

HERE = pathlib.Path(__file__).resolve().parent
JAVA_ENV = {"PATH": "/usr/bin:/bin"}
"""The driver JVM's whole environment."""


class ClassicJava:
    """The built classic driver: ``run`` one scenario against the cluster's name server.

    Args:
        classpath: the client's jars and the compiled driver.
        namesrv: ``HOST:PORT`` of the name server every scenario starts from.
        logs: where the client logs and each run's stderr go.
        properties: extra ``-D`` system properties of every JVM (client tunables).
    """

    def __init__(
        self,
        classpath: str,
        namesrv: str,
        logs: pathlib.Path,
        properties: dict[str, str] | None = None,
    ) -> None:
        self.command = (
            "java",
            f"-Drocketmq.client.localOffsetStoreDir={logs / 'offsets'}",
            f"-Drocketmq.client.logRoot={logs}",
            *(f"-D{key}={value}" for key, value in (properties or {}).items()),
            *("-cp", classpath, "ClassicDriver"),
        )
        self.namesrv = namesrv
        self._logs = logs
        self._runs = 0

    def start(self, scenario: str, *args: str) -> subprocess.Popen[str]:
        """Start a scenario in the background (its stderr in the log directory)."""
        self._runs += 1
        with (self._logs / f"{self._runs:02d}-{scenario}.log").open("w") as log:
            return subprocess.Popen(  # the child keeps its own copy of the log's descriptor
                [*self.command, scenario, "--namesrv", self.namesrv, *args],
                stdout=subprocess.PIPE,
                stderr=log,
                text=True,
                env=JAVA_ENV,
            )

    def finish(self, proc: subprocess.Popen[str], timeout_s: float = 180) -> polyglot.Outcome:
        """Wait for a started scenario; raises if it crashed."""
        out, _ = proc.communicate(timeout=timeout_s)
        events = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
        outcome = polyglot.Outcome(proc.returncode, events, "")
        assert proc.returncode in (0, 3), f"classic driver failed ({proc.returncode}): {events}"
        return outcome

    def run(self, scenario: str, *args: str) -> polyglot.Outcome:
        """Run a scenario to its end."""
        return self.finish(self.start(scenario, *args))


def build() -> str:
    """Fetch and compile the driver (a no-op when the cache's stamp matches); its class path."""
    env = {
        **os.environ,
        "FETCH_PROJECT_DIR": str(HERE / "classic_java"),
        "FETCH_DRIVER": "ClassicDriver",
        "FETCH_CACHE_NAME": "classic-java-client",
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
