"""bench/office_scoring.py and bench/office_markdown.py on hand-made outputs: each case is
built so that a wrong rule gives the wrong answer (a list flattened, a Title at Heading 1's
level, a column shifted, a sheet cut into parts, a bullet glyph left in the text)."""

from __future__ import annotations

from bench.office_markdown import OutTable, parse_markdown
from bench.office_runs import folio_structure
from bench.office_scoring import (
    heading_scores,
    list_scores,
    presence,
    score,
    stitch,
    table_scores,
    word_recall,
)
from bench.office_truth import Cell, Heading, ListItem, Table, Truth

ITEMS = [ListItem(text="Inbound freight", level=1, ordered=False),
         ListItem(text="Container terminals", level=2, ordered=False),
         ListItem(text="Check the note", level=1, ordered=True),
         ListItem(text="Scan each label", level=2, ordered=True)]
NESTED = """Intro paragraph.

- Inbound freight
    - Container terminals

1. Check the note
   1. Scan each label
"""


def test_nested_markdown_lists_score_fully() -> None:
    found = parse_markdown(NESTED).list_items
    assert [(i.text, i.level, i.ordered) for i in found] == [
        (i.text, i.level, i.ordered) for i in ITEMS]
    assert list_scores(ITEMS, found) == {"items": 4, "as_list_items": 1.0,
                                         "level_and_kind": 1.0}


def test_a_flattened_list_keeps_its_items_but_not_their_depth() -> None:
    flat = NESTED.replace("    - Container", "- Container").replace("   1. Scan", "2. Scan")
    scores = list_scores(ITEMS, parse_markdown(flat).list_items)
    assert scores["as_list_items"] == 1.0
    assert scores["level_and_kind"] == 0.5


def test_bullets_printed_as_paragraphs_are_no_list_items() -> None:
    printed = ("\uf0b7 Inbound freight\n\n\uf0b7 Container terminals\n\n"
               "1. Check the note 2. Scan each label\n")
    truth = Truth(text=[i.text for i in ITEMS], list_items=ITEMS)
    scores = score(truth, printed, parse_markdown(printed))
    assert scores["word_recall"] == 1.0  # every word is there ...
    # ... but none is a list item: two numbered items run together are one of neither text
    assert scores["lists"]["as_list_items"] == 0.0
    assert len(parse_markdown(printed).list_items) == 1
    assert scores["private_use_chars"] == 2


def test_heading_levels_allow_one_shift_but_not_a_title_at_heading_1() -> None:
    truth = [Heading(text="Report", level=1), Heading(text="Overview", level=2),
             Heading(text="Scope", level=3)]
    shifted = parse_markdown("## Report\n\n### Overview\n\n#### Scope\n").headings
    assert heading_scores(truth, shifted)["right_level"] == 1.0
    flat_title = parse_markdown("# Report\n\n# Overview\n\n## Scope\n").headings
    scores = heading_scores(truth, flat_title)
    assert scores["as_headings"] == 1.0
    assert scores["right_level"] == 0.6667
    assert heading_scores(truth, parse_markdown("**Report**\n").headings)["as_headings"] == 0


GRID = Table(name="t", cells=[
    Cell(row=0, col=0, text="Depot performance", col_span=3),
    Cell(row=1, col=0, text="Region"), Cell(row=1, col=1, text="Parcels"),
    Cell(row=1, col=2, text="On time"),
    Cell(row=2, col=0, text="North"), Cell(row=2, col=1, text="1240"),
    Cell(row=2, col=2, text="97 percent")])


def test_html_table_with_colspan_and_a_caption_row_above_is_in_place() -> None:
    html = ("<table><tr><td colspan='3'>Table 1</td></tr>"
            "<tr><th colspan='3'>Depot performance</th></tr>"
            "<tr><th>Region</th><th>Parcels</th><th>On time</th></tr>"
            "<tr><td>North</td><td>1,240</td><td>97 percent</td></tr></table>")
    found = parse_markdown(f"Some text.\n\n{html}\n").tables
    assert table_scores([GRID], found)["cells_in_place"] == 1.0


def test_two_columns_run_together_lose_their_cells() -> None:
    pipe = ("| Depot performance | | |\n|---|---|---|\n| Region | Parcels | On time |\n"
            "| North 1240 | 97 percent | |\n")
    scores = table_scores([GRID], parse_markdown(pipe).tables)
    assert scores["cells_in_place"] == round(4 / 7, 4)


def test_rowspan_pushes_later_cells_right() -> None:
    html = ("<table><tr><td rowspan='2'>Wrap</td><td>Leeds</td></tr>"
            "<tr><td>Bristol</td></tr></table>")
    cells = parse_markdown(html).tables[0].cells
    assert [(c.row, c.col, c.text, c.row_span) for c in cells] == [
        (0, 0, "Wrap", 2), (0, 1, "Leeds", 1), (1, 1, "Bristol", 1)]


SHEET = Table(name="Shipments", cells=[
    Cell(row=r, col=c, text=text) for r, row in enumerate(
        [("ID", "Total"), ("SH-1", "10"), ("SH-2", "20"), ("SH-3", "30"), ("SH-4", "40")])
    for c, text in enumerate(row)])


def _part(rows: list[tuple[str, str]], group: str | None = None) -> OutTable:
    return OutTable(cells=[Cell(row=r, col=c, text=t) for r, row in enumerate(rows)
                           for c, t in enumerate(row)], group=group)


def test_a_sheet_cut_into_parts_with_its_header_repeated_is_one_table() -> None:
    parts = [_part([("ID", "Total"), ("SH-1", "10"), ("SH-2", "20")]),
             _part([("ID", "Total"), ("SH-3", "30"), ("SH-4", "40")])]
    assert len(stitch(parts)) == 1
    assert table_scores([SHEET], parts)["cells_in_place"] == 1.0


def test_parts_without_a_header_join_only_on_one_sheet() -> None:
    parts = [_part([("ID", "Total"), ("SH-1", "10"), ("SH-2", "20")]),
             _part([("SH-3", "30"), ("SH-4", "40")])]
    assert table_scores([SHEET], parts)["cells_in_place"] == 0.6
    same_sheet = [p.model_copy(update={"group": "Shipments"}) for p in parts]
    assert table_scores([SHEET], same_sheet)["cells_in_place"] == 1.0


def test_word_recall_counts_repeats_and_compares_numbers_as_numbers() -> None:
    truth = ["North 1240 12.5", "North 980 2025-07-01"]
    assert word_recall(truth, "North 1,240 12.50 North 980 2025-07-01 00:00:00") == 1.0
    assert word_recall(truth, "North 1240 12.5 980 2025-07-01") == 5 / 6


def test_presence_of_notes_and_link_urls() -> None:
    text = "Stress that **customs** pre-booking starts in October. [portal](https://x.test/p)"
    assert presence(["Stress that customs pre-booking starts in October."], text) == 1.0
    assert presence(["https://x.test/p", "https://x.test/q"], text, literal=True) == 0.5
    assert presence([], text) is None


def test_folio_blocks_give_items_headings_and_sheet_tables() -> None:
    def block(label: str, content: str, **more: object) -> dict[str, object]:
        return {"label": label, "content": content, "order": 0, **more}

    cells = [{"row": 0, "col": 0, "text": "ID"}, {"row": 0, "col": 1, "text": "Total"},
             {"row": 1, "col": 0, "text": "SH-1"}, {"row": 1, "col": 1, "text": "10"}]
    document = {"pages": [{"blocks": [
        block("Section-Header", "Shipments", level=1),
        block("List-Item", "Inbound freight", level=1, marker="-"),
        block("List-Item", "Scan each label", level=2, marker="1."),
        block("Table", "<table></table>", cells=cells, location="Shipments!A1:B2"),
        block("Table", "<table><tr><td>ID</td><td>Total</td></tr>"
                       "<tr><td>SH-2</td><td>20</td></tr></table>",
              location="Shipments!A3:B3")]}]}
    found = folio_structure(document)
    assert [(h.text, h.level) for h in found.headings] == [("Shipments", 1)]
    assert [(i.level, i.ordered) for i in found.list_items] == [(1, False), (2, True)]
    assert [t.group for t in found.tables] == ["Shipments", "Shipments"]
    joined = stitch(found.tables)
    assert len(joined) == 1
    assert {(c.row, c.col, c.text) for c in joined[0].cells} >= {(2, 0, "SH-2"), (2, 1, "20")}


def _row(recall: float, items: int, as_items: float, cpu: float) -> dict[str, object]:
    present = {kind: None for kind in ("sheet_names", "notes", "comments", "footnotes",
                                       "link_urls", "chart_values", "captions")}
    return {"error": "", "cpu_s": cpu, "wall_s": cpu, "scores": {
        "word_recall": recall, "private_use_chars": 0, "present": {**present, "notes": 1.0},
        "lists": {"items": items, "as_list_items": as_items, "level_and_kind": as_items},
        "headings": {"headings": 1, "as_headings": 1.0, "right_level": 1.0},
        "tables": {"cells": 1, "cells_in_place": 1.0}}}


def test_summary_pools_by_count_and_compares_cpu_with_docling() -> None:
    from bench.office_summary import summarise

    files = {"a": {"readers": {"folio": _row(1.0, 30, 1.0, 10.0),
                               "docling": _row(1.0, 30, 1.0, 8.0)}},
             "b": {"readers": {"folio": _row(0.9, 10, 0.0, 10.0),
                               "docling": _row(1.0, 10, 1.0, 8.0)}}}
    summary = summarise(files, ["folio", "docling"])
    folio = summary["folio"]
    assert folio["list_items_as_list_items"] == 0.75  # 30 of 40 items, not the mean 0.5
    assert folio["word_recall_min"] == 0.9
    assert folio["targets_met"]["list_items_as_list_items"] is False
    assert folio["targets_met"]["present_notes"] is True
    assert "present_comments" not in folio["targets_met"]  # no file has comments
    assert folio["cpu_vs_docling"] == 1.25
    assert folio["targets_met"]["cpu_no_more_than_docling"] is False
    assert summary["docling"]["targets_met"]["list_items_as_list_items"] is True
