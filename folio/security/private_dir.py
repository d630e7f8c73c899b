"""Folders and files only their user can touch, checked on every use.

Why: folio's state folders (the shared vLLM server's, the local Prefect server's home)
decide which server a run talks to and hold the secrets those servers require. A folder
another local user made first (a predictable name under /tmp, mode 0777) or can write to
would let that user point folio's runs at a server of theirs. So a folder is used only
when it is a real directory (not a link), owned by this user and closed to group and
others; folio creates it that way, and refuses one that is not, saying which and why.
"""

from __future__ import annotations

import os
import secrets
import stat
from pathlib import Path

from folio.errors import ConfigError
from folio.process_files import write_atomic

__all__ = ["InsecureLocationError", "check_path_to", "check_private_dir", "ensure_private_dir",
           "read_or_make_secret", "write_private"]


class InsecureLocationError(ConfigError):
    """A state folder or secret file another user could have made or can change."""

    code = "insecure-location"


def ensure_private_dir(path: Path) -> Path:
    """``path`` created (mode 0700, parents too) if absent, then checked
    (:func:`check_private_dir`). Returns it absolute.

    Raises:
        InsecureLocationError: it exists but is not this user's private folder.
    """
    path = Path(path).absolute()
    check_path_to(path)  # before making anything under a folder another user controls
    try:
        path.mkdir(parents=True, mode=0o700)
    except FileExistsError:
        pass
    check_path_to(path)  # the parents it made
    check_private_dir(path)
    return path


def check_path_to(path: Path) -> None:
    """Raise :class:`InsecureLocationError` unless no other user can change what ``path``
    names: every folder above it, on the path as written and as resolved (through any
    link), belongs to this user or root and is writable by no one else, unless sticky
    (``/tmp``: there only a name's owner can remove or rename it, and the next folder,
    checked in turn, must be this user's).

    Why: a private leaf folder inside a folder another user owns or may write to (a
    ``.folio`` they made first in a shared folder) is theirs to rename and replace with
    one of their own between two uses.
    """
    me = os.geteuid()
    path = Path(path).absolute()
    for folder in dict.fromkeys([*path.parents, *path.resolve().parents]):
        try:
            info = os.stat(folder)
        except FileNotFoundError:
            continue  # made below, by this user
        except OSError as exc:
            raise InsecureLocationError(f"{folder}: cannot be checked ({exc})") from None
        if info.st_uid not in (0, me):
            raise InsecureLocationError(
                f"{folder} (above {path}) belongs to user id {info.st_uid}: that user can "
                "swap folio's folder there for one of theirs; choose a folder of yours")
        if info.st_mode & 0o022 and not info.st_mode & stat.S_ISVTX:
            raise InsecureLocationError(
                f"{folder} (above {path}) has mode {stat.S_IMODE(info.st_mode):04o}: other "
                "users can swap folio's folder there for one of theirs; choose a folder of "
                "yours or remove their write permission")


def check_private_dir(path: Path) -> None:
    """Raise :class:`InsecureLocationError` unless ``path`` is a directory (not a link),
    owned by this process's user, with no permission for group or others."""
    try:
        info = os.lstat(path)
    except OSError as exc:
        raise InsecureLocationError(f"{path}: cannot be checked ({exc})") from None
    if stat.S_ISLNK(info.st_mode) or not stat.S_ISDIR(info.st_mode):
        raise InsecureLocationError(f"{path} is not a folder (a link or a file): refusing it "
                                    "as folio's state folder; remove it")
    if info.st_uid != os.geteuid():
        raise InsecureLocationError(
            f"{path} belongs to user id {info.st_uid}, not to you ({os.geteuid()}): another "
            "user may have made it to take over folio's servers; remove it or choose another "
            "folder")
    if info.st_mode & 0o077:
        raise InsecureLocationError(
            f"{path} has mode {stat.S_IMODE(info.st_mode):04o}: other users could change "
            f"folio's state there; run `chmod 700 {path}` or remove it")


def write_private(path: Path, text: str) -> None:
    """Write ``text`` to a new file of mode 0600, then rename it over ``path`` (readers
    see the old file or the new one)."""
    write_atomic(path, text, mode=0o600)


def read_or_make_secret(path: Path, *, prefix: str = "") -> str:
    """The secret in ``path`` (a 0600 file of this user's), made (``prefix`` and 32 random
    bytes in hex) if there is none. The caller holds the folder's lock, so two processes never make
    two secrets.

    Raises:
        InsecureLocationError: the file is a link, another user's, or open to others.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        secret = prefix + secrets.token_hex(32)
        write_private(path, secret)
        return secret
    except OSError as exc:  # ELOOP: a link
        raise InsecureLocationError(f"{path}: not a plain file of yours ({exc})") from None
    with os.fdopen(fd) as fh:
        info = os.fstat(fh.fileno())
        if info.st_uid != os.geteuid() or info.st_mode & 0o077:
            raise InsecureLocationError(
                f"{path} (mode {stat.S_IMODE(info.st_mode):04o}, user id {info.st_uid}) is "
                "not a secret only you can read: remove it (folio makes a new one)")
        value = fh.read().strip()
    if not value:
        secret = prefix + secrets.token_hex(32)
        write_private(path, secret)
        return secret
    return value
