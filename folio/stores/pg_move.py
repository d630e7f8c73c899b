"""The pgvector store's write locks, and the move of its side table's rows into the HNSW
table under them.

Why a module of its own: :mod:`folio.stores.pgvector_store` passed 500 lines (issue 46),
and what a document's write lock is and how upkeep moves rows while writers hold such
locks is one concern, shared by the store's writes, deletes and upkeep: a row moved
under no lock could outlive its writer's delete. The store's module doc says why writes
land in a side table at all.
"""

from __future__ import annotations

import logging
from typing import Any

import psycopg
from psycopg import sql

from folio.stores.pg_schema import _COLUMNS

__all__ = ["lock_documents", "move_side_rows"]

log = logging.getLogger(__name__)

#: rows an upkeep transaction moves into the HNSW table at most (whole documents, at least
#: one): each row is an HNSW insert, and writers of the moved documents wait for the move
_MOVE_ROWS = 2000


def lock_documents(table: str) -> sql.Composed:
    """Every listed document's write lock in one statement, in the order of the lock
    keys themselves (not of the doc ids, which two hash collisions could invert):
    batches sharing documents then wait for each other instead of deadlocking."""
    return sql.SQL(
        "SELECT pg_advisory_xact_lock(hashtext({name}), k) FROM"
        " (SELECT DISTINCT hashtext(d) AS k FROM unnest(%s::text[]) AS d ORDER BY k) AS keys"
    ).format(name=sql.Literal(table))


def move_side_rows(conn: psycopg.Connection[Any], table: str, delta_table: str) -> None:
    """Move every row of ``delta_table`` into ``table``, whole documents at a time (at
    most about ``_MOVE_ROWS`` rows a transaction, each under its documents' write locks),
    then vacuum the side table."""
    t, d = sql.Identifier(table), sql.Identifier(delta_table)
    if conn.execute("SELECT to_regclass(%s)", (d.as_string(conn),)).fetchone() == (None,):
        return  # no side table yet: nothing written since
    # grouped by document and source, and both locked: writers lock what they replace
    # by (doc_id or source), and a row moved under neither lock could outlive its
    # writer's delete
    sizes = conn.execute(sql.SQL(
        "SELECT doc_id, coalesce(source, ''), count(*) FROM {d}"
        " GROUP BY 1, 2 ORDER BY 1, 2").format(d=d)).fetchall()
    cols = sql.SQL(", ").join(map(sql.Identifier, _COLUMNS))
    move = sql.SQL(
        "WITH moved AS (DELETE FROM {d} WHERE doc_id = ANY(%s)"
        " AND coalesce(source, '') = ANY(%s) RETURNING {cols})"
        " INSERT INTO {t} ({cols}) SELECT {cols} FROM moved"
        " ON CONFLICT (id) DO UPDATE SET {sets}"
    ).format(
        d=d, t=t, cols=cols,
        sets=sql.SQL(", ").join(
            sql.SQL("{c} = EXCLUDED.{c}").format(c=sql.Identifier(c)) for c in _COLUMNS[1:]
        ),
    )  # fmt: skip
    lock = lock_documents(table)
    group: list[str] = []
    group_sources: list[str] = []
    held = 0
    for at, (doc_id, source, rows) in enumerate(sizes):
        group.append(doc_id)
        group_sources.append(source)
        held += int(rows)
        if held < _MOVE_ROWS and at + 1 < len(sizes):
            continue
        with conn.transaction():
            # a writer of one of these documents holds its lock until it commits: the
            # move then sees (and moves) its new rows, never its old ones
            conn.execute(lock, (sorted({*group, *group_sources}),))
            conn.execute(move, (group, group_sources))
        group, group_sources, held = [], [], 0
    if sizes:
        try:
            conn.execute(sql.SQL("VACUUM {d}").format(d=d))  # moved rows are dead rows
        except psycopg.Error as exc:  # another owner's table: autovacuum's job then
            log.info("pgvector upkeep: VACUUM %s skipped: %s", delta_table, exc)
