"""PostgreSQL + pgvector: the server-grade store, for many writers on many machines.

Same contract as :class:`~folio.stores.lancedb_store.LanceDBStore`: a batch of documents
is replaced in one transaction (the batch's documents' rows, and any row holding one of
the new deterministic chunk ids, deleted; the new rows copied in), so readers never see a
half-replaced document. A transaction-scoped advisory lock on (table, doc_id) per document serialises
two writers of the same document; without it, each writer's delete could miss the
other's uncommitted new ids and both sets would survive. A batch takes its locks in
ascending key order, so two batches sharing documents wait instead of deadlocking.

Writes land in a side table without the HNSW index (``{table}_delta``; the main table
``{table}`` has it), and a background upkeep thread moves them into the main table in
bulk. Why: inserting a row into an HNSW graph costs more the larger the graph (measured
on 2 cores: 6 s per 1000 rows at 1k rows, 22 s at 1M; the same rows into a table without
it 0.25-0.6 s), and a write paid that for every row it wrote. Now a write deletes the
batch's documents' rows from both tables (B-tree lookups) and copies the new rows into
the side table, at a cost that does not depend on the main table's size; searches read
the main table through HNSW and the side table exactly (it holds at most a few upkeep
rounds' rows) and merge the two in one statement, so they see one snapshot: a
document's rows are in one table or the other, never both or neither. The move takes
each document's write lock, so it never races a writer of the same document (both in
:mod:`folio.stores.pg_move`).

The DSN usually holds a password: it is kept private, and every name, repr and error
message is built from a redacted copy or scrubbed of it.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt
import psycopg
from psycopg import errors as pg_errors
from psycopg import sql
from psycopg.conninfo import make_conninfo
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

from folio.errors import ConfigError, StorageError
from folio.models import Chunk
from folio.stores.base import (
    EMBEDDER_COLUMN,
    LATE_COLUMNS,
    VERSION_COLUMNS,
    DocumentVectors,
    batch_label,
    box_records,
    check_batch,
    legacy_hit,
)
from folio.stores.pg_dsn import _parse_dsn, _secret_forms, _shown
from folio.stores.pg_move import lock_documents, move_side_rows
from folio.stores.pg_queries import count_statement, search_statement, tables_read
from folio.stores.pg_schema import (
    _COLUMNS,
    _vector_text,
    add_text_columns,
    create_tables,
    has_columns,
    present_columns,
)
from folio.stores.search_filter import SearchFilter
from folio.stores.upkeep import Upkeep

__all__ = ["PgVectorStore"]

log = logging.getLogger(__name__)

T = TypeVar("T")

#: plain identifiers only; 48 characters leave room for the derived index names (63 max)
_TABLE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,47}")
#: an HNSW scan never yields more rows than hnsw.ef_search (pgvector's default: 40, which
#: found the query's own chunk first in 64% of searches at 100k rows); the store's
#: ``ef_search`` is raised to k when k is larger
_EF_SEARCH_MAX = 1000
_CONNECT_TIMEOUT_S = 10
#: the side table's name is the main table's plus this (48 + 6 characters fit in 63)
_DELTA_SUFFIX = "_delta"
#: a store asks for upkeep after this many rows written since it last asked, whatever the
#: number of writes: the side table is searched exactly, so it must stay small
_DELTA_ROWS = 10_000


class PgVectorStore:
    """Chunks + vectors in a PostgreSQL table with pgvector, addressed by a libpq DSN.

    One connection per store, opened lazily and guarded by a lock (Prefect runs tasks in
    threads; a transaction must not interleave with another thread's statements). The
    extension, table and indexes are created on the first write; reads of a missing table
    return nothing and create nothing, as with LanceDB.

    Example:
        >>> store = PgVectorStore("postgresql://folio@db/rag", dim=384)  # doctest: +SKIP
        >>> store.replace_document(doc_id, chunks, vectors)  # doctest: +SKIP
        >>> store.replace_documents([DocumentVectors(doc_id, chunks, vectors)])  # doctest: +SKIP
    """

    def __init__(
        self,
        dsn: str,
        *,
        dim: int,
        table: str = "chunks",
        connect_timeout_s: int = _CONNECT_TIMEOUT_S,
        ef_search: int = 100,
        maintain_every_writes: int = 20,
        maintain_every_rows: int = _DELTA_ROWS,
        maintain_retry_s: float = 30.0,
        embedder: str | None = None,
    ) -> None:
        if not _TABLE_NAME.fullmatch(table):
            raise ConfigError(
                f"store.table {table[:80]!r}: pgvector needs a plain SQL identifier "
                "(letters, digits, _; at most 48 characters; not starting with a digit)"
            )
        if dim < 1:
            raise ConfigError(f"vector dimension {dim} must be positive")
        params = _parse_dsn(dsn)
        self.dim = dim
        #: the embedding model the rows written here are recorded with (EMBEDDER_COLUMN)
        self.embedder = embedder
        self.ef_search = ef_search  # HNSW candidates per search: recall against latency
        self._table_name = table
        self._shown = _shown(params)
        self._secrets = _secret_forms(params)
        extra: dict[str, Any] = {}
        if "connect_timeout" not in params:  # libpq waits for the OS (minutes) otherwise
            extra["connect_timeout"] = connect_timeout_s
        if "application_name" not in params:
            extra["application_name"] = "folio"
        self._conninfo = make_conninfo(dsn, **extra)  # holds the password: never shown
        self._lock = threading.Lock()
        self._conn: psycopg.Connection[Any] | None = None
        self._ready = False  # the table was seen to exist with our dimension
        self._has_delta = False  # ... and its side table (tables made before it had none)
        self._has_version = False  # ... and its version columns (docs/index-sync.md)
        #: ... and which of its late columns (image_uri, location, embedder) it has: a
        #: table of an older folio lacks some until its first write here (see _prepare)
        self._late: frozenset[str] = frozenset(LATE_COLUMNS)
        self.maintain_every_writes = maintain_every_writes
        self.maintain_every_rows = maintain_every_rows
        self._maintain_retry_s = maintain_retry_s
        self._maintain_lock = threading.Lock()  # one move at a time in this object
        self.upkeep = self._new_upkeep()

    def __repr__(self) -> str:
        return f"PgVectorStore({self._shown!r}, table={self._table_name!r})"

    @property
    def name(self) -> str:
        return f"pgvector:{self._shown}"

    @property
    def table(self) -> str:
        return self._table_name

    def close(self, timeout: float = 60.0) -> None:
        """Stop the upkeep thread (letting a move in progress end, at most ``timeout``
        seconds: a move cut short rolls back and loses nothing) and close the connection
        (a later call opens a new one)."""
        if not self.upkeep.close(timeout):
            log.warning("pgvector upkeep of %s still running after %.0f s: left to finish "
                        "or stop with the process", self._shown, timeout)
        self.upkeep = self._new_upkeep()
        with self._lock:
            self._drop()

    def _new_upkeep(self) -> Upkeep:
        return Upkeep(self.maintain, name=f"pgvector upkeep {self._table_name}",
                      retry_s=self._maintain_retry_s, every_writes=self.maintain_every_writes,
                      every_rows=self.maintain_every_rows)

    @property
    def delta_table(self) -> str:
        """The side table new rows land in until upkeep moves them (see the module doc)."""
        return self._table_name + _DELTA_SUFFIX

    # --- connection and schema ------------------------------------------------------------

    def _describe(self, exc: BaseException) -> str:
        """Type and message of a driver error on one line, with any password blanked out."""
        text = " ".join(line.strip() for line in str(exc).splitlines() if line.strip())[:400]
        for secret in self._secrets:
            text = text.replace(secret, "***")
        return f"{type(exc).__name__}: {text}"

    def _drop(self) -> None:
        if self._conn is not None:
            try:
                self._conn.close()
            finally:
                self._conn, self._ready = None, False

    def _connect(self) -> psycopg.Connection[Any]:
        if self._conn is None or self._conn.closed:
            self._ready = False
            try:
                self._conn = psycopg.connect(self._conninfo, autocommit=True)
            except psycopg.Error as exc:
                raise StorageError(
                    f"pgvector connect ({self._shown}): {self._describe(exc)}"
                ) from None
        return self._conn

    def _run(
        self, what: str, work: Callable[[psycopg.Connection[Any]], T], *, create: bool
    ) -> T | None:
        """``work`` on a ready connection; ``None`` when the table is missing and ``create``
        is false. A connection that broke while idle (server restart, idle timeout in a
        proxy) is replaced once: every operation here is idempotent."""
        with self._lock:
            for attempt in range(2):
                reused = self._conn is not None and not self._conn.closed
                conn = self._connect()
                try:
                    if not self._ready and not self._prepare(conn, create=create):
                        return None
                    return work(conn)
                except psycopg.OperationalError as exc:
                    if conn.broken:
                        self._drop()
                        if reused and attempt == 0:
                            continue
                    raise StorageError(f"pgvector {what}: {self._describe(exc)}") from None
                except (pg_errors.InsufficientPrivilege, pg_errors.UndefinedFile) as exc:
                    raise ConfigError(
                        f"pgvector {what} ({self._shown}): {self._describe(exc)}; the vector "
                        "extension must be available and the user allowed to use the table "
                        "(and to create it, on the first write)"
                    ) from None
                except psycopg.Error as exc:
                    if isinstance(exc, pg_errors.UndefinedTable):
                        self._ready = False  # dropped behind our back: check again next time
                    raise StorageError(f"pgvector {what}: {self._describe(exc)}") from None
            raise AssertionError("unreachable")  # pragma: no cover

    def _inspect(self, conn: psycopg.Connection[Any]) -> tuple[bool, str | None, int, bool]:
        """Whether the table exists, its ``vector`` column's type name and typmod (the
        dimension for pgvector; -1 when absent), and whether its side table exists."""
        qualified = sql.Identifier(self._table_name).as_string(conn)
        delta = sql.Identifier(self.delta_table).as_string(conn)
        row = conn.execute(
            "SELECT to_regclass(%(t)s) IS NOT NULL,"
            " (SELECT ty.typname FROM pg_attribute a JOIN pg_type ty ON ty.oid = a.atttypid"
            "  WHERE a.attrelid = to_regclass(%(t)s) AND a.attname = 'vector'"
            "  AND NOT a.attisdropped),"
            " (SELECT a.atttypmod FROM pg_attribute a"
            "  WHERE a.attrelid = to_regclass(%(t)s) AND a.attname = 'vector'"
            "  AND NOT a.attisdropped),"
            " to_regclass(%(d)s) IS NOT NULL",
            {"t": qualified, "d": delta},
        ).fetchone()
        assert row is not None
        return bool(row[0]), row[1], int(row[2] if row[2] is not None else -1), bool(row[3])

    def _prepare(self, conn: psycopg.Connection[Any], *, create: bool) -> bool:
        """Check (and on a write, create) the tables; False when absent on a read. A table
        made before the side table existed gets one on its first write."""
        exists, type_name, dim, has_delta = self._inspect(conn)
        if create and not (exists and has_delta):
            self._create(conn)
            exists, type_name, dim, has_delta = self._inspect(conn)
        if not exists:
            return False
        if type_name != "vector" or dim != self.dim:
            held = f"{dim}-dim vectors" if type_name == "vector" else "no vector(n) column"
            raise ConfigError(
                f"vector table {self._table_name} at {self._shown} holds {held}, the embedder "
                f"makes {self.dim}: use another store.table or store.uri"
            )
        tables = (self._table_name, self.delta_table)
        self._has_version = has_columns(conn, self._table_name, VERSION_COLUMNS)
        if create and not self._has_version:  # a table from before rows had versions
            add_text_columns(conn, tables, VERSION_COLUMNS, source_index=True)
            self._has_version = True
        self._late = present_columns(conn, self._table_name, LATE_COLUMNS)
        if create and not self._has_late:  # made before figure chunks or locations: add them
            add_text_columns(conn, tables, LATE_COLUMNS)
            self._late = frozenset(LATE_COLUMNS)
        self._ready, self._has_delta = True, has_delta
        return True

    @property
    def _has_late(self) -> bool:
        return self._late == frozenset(LATE_COLUMNS)

    def _tables(self) -> list[str]:
        return tables_read(self._table_name, self.delta_table, self._has_delta)

    def _create(self, conn: psycopg.Connection[Any]) -> None:
        create_tables(conn, self._table_name, self.delta_table, self.dim)

    # --- the VectorStore protocol ---------------------------------------------------------

    def replace_document(
        self, doc_id: str, chunks: list[Chunk], vectors: npt.NDArray[np.float32]
    ) -> None:
        """Replace the document's rows with ``chunks``, in one transaction (see
        :meth:`replace_documents`)."""
        self.replace_documents([DocumentVectors(doc_id, chunks, vectors)])

    def replace_documents(self, batch: Sequence[DocumentVectors]) -> None:
        """Drop the listed documents' rows (and any row holding one of the new chunk ids)
        from both tables and copy the new rows into the side table, in one transaction
        for the whole batch; every ``maintain_every_writes`` writes or
        ``maintain_every_rows`` rows, ask the upkeep thread to move the side table's rows
        into the HNSW table.

        Raises:
            ValueError: mismatched input (see :func:`~folio.stores.base.check_batch`), or
                vectors that are not finite (pgvector refuses NaN and infinity); nothing
                is written.
            ConfigError: the table holds vectors of another dimension.
            StorageError: the server is unreachable or the write failed (retry later).
        """
        check_batch(batch, self.dim)
        for entry in batch:
            if not np.isfinite(entry.vectors).all():
                raise ValueError(f"{entry.doc_id}: vectors hold NaN or infinity")
        if not batch:
            return
        lock = lock_documents(self._table_name)
        # an entry naming its source replaces all of that source's rows (its earlier
        # versions'), never another source's rows of the same bytes
        drop = "DELETE FROM {t} WHERE doc_id = ANY(%s) OR source = ANY(%s) OR id = ANY(%s)"
        deletes = [sql.SQL(drop).format(t=sql.Identifier(name))
                   for name in (self._table_name, self.delta_table)]  # fmt: skip
        copy = sql.SQL("COPY {d} ({cols}) FROM STDIN").format(
            d=sql.Identifier(self.delta_table),
            cols=sql.SQL(", ").join(map(sql.Identifier, _COLUMNS)),
        )
        keys = sorted(set().union(*(entry.keys() for entry in batch)))
        doc_ids = [entry.doc_id for entry in batch if not entry.source]
        sources = [entry.source for entry in batch if entry.source]
        new_ids = [c.id for entry in batch for c in entry.chunks]
        rows = [
            (
                c.id, c.doc_id, c.source, c.index, c.kind, c.text, c.page_start, c.page_end,
                Jsonb(c.headings), Jsonb(box_records(c)), _vector_text(v),
                c.sha256 or None, c.config_hash or None, c.image_uri, c.location,
                self.embedder,
            )
            for entry in batch
            for c, v in zip(
                entry.chunks, np.asarray(entry.vectors, dtype=np.float32), strict=True
            )
        ]  # fmt: skip

        def work(conn: psycopg.Connection[Any]) -> bool:
            if not (self._has_delta and self._has_version and self._has_late):
                self._prepare(conn, create=True)  # an older table: bring it up to date
            with conn.transaction(), conn.cursor() as cur:
                cur.execute(lock, (keys,))
                for delete in deletes:
                    cur.execute(delete, (doc_ids, sources, new_ids))
                if rows:
                    with cur.copy(copy) as out:
                        for row in rows:
                            out.write_row(row)
            return True

        if self._run(f"write {batch_label(batch)}", work, create=bool(rows)) is None:
            return  # no table and nothing to write
        self.upkeep.wrote(rows=len(rows))

    def delete_sources(self, sources: Sequence[str]) -> int:
        """Remove every row of these sources from both tables in one transaction, under
        their write locks (a writer of one of them waits, or is waited for)."""
        if not sources:
            return 0
        lock = lock_documents(self._table_name)
        deletes = [sql.SQL("DELETE FROM {t} WHERE source = ANY(%s)").format(t=sql.Identifier(n))
                   for n in (self._table_name, self.delta_table)]  # fmt: skip

        def work(conn: psycopg.Connection[Any]) -> int:
            removed = 0
            with conn.transaction(), conn.cursor() as cur:
                cur.execute(lock, (sorted(set(sources)),))
                for delete in deletes if self._has_delta else deletes[:1]:
                    cur.execute(delete, (list(sources),))
                    removed += max(cur.rowcount, 0)
            return removed

        return self._run(f"delete {len(sources)} source(s)", work, create=False) or 0

    def search(self, vector: npt.NDArray[np.float32], k: int = 5,
               where: SearchFilter | None = None) -> list[dict[str, Any]]:
        """Nearest chunks by cosine similarity, best first (``score`` = 1 - distance), with
        the keys LanceDBStore returns (``boxes`` a list of dicts, ``headings`` a list):
        the HNSW table's k nearest and the side table's exact k nearest, merged.
        ``where`` filters the HNSW scan's candidates (ef_search of them), so a filter
        that few rows match may return fewer than k."""
        flat = np.asarray(vector, dtype=np.float32).reshape(-1)
        if flat.shape != (self.dim,):
            raise ValueError(f"query vector has {flat.size} values, the store holds {self.dim}")
        if k < 1:
            return []
        query = _vector_text(flat)
        condition, params = where.pg_where() if where else ("", {})

        def work(conn: psycopg.Connection[Any]) -> list[dict[str, Any]]:
            statement = search_statement(self._tables(), condition,
                                         has_version=self._has_version,
                                         late=self._late)
            with conn.transaction(), conn.cursor(row_factory=dict_row) as cur:
                cur.execute(  # for this transaction only
                    "SELECT set_config('hnsw.ef_search', %s, true)",
                    (str(min(max(k, self.ef_search), _EF_SEARCH_MAX)),),
                )
                if k > _EF_SEARCH_MAX:  # beyond HNSW's reach: exact scan
                    cur.execute("SELECT set_config('enable_indexscan', 'off', true)")
                cur.execute(statement, {"q": query, "k": k, **params})
                return cur.fetchall()

        return [legacy_hit(hit) for hit in self._run("search", work, create=False) or []]

    def count(self, doc_id: str | None = None) -> int:
        """Rows of ``doc_id`` (all rows: None) in both tables."""

        def work(conn: psycopg.Connection[Any]) -> int:
            statement = count_statement(self._tables(), doc_id is not None)
            row = conn.execute(statement, None if doc_id is None else {"d": doc_id}).fetchone()
            return int(row[0]) if row else 0

        return self._run("count", work, create=False) or 0

    def recorded_embedder(self) -> str | None:
        """The embedding model one row names, in either table (rows written before it
        was recorded name none; a table without the column: None)."""

        def work(conn: psycopg.Connection[Any]) -> str | None:
            if EMBEDDER_COLUMN not in self._late:
                return None
            for name in self._tables():
                row = conn.execute(sql.SQL(
                    "SELECT embedder FROM {t} WHERE embedder IS NOT NULL LIMIT 1").format(
                        t=sql.Identifier(name))).fetchone()
                if row:
                    return str(row[0])
            return None

        return self._run("read its embedder", work, create=False)

    # --- upkeep -----------------------------------------------------------------------------

    def delta_rows(self) -> int:
        """Rows in the side table, waiting to be moved into the HNSW table."""

        def work(conn: psycopg.Connection[Any]) -> int:
            if not self._has_delta:
                return 0
            statement = sql.SQL("SELECT count(*) FROM {d}").format(
                d=sql.Identifier(self.delta_table))
            row = conn.execute(statement).fetchone()
            return int(row[0]) if row else 0

        return self._run("count", work, create=False) or 0

    def maintain(self) -> None:
        """Move every row of the side table into the HNSW table, whole documents at a time
        (at most about ``_MOVE_ROWS`` rows a transaction, each under its documents' write
        locks), then vacuum the side table (:func:`~folio.stores.pg_move.move_side_rows`).
        Runs on the upkeep thread when writes ask for it, on a connection of its own
        (writes and searches go on meanwhile); a direct call waits for a run in progress
        rather than racing it.

        Raises:
            StorageError: the server is unreachable or a step failed (nothing moved by a
                failed transaction is lost: it rolls back into the side table).
        """
        with self._maintain_lock:
            try:
                with psycopg.connect(self._conninfo, autocommit=True) as conn:
                    move_side_rows(conn, self._table_name, self.delta_table)
            except psycopg.Error as exc:
                raise StorageError(f"pgvector maintain: {self._describe(exc)}") from None

    def wait_maintained(self, timeout: float | None = None) -> bool:
        """Wait until upkeep that writes asked for has run; False on ``timeout``."""
        return self.upkeep.wait_idle(timeout)
