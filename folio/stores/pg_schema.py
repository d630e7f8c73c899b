"""The pgvector store's tables: their columns, how they are created, a vector's text form.

Why: :mod:`folio.stores.pgvector_store` is about writes, upkeep and search; what its two
tables hold (a ``vector(n)`` column, chunks' headings and boxes as JSONB) and how they
and their indexes are created under one advisory lock is one concern of its own, as
:mod:`folio.stores.lance_schema` is for LanceDB.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import numpy.typing as npt
import psycopg
from psycopg import sql

from folio.stores.base import LATE_COLUMNS

#: advisory lock key (an arbitrary constant) serialising schema changes across processes:
#: concurrent CREATE ... IF NOT EXISTS can still fail on PostgreSQL's catalog unique keys
_DDL_LOCK_KEY = 0x466F6C69  # "Foli"
_HNSW_MAX_DIM = 2000  # pgvector 0.6-0.8's limit for an HNSW index on vector(n)
_COLUMNS = (
    "id", "doc_id", "source", "chunk_index", "kind", "text",
    "page_start", "page_end", "headings", "boxes", "vector", "sha256", "config_hash",
    *LATE_COLUMNS,
)  # fmt: skip


def _vector_text(row: npt.NDArray[np.float32]) -> str:
    """pgvector's text input. Nine significant digits parse back to the same float32
    (FLT_DECIMAL_DIG), and one ``%`` over the row costs a third of a ``repr`` per value:
    under load this formatting was most of a write's time (1.7 s per 1000 384-dim rows by
    ``repr``, 0.56 s so)."""
    return _vector_format(row.shape[0]) % tuple(row.tolist())


@functools.cache
def _vector_format(dim: int) -> str:
    return "[" + ",".join(["%.9g"] * dim) + "]"


def create_tables(conn: psycopg.Connection[Any], table: str, delta_table: str, dim: int
                  ) -> None:
    """Create the extension, the main and side tables with their ``doc_id`` indexes, and
    the main table's HNSW index (none past :data:`_HNSW_MAX_DIM` dimensions), under one
    advisory lock (:data:`_DDL_LOCK_KEY`)."""
    t = sql.Identifier(table)
    columns = sql.SQL(
        " id text PRIMARY KEY,"
        " doc_id text NOT NULL,"
        " source text,"
        " chunk_index integer,"
        " kind text,"
        " text text,"
        " page_start integer,"
        " page_end integer,"
        " headings jsonb NOT NULL DEFAULT '[]',"
        " boxes jsonb NOT NULL DEFAULT '[]',"  # folio.stores.base.box_records
        " vector vector({dim}) NOT NULL,"
        " sha256 text,"
        " config_hash text,"
        " image_uri text,"  # a figure chunk crop (add_text_columns for older tables)
        " location text,"  # a place in a source without pages (likewise)
        " embedder text"  # last: the embedding model of the row's vector (likewise)
    ).format(dim=sql.Literal(dim))
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (_DDL_LOCK_KEY,))
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        for name in (table, delta_table):
            conn.execute(
                sql.SQL("CREATE TABLE IF NOT EXISTS {t} ({columns})").format(
                    t=sql.Identifier(name), columns=columns
                )
            )
            conn.execute(
                sql.SQL("CREATE INDEX IF NOT EXISTS {i} ON {t} (doc_id)").format(
                    i=sql.Identifier(f"{name}_doc_id_idx"), t=sql.Identifier(name)
                )
            )
        _source_indexes(conn, (table, delta_table))
        if dim > _HNSW_MAX_DIM:
            return  # pgvector cannot index it: searches scan the table exactly
        conn.execute(
            sql.SQL(
                "CREATE INDEX IF NOT EXISTS {i} ON {t} USING hnsw (vector vector_cosine_ops)"
            ).format(i=sql.Identifier(f"{table}_vector_hnsw_idx"), t=t)
        )


def _source_indexes(conn: psycopg.Connection[Any], names: tuple[str, ...]) -> None:
    """A ``source`` index on each table: a source's rows are replaced and deleted by it."""
    for name in names:
        conn.execute(sql.SQL("CREATE INDEX IF NOT EXISTS {i} ON {t} (source)").format(
            i=sql.Identifier(f"{name}_source_idx"), t=sql.Identifier(name)))


def present_columns(conn: psycopg.Connection[Any], table: str,
                    columns: tuple[str, ...]) -> frozenset[str]:
    """Those of ``columns`` that ``table`` has (a table made before a column came in has
    not: the version columns, ``image_uri``, ``location``, ``embedder``)."""
    rows = conn.execute(
        "SELECT attname FROM pg_attribute WHERE attrelid = to_regclass(%s)"
        " AND attname = ANY(%s) AND NOT attisdropped",
        (sql.Identifier(table).as_string(conn), list(columns))).fetchall()
    return frozenset(str(row[0]) for row in rows)


def has_columns(conn: psycopg.Connection[Any], table: str, columns: tuple[str, ...]) -> bool:
    """Whether ``table`` has every one of ``columns``."""
    return present_columns(conn, table, columns) == frozenset(columns)


def add_text_columns(conn: psycopg.Connection[Any], tables: tuple[str, ...],
                     columns: tuple[str, ...], *, source_index: bool = False) -> None:
    """Give tables made before ``columns`` came in those text columns (NULL in their old
    rows), and with ``source_index`` the ``source`` index the version columns came with;
    under the DDL lock, idempotent when writers race."""
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (_DDL_LOCK_KEY,))
        for name in tables:
            conn.execute(sql.SQL("ALTER TABLE IF EXISTS {t} ").format(t=sql.Identifier(name))
                         + sql.SQL(", ").join(
                             sql.SQL("ADD COLUMN IF NOT EXISTS {c} text").format(
                                 c=sql.Identifier(c)) for c in columns))
        if source_index:
            _source_indexes(conn, tables)
