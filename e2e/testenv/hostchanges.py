"""What the real test node changes on the host, written down before it happens, and undone.

A ``Journal`` is a JSON file at a fixed path (``JOURNAL_PATH``, on /run: host changes do not
survive a reboot either). Before the node touches the host it records the state it will change:
the sysctls (``SYSCTLS``), the iptables and ip6tables tables (``iptables-save``), the names of the
ipsets (``ipset list -n``), the mount points, which of ``CREATED_PATHS`` exist, and which cgroups
exist under ``CGROUP_PARENTS``. While it runs it
adds the PIDs it starts (with their start time, so a recycled PID is never signalled) and the
bridge it creates. ``restore`` puts everything back and deletes the journal:

1. the recorded processes, by PID (SIGTERM, bounded wait, SIGKILL), then the containerd shims
   whose command line names this node's containerd socket (started by that containerd);
2. mounts made since (deepest first, lazily) under the node's work directory and /run/netns;
3. iptables and ip6tables, every table replaced by its recorded content (a table that was absent
   comes back empty with ACCEPT policies), then every ipset that was not there before (the
   NetworkPolicy agent's) destroyed (no rule refers to it any more);
4. the bridge (its routes go with it), then the sysctls;
5. paths of ``CREATED_PATHS`` that did not exist, and new empty cgroups, removed.

A run that dies without restoring (SIGKILL, power cut of the test process) leaves the journal
behind; the next ``realnode.start`` finds it and restores first (also ``python -m
e2e.testenv.hostchanges``). Every step is best effort and logged: one failure does not stop the
others.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import pathlib
import shutil
import signal
import subprocess
import time
from typing import Any

logger = logging.getLogger(__name__)

JOURNAL_PATH = pathlib.Path("/run/ariane-testenv/realnode.json")
"""Where the journal lives while a real node runs (and after a run that could not restore)."""
SYSCTLS = (
    "net.ipv4.ip_forward",
    "net.ipv6.conf.all.forwarding",
    "net.ipv4.conf.all.route_localnet",
    "net.bridge.bridge-nf-call-iptables",
    "vm.overcommit_memory",
    "vm.panic_on_oom",
    "kernel.panic",
    "kernel.panic_on_oops",
    "kernel.keys.root_maxkeys",
    "kernel.keys.root_maxbytes",
)
"""Sysctls the kubelet, kube-proxy or the CNI bridge plugin may set (spec k8s-real-node §7/8)."""
CREATED_PATHS = (
    "/run/netns",
    "/var/run/netns",
    "/var/log/pods",
    "/var/log/containers",
    "/var/lib/cni",
    "/run/containerd",
    "/var/lib/kubelet",
    "/etc/kubernetes",
)
"""Host paths the components create outside their configured directories, if absent before."""
CGROUP_ROOT = pathlib.Path("/sys/fs/cgroup")
CGROUP_PARENTS = ("kubepods", "kubepods.slice", "k8s.io")
"""Top-level cgroup names the kubelet and containerd create in each controller hierarchy."""
IPTABLES_BUILTINS = {
    "filter": ("INPUT", "FORWARD", "OUTPUT"),
    "nat": ("PREROUTING", "INPUT", "OUTPUT", "POSTROUTING"),
    "mangle": ("PREROUTING", "INPUT", "FORWARD", "OUTPUT", "POSTROUTING"),
    "raw": ("PREROUTING", "OUTPUT"),
    "security": ("INPUT", "FORWARD", "OUTPUT"),
}
STOP_GRACE_S = 10.0
COMMAND_TIMEOUT_S = 30.0


def _sysctl_path(name: str) -> pathlib.Path:
    return pathlib.Path("/proc/sys") / name.replace(".", "/")


def _mount_points() -> list[str]:
    """Mount points of this mount namespace, in /proc/self/mountinfo order (unescaped)."""
    points = []
    for line in pathlib.Path("/proc/self/mountinfo").read_text().splitlines():
        raw = line.split()[4]
        points.append(raw.encode().decode("unicode_escape"))
    return points


def _start_time(pid: int) -> str | None:
    """Field 22 of /proc/PID/stat (start time in clock ticks), or None if PID is gone."""
    try:
        stat = pathlib.Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]


def _cgroups() -> list[str]:
    found = []
    for controller in CGROUP_ROOT.iterdir() if CGROUP_ROOT.is_dir() else ():
        for parent in CGROUP_PARENTS:
            top = controller / parent
            if top.is_dir():
                found += [str(p) for p in top.rglob("*") if p.is_dir()] + [str(top)]
    return found


def _run(argv: list[str], stdin: str | None = None) -> str:
    """Runs a host tool; returns stdout ("" and a log line if it failed)."""
    try:
        result = subprocess.run(
            argv, input=stdin, capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        logger.warning("%s: %s", argv[0], error)
        return ""
    if result.returncode != 0:
        logger.warning("%s failed (%d): %s", " ".join(argv), result.returncode, result.stderr)
    return result.stdout


class Journal:
    """The record of one real node's host changes (see the module docstring)."""

    def __init__(self, data: dict[str, Any], path: pathlib.Path = JOURNAL_PATH) -> None:
        self.data = data
        self.path = path

    @classmethod
    def begin(cls, work_dir: pathlib.Path, socket: pathlib.Path) -> Journal:
        """Records the host state before any change and writes the journal.

        Args:
            work_dir: the node's directory (mounts below it are the node's).
            socket: the containerd socket path (its shims name it on their command line).
        """
        sysctls = {}
        for name in SYSCTLS:
            with contextlib.suppress(OSError):
                sysctls[name] = _sysctl_path(name).read_text().strip()
        data = {
            "work_dir": str(work_dir),
            "containerd_socket": str(socket),
            "sysctls": sysctls,
            "iptables": _run(["iptables-save"]),
            "ip6tables": _run(["ip6tables-save"]),
            "ipsets": ipset_names(),
            "mounts": _mount_points(),
            "absent_paths": [p for p in CREATED_PATHS if not os.path.lexists(p)],
            "cgroups": _cgroups(),
            "processes": [],
            "bridge": None,
        }
        journal = cls(data)
        journal.save()
        return journal

    @classmethod
    def load(cls, path: pathlib.Path = JOURNAL_PATH) -> Journal | None:
        """The journal a previous run left, or None."""
        try:
            return cls(json.loads(path.read_text()), path)
        except FileNotFoundError:
            return None

    def save(self) -> None:
        """Writes the journal atomically."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.data, indent=1))
        tmp.replace(self.path)

    def add_process(self, name: str, pid: int) -> None:
        """Records a started process (PID and start time)."""
        self.data["processes"].append({"name": name, "pid": pid, "start": _start_time(pid)})
        self.save()

    def set_bridge(self, name: str) -> None:
        """Records the bridge the node created."""
        self.data["bridge"] = name
        self.save()

    def restore(self) -> None:
        """Undoes every recorded change (module docstring, steps 1-5) and deletes the journal."""
        for step in (
            self._stop_processes,
            self._unmount,
            self._restore_iptables,
            self._delete_bridge,
            self._restore_sysctls,
            self._remove_paths,
        ):
            try:
                step()
            except Exception:
                logger.exception("host restore step %s failed", step.__name__)
        self.path.unlink(missing_ok=True)

    def _stop_processes(self) -> None:
        recorded = [
            (p["pid"], p["name"])
            for p in reversed(self.data["processes"])
            if p["start"] is not None and _start_time(p["pid"]) == p["start"]
        ]
        socket = self.data["containerd_socket"]
        for proc in pathlib.Path("/proc").iterdir():
            if not proc.name.isdigit():
                continue
            with contextlib.suppress(OSError):
                argv = (proc / "cmdline").read_bytes().split(b"\0")
                if b"containerd-shim" in argv[0] and socket.encode() in argv:
                    recorded.append((int(proc.name), "containerd-shim"))
        for pid, name in recorded:
            _stop_pid(pid, name)

    def _unmount(self) -> None:
        before = set(self.data["mounts"])
        owned = (self.data["work_dir"], "/run/netns", "/var/run/netns")
        new = [m for m in _mount_points() if m not in before and m.startswith(owned)]
        for point in sorted(set(new), key=lambda m: m.count("/"), reverse=True):
            _run(["umount", "-l", point])
        for netns in ("/run/netns", "/var/run/netns"):
            for entry in pathlib.Path(netns).glob("cni-*"):
                entry.unlink(missing_ok=True)

    def _restore_iptables(self) -> None:
        for tool in ("iptables", "ip6tables"):
            saved = _tables(self.data[tool])
            now = _tables(_run([f"{tool}-save"]))
            for table in sorted(set(saved) | set(now)):
                _run([f"{tool}-restore"], stdin=saved.get(table) or _empty_table(table))
        before = set(self.data.get("ipsets", []))
        for name in ipset_names():
            if name not in before:
                _run(["ipset", "destroy", name])

    def _delete_bridge(self) -> None:
        bridge = self.data.get("bridge")
        if bridge and pathlib.Path(f"/sys/class/net/{bridge}").exists():
            _run(["ip", "link", "delete", bridge])

    def _restore_sysctls(self) -> None:
        for name, value in self.data["sysctls"].items():
            path = _sysctl_path(name)
            with contextlib.suppress(OSError):
                if path.read_text().strip() != value:
                    path.write_text(value)
                    logger.info("restored sysctl %s = %s", name, value)

    def _remove_paths(self) -> None:
        for path in self.data["absent_paths"]:
            if os.path.lexists(path):
                shutil.rmtree(path, ignore_errors=True)
        before = set(self.data["cgroups"])
        for cgroup in sorted(set(_cgroups()) - before, key=len, reverse=True):
            with contextlib.suppress(OSError):
                os.rmdir(cgroup)  # only empty cgroups go; a busy one stays (and is logged)
        work = pathlib.Path(self.data["work_dir"])
        if work.exists():
            shutil.rmtree(work, ignore_errors=True)


def ipset_names() -> list[str]:
    """The names of the host's ipsets (``[]`` without the ``ipset`` tool)."""
    if shutil.which("ipset") is None:
        return []
    return _run(["ipset", "list", "-n"]).split()


def _tables(dump: str) -> dict[str, str]:
    """``iptables-save`` output split into one restorable text per table."""
    tables: dict[str, str] = {}
    current: list[str] = []
    for line in dump.splitlines():
        if line.startswith("*"):
            current = [line]
        elif current:
            current.append(line)
            if line == "COMMIT":
                tables[current[0][1:].strip()] = "\n".join(current) + "\n"
                current = []
    return tables


def _empty_table(table: str) -> str:
    """A table with its built-in chains only, policies ACCEPT (what an unused table holds)."""
    chains = IPTABLES_BUILTINS.get(table, ())
    return "\n".join([f"*{table}", *(f":{c} ACCEPT [0:0]" for c in chains), "COMMIT"]) + "\n"


def _stop_pid(pid: int, name: str) -> None:
    """SIGTERM ``pid``, wait up to STOP_GRACE_S, then SIGKILL (only this PID)."""
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + STOP_GRACE_S
    while time.monotonic() < deadline:
        if _start_time(pid) is None or _is_zombie(pid):
            return
        time.sleep(0.1)
    logger.warning("%s (pid %d) ignored SIGTERM; killing", name, pid)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)


def _is_zombie(pid: int) -> bool:
    try:
        return pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def restore_leftovers() -> bool:
    """Restores what a previous run left (its journal); True if there was one."""
    journal = Journal.load()
    if journal is None:
        return False
    logger.warning(
        "a previous real-node run did not restore the host; restoring from %s", JOURNAL_PATH
    )
    journal.restore()
    return True


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO)
    print("restored" if restore_leftovers() else f"nothing to restore ({JOURNAL_PATH} absent)")
