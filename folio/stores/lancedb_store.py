"""LanceDB: an embedded vector store in a local folder or on S3, no server to run.

One table; a batch of documents is replaced in at most two commits: an upsert
(``merge_insert`` on the deterministic chunk id) of the new chunks, then a delete of the
batch's documents' rows that are not in the new set. Concurrent writers of different
documents retry on conflict instead of losing rows. A document must have one writer at a
time: two upserts inserting the same new id at once both commit (the single-commit write
this replaced did the same). A reader may see, between the two commits, a document's new
chunks next to its stale ones, never a missing chunk.

Why not one ``merge_insert ... when_not_matched_by_source_delete`` commit: its
not-matched-by-source step joins the new rows against every row of the table, so a write
cost grows with the table (measured on S3: 0.06 s per 1000 chunks at 10k rows, 0.7 s at
300k). The upsert alone and a delete filtered on ``doc_id`` use the BTREE indexes on
``id`` and ``doc_id`` and cost the same at any size.

Every commit adds a fragment and a table version, and rows written after an index was
built are scanned unindexed; so every ``maintain_every_writes`` writes a store asks its
background upkeep thread (:mod:`folio.stores.upkeep`) to compact the table, fold new rows
into the indexes and drop old versions, and to build the ANN vector index (IVF_SQ,
cosine; :mod:`folio.stores.lance_indexes`) once the table passes ``ann_index_min_rows``.
Not inline: at 1M rows that took minutes, which the write that triggered it (and its
batch of documents) waited for.
IVF_SQ, not IVF_PQ: on 2 cores PQ training took 77-134 s per 100k 384-dim rows, SQ 5 s.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from folio.errors import ConfigError, StorageError
from folio.models import Chunk
from folio.stores.base import (
    EMBEDDER_COLUMN,
    DocumentVectors,
    batch_label,
    check_batch,
    legacy_hit,
)
from folio.stores.lance_import import import_lancedb
from folio.stores.lance_indexes import (
    SCALAR_INDEXED,
    ensure_scalar_indexes,
    ensure_vector_index,
    vector_index,
)
from folio.stores.lance_schema import (
    _RESULT_COLUMNS,
    LATE_COLUMNS,
    VERSION_COLUMNS,
    _rows,
    chunk_schema,
)
from folio.stores.lance_tuning import LanceTuning
from folio.stores.search_filter import SearchFilter
from folio.stores.upkeep import Upkeep

__all__ = ["LanceDBStore"]

log = logging.getLogger(__name__)

def _sql_string(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


class LanceDBStore:
    """Chunks + vectors in a LanceDB table at ``uri`` (folder or ``s3://``).

    The connection and table open lazily on first use; the table is created on the first
    write, so read-only uses of an empty location create nothing.
    """

    def __init__(
        self,
        uri: str,
        *,
        dim: int,
        table: str = "chunks",
        storage_options: dict[str, str] | None = None,
        tuning: LanceTuning | None = None,
        embedder: str | None = None,
    ) -> None:
        self.uri = uri
        self.dim = dim
        #: the embedding model the rows written here are recorded with (EMBEDDER_COLUMN)
        self.embedder = embedder
        self._table_name = table
        self._options = dict(storage_options or {})  # may hold credentials: never shown
        self._schema = chunk_schema(dim)
        self._lock = threading.Lock()
        self._db: Any = None
        self._table: Any = None
        self._search_table: Any = None  # see _searcher
        self._search_stale = False
        self._legacy = False  # see _check_schema
        self._prewarm_thread: threading.Thread | None = None
        self._writer_prewarm: threading.Thread | None = None  # see _prewarm_writer
        self.tuning = tuning or LanceTuning()
        self._maintain_lock = threading.Lock()  # one maintenance at a time in this object
        self.upkeep = self._new_upkeep()

    def __repr__(self) -> str:
        return f"LanceDBStore({self.uri!r}, table={self._table_name!r})"

    @property
    def name(self) -> str:
        return f"lancedb:{self.uri}"

    @property
    def table(self) -> str:
        return self._table_name

    def _connect(self) -> Any:
        lancedb = import_lancedb()  # without the REST client's import (lance_import.py)

        if self._db is None:
            try:
                self._db = lancedb.connect(
                    self.uri,
                    storage_options=self._options or None,
                    # see other workers' commits at once (one cheap version check per call)
                    read_consistency_interval=timedelta(0),
                )
            except Exception as exc:
                raise StorageError(f"lancedb connect {self.uri}: {self._describe(exc)}") from None
        return self._db

    def _open(self, *, create: bool) -> Any:
        """The table, created if asked (idempotent when several workers race)."""
        with self._lock:
            if self._table is not None:
                return self._table
            db = self._connect()
            try:
                self._table = self._open_or_create(db, create)
            except ConfigError:
                raise
            except Exception as exc:
                raise StorageError(
                    f"lancedb open {self.uri}/{self._table_name}: {self._describe(exc)}"
                ) from None
            if self._table is not None:
                self._check_schema(self._table.schema)
            return self._table

    def _add_missing_columns(self, table: Any) -> None:
        """A table written by an earlier folio gets the columns it lacks, NULL in its old
        rows (which the next write of each source replaces): the version columns (before
        rows carried their version, docs/index-sync.md), ``image_uri`` (before figure
        chunks), ``location`` (before Office files were read natively) and ``embedder``
        (before an index named its model). Reads and writes then see one schema.
        Idempotent when workers race."""
        missing = [c for c in (*VERSION_COLUMNS, *LATE_COLUMNS) if c not in table.schema.names]
        if not missing:
            return
        try:
            table.add_columns({c: "CAST(NULL AS STRING)" for c in missing})
        except Exception as exc:
            if not all(c in table.schema.names for c in missing):
                self._table = None
                raise StorageError(f"lancedb add columns {missing} to {self.uri}/"
                                   f"{self._table_name}: {self._describe(exc)}") from None

    def _open_or_create(self, db: Any, create: bool) -> Any:
        try:
            return db.open_table(self._table_name)
        except ValueError:  # LanceDB's "Table ... was not found"
            if not create:
                return None
        table = db.create_table(self._table_name, schema=self._schema, exist_ok=True)
        ensure_scalar_indexes(table)
        return table

    def _describe(self, exc: BaseException) -> str:
        """Type and first line of a Lance error, with any configured secret blanked out."""
        lines = str(exc).strip().splitlines()
        text = lines[0][:300] if lines else ""
        for key in ("aws_secret_access_key", "aws_session_token", "aws_access_key_id"):
            secret = self._options.get(key)
            if secret:
                text = text.replace(secret, "***")
        return f"{type(exc).__name__}: {text}"

    def _check_schema(self, schema: pa.Schema) -> None:
        vector = schema.field("vector").type if "vector" in schema.names else None
        size = getattr(vector, "list_size", None)
        if size != self.dim:
            self._table = None
            raise ConfigError(
                f"vector table {self.uri}/{self._table_name} holds {size}-dim vectors, the "
                f"embedder makes {self.dim}: use another store.table or store.uri"
            )
        #: written by folio before pages counted from 1: readable (search converts its
        #: rows), not writable (new rows would mix two page conventions in one table)
        self._legacy = schema.field("boxes").type == pa.string() if "boxes" in schema.names else False

    def replace_document(
        self, doc_id: str, chunks: list[Chunk], vectors: npt.NDArray[np.float32]
    ) -> None:
        """Upsert ``chunks`` by id and drop the document's other rows, in one commit."""
        self.replace_documents([DocumentVectors(doc_id, chunks, vectors)])

    def replace_documents(self, batch: Sequence[DocumentVectors]) -> None:
        """Upsert every entry's chunks by id and drop the listed documents' other rows, in
        one commit (one new table version) for the whole batch.

        Raises:
            ValueError: mismatched input (see :func:`~folio.stores.base.check_batch`);
                nothing is written.
            ConfigError: the table holds vectors of another dimension.
            StorageError: the location is unreachable or the write failed.
        """
        check_batch(batch, self.dim)
        if not batch:
            return
        chunks = [c for entry in batch for c in entry.chunks]
        table = self._open(create=bool(chunks))
        if table is None:
            return  # nothing stored yet and nothing to store
        if self._legacy:
            raise ConfigError(
                f"vector table {self.uri}/{self._table_name} was written by an older folio "
                "(pages counted from 0, boxes as text): move that folder aside (or give "
                "another store.table) and run again with --reprocess to rewrite every "
                "document's vectors with pages from 1"
            )
        self._add_missing_columns(table)
        try:
            if chunks:
                vectors = np.concatenate([entry.vectors for entry in batch], axis=0)
                self._upsert(table, _rows(chunks, vectors, self._schema, self.embedder))
            self._delete_stale(table, batch, chunks)
        except Exception as exc:
            raise StorageError(
                f"lancedb write {batch_label(batch)} to {self.uri}: {self._describe(exc)}"
            ) from None
        with self._lock:
            self._search_stale = True
            first_write = self._writer_prewarm is None
            if first_write and self.tuning.prewarm_index:
                # beside the writes, not before the first (a one-shot ingest of a few
                # documents would wait for the whole id index)
                self._writer_prewarm = threading.Thread(
                    target=self._prewarm_writer, args=(table,),
                    name="folio-lancedb-prewarm-writer", daemon=True)
                self._writer_prewarm.start()
        self.upkeep.wrote()

    @staticmethod
    def _upsert(table: Any, rows: pa.Table) -> None:
        (
            table.merge_insert("id")
            .when_matched_update_all()
            .when_not_matched_insert_all()
            .execute(rows)
        )

    @staticmethod
    def _delete_stale(table: Any, batch: Sequence[DocumentVectors], chunks: list[Chunk]) -> None:
        """Drop the batch's documents' rows (by source where the entry names one: its
        earlier versions' rows too) that the new chunks did not overwrite; the count
        first, because a delete that matches nothing still commits a version."""
        docs = ", ".join(_sql_string(e.doc_id) for e in batch if not e.source) or "NULL"
        sources = ", ".join(_sql_string(e.source) for e in batch if e.source) or "NULL"
        where = f"(doc_id IN ({docs}) OR source IN ({sources}))"
        if chunks:
            where += " AND id NOT IN (" + ", ".join(_sql_string(c.id) for c in chunks) + ")"
        if table.count_rows(where):
            table.delete(where)

    def delete_sources(self, sources: Sequence[str]) -> int:
        """Remove every row of these sources, in one commit (none when no row matches).

        Raises:
            StorageError: the location is unreachable or the delete failed.
        """
        table = self._open(create=False) if sources else None
        if table is None:
            return 0
        where = "source IN (" + ", ".join(_sql_string(s) for s in sources) + ")"
        try:
            rows = int(table.count_rows(where))
            if rows:
                table.delete(where)
        except Exception as exc:
            raise StorageError(f"lancedb delete {len(sources)} source(s) from {self.uri}: "
                               f"{self._describe(exc)}") from None
        with self._lock:
            self._search_stale = True
        return rows

    def maintain(self) -> None:
        """Compact, fold new rows into the indexes, drop versions older than
        ``keep_versions``, and build the ANN index once the table is big enough. Runs on
        the upkeep thread when writes ask for it; a direct call waits for a run of it in
        progress rather than racing it.

        Raises:
            StorageError: the location is unreachable or a step failed.
        """
        with self._maintain_lock:
            table = self._open(create=False)
            if table is None:
                return
            try:
                ensure_scalar_indexes(table)
                ensure_vector_index(table, self.tuning)
                table.optimize(cleanup_older_than=self.tuning.keep_versions)
            except Exception as exc:
                self._search_stale = True  # a step may have committed
                raise StorageError(
                    f"lancedb maintain {self.uri}: {self._describe(exc)}"
                ) from None
            self._search_stale = True  # searches use the new index and fragments at once
        if self._writer_prewarm is not None:  # this object writes: load its new id indexes
            self._prewarm_writer(table)
        if self._search_table is not None:  # this process searches: load the new index now
            self._prewarm(self._searcher())

    def wait_maintained(self, timeout: float | None = None) -> bool:
        """Wait until maintenance that writes asked for has run; False on ``timeout``."""
        return self.upkeep.wait_idle(timeout)

    def close(self, timeout: float = 60.0) -> None:
        """Stop the upkeep thread, letting a run in progress end (at most ``timeout``
        seconds; a compaction cut short commits nothing and loses no row)."""
        if not self.upkeep.close(timeout):
            log.warning("lancedb upkeep of %s still running after %.0f s: left to finish "
                        "or stop with the process", self.uri, timeout)
        self.upkeep = self._new_upkeep()  # a later write may ask again, as after open

    def _new_upkeep(self) -> Upkeep:
        return Upkeep(self.maintain, name=f"lancedb upkeep {self.uri}",
                      retry_s=self.tuning.maintain_retry_s,
                      every_writes=self.tuning.maintain_every_writes)

    def has_vector_index(self) -> bool:
        """Whether searches go through an ANN index (else an exact scan)."""
        table = self._open(create=False)
        return table is not None and vector_index(table) is not None

    def vector_index_partitions(self) -> int:
        """Partitions of this store's ANN index (0: none or made elsewhere)."""
        table = self._open(create=False)
        found = None if table is None else vector_index(table)
        return found[1] if found else 0

    def _searcher(self) -> Any:
        """The table handle searches use: on its own connection, which looks for other
        workers' commits at most every ``search_staleness_s`` instead of before every
        query (on S3 that look is a request: 15-30 ms of a 50 ms search on the local S3
        server). This object's own writes and maintenance are seen at once."""
        staleness = self.tuning.search_staleness_s
        table = self._open(create=False)
        if table is None or not staleness:
            return table
        with self._lock:
            if self._search_table is None:
                lancedb = import_lancedb()

                db = lancedb.connect(self.uri, storage_options=self._options or None,
                                     read_consistency_interval=timedelta(seconds=staleness))
                self._search_table, self._search_stale = db.open_table(self._table_name), False
                opened = True
            else:
                opened = False
                if self._search_stale:
                    self._search_table.checkout_latest()
                    self._search_stale = False
            searcher = self._search_table
        if opened and self.tuning.prewarm_index:
            # beside the searches, not before the first: a one-shot search (`folio search`)
            # would otherwise wait for the whole index, about twelve cold searches at 1M rows
            self._prewarm_thread = threading.Thread(
                target=self._prewarm, args=(searcher,), name="folio-lancedb-prewarm",
                daemon=True)
            self._prewarm_thread.start()
        return searcher

    def wait_prewarmed(self, timeout: float | None = None) -> bool:
        """Wait for the index load the first search started; False on ``timeout``."""
        thread = self._prewarm_thread
        if thread is not None:
            thread.join(timeout)
        return thread is None or not thread.is_alive()

    def _prewarm(self, table: Any) -> None:
        """Load the ANN index's partitions into this process's index cache (in the
        background when the search handle opens, and after each maintenance of this
        object, on the upkeep thread).

        Why: a search reads ``ann_nprobes`` partitions, and each one not yet cached is a
        ranged GET of ~1.5 MB at 4096 rows per partition; on the local S3 server at 1M rows
        a search with a cold cache took 0.5-0.9 s and 35-50 requests (14-23 MB), the same
        searches with their partitions cached 3-4 requests for the row columns. Loading
        the whole index once costs what ~12 cold searches do (244 partitions at 1M rows,
        about 384 bytes a row in memory). ``prewarm_index=False`` leaves the cache to fill
        query by query (for an index larger than the cache)."""
        if not self.tuning.prewarm_index:
            return
        found = vector_index(table)
        if found is None:
            return
        try:
            table.prewarm_index(found[0])
        except Exception as exc:  # a hint: searches work without it, only slower at first
            log.warning("lancedb prewarm of %s on %s failed: %s", found[0], self.uri,
                        self._describe(exc))

    def wait_writer_prewarmed(self, timeout: float | None = None) -> bool:
        """Wait for the id-index load the first write started; False on ``timeout``."""
        thread = self._writer_prewarm
        if thread is not None:
            thread.join(timeout)
        return thread is None or not thread.is_alive()

    def _prewarm_writer(self, table: Any) -> None:
        """Load the BTREE indexes of the write path (``id``: the upsert's join, ``doc_id``:
        the stale-row delete) into the write handle's index cache: after this object's
        first write (in the background) and after each maintenance (which writes new
        index files).

        Why: without it every write read the index pages its batch's ids fall in, and the
        larger the table the more pages: through a counting proxy a write to a 200k-row
        table made 4-5 GETs of the two index files that the same write to a 10k-row table
        did not (at 1M 17-22 index GETs against 8-13 at 1k, an earlier run), each a
        request on S3; with the indexes loaded the write's requests were the same at both
        sizes. Memory: about the ids' own size (~50 bytes a row for folio's 64-character
        ids); ``prewarm_index=False`` turns this off with the ANN index's load."""
        if not self.tuning.prewarm_index:
            return
        try:
            names = [index.name for index in table.list_indices()
                     if tuple(index.columns) in {(c,) for c in SCALAR_INDEXED}]  # fmt: skip
            for name in names:
                table.prewarm_index(name)
        except Exception as exc:  # a hint: writes work without it, with more reads
            log.warning("lancedb prewarm of the id indexes on %s failed: %s", self.uri,
                        self._describe(exc))

    def search(self, vector: npt.NDArray[np.float32], k: int = 5,
               where: SearchFilter | None = None) -> list[dict[str, Any]]:
        """Nearest chunks by cosine similarity, best first (``score`` = 1 - distance);
        ``where`` filters before the nearest are chosen, so k hits come when k match."""
        query = np.asarray(vector, dtype=np.float32).reshape(-1)
        try:
            table = self._searcher()
            if table is None:
                return []
            builder = (
                table.search(query, vector_column_name="vector")
                .distance_type("cosine")
                .nprobes(self.tuning.ann_nprobes)  # used only once an ANN index exists
            )
            if self.tuning.ann_refine_factor:
                builder = builder.refine_factor(self.tuning.ann_refine_factor)
            condition = where.lance_where() if where else None
            if condition:
                builder = builder.where(condition, prefilter=True)
            present = set(table.schema.names)  # a table opened read-only may predate a column
            columns = [c for c in _RESULT_COLUMNS if c in present]
            rows = builder.select([*columns, "_distance"]).limit(k).to_list()
        except Exception as exc:
            raise StorageError(f"lancedb search {self.uri}: {self._describe(exc)}") from None
        for row in rows:
            row["score"] = 1.0 - float(row.pop("_distance"))
        return [legacy_hit(row) for row in rows]

    def recorded_embedder(self) -> str | None:
        """The embedding model one row names (rows written before it was recorded name
        none; a table without the column: None)."""
        table = self._open(create=False)
        if table is None or EMBEDDER_COLUMN not in table.schema.names:
            return None
        try:
            rows = (table.search().where(f"{EMBEDDER_COLUMN} IS NOT NULL")
                    .select([EMBEDDER_COLUMN]).limit(1).to_list())
        except Exception as exc:
            raise StorageError(f"lancedb read {self.uri}: {self._describe(exc)}") from None
        return str(rows[0][EMBEDDER_COLUMN]) if rows else None

    def count(self, doc_id: str | None = None) -> int:
        table = self._open(create=False)
        if table is None:
            return 0
        where = None if doc_id is None else f"doc_id = {_sql_string(doc_id)}"
        try:
            return int(table.count_rows(where))
        except Exception as exc:
            raise StorageError(f"lancedb count {self.uri}: {self._describe(exc)}") from None
