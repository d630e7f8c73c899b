"""PostgreSQL + pgvector: the server-grade store, for many writers on many machines.

Same contract as :class:`~folio.stores.lancedb_store.LanceDBStore`: a batch of documents
is replaced in one transaction (upsert on the deterministic chunk id, delete the batch's
documents' rows that are not in the new set), so readers never see a half-replaced
document. A transaction-scoped advisory lock on (table, doc_id) per document serialises
two writers of the same document; without it, each writer's delete could miss the
other's uncommitted new ids and both sets would survive. A batch takes its locks in
ascending key order, so two batches sharing documents wait instead of deadlocking.

The DSN usually holds a password: it is kept private, and every name, repr and error
message is built from a redacted copy or scrubbed of it.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Sequence
from typing import Any, TypeVar
from urllib.parse import quote, quote_plus

import numpy as np
import numpy.typing as npt
import psycopg
from psycopg import errors as pg_errors
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

from folio.errors import ConfigError, StorageError
from folio.models import Chunk
from folio.stores.base import DocumentVectors, batch_label, check_batch

__all__ = ["PgVectorStore", "redact_dsn"]

T = TypeVar("T")

#: plain identifiers only; 48 characters leave room for the derived index names (63 max)
_TABLE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,47}")
#: connection parameters shown in names and errors; everything else may be a secret
_SHOWN_PARAMS = ("host", "hostaddr", "port", "dbname", "user")
_SECRET_PARAMS = ("password", "sslpassword")
#: advisory lock key (an arbitrary constant) serialising schema changes across processes:
#: concurrent CREATE ... IF NOT EXISTS can still fail on PostgreSQL's catalog unique keys
_DDL_LOCK_KEY = 0x466F6C69  # "Foli"
#: an HNSW scan never yields more rows than hnsw.ef_search (pgvector's default: 40, which
#: found the query's own chunk first in 64% of searches at 100k rows); the store's
#: ``ef_search`` is raised to k when k is larger
_EF_SEARCH_MAX = 1000
_HNSW_MAX_DIM = 2000  # pgvector 0.6-0.8's limit for an HNSW index on vector(n)
_CONNECT_TIMEOUT_S = 10
_UPSERT_COLUMNS = (
    "id", "doc_id", "source", "chunk_index", "kind", "text",
    "page_start", "page_end", "headings", "boxes", "vector",
)  # fmt: skip


def redact_dsn(dsn: str) -> str:
    """Host, port, database and user of ``dsn`` as a conninfo string: never a password.

    Raises:
        ConfigError: ``dsn`` is not a PostgreSQL URI or ``key=value`` string (the message
            does not echo it, since it may hold a password).
    """
    return _shown(_parse_dsn(dsn))


def _shown(params: dict[str, Any]) -> str:
    return make_conninfo(**{k: v for k, v in params.items() if k in _SHOWN_PARAMS})


def _secret_forms(params: dict[str, Any]) -> list[str]:
    """Each password as given and URL-encoded (a URI DSN holds the encoded form), longest
    first so that blanking a shorter form never leaves part of a longer one."""
    values = [str(params[key]) for key in _SECRET_PARAMS if params.get(key)]
    forms = {form for v in values for form in (v, quote(v, safe=""), quote_plus(v))}
    return sorted(forms, key=len, reverse=True)


def _parse_dsn(dsn: str) -> dict[str, Any]:
    if not dsn.strip():
        raise ConfigError("empty PostgreSQL DSN: set store.uri to postgresql://user@host/db")
    try:
        return conninfo_to_dict(dsn)
    except psycopg.ProgrammingError:  # libpq's message quotes the DSN: not shown
        raise ConfigError(
            "store.uri is not a PostgreSQL DSN (postgresql://user:password@host:port/db "
            "or 'host=... dbname=...')"
        ) from None


def _vector_text(row: npt.NDArray[np.float32]) -> str:
    """pgvector's text input; ``repr`` of the widened float32 parses back bit-exact."""
    return "[" + ",".join(map(repr, row.tolist())) + "]"


def _boxes(chunk: Chunk) -> list[list[Any]]:
    return [[p, [b.x0, b.y0, b.x1, b.y1]] for p, b in chunk.boxes]


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

    def __repr__(self) -> str:
        return f"PgVectorStore({self._shown!r}, table={self._table_name!r})"

    @property
    def name(self) -> str:
        return f"pgvector:{self._shown}"

    @property
    def table(self) -> str:
        return self._table_name

    def close(self) -> None:
        """Close the connection (a later call opens a new one)."""
        with self._lock:
            self._drop()

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

    def _inspect(self, conn: psycopg.Connection[Any]) -> tuple[bool, str | None, int]:
        """Whether the table exists, and its ``vector`` column's type name and typmod (the
        dimension for pgvector; -1 when absent)."""
        qualified = sql.Identifier(self._table_name).as_string(conn)
        row = conn.execute(
            "SELECT to_regclass(%(t)s) IS NOT NULL,"
            " (SELECT ty.typname FROM pg_attribute a JOIN pg_type ty ON ty.oid = a.atttypid"
            "  WHERE a.attrelid = to_regclass(%(t)s) AND a.attname = 'vector'"
            "  AND NOT a.attisdropped),"
            " (SELECT a.atttypmod FROM pg_attribute a"
            "  WHERE a.attrelid = to_regclass(%(t)s) AND a.attname = 'vector'"
            "  AND NOT a.attisdropped)",
            {"t": qualified},
        ).fetchone()
        assert row is not None
        return bool(row[0]), row[1], int(row[2] if row[2] is not None else -1)

    def _prepare(self, conn: psycopg.Connection[Any], *, create: bool) -> bool:
        """Check (and on a write, create) the table; False when it is absent on a read."""
        exists, type_name, dim = self._inspect(conn)
        if not exists:
            if not create:
                return False
            self._create(conn)
            exists, type_name, dim = self._inspect(conn)
        if type_name != "vector" or dim != self.dim:
            held = f"{dim}-dim vectors" if type_name == "vector" else "no vector(n) column"
            raise ConfigError(
                f"vector table {self._table_name} at {self._shown} holds {held}, the embedder "
                f"makes {self.dim}: use another store.table or store.uri"
            )
        self._ready = True
        return True

    def _create(self, conn: psycopg.Connection[Any]) -> None:
        t = sql.Identifier(self._table_name)
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_DDL_LOCK_KEY,))
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
            conn.execute(
                sql.SQL(
                    "CREATE TABLE IF NOT EXISTS {t} ("
                    " id text PRIMARY KEY,"
                    " doc_id text NOT NULL,"
                    " source text,"
                    " chunk_index integer,"
                    " kind text,"
                    " text text,"
                    " page_start integer,"
                    " page_end integer,"
                    " headings jsonb NOT NULL DEFAULT '[]',"
                    " boxes jsonb NOT NULL DEFAULT '[]',"  # [[page, [x0, y0, x1, y1]], ...]
                    " vector vector({dim}) NOT NULL)"
                ).format(t=t, dim=sql.Literal(self.dim))
            )
            conn.execute(
                sql.SQL("CREATE INDEX IF NOT EXISTS {i} ON {t} (doc_id)").format(
                    i=sql.Identifier(f"{self._table_name}_doc_id_idx"), t=t
                )
            )
            if self.dim > _HNSW_MAX_DIM:
                return  # pgvector cannot index it: searches scan the table exactly
            conn.execute(
                sql.SQL(
                    "CREATE INDEX IF NOT EXISTS {i} ON {t} USING hnsw (vector vector_cosine_ops)"
                ).format(i=sql.Identifier(f"{self._table_name}_vector_hnsw_idx"), t=t)
            )

    # --- the VectorStore protocol ---------------------------------------------------------

    def replace_document(
        self, doc_id: str, chunks: list[Chunk], vectors: npt.NDArray[np.float32]
    ) -> None:
        """Upsert ``chunks`` by id and drop the document's other rows, in one transaction
        (see :meth:`replace_documents`)."""
        self.replace_documents([DocumentVectors(doc_id, chunks, vectors)])

    def replace_documents(self, batch: Sequence[DocumentVectors]) -> None:
        """Upsert every entry's chunks by id and drop the listed documents' other rows, in
        one transaction for the whole batch.

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
        t = sql.Identifier(self._table_name)
        # every document's lock in one statement, in the order of the lock keys themselves
        # (not of the doc ids, which two hash collisions could invert): batches sharing
        # documents then wait for each other instead of deadlocking
        lock = sql.SQL(
            "SELECT pg_advisory_xact_lock(hashtext({name}), k) FROM"
            " (SELECT DISTINCT hashtext(d) AS k FROM unnest(%s::text[]) AS d ORDER BY k) AS keys"
        ).format(name=sql.Literal(self._table_name))
        stale = "DELETE FROM {t} WHERE doc_id = ANY(%s) AND NOT (id = ANY(%s))"
        delete = sql.SQL(stale).format(t=t)
        upsert = sql.SQL(
            "INSERT INTO {t} ({cols}) VALUES ({vals}) ON CONFLICT (id) DO UPDATE SET {sets}"
        ).format(
            t=t,
            cols=sql.SQL(", ").join(map(sql.Identifier, _UPSERT_COLUMNS)),
            vals=sql.SQL(", ").join(
                [sql.Placeholder()] * (len(_UPSERT_COLUMNS) - 1) + [sql.SQL("%s::vector")]
            ),
            sets=sql.SQL(", ").join(
                sql.SQL("{c} = EXCLUDED.{c}").format(c=sql.Identifier(c))
                for c in _UPSERT_COLUMNS[1:]
            ),
        )
        doc_ids = [entry.doc_id for entry in batch]
        new_ids = [c.id for entry in batch for c in entry.chunks]
        rows = [
            (
                c.id, c.doc_id, c.source, c.index, c.kind, c.text, c.page_start, c.page_end,
                Jsonb(c.headings), Jsonb(_boxes(c)), _vector_text(v),
            )
            for entry in batch
            for c, v in zip(
                entry.chunks, np.asarray(entry.vectors, dtype=np.float32), strict=True
            )
        ]  # fmt: skip

        def work(conn: psycopg.Connection[Any]) -> None:
            with conn.transaction(), conn.cursor() as cur:
                cur.execute(lock, (doc_ids,))
                cur.execute(delete, (doc_ids, new_ids))
                if rows:
                    cur.executemany(upsert, rows)

        self._run(f"write {batch_label(batch)}", work, create=bool(rows))

    def search(self, vector: npt.NDArray[np.float32], k: int = 5) -> list[dict[str, Any]]:
        """Nearest chunks by cosine similarity, best first (``score`` = 1 - distance), with
        the keys LanceDBStore returns (``boxes`` as a JSON string, ``headings`` a list)."""
        flat = np.asarray(vector, dtype=np.float32).reshape(-1)
        if flat.shape != (self.dim,):
            raise ValueError(f"query vector has {flat.size} values, the store holds {self.dim}")
        if k < 1:
            return []
        query = _vector_text(flat)
        statement = sql.SQL(
            "SELECT id, doc_id, source, chunk_index, kind, text, page_start, page_end,"
            " headings, boxes::text AS boxes, 1 - (vector <=> %(q)s::vector) AS score"
            " FROM {t} ORDER BY vector <=> %(q)s::vector LIMIT %(k)s"
        ).format(t=sql.Identifier(self._table_name))

        def work(conn: psycopg.Connection[Any]) -> list[dict[str, Any]]:
            with conn.transaction(), conn.cursor(row_factory=dict_row) as cur:
                cur.execute(  # for this transaction only
                    "SELECT set_config('hnsw.ef_search', %s, true)",
                    (str(min(max(k, self.ef_search), _EF_SEARCH_MAX)),),
                )
                if k > _EF_SEARCH_MAX:  # beyond HNSW's reach: exact scan
                    cur.execute("SELECT set_config('enable_indexscan', 'off', true)")
                cur.execute(statement, {"q": query, "k": k})
                return cur.fetchall()

        return self._run("search", work, create=False) or []

    def count(self, doc_id: str | None = None) -> int:
        t = sql.Identifier(self._table_name)

        def work(conn: psycopg.Connection[Any]) -> int:
            if doc_id is None:
                row = conn.execute(sql.SQL("SELECT count(*) FROM {t}").format(t=t)).fetchone()
            else:
                row = conn.execute(
                    sql.SQL("SELECT count(*) FROM {t} WHERE doc_id = %s").format(t=t), (doc_id,)
                ).fetchone()
            return int(row[0]) if row else 0

        return self._run("count", work, create=False) or 0
