"""What every vector store promises, run on each: LanceDB (local and on a real S3 endpoint)
and pgvector (a real PostgreSQL). Store-specific behaviour is in test_<store>_store.py."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from folio.settings.config import S3Settings, StoreSettings
from folio.stores import default_vector_uri, open_store
from folio.stores.base import DocumentVectors, VectorStore
from tests.s3_server import S3Server
from tests.store_data import DIM, chunks, vectors


@pytest.fixture(params=["lancedb-local", "lancedb-s3", "pgvector"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[VectorStore]:
    if request.param == "lancedb-local":
        uri = default_vector_uri(str(tmp_path / "out"))
        opened = open_store(StoreSettings(), default_uri=uri, s3=S3Settings(), dim=DIM)
    elif request.param == "lancedb-s3":
        server: S3Server = request.getfixturevalue("s3_server")
        uri = f"s3://{server.create_bucket()}/out/.folio/vectors"
        opened = open_store(StoreSettings(), default_uri=uri, s3=server.settings, dim=DIM)
    else:
        dsn: str = request.getfixturevalue("pg_dsn")
        settings = StoreSettings(kind="pgvector", uri=dsn, table=f"t_{uuid.uuid4().hex[:12]}")
        opened = open_store(settings, default_uri="ignored", s3=S3Settings(), dim=DIM)
    assert isinstance(opened, VectorStore)
    yield opened
    close = getattr(opened, "close", None)
    if callable(close):
        close()


def test_empty_store_reads_without_creating(store: VectorStore) -> None:
    assert store.count() == 0 and store.count("a") == 0
    assert store.search(vectors(1, 0)[0]) == []


def test_reprocessing_replaces_never_duplicates(store: VectorStore) -> None:
    store.replace_document("a", chunks("a", 5), vectors(5, 1))
    store.replace_document("b", chunks("b", 3), vectors(3, 2))
    assert (store.count(), store.count("a"), store.count("b")) == (8, 5, 3)

    store.replace_document("a", chunks("a", 5, "v2 "), vectors(5, 3))
    assert (store.count(), store.count("a")) == (8, 5)

    store.replace_document("a", chunks("a", 2, "v3 "), vectors(2, 4))  # fewer: no stale rows
    assert (store.count(), store.count("a"), store.count("b")) == (5, 2, 3)
    texts = {hit["text"] for hit in store.search(vectors(1, 9)[0], k=10)}
    assert texts == {"v3 a chunk 0", "v3 a chunk 1", "b chunk 0", "b chunk 1", "b chunk 2"}

    store.replace_document("a", [], np.zeros((0, DIM), np.float32))
    assert (store.count(), store.count("a")) == (3, 0)


def test_search_ranks_the_right_chunk_first_with_citations(store: VectorStore) -> None:
    vs = vectors(6, 5)
    store.replace_document("doc", chunks("doc", 6), vs)
    hits = store.search(vs[4] + 0.05 * vectors(1, 6)[0], k=3)
    assert len(hits) == 3
    best = hits[0]
    assert best["text"] == "doc chunk 4" and best["score"] > 0.9
    assert hits[0]["score"] >= hits[1]["score"] >= hits[2]["score"]
    assert best["doc_id"] == "doc" and best["source"] == "s3://b/doc.pdf"
    assert (best["page_start"], best["page_end"]) == (5, 6)
    assert list(best["headings"]) == ["Intro", "Part 4"]
    # a structure, not a JSON string: page from 1 (store_data's chunk 4 is on page 5)
    assert best["boxes"] == [{"page": 5, "x0": 1, "y0": 2, "x1": 3, "y1": 4.5}]
    assert "vector" not in best


def test_quotes_in_doc_id_are_plain_data(store: VectorStore) -> None:
    doc = "it's'); DROP TABLE chunks; --"
    store.replace_document(doc, chunks(doc, 2), vectors(2, 7))
    store.replace_document(doc, chunks(doc, 1), vectors(1, 8))
    assert store.count(doc) == 1 and store.count() == 1


def test_mismatched_input_is_refused(store: VectorStore) -> None:
    with pytest.raises(ValueError, match="shape"):
        store.replace_document("a", chunks("a", 2), vectors(3, 0))
    with pytest.raises(ValueError, match="other documents"):
        store.replace_document("a", chunks("b", 2), vectors(2, 0))
    assert store.count() == 0


def _doc(doc_id: str, n: int, seed: int, tag: str = "") -> DocumentVectors:
    return DocumentVectors(doc_id, chunks(doc_id, n, tag), vectors(n, seed))


def _texts(store: VectorStore) -> set[str]:
    return {hit["text"] for hit in store.search(vectors(1, 99)[0], k=50)}


def test_a_batch_replaces_each_listed_document_and_no_other(store: VectorStore) -> None:
    store.replace_documents([_doc("a", 5, 1), _doc("b", 3, 2), _doc("c", 4, 3)])
    assert [store.count(d) for d in ("a", "b", "c")] == [5, 3, 4] and store.count() == 12

    # a shrinks, b empties, c is left out; d is new and e was never stored
    empty = np.zeros((0, DIM), np.float32)
    store.replace_documents(
        [
            _doc("a", 2, 4, "v2 "),
            DocumentVectors("b", [], empty),
            _doc("d", 1, 5),
            DocumentVectors("e", [], empty),
        ]
    )
    assert [store.count(d) for d in ("a", "b", "c", "d", "e")] == [2, 0, 4, 1, 0]
    assert store.count() == 7
    assert _texts(store) == {
        "v2 a chunk 0", "v2 a chunk 1", "c chunk 0", "c chunk 1", "c chunk 2", "c chunk 3",
        "d chunk 0",
    }  # fmt: skip

    store.replace_documents([])  # nothing to do
    store.replace_documents([DocumentVectors("a", [], empty), DocumentVectors("c", [], empty)])
    assert (store.count(), store.count("d")) == (1, 1)


def test_a_batch_of_only_empty_documents_on_an_empty_store(store: VectorStore) -> None:
    store.replace_documents([DocumentVectors("a", [], np.zeros((0, DIM), np.float32))])
    assert store.count() == 0 and store.search(vectors(1, 0)[0]) == []


def test_a_document_twice_in_one_batch_writes_nothing(store: VectorStore) -> None:
    store.replace_documents([_doc("a", 2, 1)])
    with pytest.raises(ValueError, match="twice"):
        store.replace_documents([_doc("b", 3, 2), _doc("a", 1, 3, "v2 "), _doc("a", 4, 4)])
    assert (store.count(), store.count("b")) == (2, 0)
    assert _texts(store) == {"a chunk 0", "a chunk 1"}


def test_a_chunk_id_in_two_documents_of_a_batch_is_refused(store: VectorStore) -> None:
    theirs = [c.model_copy(update={"doc_id": "b"}) for c in chunks("a", 2)]  # a's ids
    with pytest.raises(ValueError, match="chunk ids of another document"):
        store.replace_documents([_doc("a", 2, 1), DocumentVectors("b", theirs, vectors(2, 2))])
    assert store.count() == 0


def test_a_mismatched_entry_refuses_the_whole_batch_before_writing(store: VectorStore) -> None:
    store.replace_documents([_doc("a", 2, 1)])
    with pytest.raises(ValueError, match="shape"):
        store.replace_documents(
            [_doc("a", 1, 2, "v2 "), DocumentVectors("b", chunks("b", 2), vectors(3, 3))]
        )
    with pytest.raises(ValueError, match="other documents"):
        store.replace_documents(
            [_doc("a", 1, 2, "v2 "), DocumentVectors("b", chunks("c", 2), vectors(2, 3))]
        )
    assert (store.count(), store.count("b"), store.count("c")) == (2, 0, 0)
    assert _texts(store) == {"a chunk 0", "a chunk 1"}
