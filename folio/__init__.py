"""folio: PDFs (and Office files) to markdown, chunks and a vector index for RAG.

``folio.open_index`` is the one name at the top: retrieval from a Python process
(:mod:`folio.retrieval`). It is imported on first use, so ``import folio`` (which every
submodule's import runs) stays free of pydantic models and stores.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from folio.retrieval import open_index

__all__ = ["open_index"]


def __getattr__(name: str) -> Any:
    if name == "open_index":
        from folio.retrieval import open_index

        return open_index
    raise AttributeError(f"module 'folio' has no attribute {name!r}")
