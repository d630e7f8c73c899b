"""Scores of one reader's output of an Office file against its truth (bench/office_truth.py),
for bench/office_structure.py. Pure: no files, no processes.

- word recall: the truth's words found in the output's text, as a multiset (a word the
  file holds five times must be there five times); words are lower-cased, markdown
  escapes and HTML tags are dropped, numbers compare as numbers (``1,240`` is ``1240``,
  ``12.50`` is ``12.5``);
- list items: found as list items (by their text), and at their nesting depth with their
  kind (bulleted or numbered);
- headings: found as headings, and at their level: a reader may number levels from
  another base (markdown's ``#`` for a Title or ``##``), so levels are compared after the
  one shift (for the whole file) that fits most headings; a Title at the level of
  Heading 1 still counts as wrong;
- table cells: each truth table against the output table that holds most of its cells in
  their places, after the one shift of rows and columns that fits most cells (a table
  with a caption row above it is still right); consecutive output tables are joined where
  the later one repeats the former's header row, or both lie on one sheet (folio's
  location);
- presence: sheet names, notes, comments, footnotes, link URLs, chart values and captions,
  each the share found in the text (None where the file has none);
- private-use characters (U+E000-U+F8FF, the Symbol font's bullets): any is a defect.
"""

from __future__ import annotations

import html
import re
from collections import Counter
from typing import Any

from bench.office_markdown import OutTable, Structure, clean_inline
from bench.office_truth import Cell, Heading, ListItem, Table, Truth

_TOKEN = re.compile(r"[0-9a-z\u00c0-\u024f]+(?:[.,:/'\u2019-][0-9a-z\u00c0-\u024f]+)*")
_NUMBER = re.compile(r"^-?\d{1,3}(,\d{3})+(\.\d+)?$|^-?\d+(\.\d+)?$")
#: a midnight time after a date: a date cell read as a date and time
_MIDNIGHT = {"00:00:00", "00:00"}


def _number(token: str) -> str:
    value = float(token.replace(",", ""))
    return f"{value:.4f}".rstrip("0").rstrip(".")


def words(text: str) -> list[str]:
    """The words of ``text`` as scores compare them."""
    text = html.unescape(re.sub(r"<[^>]+>", " ", text))
    text = re.sub(r"\\(.)", r"\1", text).lower()
    return [_number(t) if _NUMBER.match(t) else t for t in _TOKEN.findall(text)]


def norm(text: str) -> str:
    """``text`` as one comparable string: its words, midnight times dropped."""
    return " ".join(w for w in words(clean_inline(text)) if w not in _MIDNIGHT)


def word_recall(truth_text: list[str], output: str) -> float:
    expected = Counter(w for fragment in truth_text for w in words(fragment))
    found = Counter(words(output))
    total = sum(expected.values())
    return sum((expected & found).values()) / total if total else 1.0


def list_scores(truth: list[ListItem], found: list[ListItem]) -> dict[str, Any]:
    """``as_list_items``: the share of the truth's items found as list items;
    ``level_and_kind``: the share found at their depth and with their kind."""
    pool = list(found)
    as_items = exact = 0
    for item in truth:
        key = norm(item.text)
        match = next((f for f in pool if norm(f.text) == key), None)
        if match is None:
            continue
        pool.remove(match)
        as_items += 1
        exact += match.level == item.level and match.ordered == item.ordered
    total = len(truth)
    return {"items": total, "as_list_items": _share(as_items, total),
            "level_and_kind": _share(exact, total)}


def heading_scores(truth: list[Heading], found: list[Heading]) -> dict[str, Any]:
    """``as_headings``: the share found as headings; ``right_level``: at their level after
    the best shift for the file (``level_shift``)."""
    pool = list(found)
    pairs: list[tuple[int, int]] = []
    for heading in truth:
        key = norm(heading.text)
        match = next((f for f in pool if norm(f.text) == key), None)
        if match is not None:
            pool.remove(match)
            pairs.append((heading.level, match.level))
    shifts = Counter(out - want for want, out in pairs)
    shift, right = shifts.most_common(1)[0] if shifts else (0, 0)
    total = len(truth)
    return {"headings": total, "as_headings": _share(len(pairs), total),
            "right_level": _share(right, total), "level_shift": shift}


def _rows(table: OutTable) -> dict[int, list[Cell]]:
    rows: dict[int, list[Cell]] = {}
    for cell in table.cells:
        rows.setdefault(cell.row, []).append(cell)
    return rows


def _first_row(table: OutTable) -> list[str]:
    rows = _rows(table)
    return [norm(c.text) for c in sorted(rows[min(rows)], key=lambda c: c.col)] if rows else []


def stitch(tables: list[OutTable]) -> list[OutTable]:
    """Consecutive tables joined where the later repeats the former's header row (the
    repeat dropped) or both carry one ``group`` (one sheet's parts)."""
    joined: list[OutTable] = []
    for table in tables:
        last = joined[-1] if joined else None
        if last is None or not table.cells or not last.cells:
            joined.append(table)
            continue
        header = _first_row(last)
        repeats = bool(header) and any(header) and _first_row(table) == header
        if not repeats and (table.group is None or table.group != last.group):
            joined.append(table)
            continue
        base = max(c.row + c.row_span for c in last.cells)
        start = min(c.row for c in table.cells) + repeats
        cells = [c.model_copy(update={"row": base + c.row - start}) for c in table.cells
                 if c.row >= start]
        joined[-1] = OutTable(cells=last.cells + cells, group=last.group)
    return joined


def _place_score(truth: Table, table: OutTable) -> int:
    slots = {(c.row, c.col): norm(c.text) for c in table.cells}
    where: dict[str, list[tuple[int, int]]] = {}
    for slot, text in slots.items():
        where.setdefault(text, []).append(slot)
    votes: Counter[tuple[int, int]] = Counter()
    for cell in truth.cells:
        places = where.get(norm(cell.text), [])
        if 0 < len(places) <= 3:
            votes.update((r - cell.row, c - cell.col) for r, c in places)
    dr, dc = votes.most_common(1)[0][0] if votes else (0, 0)
    return sum(slots.get((c.row + dr, c.col + dc)) == norm(c.text) for c in truth.cells)


def table_scores(truth: list[Table], found: list[OutTable]) -> dict[str, Any]:
    """``cells_in_place``: the share of the truth's cells found in their row and column of
    the output table that holds most of them (pooled over the file's tables)."""
    candidates = stitch(found)
    per_table = {}
    right = total = 0
    for table in truth:
        best = max((_place_score(table, out) for out in candidates), default=0)
        per_table[table.name] = _share(best, len(table.cells))
        right, total = right + best, total + len(table.cells)
    return {"cells": total, "cells_in_place": _share(right, total), "tables": per_table,
            "output_tables": len(found)}


def presence(items: list[str], text: str, *, literal: bool = False) -> float | None:
    """The share of ``items`` found in ``text`` (as words; ``literal``: as written)."""
    if not items:
        return None
    haystack = text if literal else f" {norm(text)} "
    found = sum((item in haystack) if literal else (f" {norm(item)} " in haystack)
                for item in items)
    return round(found / len(items), 4)


def private_use(text: str) -> int:
    return sum(0xE000 <= ord(ch) <= 0xF8FF for ch in text)


def score(truth: Truth, markdown: str, structure: Structure) -> dict[str, Any]:
    """Every score of one output: its text (``markdown``) and its structure."""
    return {
        "word_recall": round(word_recall(truth.text, markdown), 4),
        "lists": list_scores(truth.list_items, structure.list_items),
        "headings": heading_scores(truth.headings, structure.headings),
        "tables": table_scores(truth.tables, structure.tables),
        "present": {
            "sheet_names": presence(truth.sheets, markdown),
            "notes": presence(truth.notes, markdown),
            "comments": presence(truth.comments, markdown),
            "footnotes": presence(truth.footnotes, markdown),
            "link_urls": presence(truth.links, markdown, literal=True),
            "chart_values": presence(truth.chart_values, markdown),
            "captions": presence(truth.captions, markdown),
        },
        "private_use_chars": private_use(markdown),
    }


def _share(part: int, whole: int) -> float | None:
    return round(part / whole, 4) if whole else None
