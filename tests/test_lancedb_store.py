"""LanceDB store: replace-not-duplicate, stale rows, search; local and on moto's S3."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest

from folio.config import S3Settings, StoreSettings
from folio.errors import ConfigError
from folio.models import BBox, Chunk
from folio.stores import NullStore, default_vector_uri, open_store
from folio.stores.base import VectorStore
from folio.stores.lancedb_store import LanceDBStore, lance_storage_options
from tests.s3_server import S3Server

DIM = 8


def _chunks(doc_id: str, n: int, tag: str = "") -> list[Chunk]:
    return [
        Chunk(
            id=f"{doc_id}-{i:04d}",
            doc_id=doc_id,
            source=f"s3://b/{doc_id}.pdf",
            index=i,
            text=f"{tag}{doc_id} chunk {i}",
            page_start=i,
            page_end=i + 1,
            headings=["Intro", f"Part {i}"],
            boxes=[(i, BBox(x0=1, y0=2, x1=3, y1=4))],
        )
        for i in range(n)
    ]


def _vectors(n: int, seed: int) -> npt.NDArray[np.float32]:
    rng = np.random.default_rng(seed)
    v = rng.normal(size=(n, DIM)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


@pytest.fixture(params=["local", "s3"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> VectorStore:
    if request.param == "local":
        uri = default_vector_uri(str(tmp_path / "out"))
        return open_store(StoreSettings(), default_uri=uri, s3=S3Settings(), dim=DIM)
    server: S3Server = request.getfixturevalue("s3_server")
    uri = f"s3://{server.create_bucket()}/out/.folio/vectors"
    return open_store(StoreSettings(), default_uri=uri, s3=server.settings, dim=DIM)


def test_empty_store_reads_without_creating(store: VectorStore) -> None:
    assert store.count() == 0 and store.count("a") == 0
    assert store.search(_vectors(1, 0)[0]) == []


def test_reprocessing_replaces_never_duplicates(store: VectorStore) -> None:
    store.replace_document("a", _chunks("a", 5), _vectors(5, 1))
    store.replace_document("b", _chunks("b", 3), _vectors(3, 2))
    assert (store.count(), store.count("a"), store.count("b")) == (8, 5, 3)

    store.replace_document("a", _chunks("a", 5, "v2 "), _vectors(5, 3))
    assert (store.count(), store.count("a")) == (8, 5)

    store.replace_document("a", _chunks("a", 2, "v3 "), _vectors(2, 4))  # fewer: no stale rows
    assert (store.count(), store.count("a"), store.count("b")) == (5, 2, 3)
    texts = {hit["text"] for hit in store.search(_vectors(1, 9)[0], k=10)}
    assert texts == {"v3 a chunk 0", "v3 a chunk 1", "b chunk 0", "b chunk 1", "b chunk 2"}

    store.replace_document("a", [], np.zeros((0, DIM), np.float32))
    assert (store.count(), store.count("a")) == (3, 0)


def test_search_returns_the_right_chunk_first(store: VectorStore) -> None:
    vectors = _vectors(6, 5)
    store.replace_document("doc", _chunks("doc", 6), vectors)
    query = vectors[4] + 0.05 * _vectors(1, 6)[0]
    hits = store.search(query, k=3)
    assert len(hits) == 3
    best = hits[0]
    assert best["text"] == "doc chunk 4" and best["score"] > 0.9
    assert hits[0]["score"] >= hits[1]["score"] >= hits[2]["score"]
    assert best["doc_id"] == "doc" and best["source"] == "s3://b/doc.pdf"
    assert (best["page_start"], best["page_end"]) == (4, 5)
    assert list(best["headings"]) == ["Intro", "Part 4"]
    assert json.loads(best["boxes"]) == [[4, [1, 2, 3, 4]]]
    assert "vector" not in best


def test_quotes_in_doc_id_are_escaped(store: VectorStore) -> None:
    store.replace_document("it's", _chunks("it's", 2), _vectors(2, 7))
    store.replace_document("it's", _chunks("it's", 1), _vectors(1, 8))
    assert store.count("it's") == 1


def test_mismatched_input_is_refused(tmp_path: Path) -> None:
    store = LanceDBStore(str(tmp_path / "v"), dim=DIM)
    with pytest.raises(ValueError, match="shape"):
        store.replace_document("a", _chunks("a", 2), _vectors(3, 0))
    with pytest.raises(ValueError, match="other documents"):
        store.replace_document("a", _chunks("b", 2), _vectors(2, 0))


def test_dimension_change_is_a_config_error(tmp_path: Path) -> None:
    LanceDBStore(str(tmp_path / "v"), dim=DIM).replace_document(
        "a", _chunks("a", 1), _vectors(1, 0)
    )
    with pytest.raises(ConfigError, match="8-dim"):
        LanceDBStore(str(tmp_path / "v"), dim=384).count()


def test_open_store_kinds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    none = open_store(StoreSettings(kind="none"), default_uri="x", s3=S3Settings(), dim=DIM)
    assert (
        isinstance(none, NullStore) and none.count() == 0 and none.search(_vectors(1, 0)[0]) == []
    )
    none.replace_document("a", _chunks("a", 1), _vectors(1, 0))
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
