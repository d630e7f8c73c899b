"""deck.pptx for bench/office_docs.py: a title slide, a slide of nested bullets, a table
with a merged title row, a column chart with known values, speaker notes; written with
python-pptx from the fixed content below, returned with its truth."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench.office_truth import Cell, Heading, ListItem, Table, Truth

TITLE = "Northwind Logistics Operations Review"
SUBTITLE = "Third quarter briefing for depot managers"
#: (slide title, bullets as (text, level from 1), speaker notes)
BULLETS = ("Priorities for the next quarter", (
    ("Reduce dwell time at coastal depots", 1),
    ("Pre-book customs inspections", 2),
    ("Extend evening unloading shifts", 2),
    ("Expand cold chain capacity", 1),
    ("Lease two refrigerated trailers", 2),
    ("Confirm insurance cover first", 3),
    ("Retire paper delivery notes", 1),
), "Stress that customs pre-booking starts in October.")
TABLE_TITLE = "Depot throughput"
TABLE = (("Throughput by depot", "", ""),
         ("Depot", "Parcels", "Pallets"),
         ("Leeds", "2210", "198"),
         ("Bristol", "1823", "164"),
         ("Glasgow", "1517", "131"))
TABLE_NOTES = "Bristol figures include the September backlog."
CHART_TITLE = "Parcels per month"
CHART_CATEGORIES = ("July", "August", "September")
CHART_SERIES = (("Leeds", (712.0, 745.0, 753.0)), ("Bristol", (604.0, 588.0, 631.0)))
CHART_NOTES = "Volumes are provisional until the audit closes."


def _notes(slide: Any, text: str) -> None:
    slide.notes_slide.notes_text_frame.text = text


def build_deck(path: Path) -> Truth:
    """Write deck.pptx at ``path``; its truth."""
    from pptx import Presentation
    from pptx.chart.data import CategoryChartData
    from pptx.enum.chart import XL_CHART_TYPE
    from pptx.util import Inches

    deck = Presentation()
    first = deck.slides.add_slide(deck.slide_layouts[0])
    first.shapes.title.text = TITLE
    first.placeholders[1].text = SUBTITLE

    title, bullets, notes = BULLETS
    slide = deck.slides.add_slide(deck.slide_layouts[1])
    slide.shapes.title.text = title
    frame = slide.placeholders[1].text_frame
    for i, (text, level) in enumerate(bullets):
        paragraph = frame.paragraphs[0] if i == 0 else frame.add_paragraph()
        paragraph.text, paragraph.level = text, level - 1
    _notes(slide, notes)

    slide = deck.slides.add_slide(deck.slide_layouts[5])
    slide.shapes.title.text = TABLE_TITLE
    shape = slide.shapes.add_table(len(TABLE), len(TABLE[0]), Inches(1), Inches(1.8),
                                   Inches(8), Inches(3))
    table = shape.table
    table.cell(0, 0).merge(table.cell(0, len(TABLE[0]) - 1))
    for r, row in enumerate(TABLE):
        for c, text in enumerate(row):
            if text:
                table.cell(r, c).text = text
    _notes(slide, TABLE_NOTES)

    slide = deck.slides.add_slide(deck.slide_layouts[5])
    slide.shapes.title.text = CHART_TITLE
    data = CategoryChartData()
    data.categories = list(CHART_CATEGORIES)
    for name, values in CHART_SERIES:
        data.add_series(name, values)
    slide.shapes.add_chart(XL_CHART_TYPE.COLUMN_CLUSTERED, Inches(1), Inches(1.8), Inches(8),
                           Inches(4.5), data)
    _notes(slide, CHART_NOTES)
    deck.save(str(path))

    cells = [Cell(row=r, col=c, text=text, col_span=len(row) if (r, c) == (0, 0) else 1)
             for r, row in enumerate(TABLE) for c, text in enumerate(row) if text]
    titles = [TITLE, title, TABLE_TITLE, CHART_TITLE]
    return Truth(
        text=[*titles, SUBTITLE, *(text for text, _ in bullets), *(c.text for c in cells)],
        headings=[Heading(text=t, level=1) for t in titles],
        list_items=[ListItem(text=text, level=level, ordered=False) for text, level in bullets],
        tables=[Table(name="slide 3 table", cells=cells)],
        notes=[notes, TABLE_NOTES, CHART_NOTES],
        chart_values=[f"{v:g}" for _, values in CHART_SERIES for v in values])
