"""Removal under a folder that never follows a symbolic link on the way.

Why: ``--sync`` and a replaced version remove files and folders inside the output folder,
which on a shared host others may be able to write into (a shared inbox). A path resolved
by name follows every link between the output folder and the leaf: one planted there
(``out/x -> /home/you``) turned ``rmtree(out/x/docs)`` into the removal of a folder of
yours outside every root. Here each component below the output folder is opened relative
to its parent's descriptor with ``O_NOFOLLOW`` (a link there ends the removal, typed), and
the leaf is removed relative to its parent's descriptor (``shutil.rmtree(dir_fd=...)``,
which itself never follows a link). The output folder itself may be a link: the user
named it.
"""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

from folio.errors import StorageError

__all__ = ["remove", "unlink"]

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def _open_parent(root: Path, parts: list[str]) -> int | None:
    """A descriptor of the folder holding ``parts[-1]``, reached from ``root`` without
    following a link; None when a folder on the way is missing.

    Raises:
        StorageError: a component on the way is a link or not a folder.
    """
    try:
        fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise StorageError(f"open {root}: {exc.strerror or type(exc).__name__}") from exc
    for index, part in enumerate(parts[:-1]):
        try:
            child = os.open(part, _DIR_FLAGS, dir_fd=fd)
        except FileNotFoundError:
            os.close(fd)
            return None
        except OSError as exc:  # ELOOP: a link; ENOTDIR: a file
            os.close(fd)
            where = root.joinpath(*parts[:index + 1])
            raise StorageError(f"remove under {root}: {where} is a symbolic link or not a "
                               "folder; folio never removes through links") from exc
        os.close(fd)
        fd = child
    return fd


def remove(root: Path, relpath: str) -> int:
    """Remove ``root/relpath`` (a file, or a folder whole), following no link: returns how
    many files went; 0 when it is absent. A link at ``relpath`` itself is removed, never
    followed.

    Raises:
        StorageError: a folder on the way is a link, or the removal failed.
    """
    parts = relpath.split("/")
    parent = _open_parent(root, parts)
    if parent is None:
        return 0
    name = parts[-1]
    try:
        try:
            info = os.stat(name, dir_fd=parent, follow_symlinks=False)
        except FileNotFoundError:
            return 0
        if not stat.S_ISDIR(info.st_mode):
            os.unlink(name, dir_fd=parent)
            return 1
        count = _count_files(parent, name)
        shutil.rmtree(name, dir_fd=parent)
        return count
    except OSError as exc:
        raise StorageError(f"remove {root / relpath}: {exc.strerror or exc}") from exc
    finally:
        os.close(parent)


def unlink(root: Path, relpath: str) -> None:
    """Remove the file ``root/relpath`` if it is there, following no link on the way.

    Raises:
        StorageError: a folder on the way is a link, or the removal failed.
    """
    parts = relpath.split("/")
    parent = _open_parent(root, parts)
    if parent is None:
        return
    try:
        os.unlink(parts[-1], dir_fd=parent)
    except FileNotFoundError:
        pass
    except OSError as exc:
        raise StorageError(f"delete {root / relpath}: {exc.strerror or exc}") from exc
    finally:
        os.close(parent)


def _count_files(parent: int, name: str) -> int:
    """Files under the folder ``name`` (links not followed), for the caller's count."""
    fd = os.open(name, _DIR_FLAGS, dir_fd=parent)
    try:
        return sum(len(files) for _, _, files, _ in os.fwalk(dir_fd=fd, follow_symlinks=False))
    finally:
        os.close(fd)
