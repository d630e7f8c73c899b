"""Which warm server a request may use: a name that changes whenever what the server
imported or read at its start would differ for the caller.

A forked child runs the code its server imported, with the settings the server's imports
read from the environment. So the name hashes:

- the interpreter (its path and version) and every ``site-packages`` folder on the path
  (a folder's modification time changes when a package is installed or removed);
- folio's own source files (path, size, modification time), so an edited or pulled
  checkout gets a new server;
- the environment without what belongs to one run or one shell (:func:`server_env`);
- the resource limits a child inherits from the server (a ``ulimit`` of the caller's
  must hold in its child);
- the modules the server preloads.

Secrets are left out of the server's environment (and so of the name): the child gets them
from its caller's environment; a long-lived server never holds a run's password or key.
"""

from __future__ import annotations

import hashlib
import json
import os
import resource
import sys
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path

from folio.security.private_dir import ensure_private_dir
from folio.security.redaction import is_secret_env

#: variables of one shell or one terminal, not of a configuration
_VOLATILE = frozenset({"PWD", "OLDPWD", "_", "SHLVL", "TERM", "COLUMNS", "LINES", "PS1",
                       "TERM_PROGRAM", "TERM_PROGRAM_VERSION", "TERM_SESSION_ID",
                       "WINDOWID", "SSH_TTY", "SSH_CLIENT", "SSH_CONNECTION", "SSH_AUTH_SOCK",
                       "GPG_TTY", "DISPLAY", "XAUTHORITY", "COLORTERM", "INVOCATION_ID",
                       "JOURNAL_STREAM", "MAIL", "LS_COLORS"})
#: the prefixes of variables that belong to one run: Prefect's runtime variables
#: (``PREFECT__FLOW_RUN_ID``, the control channel's port and token; settings have one
#: underscore) and the warm layer's own
_RUN_PREFIXES = ("PREFECT__", "FOLIO_WARM")
#: resource limits a child inherits from its server
_LIMITS = ("RLIMIT_AS", "RLIMIT_DATA", "RLIMIT_NOFILE", "RLIMIT_STACK", "RLIMIT_CORE",
           "RLIMIT_CPU", "RLIMIT_FSIZE", "RLIMIT_NPROC")
_SOURCE_FOLDERS = ("folio", "flows", "tasks", "deployments", "folio_prefect")


def server_env(env: Mapping[str, str]) -> dict[str, str]:
    """The environment a server starts with: ``env`` without a shell's or a run's own
    variables and without secrets."""
    return {k: v for k, v in env.items()
            if k not in _VOLATILE and not k.startswith(_RUN_PREFIXES)
            and not is_secret_env(k, v)}


def code_stamp() -> str:
    """What code a server runs: the interpreter, the installed packages, folio's sources
    (a server whose stamp is not the current one is stale: :mod:`folio.warm.client`
    retires it once its children are done)."""
    facts = {
        "python": [os.path.realpath(sys.executable), sys.version, sys.flags.optimize],
        "site": [[p, _mtime(p)] for p in sys.path if p.endswith("site-packages")],
        "sources": _source_stats(),
    }
    return hashlib.sha256(json.dumps(facts, sort_keys=True).encode()).hexdigest()[:24]


def fingerprint(env: Mapping[str, str], preload: Iterable[str]) -> str:
    """The name of the server for a caller with ``env`` (hex, 24 characters)."""
    limits = {name: resource.getrlimit(getattr(resource, name)) for name in _LIMITS
              if hasattr(resource, name)}
    facts = {
        "code": code_stamp(),
        "env": sorted(server_env(env).items()),
        "limits": limits,
        "preload": list(preload),
    }
    blob = json.dumps(facts, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:24]


def socket_dir() -> Path:
    """This user's folder of server sockets, created 0700 and checked on every use
    (another local user must not be able to put a server of theirs in a run's way)."""
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    base = Path(runtime) / "folio-warm" if runtime and os.path.isdir(runtime) else None
    # a socket's path holds at most 107 bytes: a deep runtime folder is not usable
    if base is None or len(str(base)) + len("/0123456789abcdef01234567.sock") > 100:
        base = Path(tempfile.gettempdir()) / f"folio-warm-{os.geteuid()}"
    return ensure_private_dir(base)


def _mtime(path: str) -> int:
    try:
        return os.stat(path).st_mtime_ns
    except OSError:
        return 0


def _source_stats() -> list[tuple[str, int, int]]:
    """(path, size, mtime) of every ``.py`` file of folio's source folders."""
    import folio

    root = Path(folio.__file__).resolve().parent.parent
    out: list[tuple[str, int, int]] = []
    for name in _SOURCE_FOLDERS:
        top = root / name
        if top.is_dir() and not top.is_symlink():
            _walk(str(top), out)
    return sorted(out)


def _walk(folder: str, out: list[tuple[str, int, int]]) -> None:
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return
    for entry in entries:
        if entry.is_symlink() or entry.name == "__pycache__":
            continue
        if entry.is_dir():
            _walk(entry.path, out)
        elif entry.name.endswith(".py"):
            st = entry.stat()
            out.append((entry.path, st.st_size, st.st_mtime_ns))
