"""The structure a markdown document shows: its headings (``#`` marks), its list items
(marker, nesting by indentation) and its tables (pipe tables and HTML tables with
rowspan/colspan), for bench/office_scoring.py. One parser for every reader's markdown:
docling's, markitdown's and folio's own document.md.
"""

from __future__ import annotations

import html
import re
from html.parser import HTMLParser

from pydantic import BaseModel, Field

from bench.office_truth import Cell, Heading, ListItem


class OutTable(BaseModel):
    """A table as a reader wrote it: its cells at their grid slots (0-based)."""

    cells: list[Cell]
    #: tables of one group (a sheet's name, from folio's block location) that follow each
    #: other may be one table cut into parts
    group: str | None = None


class Structure(BaseModel):
    headings: list[Heading] = Field(default_factory=list)
    list_items: list[ListItem] = Field(default_factory=list)
    tables: list[OutTable] = Field(default_factory=list)


_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_ITEM = re.compile(r"^(\s*)([-*+\u2022]|\d{1,3}[.)]|[a-zA-Z][.)]|\(\w{1,4}\))\s+(.*\S)\s*$")
_FENCE = re.compile(r"^\s*(```|~~~)")
_HTML_TABLE = re.compile(r"<table\b.*?</table>", re.IGNORECASE | re.DOTALL)
_PIPE_SEPARATOR = re.compile(r"^\|?\s*:?-{2,}:?\s*(\|\s*:?-{2,}:?\s*)*\|?\s*$")


class _TableHtml(HTMLParser):
    """Cells of one HTML table at their grid slots, rowspan and colspan honoured."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.cells: list[Cell] = []
        self._taken: set[tuple[int, int]] = set()
        self._row = -1
        self._col = 0
        self._text: list[str] | None = None
        self._spans = (1, 1)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "tr":
            self._row, self._col = self._row + 1, 0
        elif tag in ("td", "th"):
            values = dict(attrs)
            self._spans = (_span(values.get("rowspan")), _span(values.get("colspan")))
            self._text = []
        elif tag == "br" and self._text is not None:
            self._text.append(" ")

    def handle_data(self, data: str) -> None:
        if self._text is not None:
            self._text.append(data)

    def handle_endtag(self, tag: str) -> None:
        if tag not in ("td", "th") or self._text is None:
            return
        row = max(self._row, 0)
        while (row, self._col) in self._taken:
            self._col += 1
        row_span, col_span = self._spans
        self.cells.append(Cell(row=row, col=self._col, text=" ".join("".join(self._text).split()),
                               row_span=row_span, col_span=col_span))
        for r in range(row, row + row_span):
            for c in range(self._col, self._col + col_span):
                self._taken.add((r, c))
        self._col += col_span
        self._text = None


def _span(value: str | None) -> int:
    try:
        return max(1, min(int(value or 1), 1000))
    except ValueError:
        return 1


def html_table(text: str) -> OutTable:
    parser = _TableHtml()
    parser.feed(text)
    parser.close()
    return OutTable(cells=parser.cells)


def _pipe_cells(line: str) -> list[str]:
    body = line.strip()
    body = body[1:] if body.startswith("|") else body
    body = body[:-1] if body.endswith("|") and not body.endswith("\\|") else body
    return [html.unescape(c.replace("\\|", "|")).strip() for c in re.split(r"(?<!\\)\|", body)]


def _pipe_table(lines: list[str]) -> OutTable:
    rows = [_pipe_cells(line) for line in lines if not _PIPE_SEPARATOR.match(line.strip())]
    return OutTable(cells=[Cell(row=r, col=c, text=text) for r, row in enumerate(rows)
                           for c, text in enumerate(row)])


def _item_level(indent: int, stack: list[int]) -> int:
    """Nesting depth of an item indented by ``indent`` within the list run ``stack`` (the
    indents of its open levels, outermost first); updates ``stack``."""
    while stack and indent < stack[-1]:
        stack.pop()
    if not stack or indent > stack[-1]:
        stack.append(indent)
    return len(stack)


def clean_inline(text: str) -> str:
    """A heading's or item's text without markdown emphasis, links' targets, escapes."""
    text = re.sub(r"!\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = re.sub(r"<[^>]+>", " ", text)
    text = re.sub(r"\\([\\`*_{}\[\]()#+\-.!|>~])", r"\1", text)
    text = text.replace("**", "").replace("__", "")
    return " ".join(html.unescape(text).split())


def parse_markdown(markdown: str) -> Structure:
    """Headings, list items and tables of ``markdown``; fenced code is skipped."""
    found = Structure()
    for match in _HTML_TABLE.finditer(markdown):
        found.tables.append(html_table(match.group(0)))
    lines = _HTML_TABLE.sub("\n", markdown).splitlines()
    fenced, stack, pipe = False, [], []  # type: bool, list[int], list[str]
    for line in [*lines, ""]:
        if _FENCE.match(line):
            fenced = not fenced
            continue
        if fenced:
            continue
        if line.strip().startswith("|"):
            pipe.append(line)
            continue
        if pipe:
            found.tables.append(_pipe_table(pipe))
            pipe = []
        heading = _HEADING.match(line)
        item = _ITEM.match(line)
        if heading:
            stack = []
            found.headings.append(Heading(text=clean_inline(heading.group(2)),
                                          level=len(heading.group(1))))
        elif item:
            indent = len(item.group(1).expandtabs(4))
            marker = item.group(2)
            found.list_items.append(ListItem(
                text=clean_inline(item.group(3)), level=_item_level(indent, stack),
                ordered=marker not in ("-", "*", "+", "\u2022")))
        elif line.strip() and not line[:1].isspace():
            stack = []  # a paragraph ends the list run
    return found
