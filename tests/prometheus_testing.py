"""Helpers for tests that run Debian's ``prometheus`` and ``promtool`` (fetched on first use by
``tests/prometheus/install.sh`` into ``~/.cache/ariane``; nothing is installed system-wide):
promtool's checks, and a real Prometheus process scraping given targets.

Debian's ``prometheus`` is built without Kubernetes service discovery (its packaging patches
``kubernetes_sd_configs`` out), so tests that discover pods through an apiserver run upstream
Prometheus built from the Go module proxy with only that discovery compiled in
(``k8s_sd_prometheus``, ``tests/prometheus/build-k8s-sd.sh``, cached the same way)."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import pathlib
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from typing import Any

from ariane import dev

INSTALL = pathlib.Path(__file__).parent / "prometheus" / "install.sh"
INSTALL_TIMEOUT_S = 600.0
"""Longest the first download and unpacking of the package may take."""
BUILD_K8S_SD = pathlib.Path(__file__).parent / "prometheus" / "build-k8s-sd.sh"
BUILD_TIMEOUT_S = 1200.0
"""Longest the first build of Prometheus with Kubernetes discovery may take (cold Go caches)."""


@functools.cache
def bin_dir() -> pathlib.Path:
    """The directory holding ``prometheus`` and ``promtool`` (installed on first use)."""
    out = subprocess.run(
        ["sh", str(INSTALL)], capture_output=True, text=True, check=True, timeout=INSTALL_TIMEOUT_S
    )
    return pathlib.Path(out.stdout.strip())


@functools.cache
def k8s_sd_prometheus() -> pathlib.Path:
    """Upstream ``prometheus`` with ``kubernetes_sd_configs`` (built on first use).

    Raises:
        subprocess.CalledProcessError: the build failed (no Go, module proxy unreachable).
    """
    out = subprocess.run(
        ["sh", str(BUILD_K8S_SD)], capture_output=True, text=True, check=True,
        timeout=BUILD_TIMEOUT_S,
    )  # fmt: skip
    return pathlib.Path(out.stdout.strip()) / "prometheus"


def promtool() -> str:
    """The promtool binary."""
    return str(bin_dir() / "promtool")


def check_rules(tmp_path: pathlib.Path, groups: list[dict[str, object]]) -> None:
    """``promtool check rules`` on a rule file holding ``groups``; fails the test if it refuses."""
    path = tmp_path / "rules.yaml"
    path.write_text(json.dumps({"groups": groups}))  # JSON is YAML
    done = subprocess.run(
        [promtool(), "check", "rules", str(path)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stdout + done.stderr


START_TIMEOUT_S = 30.0
"""Longest wait for Prometheus to answer ``/-/ready``."""


@dataclasses.dataclass(frozen=True)
class Target:
    """A ``/metrics`` endpoint and the target labels Prometheus adds to its series (the ones
    the operator's ServiceMonitor copies from the Services)."""

    address: str
    labels: dict[str, str]


@contextlib.contextmanager
def prometheus(
    tmp: pathlib.Path,
    targets: list[Target],
    rule_groups: list[dict[str, Any]],
    *,
    interval: str = "1s",
    scrape_configs: list[dict[str, Any]] | None = None,
    binary: pathlib.Path | None = None,
) -> Iterator[str]:
    """A real Prometheus scraping ``targets`` and evaluating ``rule_groups`` every ``interval``,
    its TSDB under ``tmp``, on a free loopback port; yields its base URL and stops it by PID.

    ``scrape_configs`` (e.g. ``kubernetes_sd_configs`` jobs) are added after the static job of
    ``targets`` (left out when ``targets`` is empty); their own intervals win over ``interval``.
    ``binary``: another ``prometheus`` than Debian's (e.g. ``k8s_sd_prometheus()``).
    """
    static = [{"job_name": "ariane", "static_configs": [
        {"targets": [t.address], "labels": t.labels} for t in targets
    ]}] if targets else []  # fmt: skip
    rules = tmp / "rules.yaml"
    rules.write_text(json.dumps({"groups": rule_groups}))
    config = tmp / "prometheus.yml"
    config.write_text(json.dumps({
        "global": {"scrape_interval": interval, "scrape_timeout": interval,
                   "evaluation_interval": interval},
        "rule_files": [str(rules)],
        "scrape_configs": [*static, *(scrape_configs or [])],
    }))  # fmt: skip
    port = dev.free_port()
    with (tmp / "prometheus.log").open("ab") as log:
        proc = subprocess.Popen(
            [str(binary or bin_dir() / "prometheus"), f"--config.file={config}",
             f"--storage.tsdb.path={tmp / 'tsdb'}", f"--web.listen-address=127.0.0.1:{port}"],
            stdout=log, stderr=log,
        )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while not _ready(url):
            assert proc.poll() is None, (tmp / "prometheus.log").read_text()[-2000:]
            assert time.monotonic() < deadline, "prometheus did not get ready in time"
            time.sleep(0.1)
        yield url
    finally:
        assert dev.stop_process(proc) == 0, "prometheus exit status"


def _ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/-/ready", timeout=2) as answer:
            return bool(answer.status == 200)
    except OSError:
        return False


def api(url: str, path: str, **params: str) -> Any:
    """GET ``path`` of Prometheus' HTTP API and return its ``data`` (asserting success)."""
    query = urllib.parse.urlencode(params)
    with urllib.request.urlopen(f"{url}/api/v1/{path}?{query}", timeout=5) as answer:
        body = json.loads(answer.read())
    assert body["status"] == "success", body
    return body["data"]
