"""A long table's HTML cut into tables of whole rows, each headed by the table's header
rows. Pure.

Why: a table is one chunk so that an answer sees it whole, but a sheet of two thousand
rows is no answer's unit, and one chunk of it embeds as its first few rows only. Cut by
rows with the header repeated in every piece, each chunk still says which column a value
is in (``Region | Units`` over ``North | 12``), the way a retriever needs it.

Only tables read natively from Office files are cut (folio.output.chunking): a PDF's
table is bounded by its page and stays one chunk. Only the HTML folio writes itself is
cut (:func:`folio.tables.table_grid.grid_html`: one
``<tr>`` a line, header rows as ``<th>``); other markup is left whole.
"""

from __future__ import annotations

__all__ = ["WHOLE_FACTOR", "split_table"]

#: a table up to this many times ``chunk.max_chars`` stays one chunk (as every table did)
WHOLE_FACTOR = 4


def split_table(content: str, max_chars: int) -> list[str]:
    """``content`` as one table, or (longer than ``WHOLE_FACTOR * max_chars``) as tables
    of whole rows of at most ``max_chars`` each where a row allows, each opening with the
    header rows. A row that spans rows into the next piece is cut there: the piece after
    shows the rows as they are, not the spanning cell."""
    text = content.strip()
    if len(text) <= WHOLE_FACTOR * max(max_chars, 1):
        return [content]
    lines = text.splitlines()
    if len(lines) < 3 or lines[0] != "<table>" or lines[-1] != "</table>":
        return [content]
    rows = lines[1:-1]
    if not all(row.startswith("<tr>") and row.endswith("</tr>") for row in rows):
        return [content]
    head: list[str] = []
    for row in rows:
        if "<td" in row or "<th" not in row:
            break
        head.append(row)
    body = rows[len(head):]
    if not body:
        return [content]
    base = len("<table>\n</table>") + sum(len(row) + 1 for row in head)
    pieces: list[list[str]] = [[]]
    size = base
    for row in body:
        if pieces[-1] and size + len(row) + 1 > max_chars:
            pieces.append([])
            size = base
        pieces[-1].append(row)
        size += len(row) + 1
    return ["\n".join(["<table>", *head, *piece, "</table>"]) for piece in pieces]
