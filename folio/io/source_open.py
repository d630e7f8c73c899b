"""A local source file read once, through one descriptor checked on itself, into a private
copy that every later step reads.

Why: discovery checks an entry by its path (no link out of the source, a regular file),
but whoever owns a source folder can swap the entry afterwards: for a symlink to a private
file of the user's (folio would read and index it), or a FIFO (the run would hang in
``open``, out of reach of SIGTERM). So the file is opened without following a link in its
last component and without blocking (``O_NOFOLLOW | O_NONBLOCK``), and the open
descriptor is checked: a regular file, the very file discovery saw (same device and
inode), inside the source folder (its path as the kernel has it). Hash, format detection,
conversion and the page workers then read a copy in the document's private work folder,
so a later swap changes nothing either. A FIFO or a device swapped in ends typed.
"""

from __future__ import annotations

import errno
import os
import stat as stat_mod
from pathlib import Path

from folio.errors import BadInputError

__all__ = ["SourceChangedError", "copy_checked"]

#: bytes per ``sendfile`` call (the kernel copies; nothing passes through Python)
_CHUNK = 1 << 24


class SourceChangedError(BadInputError):
    """The entry discovery listed is not what is there now (a link, a FIFO, another file)."""

    code = "source-changed"


def _open_nofollow(path: str) -> int:
    return os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY)


def _open(path: str, *, link_ok: bool) -> int:
    """The file's descriptor. A link listed as an entry (a link to a file inside the source,
    or a link the user named) is opened at its target, checked like any other."""
    try:
        return _open_nofollow(path)
    except OSError as err:
        if err.errno != errno.ELOOP:
            raise SourceChangedError(f"cannot be opened: {err.strerror or err}") from err
        if not link_ok:
            raise SourceChangedError("it is now a symlink (it was a file when listed)") from err
    try:
        return _open_nofollow(os.path.realpath(path))
    except OSError as err:
        raise SourceChangedError(f"cannot be opened: {err.strerror or err}") from err


def _check(fd: int, *, identity: tuple[int, int] | None, root: str | None) -> os.stat_result:
    st = os.fstat(fd)
    if not stat_mod.S_ISREG(st.st_mode):
        raise SourceChangedError("not a regular file now (it was one when listed)")
    if identity is not None and (st.st_dev, st.st_ino) != identity:
        raise SourceChangedError("another file than the one listed is there now")
    if root is not None:
        real = os.readlink(f"/proc/self/fd/{fd}")
        if not real.startswith(root.rstrip("/") + "/"):
            raise SourceChangedError("it now leads outside the source")
    return st


def copy_checked(path: str, dest: Path, *, identity: tuple[int, int] | None = None,
                 root: str | None = None, link_ok: bool = False,
                 max_bytes: int | None = None) -> Path:
    """Copy the file at ``path`` to ``dest`` (created exclusively, 0600) through one checked
    descriptor; :class:`SourceChangedError` when what is there is not the file listed
    (``identity`` = its device and inode, inside ``root``); BadInputError ``too-large``
    past ``max_bytes``."""
    fd = _open(path, link_ok=link_ok)
    try:
        st = _check(fd, identity=identity, root=root)
        if max_bytes is not None and st.st_size > max_bytes:
            raise BadInputError(f"{st.st_size} bytes is over the {max_bytes}-byte limit",
                                code="too-large")
        out = os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                      0o600)
        try:
            _copy(fd, out, st.st_size if max_bytes is None else max_bytes)
        finally:
            os.close(out)
    finally:
        os.close(fd)
    return dest


def _copy(src: int, dst: int, limit: int) -> None:
    """All of ``src`` (at most ``limit`` bytes: a file that grows while copied is cut
    there, and its hash is of what was copied)."""
    copied = 0
    while copied < limit:
        try:
            sent = os.sendfile(dst, src, None, min(_CHUNK, limit - copied))
        except OSError as err:
            if err.errno not in (errno.EINVAL, errno.ENOSYS):
                raise
            data = memoryview(os.read(src, min(_CHUNK, limit - copied)))
            sent = len(data)
            while data:
                data = data[os.write(dst, data):]
        if sent == 0:
            return
        copied += sent
