"""TCP sockets of a process, read from /proc (Linux): proof that the test cluster stays on loopback.

``tcp_sockets(pid)`` matches the socket inodes among ``/proc/<pid>/fd`` against
``/proc/net/tcp`` and ``/proc/net/tcp6`` (same network namespace), giving each socket's local and
remote address. Listening sockets have the unspecified remote address.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import os
import pathlib

LISTEN_STATE = "0A"
"""``st`` column value of a listening socket in /proc/net/tcp."""


@dataclasses.dataclass(frozen=True, slots=True)
class TcpSocket:
    """One TCP socket: addresses and kernel state code (``01`` established, ``0A`` listen)."""

    local: ipaddress.IPv4Address | ipaddress.IPv6Address
    local_port: int
    remote: ipaddress.IPv4Address | ipaddress.IPv6Address
    remote_port: int
    state: str


def _parse_address(field: str) -> tuple[ipaddress.IPv4Address | ipaddress.IPv6Address, int]:
    """Decodes ``HEXIP:HEXPORT`` from /proc/net/tcp{,6} (IP words in host byte order)."""
    hex_ip, hex_port = field.split(":")
    raw = bytes.fromhex(hex_ip)
    # Each 32-bit word is stored little-endian on x86: reverse within every 4-byte group.
    swapped = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
    address = ipaddress.ip_address(swapped)
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return address, int(hex_port, 16)


def _socket_inodes(pid: int) -> set[str]:
    inodes: set[str] = set()
    for fd in pathlib.Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except FileNotFoundError:  # closed while listing
            continue
        if target.startswith("socket:["):
            inodes.add(target[len("socket:[") : -1])
    return inodes


def tcp_sockets(pid: int) -> list[TcpSocket]:
    """Returns the TCP sockets (IPv4 and IPv6) the process ``pid`` holds open right now.

    Raises:
        FileNotFoundError: the process does not exist.
    """
    inodes = _socket_inodes(pid)
    found: list[TcpSocket] = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        lines = pathlib.Path(table).read_text().splitlines()[1:]
        for line in lines:
            fields = line.split()
            if fields[9] not in inodes:
                continue
            local, local_port = _parse_address(fields[1])
            remote, remote_port = _parse_address(fields[2])
            found.append(TcpSocket(local, local_port, remote, remote_port, fields[3]))
    return found
