"""bench/fidelity_scoring.py: olmOCR-bench rules and docling-derived scores on tiny inputs.

No corpus, no pipeline: each case is built so that a wrong rule gives the wrong answer
(a typo one edit past ``max_diffs``, a neighbour in the wrong column, a footer that is in
the markdown but not labelled).
"""

from __future__ import annotations

from bench.fidelity_scoring import (
    contains_words,
    fuzzy_contains,
    header_footer_scores,
    indel_ratio,
    match_starts,
    normalize_text,
    parse_tables,
    pass_rates,
    run_olmocr_test,
    table_structure_scores,
)

PAGE = "The **quick** brown fox jumps over the lazy dog.\n\nA second paragraph follows here."
HTML_TABLE = (
    "<table><thead><tr><th>Name</th><th>Score</th></tr></thead>"
    "<tbody><tr><td>Alice</td><td>0.87</td></tr><tr><td>Bob</td><td>0.42</td></tr></tbody>"
    "</table>"
)


def test(kind: str, **fields: object) -> dict[str, object]:
    return {"pdf": "x.pdf", "page": 1, "id": "t", "type": kind, **fields}


test.__test__ = False  # type: ignore[attr-defined]  # a helper, not a test


def test_normalize_drops_emphasis_and_folds_punctuation() -> None:
    assert normalize_text("**bold**  and\n_it_ \u2014 \u201cq\u201d") == 'bold and it - "q"'


def test_present_typo_within_max_diffs_passes_beyond_fails() -> None:
    typo = "quick brwn fox"  # one deletion away from the page
    assert run_olmocr_test(test("present", text=typo, max_diffs=1), PAGE)[0]
    assert not run_olmocr_test(test("present", text=typo, max_diffs=0), PAGE)[0]
    two = "quick brwn fx"  # two edits
    assert not run_olmocr_test(test("present", text=two, max_diffs=1), PAGE)[0]
    assert run_olmocr_test(test("present", text=two, max_diffs=2), PAGE)[0]


def test_present_markdown_emphasis_is_ignored_and_case_matters_by_default() -> None:
    assert run_olmocr_test(test("present", text="The quick brown"), PAGE)[0]
    assert not run_olmocr_test(test("present", text="THE QUICK brown"), PAGE)[0]
    assert run_olmocr_test(test("present", text="THE QUICK brown", case_sensitive=False), PAGE)[0]


def test_absent_passes_only_when_text_missing() -> None:
    assert run_olmocr_test(test("absent", text="purple elephant"), PAGE)[0]
    assert not run_olmocr_test(test("absent", text="lazy dog"), PAGE)[0]
    # a fuzzy absent: one edit away counts as present when max_diffs allows it
    assert not run_olmocr_test(test("absent", text="lazy dig", max_diffs=1), PAGE)[0]


def test_failed_page_fails_every_test_even_absent() -> None:
    assert not run_olmocr_test(test("absent", text="anything"), None)[0]
    assert not run_olmocr_test(test("present", text="quick"), None)[0]


def test_order() -> None:
    assert run_olmocr_test(test("order", before="quick brown", after="second paragraph"), PAGE)[0]
    assert not run_olmocr_test(test("order", before="second paragraph", after="quick brown"),
                               PAGE)[0]
    assert not run_olmocr_test(test("order", before="quick brown", after="missing"), PAGE)[0]


def test_fuzzy_helpers_agree_on_positions() -> None:
    assert fuzzy_contains("abcdef", "xxabXdefyy", 1)
    assert not fuzzy_contains("abcdef", "xxabXdXfyy", 1)
    assert match_starts("ab", "ab__ab") == [0, 4]
    assert 0 in match_starts("abc", "aXc", 1)
    assert indel_ratio("abc", "abc") == 1.0
    assert 0.5 < indel_ratio("abcd", "abce") < 1.0


def test_table_left_and_up_neighbours() -> None:
    page = "Some text\n\n" + HTML_TABLE
    assert run_olmocr_test(test("table", cell="0.87", left="Alice"), page)[0]
    assert run_olmocr_test(test("table", cell="0.42", up="0.87"), page)[0]
    assert run_olmocr_test(test("table", cell="0.42", top_heading="Score"), page)[0]
    assert run_olmocr_test(test("table", cell="0.42", left_heading="Bob"), page)[0]
    # wrong neighbours: the cell exists but the relation does not hold
    assert not run_olmocr_test(test("table", cell="0.87", left="Bob"), page)[0]
    assert not run_olmocr_test(test("table", cell="0.87", up="Alice"), page)[0]
    # a cell that is only in prose is not a table cell
    assert not run_olmocr_test(test("table", cell="Some text"), page)[0]
    assert not run_olmocr_test(test("table", cell="0.87"), "Alice 0.87 Bob 0.42")[0]


def test_markdown_table_and_spans() -> None:
    md = "| a | b |\n|---|---|\n| 1 | 2 |\n"
    assert run_olmocr_test(test("table", cell="2", left="1", up="b"), md)[0]
    spanned = ("<table><tr><td colspan=2>Head</td></tr>"
               "<tr><td>x</td><td>y</td></tr></table>")
    (table,) = parse_tables(spanned)
    assert table.origin == [(0, 0), (1, 0), (1, 1)]
    assert run_olmocr_test(test("table", cell="y", up="Head"), spanned)[0]


def test_baseline_blank_page() -> None:
    assert run_olmocr_test(test("baseline", max_length=10), "  \n 3 ")[0]
    assert not run_olmocr_test(test("baseline", max_length=10), "eleven chars here")[0]


def test_pass_rates_exclude_math_from_headline() -> None:
    rows = [{"type": "present", "passed": True}, {"type": "table", "passed": False},
            {"type": "math", "passed": False}]
    rates = pass_rates(rows)
    assert rates["pass_rate"] == 0.5
    assert rates["tests_counted"] == 2
    assert rates["table_pass_rate"] == 0.0
    assert rates["by_type"]["math"]["tests"] == 1


DOCLING = {
    "texts": [
        {"label": "page_header", "text": "Annual Report 2014", "prov": [{"page_no": 1}]},
        {"label": "page_footer", "text": "7", "prov": [{"page_no": 1}]},
        {"label": "page_footer", "text": "Confidential draft", "prov": [{"page_no": 2}]},
        {"label": "text", "text": "Body text.", "prov": [{"page_no": 1}]},
    ],
    "tables": [{
        "prov": [{"page_no": 1}],
        "data": {"num_rows": 2, "num_cols": 2, "table_cells": [
            {"text": "Name", "start_row_offset_idx": 0, "start_col_offset_idx": 0},
            {"text": "Score", "start_row_offset_idx": 0, "start_col_offset_idx": 1},
            {"text": "Alice", "start_row_offset_idx": 1, "start_col_offset_idx": 0},
            {"text": "0.87", "start_row_offset_idx": 1, "start_col_offset_idx": 1},
        ]},
    }],
}


def test_header_footer_recall_and_leakage() -> None:
    pages = {
        # header labelled as such; footer "7" left in the markdown as text
        1: ("Annual Report 2014\n\nBody text.\n\n7",
            [("Page-Header", "Annual Report 2014"), ("Text", "Body text."), ("Text", "7")]),
        # page 2 footer: dropped entirely
        2: ("Other body.", [("Text", "Other body.")]),
    }
    scores = header_footer_scores(DOCLING, pages)
    assert scores["items"] == 3
    assert scores["labelled"] == 1
    assert scores["recall"] == round(1 / 3, 4)
    assert scores["in_markdown"] == round(2 / 3, 4)
    assert scores["multiword_items"] == 2
    assert scores["multiword_in_markdown"] == 0.5
    # a page number inside a longer number is not a match
    assert not contains_words("7", "in 2017 we")


def test_header_footer_recall_zero_when_only_text_labels() -> None:
    pages = {1: ("Annual Report 2014 7", [("Text", "Annual Report 2014 7")])}
    assert header_footer_scores(DOCLING, pages)["recall"] == 0.0


def test_table_structure_cell_positions() -> None:
    (row,) = table_structure_scores(DOCLING, {1: HTML_TABLE})
    assert row["detected"] and row["cell_position_agreement"] == 1.0
    swapped = HTML_TABLE.replace("<td>Alice</td><td>0.87</td>", "<td>0.87</td><td>Alice</td>")
    (row,) = table_structure_scores(DOCLING, {1: swapped})
    assert row["cell_position_agreement"] == 0.5
    (row,) = table_structure_scores(DOCLING, {1: "Name Score Alice 0.87"})
    assert not row["detected"] and row["cell_position_agreement"] == 0.0


def test_table_structure_rows_carry_docling_label() -> None:
    """A table of contents (docling's ``document_index``) is told apart from tables, so
    the bench can score it on its own rather than as a table."""
    table = {"prov": [{"page_no": 1}], "data": {"num_rows": 1, "num_cols": 1, "table_cells": [
        {"text": "Name", "start_row_offset_idx": 0, "start_col_offset_idx": 0}]}}
    gt = {"tables": [table, {**table, "label": "document_index"}]}
    rows = table_structure_scores(gt, {1: HTML_TABLE})
    assert [r["label"] for r in rows] == ["table", "document_index"]
