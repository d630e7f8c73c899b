"""Pure scoring functions for ``bench/fidelity.py``: no pipeline, no corpus, no I/O.

They live apart from the runner so ``tests/test_fidelity_scoring.py`` can check them on
small hand-made inputs in milliseconds.

olmOCR-bench rules, reimplemented from their published description (olmocr/bench/tests.py
at allenai/olmocr): text is normalised (markdown bold/italics and ``<br>`` dropped,
whitespace collapsed, NFC, typographic quotes and dashes folded to ASCII); ``present``
passes when the query occurs in the page within ``max_diffs`` edits, ``absent`` when it
does not; ``order`` when some match of ``before`` starts before some match of ``after``;
``table`` when a table cell equals ``cell`` (within ``max_diffs``) and its given
neighbours (up/down/left/right) and headings (top_heading/left_heading) match too;
``baseline`` when a page expected blank has at most ``max_length`` alphanumerics, or
otherwise the page has text and does not end in a loop. Two deliberate differences:

* fuzzy presence uses the minimum Levenshtein distance between the query and any
  substring of the page (Sellers' algorithm; the same measure olmOCR uses for ``order``
  via fuzzysearch) instead of rapidfuzz's ``partial_ratio`` threshold, which has no
  dependency and makes ``max_diffs`` mean exactly "edits allowed";
* ``math`` tests need a KaTeX renderer; they are scored as an exact match of a
  ``$...$``/``\\(...\\)``/``\\[...\\]`` span, reported, and kept out of the headline rate.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from folio.page.quality import normalize_words, repeat_ratio
from folio.parsers._html import Node, parse_html, plain_text

# --- text normalisation ---------------------------------------------------------------

_REPLACEMENTS = {
    "\u2018": "'", "\u2019": "'", "\u201a": "'", "\u201c": '"', "\u201d": '"', "\u201e": '"',
    "\uff3f": "_", "\u2013": "-", "\u2014": "-", "\u2011": "-", "\u2012": "-", "\u2212": "-",
    "\u00b5": "\u03bc",
}


def normalize_text(text: str) -> str:
    """olmOCR-bench normalisation: markdown emphasis and ``<br>`` are not content, and
    typographic punctuation must not decide a test, so both sides are folded alike."""
    text = re.sub(r"<br\s*/?>", " ", text)
    text = re.sub(r"</?[bi]>", "", text)
    text = re.sub(r"(\*\*|__)(.*?)\1", r"\2", text)
    text = re.sub(r"(\*|_)(.*?)\1", r"\2", text)
    text = re.sub(r"\s+", " ", text)
    text = unicodedata.normalize("NFC", text)
    for fancy, plain in _REPLACEMENTS.items():
        text = text.replace(fancy, plain)
    return text


# --- fuzzy search -----------------------------------------------------------------------

def _match_ends(query: str, text: str, max_diffs: int) -> list[int]:
    """End offsets (exclusive) in ``text`` where ``query`` matches a substring within
    ``max_diffs`` Levenshtein edits (Sellers: free start, so row 0 is all zeros)."""
    if not query:
        return list(range(len(text) + 1))
    if max_diffs == 0:
        ends, start = [], text.find(query)
        while start != -1:
            ends.append(start + len(query))
            start = text.find(query, start + 1)
        return ends
    m = len(query)
    # column-wise DP over the text: col[i] = best distance of query[:i] ending here
    col = list(range(m + 1))
    ends = [0] if col[m] <= max_diffs else []
    for j, ch in enumerate(text, 1):
        prev_diag, col[0] = col[0], 0
        for i in range(1, m + 1):
            cost = 0 if query[i - 1] == ch else 1
            cur = min(col[i] + 1, col[i - 1] + 1, prev_diag + cost)
            prev_diag, col[i] = col[i], cur
        if col[m] <= max_diffs:
            ends.append(j)
    return ends


def best_distance(query: str, text: str) -> int:
    """Smallest edit distance between ``query`` and any substring of ``text``: how far the
    closest place on the page is from the expected text (reported for failed tests)."""
    m = len(query)
    col = list(range(m + 1))
    best = col[m]
    for ch in text:
        prev_diag, col[0] = col[0], 0
        for i in range(1, m + 1):
            cost = 0 if query[i - 1] == ch else 1
            cur = min(col[i] + 1, col[i - 1] + 1, prev_diag + cost)
            prev_diag, col[i] = col[i], cur
        best = min(best, col[m])
    return best


def fuzzy_contains(query: str, text: str, max_diffs: int = 0) -> bool:
    """Does ``query`` occur in ``text`` with at most ``max_diffs`` edits?"""
    if len(text) < len(query) - max_diffs:
        return False  # too short to hold it, whatever the alignment
    return bool(_match_ends(query, text, max_diffs))


def match_starts(query: str, text: str, max_diffs: int = 0) -> list[int]:
    """Start offsets of fuzzy matches: the end offsets of the reversed query in the
    reversed text, mapped back (so no alignment backtracking is needed)."""
    n = len(text)
    return sorted(n - e for e in _match_ends(query[::-1], text[::-1], max_diffs))


def indel_ratio(a: str, b: str) -> float:
    """1 - insertions+deletions / (len a + len b), rapidfuzz's ``fuzz.ratio`` measure that
    olmOCR uses to compare table cells; 1.0 only for equal strings."""
    if not a and not b:
        return 1.0
    prev = [0] * (len(b) + 1)
    for ca in a:
        cur = [0]
        for j, cb in enumerate(b, 1):
            cur.append(prev[j - 1] + 1 if ca == cb else max(prev[j], cur[j - 1]))
        prev = cur
    return 2 * prev[-1] / (len(a) + len(b))


# --- tables -----------------------------------------------------------------------------

@dataclass
class Table:
    """A parsed table as a grid: every (row, col) slot points to the cell covering it, so
    spanning cells have several slots and neighbours follow the visual layout."""

    cells: list[str] = field(default_factory=list)  # cell id -> text
    header: list[bool] = field(default_factory=list)  # cell id -> was a <th> / header row
    grid: dict[tuple[int, int], int] = field(default_factory=dict)  # slot -> cell id
    origin: list[tuple[int, int]] = field(default_factory=list)  # cell id -> top-left slot

    def add(self, row: int, text: str, *, header: bool = False, rowspan: int = 1,
            colspan: int = 1) -> None:
        """Place a cell in ``row`` at the first free column, honouring spans."""
        col = 0
        while (row, col) in self.grid:
            col += 1
        cid = len(self.cells)
        self.cells.append(text)
        self.header.append(header)
        self.origin.append((row, col))
        for r in range(row, row + max(1, rowspan)):
            for c in range(col, col + max(1, colspan)):
                self.grid[(r, c)] = cid

    def slots(self, cid: int) -> list[tuple[int, int]]:
        return [slot for slot, owner in self.grid.items() if owner == cid]

    def _neighbours(self, cid: int, dr: int, dc: int) -> set[int]:
        found = set()
        for r, c in self.slots(cid):
            other = self.grid.get((r + dr, c + dc))
            if other is not None and other != cid:
                found.add(other)
        return found

    def up(self, cid: int) -> set[int]:
        return self._neighbours(cid, -1, 0)

    def down(self, cid: int) -> set[int]:
        return self._neighbours(cid, 1, 0)

    def left(self, cid: int) -> set[int]:
        return self._neighbours(cid, 0, -1)

    def right(self, cid: int) -> set[int]:
        return self._neighbours(cid, 0, 1)

    def top_heading(self, cid: int) -> set[int]:
        """Header cells above in the same columns: ``<th>`` cells, or row 0 when the table
        marks none (markdown tables and plain HTML)."""
        cols = {c for _, c in self.slots(cid)}
        top = min(r for r, _ in self.slots(cid))
        marked = any(self.header)
        found = set()
        for (r, c), other in self.grid.items():
            if c in cols and r < top and other != cid and (self.header[other] if marked else r == 0):
                found.add(other)
        return found

    def left_heading(self, cid: int) -> set[int]:
        """The first-column cells in the same rows (row headings)."""
        rows = {r for r, _ in self.slots(cid)}
        return {self.grid[(r, 0)] for r in rows if (r, 0) in self.grid and self.grid[(r, 0)] != cid}


def _html_tables(node: Node) -> list[Table]:
    """Every ``<table>`` below ``node`` of folio's HTML tree, nested ones as tables of
    their own (listed before the table that holds them)."""
    tables: list[Table] = []
    for child in node.elements():
        tables += _html_tables(child)
        if child.tag == "table":
            table = _read_table(child)
            if table.cells:
                tables.append(table)
    return tables


def _read_table(node: Node) -> Table:
    """A table's rows (``tr``, in ``thead``/``tbody`` or not; not those of a nested
    table) into the grid; a cell in ``thead`` or a ``th`` is a header."""
    table = Table()
    rows: list[tuple[Node, bool]] = []

    def collect(parent: Node, in_head: bool) -> None:
        for child in parent.elements():
            if child.tag == "tr":
                rows.append((child, in_head))
            elif child.tag in ("thead", "tbody", "tfoot"):
                collect(child, in_head or child.tag == "thead")

    collect(node, False)
    for row, (tr, in_head) in enumerate(rows):
        for cell in tr.elements():
            if cell.tag in ("td", "th"):
                table.add(row, plain_text(cell), header=in_head or cell.tag == "th",
                          rowspan=_int(cell.attrs.get("rowspan")),
                          colspan=_int(cell.attrs.get("colspan")))
    return table


def _int(value: Any) -> int:
    try:
        return max(1, int(value))
    except (TypeError, ValueError):
        return 1


_MD_ROW = re.compile(r"^\s*\|.*\|\s*$")
_MD_RULE = re.compile(r"^\s*\|?\s*:?-{2,}:?\s*(\|\s*:?-{2,}:?\s*)*\|?\s*$")


def parse_tables(text: str) -> list[Table]:
    """HTML tables and markdown pipe tables in a page's output (olmOCR accepts both)."""
    tables = _html_tables(parse_html(text))
    block: list[str] = []
    for line in [*text.splitlines(), ""]:
        if _MD_ROW.match(line):
            block.append(line)
            continue
        if len(block) >= 2:
            table, row = Table(), 0
            has_rule = any(_MD_RULE.match(b) for b in block)
            for raw in block:
                if _MD_RULE.match(raw):
                    continue
                for cell in raw.strip().strip("|").split("|"):
                    table.add(row, cell.strip(), header=has_rule and row == 0)
                row += 1
            if table.cells:
                tables.append(table)
        block = []
    return tables


# --- olmOCR-bench tests -----------------------------------------------------------------

#: test types kept out of the headline pass rate (scored without a math renderer)
EXCLUDED_FROM_HEADLINE = frozenset({"math"})


def run_olmocr_test(test: dict[str, Any], page_text: str | None) -> tuple[bool, str]:
    """One olmOCR-bench test against one page's output. ``page_text`` None means folio
    failed the page or the document: every test fails then, ``absent`` included, so a
    crash never scores better than an answer."""
    if page_text is None:
        return False, "folio produced no page (document or page failed)"
    kind = test.get("type", "")
    diffs = int(test.get("max_diffs", 0) or 0)
    content = normalize_text(page_text)
    if kind in ("present", "absent"):
        query = normalize_text(test["text"])
        hay = content
        if not test.get("case_sensitive", True):
            query, hay = query.lower(), hay.lower()
        if test.get("first_n") and test.get("last_n"):
            hay = hay[: test["first_n"]] + hay[-test["last_n"]:]
        elif test.get("first_n"):
            hay = hay[: test["first_n"]]
        elif test.get("last_n"):
            hay = hay[-test["last_n"]:]
        found = fuzzy_contains(query, hay, diffs)
        if kind == "present":
            return found, "" if found else f"not found within {diffs} edits"
        return (not found), "" if not found else "found but should be absent"
    if kind == "order":
        before = match_starts(normalize_text(test["before"]), content, diffs)
        after = match_starts(normalize_text(test["after"]), content, diffs)
        if not before:
            return False, "'before' not found"
        if not after:
            return False, "'after' not found"
        ok = min(before) < max(after)
        return ok, "" if ok else "'after' precedes 'before'"
    if kind == "table":
        return table_test(test, page_text)
    if kind == "baseline":
        return baseline_test(test, page_text)
    if kind == "math":
        return math_test(test, page_text)
    return False, f"unknown test type {kind!r}"


def table_test(test: dict[str, Any], page_text: str) -> tuple[bool, str]:
    """olmOCR ``table``: some cell equals ``cell`` (indel ratio over max(0.5, 1 -
    max_diffs/len)) and every given neighbour/heading relation holds for that cell."""
    tables = parse_tables(page_text)
    if not tables:
        return False, "no table in the output"
    diffs = int(test.get("max_diffs", 0) or 0)

    def close(expected: str, got: str) -> bool:
        limit = max(0.5, 1.0 - diffs / max(1, len(expected)))
        return indel_ratio(expected, normalize_text(got)) >= limit

    target = normalize_text(test["cell"])
    relations: list[tuple[str, str]] = [
        (name, normalize_text(test[name])) for name in
        ("up", "down", "left", "right", "top_heading", "left_heading") if test.get(name)]
    matched_cell = False
    for table in tables:
        lookup: dict[str, Callable[[int], set[int]]] = {
            "up": table.up, "down": table.down, "left": table.left, "right": table.right,
            "top_heading": table.top_heading, "left_heading": table.left_heading}
        for cid, text in enumerate(table.cells):
            if not close(target, text):
                continue
            matched_cell = True
            if all(any(close(want, table.cells[o]) for o in lookup[name](cid))
                   for name, want in relations):
                return True, ""
    return False, "cell found, relations unmet" if matched_cell else "cell not in any table"


def baseline_test(test: dict[str, Any], page_text: str) -> tuple[bool, str]:
    """olmOCR ``baseline``: a page meant to be blank stays (nearly) empty; any other page
    has text and does not end in a loop (folio's repeat_ratio stands in for olmOCR's
    n-gram repeat detector)."""
    alnum = sum(1 for c in page_text if c.isalnum())
    if test.get("max_length") is not None:
        ok = alnum <= int(test["max_length"])
        return ok, "" if ok else f"{alnum} alphanumerics on a page expected blank"
    if not alnum:
        return False, "no alphanumeric text"
    if repeat_ratio(page_text[-2000:]) > 0.9:
        return False, "output ends in a loop"
    return True, ""


_MATH = re.compile(r"\\\((.+?)\\\)|\\\[(.+?)\\\]|\$\$(.+?)\$\$|\$(.+?)\$", re.DOTALL)


def math_test(test: dict[str, Any], page_text: str) -> tuple[bool, str]:
    """Exact (whitespace-insensitive) match of a delimited formula: a lower bound of
    olmOCR's rendered comparison, which is why math stays out of the headline."""
    want = re.sub(r"\s+", "", test["math"])
    for groups in _MATH.findall(page_text):
        if any(re.sub(r"\s+", "", g) == want for g in groups if g):
            return True, ""
    return False, "formula not found as delimited LaTeX"


def pass_rates(results: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """Pass rate per test type, overall without excluded types, and for tables alone."""
    by_type: dict[str, list[bool]] = {}
    for r in results:
        by_type.setdefault(r["type"], []).append(bool(r["passed"]))
    headline = [p for t, ps in by_type.items() if t not in EXCLUDED_FROM_HEADLINE for p in ps]
    return {
        "by_type": {t: {"tests": len(ps), "passed": sum(ps), "pass_rate": _rate(ps)}
                    for t, ps in sorted(by_type.items())},
        "tests_counted": len(headline),
        "pass_rate": _rate(headline),
        "table_pass_rate": _rate(by_type.get("table", [])),
    }


def _rate(flags: list[bool]) -> float | None:
    return round(sum(flags) / len(flags), 4) if flags else None


# --- docling ground truth ---------------------------------------------------------------

FURNITURE_LABELS = frozenset({"page_header", "page_footer"})
FOLIO_FURNITURE = frozenset({"Page-Header", "Page-Footer"})


def _page_of(item: dict[str, Any]) -> int | None:
    prov = item.get("prov") or []
    return int(prov[0]["page_no"]) if prov else None


def contains_words(needle: str, hay: str) -> bool:
    """Do the needle's words occur contiguously, in order, among the hay's words? Word
    level so "1" matches the page number "1" and not the "1" inside "2014"."""
    want, words = normalize_words(needle), normalize_words(hay)
    if not want:
        return False
    n = len(want)
    return any(words[i:i + n] == want for i in range(len(words) - n + 1))


def header_footer_scores(gt: dict[str, Any],
                         pages: dict[int, tuple[str, list[tuple[str, str]]]]) -> dict[str, Any]:
    """Running headers and footers (docling ``page_header``/``page_footer``) against
    folio's page blocks. ``pages`` maps a 1-based page number to (markdown, [(label,
    content)]). Recall: the share of ground-truth items that a folio block labelled
    Page-Header/Page-Footer on the same page holds. In-markdown: the share still in the
    page markdown (lower is better for RAG: furniture in every chunk is noise); the
    multi-word variant leaves out bare page numbers, which can match body text."""
    items = [(t["text"], _page_of(t)) for t in gt.get("texts", [])
             if t.get("label") in FURNITURE_LABELS and t.get("text", "").strip()]
    labelled = in_md = multi = multi_in_md = 0
    for text, page in items:
        markdown, blocks = pages.get(page or 0, ("", []))
        if any(label in FOLIO_FURNITURE and contains_words(text, content)
               for label, content in blocks):
            labelled += 1
        present = contains_words(text, markdown)
        in_md += present
        if len(normalize_words(text)) >= 2:
            multi += 1
            multi_in_md += present
    return {
        "items": len(items),
        "labelled": labelled,
        "recall": round(labelled / len(items), 4) if items else None,
        "in_markdown": round(in_md / len(items), 4) if items else None,
        "multiword_items": multi,
        "multiword_in_markdown": round(multi_in_md / multi, 4) if multi else None,
    }


#: docling's label for the tables it scores as tables; its ``document_index`` items (a
#: table of contents, which docling stores among its tables) are scored apart
TABLE_LABEL = "table"


def table_structure_scores(gt: dict[str, Any], page_markdown: dict[int, str]) -> list[dict[str, Any]]:
    """Per ground-truth table: did folio emit a table on that page, and what share of the
    ground-truth cells (non-empty) has a folio table cell with the same normalised text
    at the same top-left (row, col) slot (best folio table on the page). Slots come from
    docling's start_row/col offsets and from folio's HTML with spans expanded. Each row
    carries docling's label: ``table``, or ``document_index`` for a table of contents
    (no table in the page's sense: entries and page numbers, which docling's own table
    model reads with rows shifted and entries merged)."""
    rows = []
    for i, table in enumerate(gt.get("tables", [])):
        page = _page_of(table)
        data = table.get("data", {})
        cells = [c for c in data.get("table_cells", []) if c.get("text", "").strip()]
        found = parse_tables(page_markdown.get(page or 0, ""))
        best = 0
        for ft in found:
            slots = {ft.origin[cid]: normalize_words(text) for cid, text in enumerate(ft.cells)}
            hits = sum(1 for c in cells
                       if slots.get((c["start_row_offset_idx"], c["start_col_offset_idx"]))
                       == normalize_words(c["text"]))
            best = max(best, hits)
        rows.append({
            "table": i, "label": table.get("label", TABLE_LABEL), "page": page,
            "rows": data.get("num_rows"), "cols": data.get("num_cols"),
            "gt_cells": len(cells), "folio_tables_on_page": len(found),
            "detected": bool(found),
            "cell_position_agreement": round(best / len(cells), 4) if cells else None,
        })
    return rows


def strip_html_tags(markdown: str) -> str:
    """Markdown minus HTML tags (a table's ``<table><tr><td>``): markup, not words a reader
    sees, for the word-level recall and order scores (the table tests read the tags)."""
    return re.sub(r"</?[A-Za-z][A-Za-z0-9]*(?:\s[^<>]*)?/?>", " ", markdown)


def strip_md_markup(markdown: str) -> str:
    """Ground-truth markdown minus HTML comments (docling's ``<!-- image -->``), which are
    placeholders, not text a reader sees."""
    return re.sub(r"<!--.*?-->", " ", markdown, flags=re.DOTALL)
