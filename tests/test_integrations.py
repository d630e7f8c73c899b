"""LangChain and LlamaIndex against their real core packages: the retrievers return the
frameworks' own objects with folio's citation in the metadata, and the loader/reader turn
an ingest's outputs into their documents."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from folio.errors import BadInputError
from folio.models import (
    BBox,
    Block,
    DocumentOutcome,
    DocumentResult,
    Label,
    PageOutcome,
    PageResult,
)
from folio.output.outputs import document_json
from folio.retrieval import Index, open_index
from folio.settings.config import StoreSettings
from tests.test_retrieval import write_index

langchain_core = pytest.importorskip("langchain_core")
llama_index_core = pytest.importorskip("llama_index.core")


@pytest.fixture()
def index(tmp_path: Path) -> Iterator[Index]:
    write_index(StoreSettings(), str(tmp_path / "out"))
    with open_index(tmp_path / "out") as opened:
        yield opened


def _outputs(tmp_path: Path) -> Path:
    """An output folder as an ingest leaves it: two documents' document.json and
    document.md, and folio's own folders, which hold no documents to load."""
    out = tmp_path / "outputs"
    for n, title in ((1, "Revenue"), (2, "Safety")):
        blocks = [Block(label=Label.SECTION_HEADER, bbox=BBox(x0=72, y0=72, x1=300, y1=90),
                        content=f"{title} report", order=0, level=1),
                  Block(label=Label.TEXT, bbox=BBox(x0=72, y0=100, x1=540, y1=140),
                        content=f"The {title.lower()} figures of the year, page two.", order=1)]
        pages = [PageResult(index=i, width_pt=612, height_pt=792, outcome=PageOutcome.OK,
                            blocks=blocks if i == 1 else []) for i in range(2)]
        doc = DocumentResult(source=f"/in/{title.lower()}.pdf", doc_id=f"doc{n}", sha256="ab" * 32,
                             page_count=2, pages=pages, outcome=DocumentOutcome.OK)
        folder = out / f"{title.lower()}-doc{n}"
        folder.mkdir(parents=True)
        (folder / "document.json").write_text(document_json(doc))
        (folder / "document.md").write_text(f"# {title} report\n\nThe figures.\n")
    (out / "_quarantine" / "x").mkdir(parents=True)
    (out / "_quarantine" / "x" / "document.json").write_text("{}")
    return out


def test_langchain_retriever_returns_documents_with_the_citation(index: Index) -> None:
    from langchain_core.documents import Document

    from folio.integrations.langchain import FolioRetriever

    retriever = FolioRetriever(index=index, k=2, search_kwargs={"kind": "text"})
    docs = retriever.invoke("revenue growth by region")
    assert len(docs) == 2 and all(isinstance(d, Document) for d in docs)
    first = docs[0]
    assert first.page_content.startswith("Revenue grew")
    assert first.metadata["source"] == "/in/reports/a.pdf" and first.metadata["doc_id"] == "doc-a"
    assert first.metadata["page_start"] == 1 and first.metadata["boxes"][0]["page"] == 1
    assert first.metadata["kind"] == "text" and 0 < first.metadata["score"] <= 1
    assert first.id == "doc-a-0" and "text" not in first.metadata


def test_llama_index_retriever_returns_nodes_with_scores(index: Index) -> None:
    from llama_index.core.schema import MetadataMode, NodeWithScore

    from folio.integrations.llama_index import FolioRetriever

    nodes = FolioRetriever(index, similarity_top_k=3, filters={"doc_id": "doc-b"}).retrieve(
        "southern revenue")
    assert all(isinstance(n, NodeWithScore) for n in nodes) and len(nodes) == 2
    assert nodes[0].score is not None and nodes[0].score >= nodes[1].score  # type: ignore[operator]
    node = nodes[0].node
    assert node.node_id == "doc-b-0" and node.metadata["source"] == "/in/memos/b.pdf"
    assert node.metadata["page_end"] == 1 and node.metadata["headings"] == ["Q3"]
    shown = node.get_content(metadata_mode=MetadataMode.LLM)
    assert "/in/memos/b.pdf" in shown and "x0" not in shown  # coordinates are for citing


def test_langchain_loader_reads_chunks_or_markdown(tmp_path: Path) -> None:
    from folio.integrations.langchain import FolioLoader

    out = _outputs(tmp_path)
    chunks = FolioLoader(out).load()
    assert {d.metadata["source"] for d in chunks} == {"/in/revenue.pdf", "/in/safety.pdf"}
    revenue = next(d for d in chunks if d.metadata["doc_id"] == "doc1")
    assert "revenue figures" in revenue.page_content
    assert revenue.metadata["page_start"] == 2 and revenue.metadata["headings"] == ["Revenue report"]
    assert revenue.metadata["boxes"][0]["page"] == 2
    one = FolioLoader(out / "safety-doc2" / "document.json", export_type="markdown").load()
    assert [d.page_content for d in one] == ["# Safety report\n\nThe figures.\n"]
    assert one[0].metadata["pages"] == 2
    with pytest.raises(BadInputError, match="not a folio document.json"):
        FolioLoader(out / "_quarantine" / "x" / "document.json").load()
    (tmp_path / "empty").mkdir()
    with pytest.raises(BadInputError, match="no document.json under it"):
        FolioLoader(tmp_path / "empty").load()
    with pytest.raises(BadInputError, match="no such file"):
        FolioLoader(tmp_path / "missing").load()


def test_llama_index_reader_reads_chunks_or_markdown(tmp_path: Path) -> None:
    from llama_index.core.schema import Document

    from folio.integrations.llama_index import FolioReader

    out = _outputs(tmp_path)
    documents = FolioReader().load_data(file_path=out, extra_info={"team": "finance"})
    assert documents and all(isinstance(d, Document) for d in documents)
    assert {d.metadata["doc_id"] for d in documents} == {"doc1", "doc2"}
    assert all(d.metadata["team"] == "finance" for d in documents)
    markdown = FolioReader(export_type="markdown").load_data(file_path=[out / "revenue-doc1"])
    assert [d.text for d in markdown] == ["# Revenue report\n\nThe figures.\n"]
