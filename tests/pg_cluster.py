"""A PostgreSQL server for Prefect's own database in tests: the system's PostgreSQL (the
``postgresql`` and ``postgresql-contrib`` packages), a fresh cluster in a temporary
folder, listening on a unix socket only.

Why not pgserver (tests/pg_server.py): its build has no contrib extensions, and Prefect's
PostgreSQL migrations run ``CREATE EXTENSION pg_trgm`` (trigram indexes for name search),
so a Prefect server on it fails at startup. As root, PostgreSQL runs as the ``postgres``
user (it refuses to run as root).

Use from a test module: ``pytest_plugins`` in conftest.py lists it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

__all__ = ["prefect_pg_url"]


def _bindir() -> Path | None:
    initdb = shutil.which("initdb")
    if initdb:
        return Path(initdb).resolve().parent
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"))
    return found[-1].parent if found else None


def _has_trgm(bindir: Path) -> bool:
    share = subprocess.run([str(bindir / "pg_config"), "--sharedir"], capture_output=True,
                           text=True, check=False).stdout.strip()
    return (Path(share) / "extension" / "pg_trgm.control").is_file()


def _as_owner(args: list[str]) -> list[str]:
    return ["runuser", "-u", "postgres", "--", *args] if os.geteuid() == 0 else args


@pytest.fixture(scope="session")
def prefect_pg_url() -> Iterator[str]:
    """A SQLAlchemy URL (asyncpg, unix socket) of an empty database for a Prefect server,
    for ``PREFECT_API_DATABASE_CONNECTION_URL``."""
    bindir = _bindir()
    if bindir is None or not _has_trgm(bindir):
        pytest.skip("no PostgreSQL with pg_trgm here: apt-get install postgresql postgresql-contrib")
    root = Path(tempfile.mkdtemp(prefix="folio-pgc-"))
    root.chmod(0o755)  # the postgres user reaches its data and socket through it
    data, sock = root / "data", root / "sock"
    for path in (data, sock):
        path.mkdir()
        if os.geteuid() == 0:
            shutil.chown(path, user="postgres")
    ctl = [str(bindir / "pg_ctl"), "-D", str(data)]
    try:
        subprocess.run(_as_owner([str(bindir / "initdb"), "-D", str(data), "-A", "trust",
                                  "-U", "postgres"]), check=True, capture_output=True)
        subprocess.run(_as_owner([*ctl, "-l", str(data / "log"), "-w", "-o",
                                  f"-c listen_addresses='' -c unix_socket_directories={sock}",
                                  "start"]), check=True, capture_output=True)
    except subprocess.CalledProcessError as exc:
        shutil.rmtree(root, ignore_errors=True)
        pytest.skip(f"PostgreSQL did not start: {exc.stderr[-500:]!r}")
    name = f"prefect_{uuid.uuid4().hex[:8]}"
    try:
        subprocess.run([str(bindir / "psql"), "-h", str(sock), "-U", "postgres", "-c",
                        f"CREATE DATABASE {name}"], check=True, capture_output=True)
        yield f"postgresql+asyncpg://postgres@/{name}?host={sock}"
    finally:
        subprocess.run(_as_owner([*ctl, "-m", "fast", "-w", "stop"]), capture_output=True,
                       check=False)
        shutil.rmtree(root, ignore_errors=True)
