"""pgvector's side table: writes land in ``{table}_delta`` (no HNSW index) and upkeep
moves them into the HNSW table. What must hold across the split, on a real PostgreSQL:
a replace is idempotent wherever the document's old rows are, a deleted document never
comes back, a search sees both tables, and a move loses and duplicates nothing, also
while writers replace the documents being moved."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import numpy as np
import psycopg
import pytest
from psycopg import sql

from folio.settings.config import S3Settings, StoreSettings
from folio.stores import open_store, pg_move
from folio.stores.base import DocumentVectors
from folio.stores.pgvector_store import PgVectorStore
from tests.store_data import DIM, chunks, vectors


@pytest.fixture()
def table(pg_table: str) -> str:
    return pg_table


@pytest.fixture()
def store(pg_dsn: str, table: str) -> Iterator[PgVectorStore]:
    """A store whose writes never ask for upkeep by themselves: tests move rows by calling
    ``maintain()``."""
    s = PgVectorStore(pg_dsn, dim=DIM, table=table, maintain_every_writes=0,
                      maintain_every_rows=0)  # fmt: skip
    yield s
    s.close()


def _rows(dsn: str, table: str) -> list[tuple[str, str]]:
    """(id, doc_id) of every row of one table, sorted."""
    with psycopg.connect(dsn) as conn:
        found = conn.execute(
            sql.SQL("SELECT id, doc_id FROM {} ORDER BY id").format(sql.Identifier(table))
        ).fetchall()
    return [(r[0], r[1]) for r in found]


def _all_ids(dsn: str, store: PgVectorStore) -> list[str]:
    """Every row's id in both tables (a duplicate shows twice)."""
    return sorted(i for t in (store.table, store.delta_table) for i, _ in _rows(dsn, t))


def test_writes_land_in_the_side_table_and_upkeep_moves_them(
    store: PgVectorStore, pg_dsn: str
) -> None:
    store.replace_document("a", chunks("a", 4), vectors(4, 1))
    assert _rows(pg_dsn, store.table) == [] and store.delta_rows() == 4
    store.maintain()
    assert store.delta_rows() == 0
    assert _rows(pg_dsn, store.table) == [(f"a-{i:04d}", "a") for i in range(4)]
    assert store.count() == store.count("a") == 4


@pytest.mark.parametrize("moved_first", [True, False], ids=["old-in-main", "old-in-side"])
def test_replace_is_idempotent_across_the_split(
    store: PgVectorStore, pg_dsn: str, moved_first: bool
) -> None:
    store.replace_document("a", chunks("a", 5), vectors(5, 1))
    store.replace_document("b", chunks("b", 3), vectors(3, 2))
    if moved_first:
        store.maintain()  # the old rows are in the HNSW table, the new ones go to the side

    store.replace_document("a", chunks("a", 2, "v2 ", "v2"), vectors(2, 3))  # new ids, fewer
    store.replace_document("a", chunks("a", 2, "v2 ", "v2"), vectors(2, 3))  # same ids again
    assert (store.count(), store.count("a"), store.count("b")) == (5, 2, 3)
    ids = _all_ids(pg_dsn, store)
    assert ids == sorted(set(ids)) == sorted(["a-v20000", "a-v20001", "b-0000", "b-0001",
                                              "b-0002"])  # fmt: skip
    texts = {h["text"] for h in store.search(vectors(1, 9)[0], k=10)}
    assert texts == {"v2 a chunk 0", "v2 a chunk 1", "b chunk 0", "b chunk 1", "b chunk 2"}

    store.maintain()
    assert _all_ids(pg_dsn, store) == ids and store.delta_rows() == 0
    store.replace_document("b", chunks("b", 3), vectors(3, 2))  # rewrite of moved rows
    assert _all_ids(pg_dsn, store) == ids


def test_a_chunk_id_moving_to_another_document_is_kept_once(
    store: PgVectorStore, pg_dsn: str
) -> None:
    store.replace_document("a", chunks("a", 2), vectors(2, 1))
    store.maintain()
    moved = chunks("a", 1)[0].model_copy(update={"doc_id": "b", "text": "now b's"})
    store.replace_document("b", [moved], vectors(1, 2))
    assert _all_ids(pg_dsn, store) == ["a-0000", "a-0001"]
    assert (store.count("a"), store.count("b")) == (1, 1)
    store.maintain()
    assert _all_ids(pg_dsn, store) == ["a-0000", "a-0001"]


def test_deleted_documents_never_come_back(store: PgVectorStore) -> None:
    vs = vectors(3, 4)
    store.replace_document("main", chunks("main", 3), vs)
    store.maintain()
    store.replace_document("side", chunks("side", 3), vs + 0.01)
    for doc in ("main", "side"):
        store.replace_document(doc, [], np.zeros((0, DIM), np.float32))
    store.replace_document("kept", chunks("kept", 1), vectors(1, 5))

    def docs() -> set[str]:
        return {h["doc_id"] for q in vs for h in store.search(q, k=10)}

    assert docs() == {"kept"} and store.count() == 1
    store.maintain()
    assert docs() == {"kept"} and store.count() == 1


def test_search_merges_both_tables_by_distance(store: PgVectorStore) -> None:
    vs = vectors(12, 6)
    store.replace_document("m", chunks("m", 6), vs[:6])
    store.maintain()
    store.replace_document("s", chunks("s", 6), vs[6:])
    assert store.delta_rows() == 6 and store.count() == 12

    for i, q in enumerate(vs):  # each chunk's own vector finds it first, in either table
        best = store.search(q + 0.01 * vectors(1, 100 + i)[0], k=1)[0]
        assert best["id"] == (f"m-{i:04d}" if i < 6 else f"s-{i - 6:04d}")
    query = vectors(1, 7)[0]
    hits = store.search(query, k=12)
    exact = sorted(range(12), key=lambda i: -float(vs[i] @ query))
    assert [h["id"] for h in hits] == [f"m-{i:04d}" if i < 6 else f"s-{i - 6:04d}"
                                       for i in exact]  # fmt: skip
    scores = [h["score"] for h in hits]
    assert scores == sorted(scores, reverse=True)
    assert len(store.search(query, k=4)) == 4


def test_a_move_in_many_transactions_loses_and_duplicates_nothing(
    store: PgVectorStore, pg_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(pg_move, "_MOVE_ROWS", 7)  # several documents a transaction
    batch = [DocumentVectors(f"d{i:02d}", chunks(f"d{i:02d}", 1 + i % 4), vectors(1 + i % 4, i))
             for i in range(30)]  # fmt: skip
    store.replace_documents(batch)
    want = sorted(c.id for entry in batch for c in entry.chunks)
    store.maintain()
    assert [i for i, _ in _rows(pg_dsn, store.table)] == want
    assert store.delta_rows() == 0


def test_writers_racing_the_move_leave_each_document_as_last_written(
    pg_dsn: str, table: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A writer replaces documents while upkeep moves them (another connection): every
    document ends with exactly the chunks of its last write, in one table or the other."""
    monkeypatch.setattr(pg_move, "_MOVE_ROWS", 5)
    writer = PgVectorStore(pg_dsn, dim=DIM, table=table, maintain_every_writes=0,
                           maintain_every_rows=0)  # fmt: skip
    mover = PgVectorStore(pg_dsn, dim=DIM, table=table)
    names = [f"doc{i}" for i in range(8)]
    last: dict[str, list[str]] = {}
    errors: list[BaseException] = []
    for round_ in range(6):
        versions = [DocumentVectors(d, chunks(d, 1 + (round_ + j) % 5, f"r{round_} ",
                                              f"r{round_}-"), vectors(1 + (round_ + j) % 5, j))
                    for j, d in enumerate(names)]  # fmt: skip

        def write(versions: list[DocumentVectors] = versions) -> None:
            try:
                for entry in versions:  # one document a transaction: many interleavings
                    writer.replace_documents([entry])
            except BaseException as exc:
                errors.append(exc)

        thread = threading.Thread(target=write)
        thread.start()
        mover.maintain()
        thread.join(timeout=120)
        assert not errors, errors
        last = {entry.doc_id: sorted(c.id for c in entry.chunks) for entry in versions}
        ids = _all_ids(pg_dsn, writer)
        assert ids == sorted(set(ids)), "a chunk in both tables or twice"
        assert ids == sorted(i for d in names for i in last[d])
    mover.maintain()
    assert writer.delta_rows() == 0
    assert [i for i, _ in _rows(pg_dsn, table)] == sorted(i for d in names for i in last[d])
    writer.close()
    mover.close()


def test_writes_ask_for_upkeep_and_it_runs_in_the_background(pg_dsn: str, table: str) -> None:
    settings = StoreSettings(kind="pgvector", uri=pg_dsn, table=table, maintain_every_writes=2)
    store = open_store(settings, default_uri="ignored", s3=S3Settings(), dim=DIM)
    assert isinstance(store, PgVectorStore)
    store.replace_document("a", chunks("a", 3), vectors(3, 1))
    assert store.wait_maintained(timeout=60) and store.delta_rows() == 3  # not asked yet
    store.replace_document("b", chunks("b", 2), vectors(2, 2))
    assert store.wait_maintained(timeout=60)
    assert store.delta_rows() == 0 and store.count() == 5
    assert store.upkeep.failures == 0
    store.close()

    by_rows = PgVectorStore(pg_dsn, dim=DIM, table=table, maintain_every_writes=0,
                            maintain_every_rows=4)  # fmt: skip
    by_rows.replace_document("c", chunks("c", 5), vectors(5, 3))
    assert by_rows.wait_maintained(timeout=60) and by_rows.delta_rows() == 0
    by_rows.close()


def test_a_table_made_before_the_side_table_keeps_working(
    store: PgVectorStore, pg_dsn: str
) -> None:
    """A table created by an earlier folio (no side table): read as it is, given a side
    table by the first write."""
    store.replace_document("old", chunks("old", 2), vectors(2, 1))
    store.maintain()
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP TABLE {}").format(sql.Identifier(store.delta_table)))
    earlier = PgVectorStore(pg_dsn, dim=DIM, table=store.table, maintain_every_writes=0)
    assert earlier.count() == 2 and earlier.search(vectors(1, 1)[0], k=1)[0]["doc_id"] == "old"
    assert earlier.delta_rows() == 0
    earlier.replace_document("new", chunks("new", 1), vectors(1, 2))
    assert earlier.delta_rows() == 1 and earlier.count() == 3
    earlier.close()


def test_vectors_are_stored_bit_exact(store: PgVectorStore, pg_dsn: str) -> None:
    """The text the write sends parses back to the very float32 values (nine digits)."""
    vs = vectors(3, 8)
    vs[0, :4] = [1 / 3, -3.4028235e38, 1.1754944e-38, 1e-45]  # third, extremes, subnormal
    store.replace_document("x", chunks("x", 3), vs)
    with psycopg.connect(pg_dsn) as conn:
        stored = conn.execute(
            sql.SQL("SELECT vector::real[] FROM {} ORDER BY id").format(
                sql.Identifier(store.delta_table))
        ).fetchall()
    assert np.array_equal(np.array([r[0] for r in stored], dtype=np.float32), vs)
