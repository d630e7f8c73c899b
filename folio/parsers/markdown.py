"""Markdown from generic VLMs (Qwen2.5-VL, Qwen3-VL, HunyuanOCR) and olmOCR's body.

The markdown is cut into blocks a retrieval chunker can use: headings, paragraphs, list
items, tables (pipe tables are converted to HTML, the data contract's table format;
HTML tables are rebuilt so only structure survives), display equations, code and
figures. Generic models give no geometry, so bboxes are None, except for olmOCR-style
figure links ``![alt](page_x_y_w_h.png)`` whose numbers are image pixels.

Example:
    >>> blocks, md = parse("# Report\\n\\nSome text.\\n\\n| a | b |\\n|---|---|\\n| 1 | 2 |",
    ...                    width_pt=612, height_pt=792)
    >>> [b.label for b in blocks]
    ['Title', 'Text', 'Table']
    >>> blocks[2].content
    '<table><thead><tr><th>a</th><th>b</th></tr></thead><tbody><tr><td>1</td><td>2</td></tr></tbody></table>'
"""

from __future__ import annotations

import html
import re

from folio.models import BBox, Block, Label
from folio.parsers._common import page_markdown, split_lists
from folio.parsers._html import html_to_markdown, parse_html, table_html

_FENCE = re.compile(r"^\s*(```+|~~~+)\s*([\w+-]*)\s*$")
_HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
_LIST_ITEM = re.compile(r"^(\s*)([-*+]|\d{1,3}[.)])\s+")
_PIPE_SEPARATOR = re.compile(r"^\s*\|?\s*:?-{2,}:?\s*(\|\s*:?-{2,}:?\s*)*\|?\s*$")
_IMAGE_LINE = re.compile(r"^\s*!\[([^\]]*)\]\(([^)]*)\)\s*$")
_OLMOCR_FIGURE = re.compile(r"page_(\d+(?:\.\d+)?)_(\d+(?:\.\d+)?)_(\d+(?:\.\d+)?)_(\d+(?:\.\d+)?)")
_WRAPPED = re.compile(r"^\s*```(?:markdown|md|html)?\s*\n(.*?)\n```\s*$", re.DOTALL)
_HTML_TABLE_START = re.compile(r"^\s*<table\b", re.IGNORECASE)
_HTML_TABLE_END = re.compile(r"</table\s*>", re.IGNORECASE)
_MATH_OPEN = ("$$", "\\[")


def parse(
    text: str,
    *,
    width_pt: float,
    height_pt: float,
    image_px: tuple[int, int] | None = None,
) -> tuple[list[Block], str]:
    """Blocks (no geometry except olmOCR figure links) and the page markdown."""
    wrapped = _WRAPPED.match(text)
    if wrapped:  # the whole answer inside one ```markdown fence
        text = wrapped.group(1)
    blocks: list[Block] = []
    for label, content in _segments(text.replace("\r\n", "\n").split("\n")):
        content = content.strip("\n")
        if not content.strip():
            continue
        bbox = None
        if label == Label.FIGURE.value:
            bbox = _figure_bbox(content, width_pt, height_pt, image_px)
        blocks.append(Block(label=label, bbox=bbox, content=content, order=len(blocks)))
    blocks = split_lists(blocks)
    return blocks, page_markdown(blocks)


def _segments(lines: list[str]) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    paragraph: list[str] = []
    i = 0

    def flush() -> None:
        if paragraph:
            out.append((Label.TEXT.value, "\n".join(paragraph)))
            paragraph.clear()

    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        if not stripped:
            flush()
            i += 1
            continue
        fence = _FENCE.match(line)
        if fence:
            flush()
            marker = fence.group(1)
            end = _find(lines, i + 1, lambda s, m=marker: s.strip().startswith(m))
            out.append((Label.CODE.value, "\n".join(lines[i : end + 1])))
            i = end + 1
            continue
        if stripped.startswith(_MATH_OPEN):
            flush()
            closer = "$$" if stripped.startswith("$$") else "\\]"
            rest = stripped[2:]
            if closer in rest:
                end = i
            else:
                end = _find(lines, i + 1, lambda s, c=closer: c in s)
            out.append((Label.EQUATION.value, "\n".join(lines[i : end + 1])))
            i = end + 1
            continue
        if _HTML_TABLE_START.match(line):
            flush()
            end = _find(lines, i, lambda s: bool(_HTML_TABLE_END.search(s)))
            chunk = "\n".join(lines[i : end + 1])
            tables = [n for n in parse_html(chunk).elements() if n.tag == "table"]
            out.append((Label.TABLE.value, "".join(table_html(t) for t in tables) or chunk))
            i = end + 1
            continue
        if stripped.startswith("|") and i + 1 < len(lines) and _PIPE_SEPARATOR.match(lines[i + 1]):
            flush()
            end = i + 1
            while end + 1 < len(lines) and lines[end + 1].strip().startswith("|"):
                end += 1
            out.append((Label.TABLE.value, pipe_table_to_html(lines[i : end + 1])))
            i = end + 1
            continue
        heading = _HEADING.match(line)
        if heading:
            flush()
            level = len(heading.group(1))
            label = Label.TITLE if level == 1 else Label.SECTION_HEADER
            out.append((label.value, f"{heading.group(1)} {heading.group(2)}"))
            i += 1
            continue
        item = _LIST_ITEM.match(line)
        if item and not paragraph:
            indent = len(item.group(1))
            end = i
            while end + 1 < len(lines):  # one block per list, nested items included
                nxt = lines[end + 1]
                if not nxt.strip() or (
                    len(nxt) - len(nxt.lstrip()) <= indent and not _LIST_ITEM.match(nxt)
                ):
                    break
                end += 1
            out.append((Label.LIST_ITEM.value, "\n".join(lines[i : end + 1])))
            i = end + 1
            continue
        if _IMAGE_LINE.match(line):
            flush()
            out.append((Label.FIGURE.value, stripped))
            i += 1
            continue
        if stripped.startswith("<") and not paragraph:
            flush()  # an HTML fragment (a generic model mixing formats)
            end = _find(lines, i, lambda s: not s.strip())
            converted = html_to_markdown("\n".join(lines[i : end + 1]))
            if converted:
                out.append((Label.TEXT.value, converted))
            i = end + 1
            continue
        paragraph.append(line)
        i += 1
    flush()
    return out


def _find(lines: list[str], start: int, pred: object) -> int:
    """Index of the first line from ``start`` matching ``pred``, else the last line
    (a generation cut at the token budget leaves fences and tables open)."""
    assert callable(pred)
    for j in range(start, len(lines)):
        if pred(lines[j]):
            return j
    return len(lines) - 1


def _split_row(line: str) -> list[str]:
    cells = re.split(r"(?<!\\)\|", line.strip())
    if cells and not cells[0].strip():
        cells = cells[1:]
    if cells and not cells[-1].strip():
        cells = cells[:-1]
    return [c.strip().replace("\\|", "|") for c in cells]


def pipe_table_to_html(lines: list[str]) -> str:
    """A markdown pipe table as an HTML table (header row in ``<thead>``)."""
    header, body = _split_row(lines[0]), [_split_row(x) for x in lines[2:]]

    def row(cells: list[str], tag: str) -> str:
        return "<tr>" + "".join(f"<{tag}>{html.escape(c, quote=False)}</{tag}>" for c in cells) + "</tr>"

    thead = f"<thead>{row(header, 'th')}</thead>"
    tbody = f"<tbody>{''.join(row(r, 'td') for r in body)}</tbody>" if body else ""
    return f"<table>{thead}{tbody}</table>"


def _figure_bbox(
    content: str, width_pt: float, height_pt: float, image_px: tuple[int, int] | None
) -> BBox | None:
    """olmOCR's figure link ``page_x_y_w_h.png`` (image pixels) as a box in points."""
    match = _OLMOCR_FIGURE.search(content)
    if not match or not image_px or image_px[0] <= 0 or image_px[1] <= 0:
        return None
    x, y, w, h = (float(g) for g in match.groups())
    fx, fy = width_pt / image_px[0], height_pt / image_px[1]
    x0, y0 = min(max(x * fx, 0.0), width_pt), min(max(y * fy, 0.0), height_pt)
    x1, y1 = min((x + w) * fx, width_pt), min((y + h) * fy, height_pt)
    return BBox(x0=x0, y0=y0, x1=x1, y1=y1) if x1 > x0 and y1 > y0 else None
