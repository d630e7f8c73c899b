"""The vector store interface: one table of chunks + vectors, replaced per document.

A pipeline write names the document's *source* (:attr:`DocumentVectors.source`): the
store then replaces every row of that source, whatever version wrote it, so a changed
source's old chunks leave in the same write as its new ones arrive, and the same bytes
under two sources are two sets of rows (docs/index-sync.md).

``replace_document`` rather than ``add``: reprocessing a document (new OCR engine, a
retry after quarantine) must leave exactly its new chunks, never duplicates or stale
rows. Chunk ids are deterministic, so a store can upsert by id and drop the rest.

``replace_documents`` does the same for a batch in one commit: every write has a fixed
cost (a LanceDB commit adds a fragment and a manifest version that later reads and
compaction pay for; a PostgreSQL transaction pays a round trip and a WAL flush), so a
pipeline that batches documents writes far fewer, larger commits.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from folio.models import Chunk

if TYPE_CHECKING:  # numpy only for the types: 0.3 s of a CLI start that stores nothing
    import numpy as np
    import numpy.typing as npt

    from folio.stores.search_filter import SearchFilter

__all__ = [
    "EMBEDDER_COLUMN",
    "IMAGE_URI_COLUMN",
    "LATE_COLUMNS",
    "LOCATION_COLUMN",
    "VERSION_COLUMNS",
    "DocumentVectors",
    "NullStore",
    "VectorStore",
    "batch_label",
    "box_records",
    "check_batch",
    "check_vectors",
    "legacy_hit",
]

#: the version a row belongs to (docs/index-sync.md), after the columns older tables have:
#: each store adds them to such a table on its first write (NULL in the old rows)
VERSION_COLUMNS = ("sha256", "config_hash")
#: a figure chunk's crop; tables made before figure chunks get it the same way
IMAGE_URI_COLUMN = "image_uri"
#: where a chunk lies in a source without pages (a sheet's range, a slide: Chunk.location);
#: tables made before it get it the same way
LOCATION_COLUMN = "location"
#: the embedding model that made a row's vector (folio.output.embeddings.Embedder.model_id):
#: an index names its own embedder, so a reader embeds queries with the same one
EMBEDDER_COLUMN = "embedder"
#: the text columns added after a table's first columns, in their order at its end
LATE_COLUMNS = (IMAGE_URI_COLUMN, LOCATION_COLUMN, EMBEDDER_COLUMN)


def box_records(chunk: Chunk) -> list[dict[str, Any]]:
    """A chunk's boxes as stored and searched: ``[{"page", "x0", "y0", "x1", "y1"}]``,
    ``page`` from 1 and the box in PDF points, top-left origin (named fields, so a
    reader of the table needs no note on what ``[[0, [...]]]`` meant)."""
    return [{"page": page, "x0": b.x0, "y0": b.y0, "x1": b.x1, "y1": b.y1}
            for page, b in chunk.boxes]


def legacy_hit(hit: dict[str, Any]) -> dict[str, Any]:
    """A row written before pages counted from 1 in today's shape, so search output has
    one convention whatever wrote the table; a current row is returned as is. Such a row's
    boxes are ``[[page index, [x0, y0, x1, y1]], ...]``: a JSON string in LanceDB, a list
    of lists in pgvector (where a legacy row without boxes cannot be told apart)."""
    boxes = hit.get("boxes")
    if isinstance(boxes, str):
        import json

        old = json.loads(boxes) if boxes else []
    elif boxes and isinstance(boxes[0], list):
        old = boxes
    else:
        return hit
    return {
        **hit,
        "page_start": int(hit["page_start"]) + 1,
        "page_end": int(hit["page_end"]) + 1,
        "boxes": [{"page": int(p) + 1, "x0": b[0], "y0": b[1], "x1": b[2], "y1": b[3]}
                  for p, b in old],
    }


@dataclass(frozen=True, slots=True, eq=False)
class DocumentVectors:
    """One document's complete new content: its chunks and their vectors, row for row.

    ``eq=False``: comparing numpy arrays field-wise has no single truth value, so
    equality is identity.
    """

    doc_id: str
    chunks: list[Chunk]
    vectors: npt.NDArray[np.float32]
    #: when given, the write replaces every row of this source (the rows of its earlier
    #: versions included), not only the rows of ``doc_id``
    source: str = ""

    def keys(self) -> set[str]:
        """What a store's per-document write lock covers: the doc id and the sources."""
        return {self.doc_id, *({self.source} if self.source else set()),
                *(c.source for c in self.chunks)}


@runtime_checkable
class VectorStore(Protocol):
    """Where chunks and their embeddings live for retrieval."""

    @property
    def name(self) -> str:
        """Kind and location for reports, e.g. ``lancedb:/out/.folio/vectors``."""
        ...

    @property
    def table(self) -> str: ...

    def replace_document(
        self, doc_id: str, chunks: list[Chunk], vectors: npt.NDArray[np.float32]
    ) -> None:
        """Afterwards the store holds exactly ``chunks`` for ``doc_id``; the same as
        ``replace_documents([DocumentVectors(doc_id, chunks, vectors)])``."""
        ...

    def replace_documents(self, batch: Sequence[DocumentVectors]) -> None:
        """Afterwards the store holds exactly each listed document's chunks (none for an
        empty list); documents not in ``batch`` are untouched. One commit or transaction
        where the store allows it, so readers see all of the batch or none of it.

        Raises:
            ValueError: an entry fails :func:`check_vectors`, a doc_id is listed twice
                or a chunk id appears in two documents; nothing is written.
            StorageError: the store could not be reached or the write failed.
        """
        ...

    def delete_sources(self, sources: Sequence[str]) -> int:
        """Remove every row of these sources (they are gone from their roots); returns the
        rows removed. Serialised with writes of the same sources.

        Raises:
            StorageError: the store could not be reached or the delete failed.
        """
        ...

    def search(self, vector: npt.NDArray[np.float32], k: int = 5,
               where: SearchFilter | None = None) -> list[dict[str, Any]]:
        """The ``k`` nearest chunks (of those ``where`` admits), best first: id, doc_id,
        source, chunk_index, kind, text, page_start, page_end (from 1), headings, boxes
        (:func:`box_records`), image_uri, location, score (cosine similarity)."""
        ...

    def count(self, doc_id: str | None = None) -> int: ...

    def recorded_embedder(self) -> str | None:
        """The embedding model the index's rows name (one row's; rows written before
        folio recorded it name none): None when no row names one."""
        ...


def check_vectors(
    doc_id: str, chunks: list[Chunk], vectors: npt.NDArray[np.float32], dim: int
) -> None:
    """Refuse mismatched input before it reaches a store (a silent misalignment would
    attach the wrong text to a vector).

    Raises:
        ValueError: counts, shape or doc ids do not match.
    """
    if vectors.ndim != 2 or vectors.shape != (len(chunks), dim):
        raise ValueError(
            f"{doc_id}: vectors shape {vectors.shape}, expected ({len(chunks)}, {dim})"
        )
    strangers = {c.doc_id for c in chunks} - {doc_id}
    if strangers:
        raise ValueError(f"{doc_id}: chunks of other documents {sorted(strangers)[:3]}")
    if len({c.id for c in chunks}) != len(chunks):
        raise ValueError(f"{doc_id}: duplicate chunk ids")


def check_batch(batch: Sequence[DocumentVectors], dim: int) -> None:
    """:func:`check_vectors` on every entry, and refuse a document listed twice (which of
    its two contents should win?) or a chunk id shared by two documents (an upsert by id
    would keep only one row), all before a store writes anything.

    Raises:
        ValueError: as :func:`check_vectors`, or a repeated doc_id or chunk id.
    """
    seen_docs: set[str] = set()
    seen_ids: set[str] = set()
    for entry in batch:
        key = entry.source or entry.doc_id  # the same bytes may come under two sources
        if key in seen_docs:
            raise ValueError(f"{key}: listed twice in one batch")
        seen_docs.add(key)
        check_vectors(entry.doc_id, entry.chunks, entry.vectors, dim)
        ids = {c.id for c in entry.chunks}
        shared = sorted(ids & seen_ids)[:3]
        if shared:
            raise ValueError(f"{entry.doc_id}: chunk ids of another document {shared}")
        seen_ids |= ids


def batch_label(batch: Sequence[DocumentVectors], limit: int = 3) -> str:
    """The batch's doc ids for an error message: ``a`` for one, ``3 documents (a, b, c)``,
    ``12 documents (a, b, c, ...)``."""
    ids = [entry.doc_id for entry in batch]
    if len(ids) == 1:
        return ids[0]
    shown = ", ".join(ids[:limit]) + (", ..." if len(ids) > limit else "")
    return f"{len(ids)} documents ({shown})"


class NullStore:
    """``store.kind = "none"``: outputs only, no vectors (keeps nothing, counts 0)."""

    name = "none"
    table = ""

    def replace_document(
        self, doc_id: str, chunks: list[Chunk], vectors: npt.NDArray[np.float32]
    ) -> None:
        self.replace_documents([DocumentVectors(doc_id, chunks, vectors)])

    def replace_documents(self, batch: Sequence[DocumentVectors]) -> None:
        return None

    def delete_sources(self, sources: Sequence[str]) -> int:
        return 0

    def search(self, vector: npt.NDArray[np.float32], k: int = 5,
               where: SearchFilter | None = None) -> list[dict[str, Any]]:
        return []

    def count(self, doc_id: str | None = None) -> int:
        return 0

    def recorded_embedder(self) -> str | None:
        return None
