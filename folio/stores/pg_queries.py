"""The read statements of folio's pgvector tables (folio.stores.pgvector_store): built from
what the tables hold, with fixed column names and bound values only. Pure."""

from __future__ import annotations

from collections.abc import Collection, Sequence

from psycopg import sql

from folio.stores.base import IMAGE_URI_COLUMN, LOCATION_COLUMN

__all__ = ["count_statement", "search_statement", "tables_read"]

_PART = sql.SQL(
    "(SELECT id, doc_id, source, chunk_index, kind, text, page_start, page_end,"
    " headings, boxes, {version} {late},"
    " vector <=> %(q)s::vector AS distance"
    " FROM {t}{where} ORDER BY vector <=> %(q)s::vector LIMIT %(k)s)"
)


def tables_read(table: str, delta_table: str, has_delta: bool) -> list[str]:
    """The tables a read covers: the HNSW table, and its side table where one exists
    (tables made before it had none)."""
    return [table, delta_table] if has_delta else [table]


def search_statement(tables: Sequence[str], condition: str, *, has_version: bool,
                     late: Collection[str]) -> sql.Composed:
    """One statement over ``tables`` (one snapshot of both, so a row being moved between
    them is seen exactly once): each table's ``%(k)s`` nearest to ``%(q)s`` that
    ``condition`` admits, merged, best first, with ``score`` = 1 - distance. Columns a
    table made before them lacks (version, image_uri, location) come back NULL or not at
    all, as LanceDB's rows do; ``late`` names the late columns the tables have."""
    read = sql.SQL(", ").join(
        sql.Identifier(c) if c in late else sql.SQL("NULL::text AS {c}").format(
            c=sql.Identifier(c)) for c in (IMAGE_URI_COLUMN, LOCATION_COLUMN))
    version = sql.SQL("sha256, config_hash,") if has_version else sql.SQL("")
    clause = sql.SQL(condition)  # type: ignore[arg-type]  # fixed columns, bound values
    parts = [_PART.format(t=sql.Identifier(name), version=version, late=read, where=clause)
             for name in tables]
    return sql.SQL(
        "SELECT id, doc_id, source, chunk_index, kind, text, page_start, page_end,"
        " headings, boxes, {version} image_uri, location, 1 - distance AS score"
        " FROM ({parts}) AS hits"
        " ORDER BY distance LIMIT %(k)s"
    ).format(parts=sql.SQL(" UNION ALL ").join(parts), version=version)


def count_statement(tables: Sequence[str], by_document: bool) -> sql.Composed:
    """The rows of ``tables`` together, of one document (``%(d)s``) or all."""
    where = sql.SQL(" WHERE doc_id = %(d)s") if by_document else sql.SQL("")
    return sql.SQL("SELECT {sums}").format(sums=sql.SQL(" + ").join(
        sql.SQL("(SELECT count(*) FROM {t}{w})").format(t=sql.Identifier(n), w=where)
        for n in tables))
