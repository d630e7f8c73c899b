"""The warm server's messages, over an ``AF_UNIX`` ``SOCK_SEQPACKET`` connection (one send
is one message, and the kernel passes file descriptors with it).

1. client -> server: a request (:class:`Request`: what to run, the caller's argv, working
   folder and umask) with the child's standard streams, the read end of a pipe that
   carries the caller's environment, and any extra descriptors the child is to hold, as
   ``SCM_RIGHTS``. The environment (secrets included) goes through the pipe to the child
   alone: the server never reads it, so no run's secret is ever in the memory that every
   later child (a page worker parsing a hostile PDF among them) is forked from;
2. server -> client: the child's pid (8 bytes, signed; 0: no child was made);
3. server -> client: its exit status when it ends (8 bytes, signed: the exit code, or
   minus the signal that ended it).

The client's end of file (it died or gave up) makes the server kill the child's process
group: a child never outlives the command that asked for it.
"""

from __future__ import annotations

import json
import os
import socket
from dataclasses import asdict, dataclass

#: set in a forked child's environment: the socket of the server that forked it
SOCKET_ENV = "FOLIO_WARM_SOCKET"
#: the largest request (the environment is most of it)
MAX_REQUEST = 256 * 1024
#: descriptors a request may carry: stdin, stdout, stderr, the environment's pipe and a
#: few for the child
MAX_FDS = 8
#: where the environment's pipe is among a request's descriptors
ENV_FD = 3
_INT = 8


@dataclass
class Request:
    """What a child is to run and as whom.

    ``kind`` ``call``: ``target`` is ``module:function``, called with no arguments (it
    reads ``sys.argv``); ``module``: ``target`` is a module run as ``__main__``
    (``python -m target``). ``argv`` becomes ``sys.argv``; ``path0`` the first entry of
    ``sys.path`` (the script's folder, or the working folder for ``-m``). Descriptors
    after the environment's pipe keep their numbers in the child; ``{extra0}``,
    ``{extra1}``... in ``argv`` are replaced by them. ``new_session``: the child leads a
    session of its own (else a process group of its own). ``cpus`` and ``nice``: the
    caller's CPU affinity and niceness, which a forked child would otherwise take from
    the server (``taskset -c 2-3 folio ingest`` and ``nice folio ingest`` hold for the
    run as they do without a warm server; a niceness below the server's cannot be had
    unprivileged and stays the server's)."""

    kind: str
    target: str
    argv: list[str]
    cwd: str
    umask: int = 0o022
    path0: str = ""
    new_session: bool = False
    cpus: list[int] | None = None
    nice: int | None = None

    def encode(self) -> bytes:
        return json.dumps(asdict(self)).encode()

    @classmethod
    def decode(cls, data: bytes) -> Request:
        raw = json.loads(data)
        if not isinstance(raw, dict) or raw.get("kind") not in ("call", "module"):
            raise ValueError("not a warm request")
        return cls(**raw)


def send_request(sock: socket.socket, request: Request, fds: list[int],
                 env: dict[str, str]) -> None:
    """``request`` with ``fds`` (stdin, stdout, stderr, then extras), and ``env`` through a
    pipe of its own (inserted at :data:`ENV_FD`). The pipe is written after the request is
    sent, while the server forks: an environment larger than a pipe's buffer is read by
    the child as it is written."""
    env_r, env_w = os.pipe()
    try:
        socket.send_fds(sock, [request.encode()], [*fds[:3], env_r, *fds[3:]])
    finally:
        os.close(env_r)
    with os.fdopen(env_w, "wb") as pipe:
        try:
            pipe.write(json.dumps(env).encode())
        except BrokenPipeError:
            pass  # the server refused the request: no child reads it; the reply says so


def read_env(fd: int) -> dict[str, str]:
    """The environment a client wrote to ``fd`` (closed after)."""
    with os.fdopen(fd, "rb") as pipe:
        raw = json.loads(pipe.read())
    if not isinstance(raw, dict):
        raise ValueError("not an environment")
    return {str(k): str(v) for k, v in raw.items()}


def send_int(sock: socket.socket, value: int) -> None:
    sock.send(value.to_bytes(_INT, "big", signed=True))


def recv_int(sock: socket.socket) -> int | None:
    """The next number, or None at end of file (or a short message)."""
    data = sock.recv(_INT)
    return int.from_bytes(data, "big", signed=True) if len(data) == _INT else None
