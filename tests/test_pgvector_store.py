"""pgvector store on a real PostgreSQL (pgserver): what a server adds to the contract every
store keeps (test_vector_store_contract.py): concurrent writers, dropped connections,
secrets in DSNs, the real flow."""

from __future__ import annotations

import threading
import traceback
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import make_conninfo

from folio.errors import ConfigError, StorageError
from folio.settings.config import S3Settings, StoreSettings
from folio.stores import open_store
from folio.stores.base import DocumentVectors, VectorStore
from folio.stores.lancedb_store import LanceDBStore
from folio.stores.pg_dsn import redact_dsn
from folio.stores.pgvector_store import PgVectorStore
from tests.store_data import DIM, chunks, vectors

SECRET = "s3cret-pw/never+shown"


def _table_exists(dsn: str, table: str) -> bool:
    with psycopg.connect(dsn) as conn:
        row = conn.execute("SELECT to_regclass(%s)", (table,)).fetchone()
    return row is not None and row[0] is not None


@pytest.fixture()
def table(pg_table: str) -> str:
    return pg_table


@pytest.fixture()
def store(pg_dsn: str, table: str) -> Iterator[PgVectorStore]:
    s = open_store(StoreSettings(kind="pgvector", uri=pg_dsn, table=table),
                   default_uri="ignored", s3=S3Settings(), dim=DIM)
    assert isinstance(s, PgVectorStore) and isinstance(s, VectorStore)
    yield s
    s.close()


def test_an_empty_document_creates_no_table(store: PgVectorStore, pg_dsn: str) -> None:
    store.replace_document("a", [], np.zeros((0, DIM), np.float32))
    assert not _table_exists(pg_dsn, store.table)
    assert store.name.startswith("pgvector:") and store.table.startswith("t_")


def test_search_rows_match_lancedb(store: PgVectorStore, tmp_path: Path) -> None:
    """The same keys, scores and citations as the LanceDB store for the same chunks."""
    vs = vectors(6, 5)
    doc_chunks = chunks("doc", 6)
    store.replace_document("doc", doc_chunks, vs)
    query = vs[4] + 0.05 * vectors(1, 6)[0]
    best = store.search(query, k=3)[0]
    assert (best["chunk_index"], best["kind"], best["id"]) == (4, "text", "doc-0004")

    lance = LanceDBStore(str(tmp_path / "v"), dim=DIM)
    lance.replace_document("doc", doc_chunks, vs)
    lance_best = lance.search(query, k=3)[0]
    assert set(best) == set(lance_best)
    assert best["score"] == pytest.approx(lance_best["score"], abs=1e-5)
    assert best["boxes"] == lance_best["boxes"] == [
        {"page": 5, "x0": 1, "y0": 2, "x1": 3, "y1": 4.5}]


def test_search_beyond_hnsw_ef_search_returns_k_rows(store: PgVectorStore) -> None:
    store.replace_document("big", chunks("big", 120), vectors(120, 11))
    assert len(store.search(vectors(1, 12)[0], k=100)) == 100


def test_non_finite_vectors_and_wrong_query_sizes_are_refused(store: PgVectorStore) -> None:
    bad = vectors(2, 0)
    bad[1, 3] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        store.replace_document("a", chunks("a", 2), bad)
    assert store.count() == 0
    with pytest.raises(ValueError, match="query vector has 384 values"):
        store.search(np.ones(384, np.float32))


def test_dimension_change_is_a_config_error(pg_dsn: str, table: str) -> None:
    PgVectorStore(pg_dsn, dim=DIM, table=table).replace_document(
        "a", chunks("a", 1), vectors(1, 0)
    )
    with pytest.raises(ConfigError, match="8-dim"):
        PgVectorStore(pg_dsn, dim=384, table=table).count()
    with pytest.raises(ConfigError, match="8-dim"):
        PgVectorStore(pg_dsn, dim=384, table=table).replace_document(
            "a", chunks("a", 1), vectors(1, 0, dim=384)
        )


@pytest.mark.parametrize(
    "name", ["chunks; DROP TABLE x", 'a"b', "1chunks", "", "public.chunks", "x" * 49, "tä"]
)
def test_table_names_must_be_plain_identifiers(name: str) -> None:
    with pytest.raises(ConfigError, match="plain SQL identifier"):
        PgVectorStore("postgresql://u@h/db", dim=DIM, table=name)


@pytest.mark.parametrize(
    "dsn",
    [
        f"postgresql://folio:{SECRET.replace('/', '%2F').replace('+', '%2B')}@127.0.0.1:1/rag",
        f"host=127.0.0.1 port=1 dbname=rag user=folio password='{SECRET}'",
    ],
)
def test_connection_errors_are_transient_and_never_show_the_password(dsn: str) -> None:
    store = PgVectorStore(dsn, dim=DIM)
    assert SECRET not in repr(store) and SECRET not in store.name
    assert "password" not in store.name and "127.0.0.1" in store.name
    with pytest.raises(StorageError) as info:
        store.replace_document("a", chunks("a", 1), vectors(1, 0))
    shown = "".join(traceback.format_exception(info.value))
    assert "connect" in str(info.value) and "127.0.0.1" in str(info.value)
    for form in (SECRET, SECRET.replace("/", "%2F")):
        assert form not in shown
    assert "password" not in redact_dsn(dsn)


def test_malformed_or_missing_dsn_is_a_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ConfigError, match="not a PostgreSQL DSN") as info:
        PgVectorStore(f"password={SECRET} host", dim=DIM)
    assert SECRET not in str(info.value)
    # a raw "/" in a URI's password (issue 58): libpq took "folio" for the host and the
    # rest for the database, and the store's name showed both halves of the password
    with pytest.raises(ConfigError, match="raw '/'") as info:
        PgVectorStore(f"postgresql://folio:{SECRET}@127.0.0.1:1/rag", dim=DIM)
    assert not any(part in str(info.value) for part in SECRET.split("/"))
    with pytest.raises(ConfigError, match="not a PostgreSQL DSN"):
        open_store(StoreSettings(kind="pgvector", uri="/some/folder"), default_uri="x",
                   s3=S3Settings(), dim=DIM)
    monkeypatch.delenv("FOLIO_PG_DSN", raising=False)
    with pytest.raises(ConfigError, match="needs a PostgreSQL DSN"):
        open_store(StoreSettings(kind="pgvector"), default_uri="x", s3=S3Settings(), dim=DIM)
    monkeypatch.setenv("FOLIO_PG_DSN", "postgresql://u@dbhost:6543/rag")
    store = open_store(StoreSettings(kind="pgvector"), default_uri="x", s3=S3Settings(), dim=DIM)
    assert isinstance(store, PgVectorStore) and "dbhost" in store.name


def test_a_dropped_connection_is_replaced(store: PgVectorStore, pg_dsn: str) -> None:
    store.replace_document("a", chunks("a", 2), vectors(2, 1))
    with psycopg.connect(pg_dsn, autocommit=True) as admin:  # as a server restart would
        admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                      " WHERE application_name = 'folio' AND pid <> pg_backend_pid()")
    assert store.count("a") == 2


def _race(write: Callable[[int], None]) -> None:
    """``write(0)`` and ``write(1)`` in two threads released at the same instant."""
    barrier = threading.Barrier(2)
    errors: list[BaseException] = []

    def run(i: int) -> None:
        try:
            barrier.wait(timeout=10)
            write(i)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not errors, errors


@pytest.mark.parametrize("shared", [False, True], ids=["two-connections", "one-store"])
def test_concurrent_replaces_of_one_document_leave_one_copy(
    pg_dsn: str, table: str, shared: bool
) -> None:
    """Writers with different chunk id sets (another config hash) race on one document."""
    stores = [PgVectorStore(pg_dsn, dim=DIM, table=table) for _ in range(2)]
    if shared:
        stores = [stores[0], stores[0]]
    stores[0].replace_document("seed", chunks("seed", 1), vectors(1, 0))  # creates the table
    versions = [(chunks("doc", 40, "A ", "a"), vectors(40, 1)),
                (chunks("doc", 25, "B ", "b"), vectors(25, 2))]
    for _ in range(10):
        _race(lambda i: stores[i].replace_document("doc", *versions[i]))
        count = stores[0].count("doc")
        texts = {h["text"][:2] for h in stores[0].search(vectors(1, 3)[0], k=100)} - {"se"}
        assert (count, texts) in ((40, {"A "}), (25, {"B "})), (count, texts)
    for s in stores:
        s.close()


def test_batches_sharing_documents_in_opposite_order_do_not_deadlock(
    pg_dsn: str, table: str
) -> None:
    """Each batch locks its documents in key order, whatever order it lists them in."""
    stores = [PgVectorStore(pg_dsn, dim=DIM, table=table) for _ in range(2)]
    stores[0].replace_document("seed", chunks("seed", 1), vectors(1, 0))  # creates the table
    names = [f"doc{i}" for i in range(12)]
    batches = [
        [DocumentVectors(d, chunks(d, 4, "A "), vectors(4, 1)) for d in names],
        [DocumentVectors(d, chunks(d, 2, "B "), vectors(2, 2)) for d in reversed(names)],
    ]
    for _ in range(5):
        _race(lambda i: stores[i].replace_documents(batches[i]))
        counts = {stores[0].count(d) for d in names}
        assert counts in ({4}, {2}), counts  # one batch won whole, never a mix
    for s in stores:
        s.close()


def test_two_writers_may_create_the_table_at_once(pg_dsn: str, table: str) -> None:
    stores = [PgVectorStore(pg_dsn, dim=DIM, table=table) for _ in range(2)]
    _race(lambda i: stores[i].replace_document(f"d{i}", chunks(f"d{i}", 3), vectors(3, i)))
    assert (stores[0].count(), stores[1].count("d0")) == (6, 3)
    for s in stores:
        s.close()


def test_missing_rights_are_a_config_error(pg_dsn: str, table: str) -> None:
    role = f"folio_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(pg_dsn, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(role)))
    try:
        dsn = make_conninfo(pg_dsn, user=role)
        with pytest.raises(ConfigError, match="allowed to use the table"):
            PgVectorStore(dsn, dim=DIM, table=table).replace_document(
                "a", chunks("a", 1), vectors(1, 0)
            )
    finally:
        with psycopg.connect(pg_dsn, autocommit=True) as admin:
            admin.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))


@pytest.mark.usefixtures("prefect_api")
def test_flow_ingests_into_pgvector_and_reprocess_keeps_the_count(
    pg_dsn: str, table: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from folio.samples import report_pages, write_text_pdf
    from folio.stores import PG_DSN_ENV
    from folio_prefect.flows.ingest import ingest

    pdf = write_text_pdf(tmp_path / "report.pdf", report_pages(seed=3, n=2))
    # the DSN from the worker's environment: a run's settings are stored by Prefect
    # (docs/security.md)
    monkeypatch.setenv(PG_DSN_ENV, pg_dsn)
    settings = {"store.kind": "pgvector", "store.table": table}
    report = ingest(sources=[str(pdf)], out=str(tmp_path / "out"), settings=settings)
    doc = report["documents"][0]
    assert doc["outcome"] == "ok" and doc["chunks"] > 0, doc
    assert doc["vector_table"].startswith("pgvector:")
    store = PgVectorStore(pg_dsn, dim=384, table=table)
    assert store.count(doc["doc_id"]) == store.count() == doc["chunks"]

    again = ingest(sources=[str(pdf)], out=str(tmp_path / "out"), settings=settings,
                   reprocess=True)
    assert not again["documents"][0]["cached"]
    assert store.count(doc["doc_id"]) == store.count() == doc["chunks"]
    hits = store.search(np.ones(384, np.float32), k=1)
    assert hits[0]["doc_id"] == doc["doc_id"] and hits[0]["source"].endswith("report.pdf")
    store.close()


def test_ef_search_reaches_the_store_from_the_settings() -> None:
    from folio.settings.config import S3Settings, StoreSettings
    from folio.stores import open_store

    settings = StoreSettings(kind="pgvector", uri="postgresql://u@127.0.0.1:1/db", hnsw_ef_search=250)
    store = open_store(settings, default_uri="unused", s3=S3Settings(), dim=8)
    assert isinstance(store, PgVectorStore) and store.ef_search == 250
    assert StoreSettings().hnsw_ef_search == PgVectorStore("postgresql://u@h/db", dim=8).ef_search
