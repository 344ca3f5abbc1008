"""A NetworkPolicy-enforcing agent on the real test node: kube-router's firewall, nothing else.

``start`` runs kube-router (built by build-node.sh from the Go module proxy) with
``--run-firewall`` only: no BGP router, no service proxy (kube-proxy stays the node's proxy), no
health or metrics listener. It watches pods, namespaces and NetworkPolicies through the admin
kubeconfig and turns every policy into iptables chains in the filter table (``KUBE-ROUTER-*``
jumped to first from INPUT, FORWARD and OUTPUT; ``KUBE-POD-FW-*`` per local pod;
``KUBE-NWPLCY-*`` per policy) and ipsets of the admitted peers (``KUBE-SRC-*``/``KUBE-DST-*``).
A connection a policy does not admit is rejected (ICMP port unreachable: the client sees
``ECONNREFUSED``); traffic from the node itself (kubelet probes, the host) is always admitted,
as the NetworkPolicy API says. Pod-to-pod traffic on the bridge reaches iptables because
``net.bridge.bridge-nf-call-iptables`` is 1 (set here; the journal restores it).

Why kube-router and not ``sigs.k8s.io/kube-network-policies``: that agent needs nftables'
``queue`` expression, and this kernel has no ``CONFIG_NFT_QUEUE`` (build-node.sh).

``PolicyAgent.stop`` stops it by PID, then unhooks and deletes its chains and destroys its ipsets
(by their prefixes), and checks nothing of them is left. Not ``kube-router --cleanup-config``:
that also runs the BGP router's and the service proxy's cleanups, which this agent never set up.

Invariants:
- The agent adds no listener and changes only the filter table's ``KUBE-ROUTER-*``,
  ``KUBE-POD-FW-*``, ``KUBE-NWPLCY-*`` chains (plus one jump at the top of INPUT, FORWARD and
  OUTPUT), ipsets named ``KUBE-SRC-*``/``KUBE-DST-*`` and that one sysctl; all of it is gone
  after ``stop``, and after a run that died the node journal's restore removes it too (iptables
  restored, ipsets absent at the node's start destroyed, the sysctl restored, the PID stopped).
- At most one agent per node; the node's FORWARD guard (mangle table) still runs before it.
"""

from __future__ import annotations

import dataclasses
import logging
import pathlib
import shlex
import subprocess

from e2e.testenv import hostchanges, processes, realnode

logger = logging.getLogger(__name__)

AGENT = "kube-router"
BRIDGE_SYSCTL = pathlib.Path("/proc/sys/net/bridge/bridge-nf-call-iptables")
CHAIN_PREFIXES = ("KUBE-ROUTER-", "KUBE-POD-FW-", "KUBE-NWPLCY-")
"""The filter-table chains kube-router's firewall owns."""
IPSET_PREFIXES = ("KUBE-SRC-", "KUBE-DST-")
"""The ipsets it owns."""
READY_TIMEOUT_S = 60.0
"""Bound on the agent hooking its chains into the filter table, s."""
COMMAND_TIMEOUT_S = 30.0


def argv(node: realnode.RealNode) -> list[str]:
    """kube-router's command line: the firewall alone, no listener, the node's names."""
    return [
        str(node.artifacts.node_dir / "bin" / AGENT),
        f"--kubeconfig={node.cluster.kubeconfig}",
        f"--hostname-override={realnode.NODE_NAME}",
        f"--service-cluster-ip-range={realnode.SERVICE_CIDR}",
        "--run-firewall=true",
        "--run-router=false",
        "--run-service-proxy=false",
        "--enable-ipv6=false",
        "--health-port=0",
        "--metrics-port=0",
        "--v=1",
    ]


def _iptables(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["iptables", "-t", "filter", *args],
        capture_output=True,
        text=True,
        timeout=COMMAND_TIMEOUT_S,
        check=False,
    )


def owned_chains() -> list[str]:
    """The filter-table chains of the agent that exist now."""
    listed = _iptables("-S").stdout.splitlines()
    names = [line.split()[1] for line in listed if line.startswith("-N ")]
    return [n for n in names if n.startswith(CHAIN_PREFIXES)]


def owned_ipsets() -> list[str]:
    """The ipsets of the agent that exist now."""
    return [n for n in hostchanges.ipset_names() if n.startswith(IPSET_PREFIXES)]


def _hooked() -> bool:
    """The agent's chains exist and FORWARD jumps to its chain."""
    forward = _iptables("-S", "FORWARD").stdout
    return "KUBE-ROUTER-FORWARD" in forward and "KUBE-NWPLCY-DEFAULT" in owned_chains()


@dataclasses.dataclass(slots=True)
class PolicyAgent:
    """A running agent on ``node``; ``stop`` once, by whoever started it."""

    node: realnode.RealNode
    process: processes.ManagedProcess

    def log_tail(self) -> str:
        """The last lines of the agent's log (for failure messages)."""
        return self.process.log_tail()

    def stop(self) -> None:
        """Stops the agent by PID and removes its chains and ipsets (module docstring).

        Raises:
            RuntimeError: a chain or ipset of the agent is still there afterwards.
        """
        self.process.stop()
        if self.process in self.node.cluster.processes:
            self.node.cluster.processes.remove(self.process)
        _remove_leftovers()
        left = owned_chains() + owned_ipsets()
        if left:
            raise RuntimeError(f"the NetworkPolicy agent left {left} behind")
        logger.info("NetworkPolicy agent stopped; its chains and ipsets are gone")


def _remove_leftovers() -> None:
    """Unhooks and deletes the agent's chains, then destroys its ipsets (best effort)."""
    for builtin in ("INPUT", "FORWARD", "OUTPUT"):
        for rule in _iptables("-S", builtin).stdout.splitlines():
            if any(f"-j {prefix}" in rule for prefix in CHAIN_PREFIXES):
                _iptables("-D", *shlex.split(rule)[1:])  # its comments are quoted
    chains = owned_chains()
    for chain in chains:
        _iptables("-F", chain)
    for chain in chains:
        _iptables("-X", chain)
    for name in owned_ipsets():
        subprocess.run(
            ["ipset", "destroy", name], capture_output=True, check=False, timeout=COMMAND_TIMEOUT_S
        )


def start(node: realnode.RealNode) -> PolicyAgent:
    """Starts the agent on ``node`` and waits until its chains are hooked in.

    Policies that exist or appear later are enforced within the agent's sync (event driven:
    about a second here); callers poll for the effect they expect.

    Raises:
        processes.StartupError: the agent exited or did not hook in within READY_TIMEOUT_S
            (with its log tail); it has been stopped and its chains removed.
        RuntimeError: the agent's chains or ipsets exist already (another agent runs).
    """
    if owned_chains() or owned_ipsets():
        raise RuntimeError("kube-router's chains or ipsets exist already: another agent runs")
    BRIDGE_SYSCTL.write_text("1")  # journaled (hostchanges.SYSCTLS); restored with the node
    process = realnode._start(node, AGENT, argv(node))
    agent = PolicyAgent(node, process)
    try:
        process.wait_ready(_hooked, timeout_s=READY_TIMEOUT_S, what="kube-router's chains")
    except BaseException:
        agent.stop()
        raise
    logger.info("NetworkPolicy agent (kube-router firewall) running, pid %d", process.popen.pid)
    return agent
