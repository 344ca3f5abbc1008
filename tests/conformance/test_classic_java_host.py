"""The classic Java driver's JVMs on the shared test machine: its network interfaces come and
go, and its load stretches the driver's client timeouts.

The official classic client resolves its IP in every ``ClientConfig`` (the base of each producer,
consumer and admin): ``NetworkUtil`` lists the JVM's network interfaces, then asks each one for
its flags; an interface deleted in between makes that call throw, the client catches it, returns
a null address and dies with ``NullPointerException: ... "localHost" is null``. On the shared test
machine the real test node (``e2e/testenv/realnode.py``) adds and deletes a veth for every pod it
runs, so classic Java tests running meanwhile failed that way, more often under load (the window
between the listing and the probe grows). Those veths carry no IPv4 address (the bridge holds the
node's), so the driver's JVMs run with ``-Djava.net.preferIPv4Stack=true``
(``classic_java_client.JAVA_PROPERTIES``): the JVM then lists only interfaces with an IPv4 address
and never probes a pod's veth. The tests talk to 127.0.0.1 only.

The first test recreates the host in a private network namespace (``unshare --net``; needs
root, as the real node does): a stable interface with an IPv4 address like the machine's
``eth0``, and veth pairs without one added, brought up and deleted in a loop, as pods come and
go. The second checks the launcher's arguments: the client timeouts (15 s) were too short for a
cold JVM at a load of 20 on 2 cores ("sendDefaultImpl call timeout").

Own processes: no cluster (the scenario talks to no server).
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess

import pytest
from e2e.testenv import processes

from conformance import classic_java_client
from conformance.classic_java_client import ClassicJava

LIVE_PAIRS = 100
"""Veth pairs alive at any time: the JVM lists (and the client probes) about twice as many
interfaces, so a deletion often falls between the listing and a probe."""
CHURN_STEPS = 5_000
"""Most pairs the churn adds and deletes (bounded; it is stopped when the JVM is done)."""
BUILDS = 20
"""ClientConfigs the driver builds during the churn (each probes every listed interface; before
the fix about half of them died)."""
BUILD_DEADLINE_S = 45.0
"""The driver's deadline for them on an idle machine (stretched under load: one took over 90 s
at a load of 33 on 2 CPUs)."""
RUN_MARGIN_S = 60.0
"""The whole namespace run's bound beyond the driver's deadline (the pairs' setup, the churn's
end)."""

_NAMESPACE_SCRIPT = r"""
set -eu
ip link set lo up
ip link add eth0 type veth peer name eth0-peer
ip link set eth0 up
ip link set eth0-peer up
ip addr add 192.0.2.2/24 dev eth0
batch="$1"; shift
for i in $(seq 1 "$LIVE_PAIRS"); do
  printf 'link add c%d type veth peer name p%d\nlink set c%d up\nlink set p%d up\n' \
    "$i" "$i" "$i" "$i"
done > "$batch"
ip -batch "$batch" >/dev/null
for i in $(seq "$((LIVE_PAIRS + 1))" "$((LIVE_PAIRS + CHURN_STEPS))"); do
  printf 'link add c%d type veth peer name p%d\nlink set c%d up\nlink set p%d up\n' \
    "$i" "$i" "$i" "$i"
  printf 'link del c%d\n' "$((i - LIVE_PAIRS))"
done > "$batch"
ip -force -batch "$batch" >/dev/null 2>&1 &
churn=$!
set +e
"$@"
code=$?
kill "$churn" 2>/dev/null
wait "$churn" 2>/dev/null
exit "$code"
"""
"""Run in the namespace: ``eth0`` with 192.0.2.2 (TEST-NET-1) like the machine's, ``LIVE_PAIRS``
veth pairs without an IPv4 address (up, so they get IPv6 link-local ones, as a pod's host end
does), then the churn (one ``ip -batch`` process adding a pair and deleting the oldest, up to
``CHURN_STEPS`` times) while the driver command given as arguments runs; its exit code."""


def test_clients_are_built_while_veths_without_an_ipv4_address_come_and_go(
    tmp_path: pathlib.Path,
) -> None:
    """Proves the driver's JVM builds ``BUILDS`` classic clients, each with the machine's IPv4
    address as its client IP, while veth pairs without one are added and deleted beside it."""
    java = ClassicJava(classic_java_client.build(), "127.0.0.1:1", tmp_path / "java")
    deadline_s = processes.loaded_timeout_s(BUILD_DEADLINE_S)
    command = [*java.command, "client-ip", "--namesrv", java.namesrv, "--count", str(BUILDS)]
    command += ["--deadline-s", str(round(deadline_s))]
    done = subprocess.run(
        [
            *("unshare", "--net", "--", "bash", "-c", _NAMESPACE_SCRIPT, "namespace"),
            str(tmp_path / "churn.batch"),
            *("env", "-i", *(f"{k}={v}" for k, v in classic_java_client.JAVA_ENV.items())),
            *command,
        ],
        capture_output=True,
        text=True,
        timeout=deadline_s + RUN_MARGIN_S,
        check=False,
        env={
            **classic_java_client.JAVA_ENV,
            "LIVE_PAIRS": str(LIVE_PAIRS),
            "CHURN_STEPS": str(CHURN_STEPS),
        },
    )
    events = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert done.returncode == 0, f"{events} {done.stderr[-3000:]}"
    (built,) = events
    assert built["addresses"] == ["192.0.2.2"], built
    assert built["built"] == BUILDS, f"the driver's deadline passed first: {built}"


def test_the_launcher_stretches_the_client_timeouts_with_the_load_and_keeps_ipv4(
    monkeypatch: pytest.MonkeyPatch, tmp_path: pathlib.Path
) -> None:
    """Proves every driver JVM gets ``CLIENT_TIMEOUT_S`` as its client timeouts on an idle
    machine, ten times that at a load of 20 on 2 CPUs, and the IPv4 stack either way."""
    java = ClassicJava("classes", "127.0.0.1:1", tmp_path)
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    argvs = {}
    for load_1m in (0.5, 20.0):
        monkeypatch.setattr(os, "getloadavg", lambda load=load_1m: (load, load, load))
        argvs[load_1m] = java.java("ClassicDriver")
    assert "-Ddriver.timeoutMs=15000" in argvs[0.5]
    assert "-Ddriver.timeoutMs=150000" in argvs[20.0]
    assert all("-Djava.net.preferIPv4Stack=true" in argv for argv in argvs.values())
