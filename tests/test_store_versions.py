"""Both stores (real LanceDB and PostgreSQL): a write naming its source replaces every
row of that source (its old version's too), never another source's rows of the same
bytes; ``delete_sources`` removes a gone source; tables written before rows carried
their version get the columns on their next write (docs/index-sync.md)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest

from folio.models import Chunk
from folio.stores.base import DocumentVectors, VectorStore
from folio.stores.lance_schema import VERSION_COLUMNS, chunk_schema
from folio.stores.lancedb_store import LanceDBStore
from tests.store_data import DIM, chunks, vectors


def _version(doc_id: str, source: str, n: int, sha: str) -> DocumentVectors:
    rows = [c.model_copy(update={"id": f"{source}:{sha}:{c.index}", "source": source,
                                 "sha256": sha, "config_hash": "cfg"})
            for c in chunks(doc_id, n)]
    return DocumentVectors(doc_id, rows, vectors(n, hash(sha) % 1000), source=source)


@pytest.fixture(params=["lancedb", "pgvector"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[VectorStore]:
    if request.param == "lancedb":
        lance = LanceDBStore(str(tmp_path / "v"), dim=DIM)
        yield lance
        lance.close()
        return
    from folio.stores.pgvector_store import PgVectorStore

    pg = PgVectorStore(request.getfixturevalue("pg_dsn"), dim=DIM,
                       table=request.getfixturevalue("pg_table"))
    yield pg
    pg.close()


def _sources(store: VectorStore) -> dict[str, set[str]]:
    hits = store.search(vectors(1, 5)[0], k=100)
    found: dict[str, set[str]] = {}
    for hit in hits:
        found.setdefault(hit["source"], set()).add(hit["sha256"])
    return found


def test_a_new_version_replaces_its_source_and_only_it(store: VectorStore) -> None:
    store.replace_documents([_version("old", "s3://b/a.pdf", 4, "old"),
                             _version("same", "s3://b/x.pdf", 2, "same"),
                             _version("same", "s3://b/y.pdf", 2, "same")])  # same bytes
    assert _sources(store) == {"s3://b/a.pdf": {"old"}, "s3://b/x.pdf": {"same"},
                               "s3://b/y.pdf": {"same"}}
    store.replace_documents([_version("new", "s3://b/a.pdf", 2, "new")])  # another doc id
    assert _sources(store)["s3://b/a.pdf"] == {"new"} and store.count("old") == 0
    assert store.delete_sources(["s3://b/y.pdf"]) == 2
    assert _sources(store) == {"s3://b/a.pdf": {"new"}, "s3://b/x.pdf": {"same"}}
    assert store.count("same") == 2 and store.count() == 4  # x.pdf's rows stayed


def test_a_lance_table_from_before_versions_gets_the_columns(tmp_path: Path) -> None:
    import lancedb

    old = pa.schema([f for f in chunk_schema(DIM) if f.name not in VERSION_COLUMNS])
    rows: list[Chunk] = chunks("a", 2)
    db = lancedb.connect(str(tmp_path / "v"))
    table = db.create_table("chunks", schema=old)
    from folio.stores.lance_schema import _rows

    table.add(_rows(rows, vectors(2, 1), old))
    store = LanceDBStore(str(tmp_path / "v"), dim=DIM)
    assert "sha256" not in store.search(vectors(1, 1)[0], k=1)[0]  # read as it is
    store.replace_documents([_version("a2", rows[0].source, 1, "v2")])
    assert {"sha256", "config_hash"} <= set(db.open_table("chunks").schema.names)
    assert _sources(store) == {rows[0].source: {"v2"}}  # the old version's rows left


def test_a_pg_table_from_before_versions_gets_the_columns(pg_dsn: str, pg_table: str) -> None:
    import psycopg

    from folio.stores.pgvector_store import PgVectorStore

    store = PgVectorStore(pg_dsn, dim=DIM, table=pg_table)
    store.replace_document("a", chunks("a", 2), vectors(2, 1))
    store.close()
    with psycopg.connect(pg_dsn, autocommit=True) as conn:  # as an older folio made them
        for name in (pg_table, f"{pg_table}_delta"):
            conn.execute(f"ALTER TABLE {name} DROP COLUMN sha256, DROP COLUMN config_hash")
    store = PgVectorStore(pg_dsn, dim=DIM, table=pg_table)
    assert "sha256" not in store.search(vectors(1, 1)[0], k=1)[0]  # read as it is
    store.replace_documents([_version("a2", "s3://b/a.pdf", 1, "v2")])
    assert _sources(store) == {"s3://b/a.pdf": {"v2"}} and store.count() == 1
    store.maintain()  # the move carries the new columns into the HNSW table
    assert _sources(store) == {"s3://b/a.pdf": {"v2"}}
    store.close()
