"""Which process listens on a local TCP port, from the kernel's own tables.

Why: a server folio starts on a port it picked is only folio's if folio's process holds
the listening socket. Another local user can bind the port in the moment between the
pick and the server's start and relay every request (parameters, artifacts, the
credentials sent) to the real server; answering ``/health`` proves nothing. The kernel
knows: ``/proc/net/tcp{,6}`` lists each listening socket's inode, and
``/proc/PID/fd`` the sockets a process holds (readable for this user's processes only).
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["listening_inodes", "process_holds_listener", "socket_inodes"]

_LISTEN = "0A"


def listening_inodes(port: int, *, proc: Path = Path("/proc")) -> set[int]:
    """Inodes of every socket listening on TCP ``port`` (IPv4 and IPv6, any address)."""
    found: set[int] = set()
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
                if int(fields[1].rsplit(":", 1)[1], 16) == port:
                    found.add(int(fields[9]))
            except (IndexError, ValueError):
                continue
    return found


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


def process_holds_listener(pid: int, port: int) -> bool:
    """True when something listens on ``port`` and every such socket is held by ``pid``:
    no other process (another user's above all) listens there or could answer."""
    listening = listening_inodes(port)
    return bool(listening) and listening <= socket_inodes(pid)
