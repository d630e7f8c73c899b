"""The warm server's messages, over an ``AF_UNIX`` ``SOCK_SEQPACKET`` connection (one send
is one message, and the kernel passes file descriptors with it).

1. client -> server: a request (:class:`Request`: what to run, the caller's argv, working
   folder, environment and umask) with the child's standard streams (and any extra
   descriptors it is to hold) as ``SCM_RIGHTS``;
2. server -> client: the child's pid (8 bytes, signed; 0: no child was made);
3. server -> client: its exit status when it ends (8 bytes, signed: the exit code, or
   minus the signal that ended it).

The client's end of file (it died or gave up) makes the server kill the child's process
group: a child never outlives the command that asked for it.
"""

from __future__ import annotations

import json
import socket
from dataclasses import asdict, dataclass, field

#: set in a forked child's environment: the socket of the server that forked it
SOCKET_ENV = "FOLIO_WARM_SOCKET"
#: the largest request (the environment is most of it)
MAX_REQUEST = 256 * 1024
#: descriptors a request may carry: stdin, stdout, stderr and a few for the child
MAX_FDS = 8
_INT = 8


@dataclass
class Request:
    """What a child is to run and as whom.

    ``kind`` ``call``: ``target`` is ``module:function``, called with no arguments (it
    reads ``sys.argv``); ``module``: ``target`` is a module run as ``__main__``
    (``python -m target``). ``argv`` becomes ``sys.argv``; ``path0`` the first entry of
    ``sys.path`` (the script's folder, or the working folder for ``-m``). Descriptors
    beyond the first three keep their numbers in the child; ``{fd3}`` and so on in
    ``argv`` are replaced by them. ``new_session``: the child leads a session of its
    own (else a process group of its own)."""

    kind: str
    target: str
    argv: list[str]
    cwd: str
    env: dict[str, str]
    umask: int = 0o022
    path0: str = ""
    new_session: bool = False
    extra: dict[str, str] = field(default_factory=dict)

    def encode(self) -> bytes:
        return json.dumps(asdict(self)).encode()

    @classmethod
    def decode(cls, data: bytes) -> Request:
        raw = json.loads(data)
        if not isinstance(raw, dict) or raw.get("kind") not in ("call", "module"):
            raise ValueError("not a warm request")
        return cls(**raw)


def send_int(sock: socket.socket, value: int) -> None:
    sock.send(value.to_bytes(_INT, "big", signed=True))


def recv_int(sock: socket.socket) -> int | None:
    """The next number, or None at end of file (or a short message)."""
    data = sock.recv(_INT)
    return int.from_bytes(data, "big", signed=True) if len(data) == _INT else None
