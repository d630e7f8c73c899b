"""A PostgreSQL server for Prefect's own database in tests: the system's PostgreSQL (the
``postgresql`` and ``postgresql-contrib`` packages), a fresh cluster in a temporary
folder, listening on a unix socket only.

Why not pgserver (tests/pg_server.py): its build has no contrib extensions, and Prefect's
PostgreSQL migrations run ``CREATE EXTENSION pg_trgm`` (trigram indexes for name search),
so a Prefect server on it fails at startup. As root, PostgreSQL runs as the ``postgres``
user (it refuses to run as root).

One cluster a test session (a pytest-xdist worker's session); each Prefect server gets its
own database in it. Use from a test module: ``pytest_plugins`` in conftest.py lists it.
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

from tests.process_guard import guard_postgres, release_postgres

__all__ = ["PgCluster", "pg_cluster", "prefect_pg_url"]


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


class PgCluster:
    """A running cluster; :meth:`database` makes an empty database and gives its URL."""

    def __init__(self, bindir: Path, sock: Path) -> None:
        self.bindir, self.sock = bindir, sock

    def database(self) -> str:
        """A SQLAlchemy URL (asyncpg, unix socket) of a new empty database, for
        ``PREFECT_API_DATABASE_CONNECTION_URL``. One per Prefect server: two servers on one
        database would share their pools, and each one's workers would run the other's
        flow runs."""
        name = f"prefect_{uuid.uuid4().hex[:8]}"
        subprocess.run([str(self.bindir / "psql"), "-h", str(self.sock), "-U", "postgres",
                        "-c", f"CREATE DATABASE {name}"], check=True, capture_output=True)
        return f"postgresql+asyncpg://postgres@/{name}?host={self.sock}"


@pytest.fixture(scope="session")
def pg_cluster() -> Iterator[PgCluster | None]:
    """The session's cluster, or None where this machine has no PostgreSQL with pg_trgm
    (or it does not start): callers decide whether that skips them."""
    bindir = _bindir()
    if bindir is None or not _has_trgm(bindir):
        yield None
        return
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
    except subprocess.CalledProcessError:
        shutil.rmtree(root, ignore_errors=True)
        yield None
        return
    guard_postgres(data)  # stopped if this test process goes first (tests/process_guard.py)
    try:
        yield PgCluster(bindir, sock)
    finally:
        subprocess.run(_as_owner([*ctl, "-m", "fast", "-w", "stop"]), capture_output=True,
                       check=False)
        release_postgres(data)
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="session")
def prefect_pg_url(pg_cluster: PgCluster | None) -> str:
    """An empty database of the session's cluster for a Prefect server (skips without
    PostgreSQL)."""
    if pg_cluster is None:
        pytest.skip("no PostgreSQL with pg_trgm here (or it did not start): "
                    "apt-get install postgresql postgresql-contrib")
    return pg_cluster.database()
