"""A chart's data as a table: the values Office caches in the chart part (``c:ser``'s
``c:cat`` and ``c:val`` caches), so a question about a chart finds its numbers. Pure.

The same DrawingML chart part serves DOCX, PPTX and XLSX; no renderer is needed, only
the cache the application wrote when it last saved the file.
"""

from __future__ import annotations

from lxml import etree

from folio.formats.office_blocks import clean_text
from folio.models import TableCell

__all__ = ["chart_table", "chart_title"]

C = "{http://schemas.openxmlformats.org/drawingml/2006/chart}"
A = "{http://schemas.openxmlformats.org/drawingml/2006/main}"


def _points(element: etree._Element | None) -> dict[int, str]:
    if element is None:
        return {}
    return {int(pt.get("idx", "0")): clean_text("".join(pt.itertext())).strip()
            for pt in element.iter(f"{C}pt")}


def chart_title(root: etree._Element) -> str:
    """The chart's title as written (rich text runs or a cached reference); ``""``."""
    title = root.find(f".//{C}chart/{C}title")
    if title is None:
        return ""
    words = [t.text or "" for t in title.iter(f"{A}t")] or [
        v.text or "" for v in title.iter(f"{C}v")]
    return clean_text(" ".join(w.strip() for w in words if w.strip()))


def chart_table(root: etree._Element) -> list[list[TableCell]]:
    """Rows of the chart's data: a header row (an empty corner, then each series' name),
    then one row per category with each series' value. Empty when there are no series."""
    series = list(root.iter(f"{C}ser"))
    if not series:
        return []
    names: list[str] = []
    columns: list[dict[int, str]] = []
    categories: dict[int, str] = {}
    for n, ser in enumerate(series):
        tx = ser.find(f"{C}tx")
        # the cached name (c:v), never the reference formula (c:f) it was taken from
        name = " ".join((v.text or "").strip() for v in (
            tx.iter(f"{C}v") if tx is not None else []) if (v.text or "").strip())
        names.append(clean_text(name) or f"Series {n + 1}")
        for tag in ("cat", "xVal"):
            found = _points(ser.find(f"{C}{tag}"))
            if found and not categories:
                categories = found
        values = _points(ser.find(f"{C}val")) or _points(ser.find(f"{C}yVal"))
        columns.append(values)
    if not any(columns):  # references without the values Office caches: nothing to show
        return []
    count = max([len(categories), *(max(v, default=-1) + 1 for v in columns)])
    rows = [[TableCell(row=0, col=0, text=""),
             *(TableCell(row=0, col=k + 1, text=name) for k, name in enumerate(names))]]
    for i in range(count):
        rows.append([TableCell(row=i + 1, col=0, text=categories.get(i, str(i + 1))),
                     *(TableCell(row=i + 1, col=k + 1, text=values.get(i, ""))
                       for k, values in enumerate(columns))])
    return rows
