"""An empty, migrated Prefect SQLite database, made once a test session and copied into
the database place of the test servers whose subject is not a first start.

Why: a Prefect server on an empty SQLite file runs every migration before it answers,
about 11 CPU-s of its 16 on an idle 2-core machine (5.4 CPU-s on a migrated file; measured
for issue 32), and a suite started six such servers (each worker's test harness, the
session's local server, the password test's temporary server, the restart test's own).
One migration a session (``prefect server database upgrade``, the same command a user's
upgrade runs) and a file copy per server do the same work once.

Not for tests of a first start: tests/test_local_server.py starts its servers on empty
homes, as a user's first run does (migrations included), and the Prefect stacks on
PostgreSQL migrate their own databases.

Use from conftest.py::

    pytest_plugins = ["tests.prefect_db_template"]
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from folio.process_files import flocked

__all__ = ["copy_migrated_db"]

#: the session's folder for the template (made by the controlling process, inherited by
#: the xdist workers, removed when the session ends)
DIR_ENV = "FOLIO_TEST_PREFECT_TEMPLATE_DIR"
#: a migration on a loaded 2-core machine has taken 21 s
MIGRATE_TIMEOUT_S = 600


def pytest_configure(config: pytest.Config) -> None:
    if hasattr(config, "workerinput"):
        return
    os.environ[DIR_ENV] = tempfile.mkdtemp(prefix="folio-test-prefect-db-")


def pytest_sessionfinish(session: pytest.Session) -> None:
    if hasattr(session.config, "workerinput"):
        return
    folder = Path(os.environ.get(DIR_ENV, ""))
    if folder.name.startswith("folio-test-prefect-db-"):
        shutil.rmtree(folder, ignore_errors=True)


def _template() -> Path:
    """The session's migrated database, made by the first caller (a lock across workers)."""
    folder = Path(os.environ[DIR_ENV])
    db = folder / "prefect.db"
    with flocked(folder / "template.lock", timeout_s=MIGRATE_TIMEOUT_S):
        if db.is_file():
            return db
        work = folder / "making"
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir()
        env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_API_")}
        env.update(PREFECT_HOME=str(work), PREFECT_SERVER_ANALYTICS_ENABLED="false",
                   PREFECT_SERVER_DATABASE_CONNECTION_URL=f"sqlite+aiosqlite:///{work / 'prefect.db'}")
        proc = subprocess.run([sys.executable, "-m", "prefect", "server", "database", "upgrade", "-y"],
                              env=env, cwd=work, capture_output=True, text=True,
                              timeout=MIGRATE_TIMEOUT_S, check=False)
        if proc.returncode != 0 or not (work / "prefect.db").is_file():
            raise RuntimeError(f"prefect server database upgrade failed ({proc.returncode}): "
                               f"{(proc.stdout + proc.stderr)[-3000:]}")
        # a finished upgrade leaves one file (its WAL checkpointed on close); renamed into
        # place so a copier never sees half of it
        os.replace(work / "prefect.db", db)
        shutil.rmtree(work, ignore_errors=True)
    return db


def copy_migrated_db(dest: Path) -> Path:
    """Copy the session's migrated, empty database to ``dest`` (a file path; its folder
    is made) unless a database is there already; returns ``dest``."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    if not dest.exists():
        tmp = dest.with_name(dest.name + ".copying")
        shutil.copyfile(_template(), tmp)
        os.replace(tmp, dest)
    return dest
