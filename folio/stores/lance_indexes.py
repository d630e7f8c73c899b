"""The LanceDB chunk table's indexes: the BTREE indexes of the write path's filter
columns, and the ANN vector index (IVF_SQ, cosine), built once the table is big enough
and trained again once it outgrows its partitions.

Why a module of their own: :mod:`folio.stores.lancedb_store` passed 500 lines (issue 46),
and which indexes a table has and when each is (re)built is one concern, read by the
store's table creation, its upkeep and its prewarming, apart from how rows are written
and searched. The store's module doc says why IVF_SQ and why upkeep builds it off the
write path.
"""

from __future__ import annotations

import re
import time
from typing import Any

from folio.stores.lance_tuning import LanceTuning

__all__ = ["SCALAR_INDEXED", "ensure_scalar_indexes", "ensure_vector_index", "vector_index"]

#: the ANN index's name records its partition count (LanceDB does not report it), so
#: maintenance can tell when the table outgrew the partitions it was trained with
_VECTOR_INDEX_NAME = re.compile(r"vector_ivf_(\d+)p")
#: columns the write path filters on: ``id`` (upsert join), ``doc_id`` and ``source``
#: (stale-row delete, a gone source's delete)
SCALAR_INDEXED = ("id", "doc_id", "source")


def ensure_scalar_indexes(table: Any) -> None:
    """BTREE indexes on the write path's filter columns; created with the table so
    that even its first writes skip a full scan (a racing creator's index is kept)."""
    from lancedb.index import BTree

    for attempt in range(4):
        present = {tuple(index.columns) for index in table.list_indices()}
        missing = [c for c in SCALAR_INDEXED if (c,) not in present]
        try:
            for column in missing:
                table.create_index(column, config=BTree(), replace=False)
            return
        except Exception as exc:
            # two workers creating the table at once both build its indexes: the
            # second commit is preempted ("conflict"), or, when the first one's index
            # landed after the list above was read, refused ("already exists"); the
            # first one's index serves both, as the next look at the list shows
            text = str(exc).lower()
            if not ("conflict" in text or "already exists" in text) or attempt == 3:
                raise
            time.sleep(0.05 * (attempt + 1))


def ensure_vector_index(table: Any, tuning: LanceTuning) -> None:
    """Build the ANN index past the row threshold, and train it again once the table
    has doubled its partitions' worth of rows: optimize only appends new rows to the
    partitions it has, which grow until every search scans most of the table."""
    from lancedb.index import IvfSq

    rows = table.count_rows()
    if rows < tuning.ann_index_min_rows:
        return
    wanted = max(1, rows // tuning.ann_rows_per_partition)
    current = vector_index(table)
    if current is not None:
        name, partitions = current
        if partitions == 0 or wanted < 2 * partitions:
            return  # not ours (leave it) or still fine
        table.drop_index(name)
    config = IvfSq(distance_type="cosine", num_partitions=wanted)
    table.create_index("vector", config=config, name=f"vector_ivf_{wanted}p")


def vector_index(table: Any) -> tuple[str, int] | None:
    """The vector index's name and partition count (0: unknown), or None."""
    for index in table.list_indices():
        if index.columns == ["vector"]:
            match = _VECTOR_INDEX_NAME.fullmatch(index.name)
            return index.name, int(match.group(1)) if match else 0
    return None
