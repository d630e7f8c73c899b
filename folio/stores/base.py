"""The vector store interface: one table of chunks + vectors, replaced per document.

``replace_document`` rather than ``add``: reprocessing a document (new OCR engine, a
retry after quarantine) must leave exactly its new chunks, never duplicates or stale
rows. Chunk ids are deterministic, so a store can upsert by id and drop the rest.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from folio.models import Chunk

__all__ = ["NullStore", "VectorStore", "check_vectors"]


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
        """Afterwards the store holds exactly ``chunks`` for ``doc_id``."""
        ...

    def search(self, vector: npt.NDArray[np.float32], k: int = 5) -> list[dict[str, Any]]:
        """The ``k`` nearest chunks, best first: text, doc_id, source, page_start,
        page_end, headings, boxes (JSON), score (cosine similarity)."""
        ...

    def count(self, doc_id: str | None = None) -> int: ...


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


class NullStore:
    """``store.kind = "none"``: outputs only, no vectors (keeps nothing, counts 0)."""

    name = "none"
    table = ""

    def replace_document(
        self, doc_id: str, chunks: list[Chunk], vectors: npt.NDArray[np.float32]
    ) -> None:
        return None

    def search(self, vector: npt.NDArray[np.float32], k: int = 5) -> list[dict[str, Any]]:
        return []

    def count(self, doc_id: str | None = None) -> int:
        return 0
