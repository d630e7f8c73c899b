"""LanceDB maintenance off the write path: a write never waits for it or fails by it,
maintenance never runs twice at once, a failure is retried, and writes racing a
background compaction lose and duplicate nothing (real LanceDB, local and on S3)."""

from __future__ import annotations

import logging
import threading
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from folio.stores import lance_indexes
from folio.stores.base import DocumentVectors
from folio.stores.lance_s3 import lance_storage_options
from folio.stores.lance_tuning import LanceTuning
from folio.stores.lancedb_store import LanceDBStore
from folio.stores.upkeep import Upkeep
from tests.peak import Peak
from tests.s3_server import S3Server
from tests.store_data import chunks, vectors


def _ids(store: LanceDBStore) -> list[str]:
    import lancedb

    db = lancedb.connect(store.uri, storage_options=store._options or None)
    return list(db.open_table(store.table).to_arrow().column("id").to_pylist())


def _fragments(store: LanceDBStore) -> int:
    import lancedb

    table = lancedb.connect(store.uri, storage_options=store._options or None).open_table(
        store.table
    )
    stats: Any = table.stats()
    return int(stats["fragment_stats"]["num_fragments"])


class _Gate:
    """Holds every maintenance run at its start until opened; counts runs going at once."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, fail_first: int = 0) -> None:
        self.open = threading.Event()
        self.entered = threading.Event()
        self.active = self.most = self.calls = 0
        self._lock = threading.Lock()
        self._fail = fail_first
        original = lance_indexes.ensure_vector_index

        def held(table: Any, tuning: LanceTuning) -> None:
            with self._lock:
                self.calls += 1
                self.active += 1
                self.most = max(self.most, self.active)
                fail = self.calls <= self._fail
            self.entered.set()
            try:
                assert self.open.wait(60)
                if fail:
                    raise RuntimeError("injected maintenance failure")
                original(table, tuning)
            finally:
                with self._lock:
                    self.active -= 1

        monkeypatch.setattr("folio.stores.lancedb_store.ensure_vector_index", held)


def test_upkeep_runs_one_at_a_time_and_coalesces_requests() -> None:
    peak, runs, lock = Peak(), [0], threading.Lock()

    def job() -> None:
        with peak:
            time.sleep(0.05)
        with lock:
            runs[0] += 1

    upkeep = Upkeep(job, name="test upkeep")
    def ask() -> None:
        for _ in range(20):
            upkeep.request()

    threads = [threading.Thread(target=ask) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert upkeep.wait_idle(10)
    assert peak.most == 1
    assert 1 <= runs[0] <= 80 and runs[0] < 20  # 80 requests, far fewer runs
    assert upkeep.close(5)


def test_upkeep_counts_writes_and_rows_and_asks_when_either_is_due() -> None:
    runs: list[int] = []
    upkeep = Upkeep(lambda: runs.append(1), name="test", every_writes=3, every_rows=100)
    upkeep.wrote(rows=10)
    upkeep.wrote(rows=10)
    assert upkeep.wait_idle(5) and runs == []  # 2 writes, 20 rows: not yet
    upkeep.wrote(rows=10)
    assert upkeep.wait_idle(5) and len(runs) == 1  # the third write
    upkeep.wrote(rows=150)
    assert upkeep.wait_idle(5) and len(runs) == 2  # one write, over the rows
    never = Upkeep(lambda: runs.append(1), name="off")
    for _ in range(5):
        never.wrote(rows=1000)
    assert never.wait_idle(5) and len(runs) == 2  # 0 and 0: only explicit requests
    upkeep.close()


def test_upkeep_retries_a_failed_run_until_it_succeeds(caplog: pytest.LogCaptureFixture) -> None:
    outcomes = iter([RuntimeError("boom"), RuntimeError("boom again"), None])

    def job() -> None:
        error = next(outcomes)
        if error is not None:
            raise error

    upkeep = Upkeep(job, name="test upkeep", retry_s=0.02)
    with caplog.at_level(logging.WARNING, logger="folio.stores.upkeep"):
        upkeep.request()
        assert upkeep.wait_idle(10)
    assert (upkeep.runs, upkeep.failures) == (3, 2)
    assert "boom again" in caplog.text and "retried later" in caplog.text
    assert upkeep.close(5)


def test_a_write_does_not_wait_for_maintenance(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    gate = _Gate(monkeypatch)
    store = LanceDBStore(str(tmp_path / "v"), dim=8,
                         tuning=LanceTuning(maintain_every_writes=1, keep_versions=timedelta(0)))  # fmt: skip
    store.replace_document("a", chunks("a", 4), vectors(4, 0))  # asks for maintenance
    assert gate.entered.wait(30)  # ... which is now held inside its run
    started = time.monotonic()
    for i, doc in enumerate("bcd"):
        store.replace_document(doc, chunks(doc, 4), vectors(4, i + 1))
    assert time.monotonic() - started < 30 and not gate.open.is_set()
    assert store.upkeep.busy
    gate.open.set()
    assert store.wait_maintained(60)
    assert sorted(_ids(store)) == sorted(c.id for d in "abcd" for c in chunks(d, 4))
    assert _fragments(store) == 1 and gate.most == 1
    store.close()


def test_a_direct_maintain_waits_for_the_background_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    gate = _Gate(monkeypatch)
    store = LanceDBStore(str(tmp_path / "v"), dim=8, tuning=LanceTuning(maintain_every_writes=1))
    store.replace_document("a", chunks("a", 4), vectors(4, 0))
    assert gate.entered.wait(30)
    direct = threading.Thread(target=store.maintain)
    direct.start()
    time.sleep(0.3)
    assert gate.calls == 1  # the direct call is queued behind the running one
    gate.open.set()
    direct.join(60)
    assert store.wait_maintained(60)
    assert gate.calls == 2 and gate.most == 1
    store.close()


def test_a_failed_maintenance_is_logged_retried_and_never_fails_a_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    gate = _Gate(monkeypatch, fail_first=2)
    gate.open.set()
    tuning = LanceTuning(maintain_every_writes=2, maintain_retry_s=0.05, keep_versions=timedelta(0))
    store = LanceDBStore(str(tmp_path / "v"), dim=8, tuning=tuning)
    with caplog.at_level(logging.WARNING, logger="folio.stores.upkeep"):
        for i, doc in enumerate("abc"):
            store.replace_document(doc, chunks(doc, 3), vectors(3, i))  # none raises
        assert store.wait_maintained(60)
    assert "injected maintenance failure" in caplog.text
    assert store.upkeep.failures == 2 and gate.calls >= 3
    assert store.count() == 9 and _fragments(store) <= 2  # c's write came after the run
    store.close()


def _churn(store: LanceDBStore, rounds: int) -> dict[str, list[str]]:
    """Replace four documents over and over with chunks of new ids and counts, while the
    store's upkeep compacts behind the writes; returns each document's last chunk ids."""
    last: dict[str, list[str]] = {}
    for n in range(rounds):
        batch = []
        for d, doc in enumerate(["w", "x", "y", "z"][n % 2 :: 2]):
            size = 3 + (n + d) % 4
            new = chunks(doc, size, id_tag=f"r{n}-")
            batch.append(DocumentVectors(doc, new, vectors(size, n * 10 + d)))
            last[doc] = [c.id for c in new]
        store.replace_documents(batch)
    return last


@pytest.mark.parametrize("where", ["local", "s3"])
def test_writes_racing_background_compaction_lose_and_duplicate_nothing(
    where: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    # versions kept: writers are on them; a failed run is retried soon
    tuning = LanceTuning(maintain_every_writes=2, maintain_retry_s=0.2)
    if where == "s3":
        server: S3Server = request.getfixturevalue("s3_server")
        bucket = server.create_bucket()
        store = LanceDBStore(f"s3://{bucket}/v", dim=8, tuning=tuning,
                             storage_options=lance_storage_options(server.settings))  # fmt: skip
    else:
        store = LanceDBStore(str(tmp_path / "v"), dim=8, tuning=tuning)
    last = _churn(store, 16)
    assert store.wait_maintained(120)
    # a compaction preempted by a racing write's commit fails, is logged and retried: at
    # least one run must have succeeded, and whatever failed lost nothing
    assert store.upkeep.runs > store.upkeep.failures
    ids = _ids(store)
    assert len(ids) == len(set(ids))  # no chunk twice
    assert sorted(ids) == sorted(i for v in last.values() for i in v)  # none lost or stale
    assert {d: store.count(d) for d in last} == {d: len(v) for d, v in last.items()}
    store.close()
