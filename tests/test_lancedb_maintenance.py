"""LanceDB table upkeep: scheduled compaction and version cleanup, the ANN index past a
row count, and replace staying idempotent through both (real LanceDB, local and on S3)."""

from __future__ import annotations

import threading
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from folio.settings.config import StoreSettings
from folio.stores import open_store
from folio.stores.base import DocumentVectors
from folio.stores.lance_indexes import ensure_scalar_indexes
from folio.stores.lance_s3 import lance_storage_options
from folio.stores.lance_tuning import LanceTuning
from folio.stores.lancedb_store import LanceDBStore
from tests.s3_server import S3Server
from tests.store_data import chunks, vectors

ANN_DIM = 32  # enough dimensions that neighbours are distinct


def _table(store: LanceDBStore) -> Any:
    """A separate handle on the store's table, as another process would have."""
    import lancedb

    table = lancedb.connect(store.uri, storage_options=store._options or None).open_table(
        store.table
    )
    table.checkout_latest()
    return table


def _shape(store: LanceDBStore) -> tuple[int, int]:
    """(versions kept, data fragments) of the store's table."""
    table = _table(store)
    return len(table.list_versions()), int(table.stats()["fragment_stats"]["num_fragments"])


def _write(store: LanceDBStore, doc: str, n: int, seed: int, dim: int = 8) -> None:
    """One write, then wait for the maintenance it may have asked for (background)."""
    store.replace_documents([DocumentVectors(doc, chunks(doc, n), vectors(n, seed, dim))])
    assert store.wait_maintained(60)


@pytest.mark.parametrize("every", [3, 0])
def test_maintenance_compacts_and_drops_versions_on_schedule(tmp_path: Path, every: int) -> None:
    tuning = LanceTuning(maintain_every_writes=every, keep_versions=timedelta(0))
    store = LanceDBStore(str(tmp_path / "v"), dim=8, tuning=tuning)
    _write(store, "a", 4, 0)
    _write(store, "b", 4, 1)
    before, fragments = _shape(store)
    assert fragments == 2 and before >= 3  # each write: a fragment and a version
    _write(store, "c", 4, 2)  # the third write: maintenance when every == 3
    versions, fragments = _shape(store)
    if every:  # compaction and the index update commit; cleanup leaves little else
        assert fragments == 1 and versions <= 2 < before
    else:
        assert fragments == 3 and versions > before
    assert store.count() == 12 and {store.count(d) for d in "abc"} == {4}


def test_maintenance_keeps_versions_younger_than_the_setting(tmp_path: Path) -> None:
    """Another worker may still read a recent version: those survive the cleanup."""
    tuning = LanceTuning(maintain_every_writes=0, keep_versions=timedelta(hours=1))
    store = LanceDBStore(str(tmp_path / "v"), dim=8, tuning=tuning)
    for i in range(3):
        _write(store, f"d{i}", 2, i)
    before, _ = _shape(store)
    store.maintain()
    after, fragments = _shape(store)
    assert after >= before and fragments == 1


def test_ann_index_appears_past_the_row_threshold_and_finds_the_nearest(tmp_path: Path) -> None:
    tuning = LanceTuning(maintain_every_writes=1, ann_index_min_rows=600, ann_nprobes=8)
    store = LanceDBStore(str(tmp_path / "v"), dim=ANN_DIM, tuning=tuning)
    stored: list[np.ndarray[Any, Any]] = []
    for i in range(4):  # 4 x 200 rows, maintenance after each write
        vecs = vectors(200, i, ANN_DIM)
        store.replace_documents([DocumentVectors(f"d{i}", chunks(f"d{i}", 200), vecs)])
        assert store.wait_maintained(60)
        stored.append(vecs)
        assert store.has_vector_index() == (store.count() >= 600)
    assert store.has_vector_index()
    every = np.concatenate(stored)
    ids = [f"d{i}-{j:04d}" for i in range(4) for j in range(200)]
    rng = np.random.default_rng(99)
    for row in rng.choice(len(ids), 20, replace=False):
        query = every[row] + rng.normal(0, 0.01, ANN_DIM).astype(np.float32)
        exact = ids[int(np.argmax(every @ (query / np.linalg.norm(query))))]
        found = store.search(query, k=5)
        assert found[0]["id"] == exact == ids[row]
        assert found[0]["score"] == pytest.approx(max(r["score"] for r in found))


def test_ann_index_is_trained_again_when_the_table_doubles(tmp_path: Path) -> None:
    tuning = LanceTuning(maintain_every_writes=1, ann_index_min_rows=400, ann_rows_per_partition=200)
    store = LanceDBStore(str(tmp_path / "v"), dim=ANN_DIM, tuning=tuning)
    seen = []
    for i in range(8):  # 8 x 100 rows
        store.replace_documents([DocumentVectors(f"d{i}", chunks(f"d{i}", 100), vectors(100, i, ANN_DIM))])
        assert store.wait_maintained(60)
        seen.append(store.vector_index_partitions())
    # 400 rows: 2 partitions; trained again at 4 (800 rows), not in between
    assert seen == [0, 0, 0, 2, 2, 2, 2, 4]
    assert store.search(vectors(100, 7, ANN_DIM)[3], k=1)[0]["id"] == "d7-0003"


def test_replace_stays_idempotent_through_maintenance(tmp_path: Path) -> None:
    tuning = LanceTuning(maintain_every_writes=2, keep_versions=timedelta(0))
    store = LanceDBStore(str(tmp_path / "v"), dim=8, tuning=tuning)
    _write(store, "a", 5, 0)
    _write(store, "b", 3, 1)  # maintenance
    store.replace_documents([DocumentVectors("a", chunks("a", 2, id_tag="v2-"), vectors(2, 2))])
    _write(store, "b", 3, 1)  # the same chunks again: upserted, not added; maintenance
    table = _table(store)
    rows = table.to_arrow().select(["id", "doc_id"]).to_pylist()
    ids = sorted(r["id"] for r in rows)
    assert ids == sorted([c.id for c in chunks("a", 2, id_tag="v2-")] + [c.id for c in chunks("b", 3)])


def _race(workers: list[LanceDBStore], docs: list[str]) -> None:
    """Each worker replaces its document three times, all at once."""
    errors: list[BaseException] = []

    def write(store: LanceDBStore, doc: str) -> None:
        try:
            for n in range(3):
                store.replace_document(doc, chunks(doc, 20 - n, id_tag=f"{n}-"), vectors(20 - n, n))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=write, args=pair) for pair in zip(workers, docs, strict=True)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors


def test_workers_replacing_documents_at_once_leave_each_its_last_chunks(tmp_path: Path) -> None:
    """Each worker its own store object, as separate processes, each with maintenance due
    during the race: no row lost, none stale, none twice."""
    uri = str(tmp_path / "v")
    LanceDBStore(uri, dim=8).replace_document("seed", chunks("seed", 1), vectors(1, 0))
    # a compaction preempted by another worker's delete is retried: soon here (30 s by
    # default), so the wait below sees it through instead of timing out mid-backoff
    tuning = LanceTuning(maintain_every_writes=2, maintain_retry_s=0.2)
    workers = [LanceDBStore(uri, dim=8, tuning=tuning) for _ in range(3)]
    _race(workers, ["a", "b", "c"])
    assert all(w.wait_maintained(120) for w in workers)
    ids = _table(workers[0]).to_arrow().column("id").to_pylist()
    expected = [c.id for doc in "abc" for c in chunks(doc, 18, id_tag="2-")] + ["seed-0000"]
    assert sorted(ids) == sorted(expected)


def test_maintenance_on_s3_and_settings_reach_the_store(s3_server: S3Server) -> None:
    bucket = s3_server.create_bucket()
    settings = StoreSettings(
        uri=f"s3://{bucket}/v", maintain_every_writes=2, keep_versions_s=0, ann_nprobes=7
    )
    store = open_store(settings, default_uri="unused", s3=s3_server.settings, dim=8)
    assert isinstance(store, LanceDBStore)
    assert store.tuning == LanceTuning(maintain_every_writes=2, keep_versions=timedelta(0),
                                       ann_nprobes=7)  # fmt: skip
    assert store._options == lance_storage_options(s3_server.settings)
    _write(store, "a", 3, 0)
    assert _shape(store)[1] == 1
    _write(store, "b", 3, 1)
    versions, fragments = _shape(store)
    assert fragments == 1 and versions <= 2
    assert store.search(vectors(3, 1)[2], k=1)[0]["id"] == "b-0002"


def test_scalar_indexes_are_made_with_the_table(tmp_path: Path) -> None:
    store = LanceDBStore(str(tmp_path / "v"), dim=8)
    _write(store, "a", 2, 0)
    indexed = {tuple(i.columns) for i in _table(store).list_indices()}
    assert {("id",), ("doc_id",)} <= indexed


def test_a_creator_that_lost_the_index_race_keeps_the_winners_index(tmp_path: Path) -> None:
    """Two workers create the table at once; the second read the list of indexes before
    the first one's index landed, and LanceDB refuses its own ("already exists"): it
    looks again and keeps the first one's instead of failing the write."""
    store = LanceDBStore(str(tmp_path / "v"), dim=8)
    _write(store, "a", 2, 0)  # the first worker: the table and its indexes

    class LateView:
        """The second worker's table: its first look at the indexes predates the first's."""

        def __init__(self, table: Any) -> None:
            self.table, self.looks = table, 0

        def list_indices(self) -> Any:
            self.looks += 1
            return [] if self.looks == 1 else self.table.list_indices()

        def create_index(self, *args: Any, **kwargs: Any) -> Any:
            return self.table.create_index(*args, **kwargs)

    late = LateView(_table(store))
    ensure_scalar_indexes(late)
    assert late.looks == 2
    indexed = [tuple(i.columns) for i in _table(store).list_indices()]
    assert sorted(indexed) == [("doc_id",), ("id",), ("source",)]


def test_defaults_match_the_settings() -> None:
    assert LanceTuning.from_settings(StoreSettings()) == LanceTuning()
