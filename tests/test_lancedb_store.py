"""LanceDB store specifics; what every store does is in test_vector_store_contract.py."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from folio.errors import ConfigError
from folio.settings.config import S3Settings, StoreSettings
from folio.stores import NullStore, default_vector_uri, open_store
from folio.stores.base import DocumentVectors, VectorStore
from folio.stores.lance_s3 import lance_storage_options
from folio.stores.lance_schema import chunk_schema
from folio.stores.lancedb_store import LanceDBStore
from tests.store_data import DIM, chunks, vectors


def test_dimension_change_is_a_config_error(tmp_path: Path) -> None:
    LanceDBStore(str(tmp_path / "v"), dim=DIM).replace_document(
        "a", chunks("a", 1), vectors(1, 0)
    )
    with pytest.raises(ConfigError, match="8-dim"):
        LanceDBStore(str(tmp_path / "v"), dim=384).count()


def test_a_batch_of_documents_is_at_most_two_table_versions(tmp_path: Path) -> None:
    """The point of batching: N documents add one version (the upsert) and one more only
    when stale rows are deleted, never N."""
    import lancedb

    store = LanceDBStore(str(tmp_path / "v"), dim=DIM)
    store.replace_document("seed", chunks("seed", 1), vectors(1, 0))  # creates the table
    table = lancedb.connect(str(tmp_path / "v")).open_table("chunks")

    def version() -> int:
        table.checkout_latest()
        return int(table.version)

    batch = [DocumentVectors(f"d{i}", chunks(f"d{i}", 3), vectors(3, i)) for i in range(6)]
    before = version()
    store.replace_documents(batch)
    assert version() == before + 1 and store.count() == 19  # nothing stale: no delete

    # rewriting some, emptying one and adding one: the upsert and one delete
    before = version()
    store.replace_documents(
        [
            DocumentVectors("d0", chunks("d0", 1, "v2 "), vectors(1, 7)),
            DocumentVectors("d1", [], np.zeros((0, DIM), np.float32)),
            DocumentVectors("d9", chunks("d9", 2), vectors(2, 8)),
        ]
    )
    assert version() == before + 2
    assert (store.count("d0"), store.count("d1"), store.count("d9"), store.count()) == (1, 0, 2, 16)
    before = version()
    store.replace_documents([DocumentVectors("d2", [], np.zeros((0, DIM), np.float32))])
    assert version() == before + 1 and store.count() == 13


def test_open_store_kinds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    none = open_store(StoreSettings(kind="none"), default_uri="x", s3=S3Settings(), dim=DIM)
    assert (
        isinstance(none, NullStore) and none.count() == 0 and none.search(vectors(1, 0)[0]) == []
    )
    none.replace_document("a", chunks("a", 1), vectors(1, 0))
    none.replace_documents([DocumentVectors("a", chunks("a", 1), vectors(1, 0))])
    assert none.count("a") == 0
    monkeypatch.delenv("FOLIO_PG_DSN", raising=False)
    with pytest.raises(ConfigError, match="needs a PostgreSQL DSN"):
        open_store(StoreSettings(kind="pgvector"), default_uri="x", s3=S3Settings(), dim=DIM)
    explicit = open_store(
        StoreSettings(uri=str(tmp_path / "mine"), table="t2"),
        default_uri="ignored",
        s3=S3Settings(),
        dim=DIM,
    )
    assert explicit.name == f"lancedb:{tmp_path / 'mine'}" and explicit.table == "t2"
    assert isinstance(explicit, VectorStore)


def test_default_vector_uri(tmp_path: Path) -> None:
    assert default_vector_uri("s3://b/out/") == "s3://b/out/.folio/vectors"
    assert default_vector_uri(str(tmp_path)) == str(tmp_path / ".folio" / "vectors")


def test_storage_options_for_s3_clones() -> None:
    from pydantic import SecretStr

    secret = "s3cr3t-never-shown"
    opts = lance_storage_options(
        S3Settings(
            endpoint_url="http://127.0.0.1:9000",
            access_key_id="k",
            secret_access_key=SecretStr(secret),
        )
    )
    assert opts == {
        "aws_endpoint": "http://127.0.0.1:9000",
        "allow_http": "true",
        "aws_region": "us-east-1",
        "aws_access_key_id": "k",
        "aws_secret_access_key": secret,
    }
    store = LanceDBStore("s3://b/v", dim=DIM, storage_options=opts)
    assert secret not in repr(store) and secret not in store.name


def test_search_sees_its_own_writes_at_once_and_others_within_the_staleness(
    tmp_path: Path,
) -> None:
    """Searches skip the per-query version check (an S3 request) but never miss what
    their own store object wrote; another worker's write shows within
    ``search_staleness_s``."""
    import time

    from folio.stores.lance_tuning import LanceTuning

    uri = str(tmp_path / "v")
    mine = LanceDBStore(uri, dim=DIM, tuning=LanceTuning(search_staleness_s=0.5))
    theirs = LanceDBStore(uri, dim=DIM)
    mine.replace_document("a", chunks("a", 2), vectors(2, 0))
    assert mine.search(vectors(2, 0)[1], k=1)[0]["id"] == "a-0001"
    mine.replace_document("a", chunks("a", 2, id_tag="v2-"), vectors(2, 1))  # own write
    assert mine.search(vectors(2, 1)[0], k=1)[0]["id"] == "a-v2-0000"
    theirs.replace_document("b", chunks("b", 2), vectors(2, 2))
    time.sleep(0.6)
    assert mine.search(vectors(2, 2)[1], k=1)[0]["id"] == "b-0001"



def _legacy_table(uri: str) -> None:
    """A table as folio wrote it before pages counted from 1: ``boxes`` a JSON string
    ``[[page index, [x0, y0, x1, y1]]]``, ``page_start``/``page_end`` from 0."""
    import json

    import lancedb
    import pyarrow as pa

    schema = pa.schema([f if f.name != "boxes" else pa.field("boxes", pa.string())
                        for f in chunk_schema(DIM)])
    row = {"id": "old-0", "doc_id": "old", "source": "s3://b/old.pdf", "chunk_index": 0,
           "kind": "text", "text": "old chunk", "page_start": 2, "page_end": 3,
           "headings": ["Intro"], "boxes": json.dumps([[2, [1, 2, 3, 4.5]]]),
           "vector": vectors(1, 3)[0].tolist()}
    lancedb.connect(uri).create_table("chunks", pa.Table.from_pylist([row], schema=schema))


def test_a_table_of_an_older_folio_reads_with_pages_from_1_and_refuses_writes(
    tmp_path: Path,
) -> None:
    uri = str(tmp_path / "v")
    _legacy_table(uri)
    store = LanceDBStore(uri, dim=DIM)
    (hit,) = store.search(vectors(1, 3)[0], k=1)
    assert (hit["page_start"], hit["page_end"]) == (3, 4)
    assert hit["boxes"] == [{"page": 3, "x0": 1, "y0": 2, "x1": 3, "y1": 4.5}]
    # new rows would mix two page conventions in one table: say what to do instead
    with pytest.raises(ConfigError, match="older folio.*--reprocess"):
        store.replace_document("a", chunks("a", 1), vectors(1, 0))
    assert store.count() == 1
