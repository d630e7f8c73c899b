"""A real PostgreSQL 16 with pgvector for tests, started by pgserver (pip wheels).

Why pgserver: Debian has no pgvector package, and a real server (not a mock) is what
catches SQL, locking and transaction mistakes. It listens on a unix socket only, so
sessions of several engineers on one machine never collide on a port.

The data directory lives in its own ``mkdtemp`` folder, not under pytest's basetemp:
as root, pgserver runs postgres as a ``pgserver`` user and opens every parent folder to
it (chmod o+rx), and another pytest session tightens ``/tmp/pytest-of-root`` back to
0700 when it starts, which would cut a running server off from its data.

Set ``FOLIO_TEST_PG_DSN`` to test against an existing server instead (it needs the
vector extension available and rights to create tables).

Use from conftest.py::

    pytest_plugins = ["tests.pg_server"]
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.process_guard import guard_postgres, release_postgres

__all__ = ["pg_dsn", "pg_table"]

ENV_DSN = "FOLIO_TEST_PG_DSN"


@pytest.fixture(scope="session")
def pg_dsn() -> Iterator[str]:
    """A libpq DSN (unix socket, trust auth, database ``postgres``) for the session."""
    external = os.environ.get(ENV_DSN)
    if external:
        yield external
        return
    try:
        with warnings.catch_warnings():  # platformdirs warns when XDG_RUNTIME_DIR is unset
            warnings.simplefilter("ignore")
            import pgserver
    except ImportError as exc:
        pytest.skip(f"pgserver not installed ({exc}): pip install -e '.[dev]'")
    root = Path(tempfile.mkdtemp(prefix="folio-pg-"))
    try:
        server = pgserver.get_server(root / "data", cleanup_mode="stop")
    except (OSError, RuntimeError, subprocess.SubprocessError) as exc:
        log = root / "data" / "log"
        tail = log.read_text(errors="replace")[-500:] if log.is_file() else ""
        shutil.rmtree(root, ignore_errors=True)
        pytest.skip(f"pgserver cannot start PostgreSQL here: {type(exc).__name__}: {exc} {tail}")
    guard_postgres(root / "data")  # stopped if this test process goes first
    try:
        yield server.get_uri()
    finally:
        server.cleanup()
        release_postgres(root / "data")
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture()
def pg_table(pg_dsn: str) -> Iterator[str]:
    """A fresh table name, dropped afterwards with the side table a PgVectorStore gives it
    (the server is shared by the session)."""
    import uuid

    import psycopg
    from psycopg import sql

    name = f"t_{uuid.uuid4().hex[:12]}"
    yield name
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        for dropped in (name, f"{name}_delta"):
            conn.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(sql.Identifier(dropped)))
