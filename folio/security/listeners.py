"""Which process listens on a local TCP port, from the kernel's own tables.

Why: a server folio starts on a port it picked is only folio's if folio's process holds
the listening socket. Another local user can bind the port in the moment between the
pick and the server's start (the port is on the server's command line, which every user
can read) and receive every request (the API key sent with it, the pages, the
credentials); answering ``/health`` proves nothing. The kernel knows: ``/proc/net/tcp{,6}``
lists each listening socket's address and inode, and ``/proc/PID/fd`` the sockets a
process holds (readable for this user's processes only).

Only the sockets a connection to the server's address can reach count: one on
``[::1]:N`` beside the server's ``127.0.0.1:N`` never receives its requests, and taking
it for a squatter made every run wait for a server that was there.
"""

from __future__ import annotations

import ipaddress
import os
from enum import StrEnum
from pathlib import Path
from urllib.parse import urlsplit

__all__ = ["ListenerVerdict", "listener_verdict", "listening_sockets", "process_holds_listener",
           "socket_inodes", "url_verdict"]

_LISTEN = "0A"
_Address = ipaddress.IPv4Address | ipaddress.IPv6Address


class ListenerVerdict(StrEnum):
    #: something reachable listens on the port and every such socket is the process's
    OURS = "ours"
    #: a socket the address reaches belongs to another process: never send it a request
    FOREIGN = "foreign"
    #: nothing the address reaches listens (yet)
    NONE = "none"


def _address(hex_addr: str) -> _Address:
    """``/proc/net/tcp``'s address: 32-bit words in host (little-endian) order."""
    raw = bytes.fromhex(hex_addr)
    words = b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4))
    return ipaddress.ip_address(words)


def listening_sockets(port: int, *, proc: Path = Path("/proc")) -> list[tuple[_Address, int]]:
    """(address, inode) of every socket listening on TCP ``port`` (IPv4 and IPv6)."""
    found: list[tuple[_Address, int]] = []
    for table in ("net/tcp", "net/tcp6"):
        try:
            lines = (proc / table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) < 10 or fields[3] != _LISTEN:
                continue
            try:
                addr, hex_port = fields[1].rsplit(":", 1)
                if int(hex_port, 16) == port:
                    found.append((_address(addr), int(fields[9])))
            except (ValueError, IndexError):
                continue
    return found


def _reaches(listener: _Address, host: _Address) -> bool:
    """Whether a connection to ``host`` can land on a socket bound to ``listener``: the
    same address, a wildcard of the family, or (for IPv4) an IPv6 wildcard or mapped
    address, which dual-stack sockets serve."""
    if listener == host or listener.is_unspecified and listener.version == host.version:
        return True
    if host.version == 4 and isinstance(listener, ipaddress.IPv6Address):
        return listener.is_unspecified or listener.ipv4_mapped == host
    return False


def socket_inodes(pid: int, *, proc: Path = Path("/proc")) -> set[int]:
    """Inodes of the sockets ``pid`` holds (empty when it is gone or not ours)."""
    found: set[int] = set()
    fd_dir = proc / str(pid) / "fd"
    try:
        names = os.listdir(fd_dir)
    except OSError:
        return found
    for name in names:
        try:
            target = os.readlink(fd_dir / name)
        except OSError:
            continue
        if target.startswith("socket:["):
            found.add(int(target[len("socket:["):-1]))
    return found


def _group_socket_inodes(pgid: int, *, proc: Path = Path("/proc")) -> set[int]:
    """Sockets held by any process of process group ``pgid`` (a server's workers, such as
    vLLM's API processes, inherit its listening socket). Another user cannot put a process
    into this user's group, and its descriptors are unreadable anyway."""
    found = socket_inodes(pgid, proc=proc)
    try:
        names = [n for n in os.listdir(proc) if n.isdigit() and int(n) != pgid]
    except OSError:
        return found
    for name in names:
        try:
            stat = (proc / name / "stat").read_text()
            if int(stat.rsplit(")", 1)[1].split()[2]) != pgid:
                continue
        except (OSError, ValueError, IndexError):
            continue
        found |= socket_inodes(int(name), proc=proc)
    return found


def listener_verdict(pid: int, port: int, host: str = "127.0.0.1", *,
                     group: bool = False, proc: Path = Path("/proc")) -> ListenerVerdict:
    """Whose socket a connection to ``host:port`` reaches: ``pid``'s (with ``group``, any
    process of the group ``pid`` leads), another process's, or none yet."""
    try:
        target = ipaddress.ip_address(host)
    except ValueError:
        return ListenerVerdict.FOREIGN  # a name could resolve anywhere: never trusted
    reachable = {inode for addr, inode in listening_sockets(port, proc=proc)
                 if _reaches(addr, target)}
    if not reachable:
        return ListenerVerdict.NONE
    held = _group_socket_inodes(pid, proc=proc) if group else socket_inodes(pid, proc=proc)
    return ListenerVerdict.OURS if reachable <= held else ListenerVerdict.FOREIGN


def url_verdict(pid: int, url: str) -> ListenerVerdict:
    """:func:`listener_verdict` for the server a URL names (``http://127.0.0.1:8000/v1``),
    counting the sockets of the whole process group ``pid`` leads."""
    parts = urlsplit(url)
    if parts.hostname is None or parts.port is None:
        return ListenerVerdict.FOREIGN
    return listener_verdict(pid, parts.port, parts.hostname, group=True)


def process_holds_listener(pid: int, port: int, host: str = "127.0.0.1") -> bool:
    """True when something listens where a connection to ``host:port`` goes and every
    such socket is held by ``pid``: no other process (another user's above all) could
    answer."""
    return listener_verdict(pid, port, host) is ListenerVerdict.OURS
