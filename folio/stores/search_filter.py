"""What a search may be limited to: documents, sources (exact or by prefix) and chunk kinds.

Why one model for both stores: ``folio search --doc-id/--source/--kind`` and
:meth:`folio.retrieval.Index.search` take the same filters whichever store holds the
index, so each store turns this one value into its own WHERE clause: an SQL expression
for LanceDB (values quoted here, never interpolated raw) and a clause with named
parameters for PostgreSQL (values bound by psycopg).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

__all__ = ["SearchFilter"]


def _quoted(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


class SearchFilter(BaseModel):
    """Every given condition must hold (AND); inside one, any value may match (OR)."""

    model_config = ConfigDict(frozen=True)

    doc_ids: tuple[str, ...] = ()
    sources: tuple[str, ...] = ()
    #: a folder or prefix: the chunks of every source under it (``s3://bucket/reports/``)
    source_prefix: str | None = None
    #: chunk kinds: ``text``, ``table``, ``figure``
    kinds: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.doc_ids or self.sources or self.source_prefix or self.kinds)

    def lance_where(self) -> str | None:
        """The filter as a LanceDB (DataFusion SQL) expression; None when it is empty."""
        parts = [f"{column} IN ({', '.join(_quoted(v) for v in values)})"
                 for column, values in self._lists() if values]
        if self.source_prefix:
            parts.append(f"starts_with(source, {_quoted(self.source_prefix)})")
        return " AND ".join(f"({p})" for p in parts) or None

    def pg_where(self) -> tuple[str, dict[str, Any]]:
        """``WHERE ...`` (empty when there is nothing to filter) with psycopg's named
        parameters, and the parameters; column names are fixed here, values bound."""
        parts = [f"{column} = ANY(%(f_{column})s)" for column, values in self._lists() if values]
        params: dict[str, Any] = {f"f_{column}": list(values)
                                  for column, values in self._lists() if values}
        if self.source_prefix:
            parts.append("starts_with(source, %(f_prefix)s)")
            params["f_prefix"] = self.source_prefix
        return (" WHERE " + " AND ".join(parts) if parts else "", params)

    def _lists(self) -> list[tuple[str, tuple[str, ...]]]:
        return [("doc_id", self.doc_ids), ("source", self.sources), ("kind", self.kinds)]
