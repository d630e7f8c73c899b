"""folio.retrieval as a RAG job uses it: an index opened once and queried in-process, with
the records and filters of ``folio search --json``, on LanceDB and on pgvector; and
pgvector end to end through the commands (``folio ingest --store pgvector`` then
``folio search`` with the same options)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

import folio
from folio import cli
from folio.errors import ConfigError, NothingToDoError
from folio.io.layout import VECTORS
from folio.io.sinks import open_sink
from folio.models import BBox, Chunk
from folio.output.chunking import embedding_text
from folio.output.embeddings import Embedder
from folio.retrieval import Index, open_index
from folio.settings.config import EmbeddingSettings, S3Settings, StoreSettings
from folio.stores import open_store

TEXTS = {
    ("doc-a", "/in/reports/a.pdf"): [
        ("text", "Revenue grew by twelve percent in the northern region."),
        ("table", "Region | Revenue\nNorth | 12%\nSouth | 3%"),
    ],
    ("doc-b", "/in/memos/b.pdf"): [
        ("text", "Revenue in the southern region fell slightly this quarter."),
        ("text", "The cafeteria menu changes every Tuesday."),
    ],
}


def _chunks() -> dict[str, list[Chunk]]:
    return {doc_id: [Chunk(id=f"{doc_id}-{i}", doc_id=doc_id, source=source, index=i, kind=kind,
                           text=text, page_start=i + 1, page_end=i + 1, headings=["Q3"],
                           boxes=[(i + 1, BBox(x0=72, y0=90, x1=540, y1=120))])
                     for i, (kind, text) in enumerate(entries)]
            for (doc_id, source), entries in TEXTS.items()}


def write_index(settings: StoreSettings, out: str) -> None:
    embedder = Embedder(EmbeddingSettings())
    store = open_store(settings, default_uri=open_sink(out, S3Settings()).uri(VECTORS),
                       s3=S3Settings(), dim=embedder.dim, embedder=embedder.model_id)
    for doc_id, chunks in _chunks().items():
        store.replace_document(doc_id, chunks, embedder.embed([embedding_text(c) for c in chunks]))
    getattr(store, "close", lambda: None)()


@pytest.fixture(params=["lancedb", "pgvector"])
def index(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Index]:
    out = str(tmp_path / "out")
    if request.param == "lancedb":
        write_index(StoreSettings(), out)
        opened = open_index(out)
    else:
        dsn = request.getfixturevalue("pg_dsn")
        table = request.getfixturevalue("pg_table")
        write_index(StoreSettings(kind="pgvector", uri=dsn, table=table), out)
        opened = folio.open_index(store="pgvector", store_uri=dsn, table=table)
    with opened:
        yield opened


def test_hits_carry_the_citation_of_folio_search_json(index: Index) -> None:
    hits = index.search("revenue growth by region", k=3)
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    assert hits[0].doc_id == "doc-a" and hits[0].source == "/in/reports/a.pdf"
    record = hits[0].model_dump()
    assert list(record) == ["id", "doc_id", "source", "chunk_index", "kind", "page_start",
                            "page_end", "headings", "boxes", "score", "text", "image_uri", "location"]
    assert record["boxes"] == [{"page": record["page_start"], "x0": 72.0, "y0": 90.0,
                                "x1": 540.0, "y1": 120.0}]
    assert record["page_start"] >= 1 and record["headings"] == ["Q3"]
    assert index.count() == 4


def test_filters_limit_the_hits(index: Index) -> None:
    only_b = index.search("revenue", k=4, doc_id="doc-b")
    assert {h.doc_id for h in only_b} == {"doc-b"} and len(only_b) == 2
    tables = index.search("revenue", k=4, kind="table")
    assert [h.id for h in tables] == ["doc-a-1"]
    under = index.search("revenue", k=4, source_prefix="/in/memos/")
    assert {h.source for h in under} == {"/in/memos/b.pdf"}
    both = index.search("revenue", k=4, source=["/in/memos/b.pdf", "/in/reports/a.pdf"],
                        kind=["text"])
    assert {h.id for h in both} == {"doc-a-0", "doc-b-0", "doc-b-1"}
    assert index.search("revenue", k=4, source_prefix="/in/none/") == []
    quoted = index.search("revenue", k=4, doc_id="x' OR '1'='1")  # a value, never SQL
    assert quoted == []


def test_the_cli_prints_the_records_of_the_api(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = str(tmp_path / "out")
    write_index(StoreSettings(), out)
    with open_index(out) as index:
        expected = [h.model_dump() for h in index.search("southern revenue", k=2, kind="text")]
    assert cli.main(["search", "southern revenue", "--out", out, "-k", "2", "--kind", "text",
                     "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == expected


def test_opening_nothing_says_what_to_give(tmp_path: Path) -> None:
    with pytest.raises(NothingToDoError, match="no vectors under"):
        open_index(tmp_path / "never-ingested")
    assert not (tmp_path / "never-ingested").exists()
    with pytest.raises(ConfigError, match=r"--out \(out=\)"):
        open_index()
    with pytest.raises(ConfigError, match="keeps no vectors"):
        open_index(tmp_path, store="none")


@pytest.mark.usefixtures("prefect_api")
def test_pgvector_from_ingest_to_search_with_the_same_options(
    pg_dsn: str, pg_table: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The documented way: ``folio ingest --store pgvector`` with the DSN in
    ``FOLIO_PG_DSN`` (a DSN holding a password is refused on the command line, which every
    local user can read), then ``folio search`` with the same options (it used to look
    for LanceDB under --out)."""
    from folio.samples import report_pages, write_text_pdf
    from folio_prefect.flows import cli as folio_command

    monkeypatch.setenv("FOLIO_STORE__TABLE", pg_table)  # a table of this test's own
    pdf = write_text_pdf(tmp_path / "report.pdf", report_pages(seed=5, n=2))
    out = str(tmp_path / "out")
    monkeypatch.setenv("FOLIO_PG_DSN", pg_dsn)
    store = ["--store", "pgvector"]
    assert folio_command.main(["ingest", str(pdf), "--out", out, *store, "--quiet"]) == 0
    capsys.readouterr()
    assert folio_command.main(["search", "revenue", "--out", out, *store, "--json"]) == 0
    hits = json.loads(capsys.readouterr().out)
    assert hits and {h["source"] for h in hits} == {str(pdf)}
    assert all(h["page_start"] >= 1 for h in hits)
    from folio.output.embeddings import PACKAGED_MODEL_ID

    with folio.open_index(store="pgvector", table=pg_table) as opened:  # the ingest's rows
        assert opened.store.recorded_embedder() == PACKAGED_MODEL_ID  # name their model
    # --out alone reads LanceDB, which this ingest never wrote: the message says what to give
    assert folio_command.main(["search", "revenue", "--out", out]) == cli.EXIT_NOTHING
    assert "--store-uri" in capsys.readouterr().err


def test_the_index_names_its_embedder_and_is_queried_with_it(index: Index) -> None:
    """The rows name the model that made them; an index opened with another model in the
    settings is still queried with its own (the packaged one here), never another's."""
    from folio.output.embeddings import PACKAGED_MODEL_ID

    assert index.store.recorded_embedder() == PACKAGED_MODEL_ID
    assert index.embedder.model_id == PACKAGED_MODEL_ID
    assert index.search("revenue growth by region", k=1)[0].doc_id == "doc-a"


def test_an_index_is_queried_with_the_model_its_rows_name() -> None:
    from folio.output.embeddings import PACKAGED_MODEL_ID
    from folio.retrieval import index_embedder

    other = EmbeddingSettings(model_path="/models/e5-small.onnx",
                              tokenizer_path="/models/tokenizer.json")
    configured = Embedder(other)
    # rows from before folio recorded it name none: the settings decide, as before
    assert index_embedder(None, configured, other) is configured
    assert index_embedder("onnx:e5-small.onnx", configured, other) is configured
    # the index was built with the packaged model: it is used, whatever the settings say
    packaged = index_embedder(PACKAGED_MODEL_ID, configured, other)
    assert packaged.model_id == PACKAGED_MODEL_ID and packaged.settings.model_path is None
    # a model the settings do not load: refused, naming it (no query in another space)
    with pytest.raises(ConfigError, match="onnx:bge-small.onnx.*FOLIO_EMBEDDING__MODEL_PATH"):
        index_embedder("onnx:bge-small.onnx", Embedder(EmbeddingSettings()), EmbeddingSettings())
