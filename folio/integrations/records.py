"""What the framework adapters hand over, framework-free: a search hit or a chunk of a
folio output as text plus metadata (folio's citation fields), and the document.json files
an output location holds.

Why apart from the adapters: LangChain's and LlamaIndex's modules differ only in the
classes they wrap these records in, so what a record carries is decided once.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

from folio.errors import BadInputError
from folio.models import Chunk, DocumentResult
from folio.retrieval import Hit
from folio.settings.config import ChunkSettings

__all__ = ["ExportType", "Record", "chunk_record", "document_files", "hit_record",
           "output_records"]

#: what a loader makes of a document: its chunks (as folio's index holds them) or its
#: whole markdown (document.md) as one document
ExportType = Literal["chunks", "markdown"]

#: (text, metadata)
Record = tuple[str, dict[str, Any]]


def hit_record(hit: Hit) -> Record:
    """A search hit: its text, and every other field of ``folio search --json`` (the
    citation: source, doc_id, pages from 1, boxes, headings, kind, image_uri, location,
    score)."""
    metadata = hit.model_dump(exclude={"text"})
    return hit.text, metadata


def chunk_record(chunk: Chunk) -> Record:
    """A chunk made from an output, with the metadata keys a search hit carries (no score)."""
    from folio.stores.base import box_records

    return chunk.text, {
        "id": chunk.id, "doc_id": chunk.doc_id, "source": chunk.source,
        "chunk_index": chunk.index, "kind": chunk.kind, "page_start": chunk.page_start,
        "page_end": chunk.page_end, "headings": list(chunk.headings),
        "boxes": box_records(chunk), "image_uri": chunk.image_uri,
        "location": chunk.location,
    }


def document_files(path: str | Path) -> list[Path]:
    """The document.json files ``path`` names: the file itself, a document's folder, or an
    output folder (``--out``: every document under it), sorted.

    Raises:
        BadInputError: nothing there, or no document.json under it.
    """
    from folio.output.outputs import JSON

    where = Path(path).expanduser()
    if where.is_file():
        return [where]
    if not where.is_dir():
        raise BadInputError(f"{where}: no such file or folder (give a folio output folder, a "
                            "document's folder or its document.json)")
    # folio's own folders (``_quarantine``, ``_vectors``, ...) start with "_": no documents
    found = sorted(p for p in where.rglob(JSON)
                   if not any(part.startswith("_") for part in p.relative_to(where).parts))
    if not found:
        raise BadInputError(f"{where}: no {JSON} under it (is it the --out of a folio ingest?)")
    return found


def _read(file: Path) -> DocumentResult:
    from folio.output.outputs import read_document_json

    try:
        return read_document_json(file.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise BadInputError(f"{file}: not a folio document.json ({type(exc).__name__})") from None


def output_records(path: str | Path, export_type: ExportType = "chunks",
                   settings: ChunkSettings | None = None) -> Iterator[Record]:
    """The records of every document under ``path``, document by document: its chunks
    (``chunks``: made by folio's chunker from document.json, as an ingest makes them) or
    its markdown (``markdown``: document.md beside document.json, one record).

    Raises:
        BadInputError: as :func:`document_files`, or a file that is not folio's.
    """
    from folio.output.chunking import chunk_document
    from folio.output.outputs import MARKDOWN

    for file in document_files(path):
        doc = _read(file)
        if export_type == "markdown":
            markdown = file.with_name(MARKDOWN)
            text = markdown.read_text(encoding="utf-8") if markdown.is_file() else ""
            yield text, {"doc_id": doc.doc_id, "source": doc.source, "pages": doc.page_count,
                         "outcome": doc.outcome.value, "document_json": str(file)}
            continue
        for chunk in chunk_document(doc, settings or ChunkSettings()):
            yield chunk_record(chunk)
