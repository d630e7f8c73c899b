"""Chunks and unit vectors for the vector-store tests (deterministic by seed)."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from folio.models import BBox, Chunk

DIM = 8


def chunks(doc_id: str, n: int, tag: str = "", id_tag: str = "") -> list[Chunk]:
    """``n`` chunks of ``doc_id``: text ``"{tag}{doc_id} chunk {i}"``, pages i+1..i+2
    (pages count from 1), one box on page i+1."""
    return [
        Chunk(
            id=f"{doc_id}-{id_tag}{i:04d}",
            doc_id=doc_id,
            source=f"s3://b/{doc_id}.pdf",
            index=i,
            text=f"{tag}{doc_id} chunk {i}",
            page_start=i + 1,
            page_end=i + 2,
            headings=["Intro", f"Part {i}"],
            boxes=[(i + 1, BBox(x0=1, y0=2, x1=3, y1=4.5))],
        )
        for i in range(n)
    ]


def vectors(n: int, seed: int, dim: int = DIM) -> npt.NDArray[np.float32]:
    rng = np.random.default_rng(seed)
    v = rng.normal(size=(n, dim)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)
