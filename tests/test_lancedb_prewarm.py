"""LanceDB: a process that searches loads the ANN index into its cache beside its first
search and after each maintenance of its store; one that writes loads the id and doc_id
BTREE indexes beside its first write and after each maintenance (real LanceDB in a local
folder)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
from lancedb.table import LanceTable

from folio.settings.config import StoreSettings
from folio.stores.base import DocumentVectors
from folio.stores.lance_tuning import LanceTuning
from folio.stores.lancedb_store import LanceDBStore
from tests.store_data import chunks, vectors

DIM = 16


def _store(path: Path, **tuning: Any) -> LanceDBStore:
    store = LanceDBStore(str(path / "v"), dim=DIM, tuning=LanceTuning(
        ann_index_min_rows=1000, ann_rows_per_partition=256, maintain_every_writes=0,
        **tuning))  # fmt: skip
    store.replace_documents([DocumentVectors(f"d{i}", chunks(f"d{i}", 100), vectors(100, i, DIM))
                             for i in range(12)])  # fmt: skip
    return store


@pytest.fixture()
def prewarmed(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Names of the indexes prewarm_index was asked for, in order (then the real call)."""
    calls: list[str] = []
    real = LanceTable.prewarm_index

    def spy(self: LanceTable, name: str) -> None:
        calls.append(name)
        real(self, name)

    monkeypatch.setattr(LanceTable, "prewarm_index", spy)
    return calls


def test_the_index_is_prewarmed_on_first_search_and_after_maintenance(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, prewarmed: list[str]
) -> None:
    # the write path's own load (tested below) is left out here
    monkeypatch.setattr(LanceDBStore, "_prewarm_writer", lambda self, table: None)
    store = _store(tmp_path)
    store.search(vectors(1, 50, DIM)[0])
    assert prewarmed == []  # no ANN index yet: nothing to load
    store.maintain()
    assert prewarmed == ["vector_ivf_4p"]  # a searcher was open: the new index loaded

    fresh = LanceDBStore(store.uri, dim=DIM, tuning=store.tuning)
    fresh.replace_documents([DocumentVectors("x", chunks("x", 3), vectors(3, 99, DIM))])
    fresh.maintain()
    assert prewarmed == ["vector_ivf_4p"]  # a writer that never searched loads nothing
    hits = fresh.search(vectors(3, 99, DIM)[1], k=3)  # answered at once, the load beside it
    assert hits[0]["id"] == "x-0001" and fresh.wait_prewarmed(30)
    assert prewarmed == ["vector_ivf_4p"] * 2
    fresh.search(vectors(1, 7, DIM)[0])
    assert fresh.wait_prewarmed(30) and len(prewarmed) == 2  # once per opened handle


def test_a_writer_loads_its_id_indexes_beside_its_first_write_and_after_maintenance(
    tmp_path: Path, prewarmed: list[str]
) -> None:
    """Without the load, every write reads the index pages its ids fall in, more of them
    the larger the table (through a counting proxy on S3: 4-5 GETs a write at 200k rows,
    none at 10k; none at either size with the indexes loaded)."""
    store = _store(tmp_path)
    assert store.wait_writer_prewarmed(30)
    assert sorted(prewarmed) == ["doc_id_idx", "id_idx"]  # once, beside the first write
    store.replace_documents([DocumentVectors("x", chunks("x", 3), vectors(3, 99, DIM))])
    assert store.wait_writer_prewarmed(30) and len(prewarmed) == 2
    store.maintain()  # new index files: loaded again, with the ANN index it built
    assert sorted(prewarmed[2:]) == ["doc_id_idx", "id_idx"]
    reader = LanceDBStore(store.uri, dim=DIM, tuning=store.tuning)
    reader.count()
    reader.maintain()
    assert len(prewarmed) == 4  # a store that never wrote loads no id index
    assert store.count() == 12 * 100 + 3


def test_prewarm_off_or_failing_leaves_search_working(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    calls: list[str] = []
    monkeypatch.setattr(LanceTable, "prewarm_index", lambda self, name: calls.append(name))
    store = _store(tmp_path, prewarm_index=False)
    store.maintain()
    assert len(store.search(vectors(1, 3, DIM)[0], k=4)) == 4 and calls == []

    def broken(self: LanceTable, name: str) -> None:
        raise RuntimeError("cache refused")

    monkeypatch.setattr(LanceTable, "prewarm_index", broken)
    warm = LanceDBStore(store.uri, dim=DIM, tuning=LanceTuning())
    with caplog.at_level(logging.WARNING, logger="folio.stores.lancedb_store"):
        hits = warm.search(vectors(12, 5, DIM)[4], k=2)
        assert warm.wait_prewarmed(30)
    assert hits[0]["id"] == "d5-0004"
    assert any("prewarm" in r.getMessage() and "cache refused" in r.getMessage()
               for r in caplog.records)  # fmt: skip


def test_the_setting_reaches_the_store() -> None:
    assert LanceTuning.from_settings(StoreSettings(prewarm_index=False)).prewarm_index is False
    assert LanceTuning.from_settings(StoreSettings()).prewarm_index is True
