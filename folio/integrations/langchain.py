"""LangChain: :class:`FolioRetriever` (a ``BaseRetriever`` over an index folio wrote) and
:class:`FolioLoader` (a ``BaseLoader`` of folio's outputs), as langchain-docling's
``DoclingLoader`` looks to its users: ``export_type`` picks chunks or whole markdown.

Example::

    import folio
    from folio.integrations.langchain import FolioLoader, FolioRetriever

    retriever = FolioRetriever(index=folio.open_index(out="folio-out"), k=4)
    docs = retriever.invoke("What was the revenue?")   # Documents, citation in metadata
    docs = FolioLoader("folio-out").load()             # chunks, for your own store

Needs ``pip install 'folio[langchain]'`` (langchain-core).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.document_loaders import BaseLoader
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from pydantic import ConfigDict

from folio.integrations.records import ExportType, hit_record, output_records
from folio.retrieval import Index
from folio.settings.config import ChunkSettings

__all__ = ["FolioLoader", "FolioRetriever"]


class FolioRetriever(BaseRetriever):
    """The ``k`` chunks nearest a query as Documents: ``page_content`` the chunk's text,
    ``metadata`` the rest of ``folio search --json``'s record (source, doc_id, page_start
    and page_end from 1, boxes, headings, kind, image_uri, score). ``search_kwargs`` are
    :meth:`folio.retrieval.Index.search`'s filters (``doc_id``, ``source``,
    ``source_prefix``, ``kind``)."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    index: Index
    k: int = 4
    search_kwargs: dict[str, Any] = {}

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        hits = self.index.search(query, k=self.k, **self.search_kwargs)
        return [Document(page_content=text, metadata=metadata, id=metadata["id"])
                for text, metadata in map(hit_record, hits)]


class FolioLoader(BaseLoader):
    """Documents from folio's outputs: ``file_path`` is an output folder (``--out``), a
    document's folder or its document.json (one or a list). ``export_type="chunks"``
    (default) gives one Document per chunk, made by folio's chunker as an ingest makes
    them, with the citation metadata of :class:`FolioRetriever` (no score);
    ``"markdown"`` one Document per document with its document.md."""

    def __init__(self, file_path: str | Path | Iterable[str | Path],
                 export_type: ExportType = "chunks",
                 chunk_settings: ChunkSettings | None = None) -> None:
        self.paths = [file_path] if isinstance(file_path, str | Path) else list(file_path)
        self.export_type = export_type
        self.chunk_settings = chunk_settings

    def lazy_load(self) -> Iterator[Document]:
        for path in self.paths:
            for text, metadata in output_records(path, self.export_type, self.chunk_settings):
                yield Document(page_content=text, metadata=metadata, id=metadata.get("id"))
