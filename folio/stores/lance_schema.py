"""The LanceDB chunk table's shape: its Arrow schema, a batch's rows, the columns read back.

Why: :mod:`folio.stores.lancedb_store` is about writing, upkeep and searching; what a row
of the table holds (a fixed-size float32 vector column LanceDB can index, a chunk's
boxes as a list of structs) is one concern of its own, read by the store and by the
benchmarks that build tables outside it.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from folio.models import Chunk
from folio.stores.base import LATE_COLUMNS, VERSION_COLUMNS, box_records

__all__ = ["BOXES_TYPE", "LATE_COLUMNS", "VERSION_COLUMNS", "chunk_schema"]


_RESULT_COLUMNS = [
    "id",
    "doc_id",
    "source",
    "chunk_index",
    "kind",
    "text",
    "page_start",
    "page_end",
    "headings",
    "boxes",
    "sha256",
    "config_hash",
    "image_uri",
    "location",
]


#: where a chunk's text lies: page from 1, box in PDF points (top-left origin). Tables
#: written before pages counted from 1 hold a JSON string here (:func:`legacy_hit`)
BOXES_TYPE = pa.list_(pa.struct([
    pa.field("page", pa.int32()),
    pa.field("x0", pa.float64()),
    pa.field("y0", pa.float64()),
    pa.field("x1", pa.float64()),
    pa.field("y1", pa.float64()),
]))



def chunk_schema(dim: int) -> pa.Schema:
    """Explicit schema: a fixed-size float32 vector column is what LanceDB indexes."""
    return pa.schema(
        [
            pa.field("id", pa.string(), nullable=False),
            pa.field("doc_id", pa.string(), nullable=False),
            pa.field("source", pa.string()),
            pa.field("chunk_index", pa.int32()),
            pa.field("kind", pa.string()),
            pa.field("text", pa.string()),
            pa.field("page_start", pa.int32()),
            pa.field("page_end", pa.int32()),
            pa.field("headings", pa.list_(pa.string())),
            pa.field("boxes", BOXES_TYPE),  # folio.stores.base.box_records
            pa.field("vector", pa.list_(pa.float32(), dim)),
            *(pa.field(name, pa.string()) for name in VERSION_COLUMNS),
            # last: tables written before them get them added (LanceDBStore._check_schema)
            # a figure chunk's crop, a place in a source without pages, the embedding
            # model (folio.stores.base.LATE_COLUMNS)
            *(pa.field(name, pa.string()) for name in LATE_COLUMNS),
        ]
    )


def _rows(chunks: list[Chunk], vectors: npt.NDArray[np.float32], schema: pa.Schema,
          embedder: str | None = None) -> pa.Table:
    dim = vectors.shape[1]
    flat = pa.array(np.ascontiguousarray(vectors, dtype=np.float32).reshape(-1))
    columns = {
        "id": [c.id for c in chunks],
        "doc_id": [c.doc_id for c in chunks],
        "source": [c.source for c in chunks],
        "chunk_index": [c.index for c in chunks],
        "kind": [c.kind for c in chunks],
        "text": [c.text for c in chunks],
        "page_start": [c.page_start for c in chunks],
        "page_end": [c.page_end for c in chunks],
        "headings": [c.headings for c in chunks],
        "boxes": [box_records(c) for c in chunks],
        "sha256": [c.sha256 for c in chunks],
        "config_hash": [c.config_hash for c in chunks],
        "image_uri": [c.image_uri for c in chunks],
        "location": [c.location for c in chunks],
        "embedder": [embedder] * len(chunks),
    }
    arrays = [pa.FixedSizeListArray.from_arrays(flat, dim) if f.name == "vector"
              else pa.array(columns[f.name], type=f.type) for f in schema]
    return pa.Table.from_arrays(arrays, schema=schema)
