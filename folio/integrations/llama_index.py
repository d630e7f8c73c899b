"""LlamaIndex: :class:`FolioRetriever` (a ``BaseRetriever`` over an index folio wrote,
returning ``NodeWithScore``) and :class:`FolioReader` (a ``BaseReader`` of folio's
outputs), as llama-index-readers-docling's ``DoclingReader`` looks to its users:
``export_type`` picks chunks or whole markdown, ``load_data(file_path=...)`` reads.

Example::

    import folio
    from folio.integrations.llama_index import FolioReader, FolioRetriever

    retriever = FolioRetriever(folio.open_index(out="folio-out"), similarity_top_k=4)
    nodes = retriever.retrieve("What was the revenue?")     # NodeWithScore, citation in metadata
    documents = FolioReader().load_data(file_path="folio-out")

Needs ``pip install 'folio[llamaindex]'`` (llama-index-core).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from llama_index.core.readers.base import BaseReader
from llama_index.core.retrievers import BaseRetriever
from llama_index.core.schema import Document, NodeWithScore, QueryBundle, TextNode

from folio.integrations.records import ExportType, hit_record, output_records
from folio.retrieval import Index
from folio.settings.config import ChunkSettings

__all__ = ["FolioReader", "FolioRetriever"]

#: metadata kept out of the text an LLM or an embedder sees (coordinates and ids are for
#: citing, not for reading); the source, pages and headings stay in
_NOT_FOR_READING = ["id", "doc_id", "chunk_index", "boxes", "image_uri", "score",
                    "document_json"]


def _quiet(metadata: dict[str, Any]) -> dict[str, Any]:
    hidden = [k for k in _NOT_FOR_READING if k in metadata]
    return {"excluded_llm_metadata_keys": hidden, "excluded_embed_metadata_keys": hidden}


class FolioRetriever(BaseRetriever):
    """The ``similarity_top_k`` chunks nearest a query as ``NodeWithScore``: a TextNode
    (id the chunk's id, text the chunk's) with the rest of ``folio search --json``'s record
    in ``metadata`` (source, doc_id, page_start and page_end from 1, boxes, headings,
    kind, image_uri), its score the cosine similarity. ``filters`` are
    :meth:`folio.retrieval.Index.search`'s (``doc_id``, ``source``, ``source_prefix``,
    ``kind``)."""

    def __init__(self, index: Index, similarity_top_k: int = 4,
                 filters: dict[str, Any] | None = None, **kwargs: Any) -> None:
        self.index = index
        self.similarity_top_k = similarity_top_k
        self.filters = dict(filters or {})
        super().__init__(**kwargs)

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        hits = self.index.search(query_bundle.query_str, k=self.similarity_top_k,
                                 **self.filters)
        results = []
        for hit in hits:
            text, metadata = hit_record(hit)
            node = TextNode(id_=hit.id, text=text, metadata=metadata, **_quiet(metadata))
            results.append(NodeWithScore(node=node, score=hit.score))
        return results


class FolioReader(BaseReader):
    """Documents from folio's outputs: ``load_data(file_path)`` with an output folder
    (``--out``), a document's folder or its document.json (one or a list).
    ``export_type="chunks"`` (default) gives one Document per chunk, made by folio's
    chunker as an ingest makes them, with the citation metadata of
    :class:`FolioRetriever`; ``"markdown"`` one Document per document (document.md)."""

    def __init__(self, export_type: ExportType = "chunks",
                 chunk_settings: ChunkSettings | None = None) -> None:
        self.export_type = export_type
        self.chunk_settings = chunk_settings

    def load_data(self, file_path: str | Path | Iterable[str | Path],  # type: ignore[override]
                  extra_info: dict[str, Any] | None = None) -> list[Document]:
        paths = [file_path] if isinstance(file_path, str | Path) else list(file_path)
        documents = []
        for path in paths:
            for text, metadata in output_records(path, self.export_type, self.chunk_settings):
                metadata = {**metadata, **(extra_info or {})}
                named = {"id_": metadata["id"]} if metadata.get("id") else {}
                documents.append(Document(text=text, metadata=metadata, **named,
                                          **_quiet(metadata)))
        return documents
