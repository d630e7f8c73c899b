"""The pure parts of bench/replay_fidelity.py on the corpus's olmOCR bench pages: answers
loaded and replayed with their front matter, the test double's image matching picking
each page's own answer, and a known answer scored."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
import replay_fidelity as bench

from tests.openai_fake import nearest_answer, thumbnail


@pytest.fixture(scope="module")
def pages(corpus: Path) -> dict[str, Any]:
    if not (corpus / "olmocr" / "bench_answers").is_dir():
        pytest.skip("corpus has no olmocr/bench_answers")
    found, _skipped = bench.load_pages(corpus)
    return {p.stem: p for p in found}


def test_answers_replay_with_front_matter(pages: dict[str, Any]) -> None:
    """The answer as olmOCR 2 sends it: ``---``, the five keys as YAML, ``---``, the text."""
    page = pages["small_page_size"]
    empty, front, body = bench.replayed(page).split("---\n", 2)
    meta = yaml.safe_load(front)
    assert empty == "" and sorted(meta) == sorted(["primary_language", "is_rotation_valid",
                                                  "rotation_correction", "is_table", "is_diagram"])
    assert meta["rotation_correction"] == 0 and meta["is_rotation_valid"] is True
    assert body == page.answer and "turnip crop" in body
    assert all(t["type"] != "math" for p in pages.values() for t in p.tests)
    assert pages["mathfuncs"].math_excluded == 4
    assert pages["blank_book_pg1"].answer == ""  # the blank_book_pg1_pg1_repeat1.md oddity


def test_request_image_picks_its_own_page(pages: dict[str, Any]) -> None:
    """Two look-alike pages (the same math sheet, columns swapped) rendered at folio's size
    each get their own answer, not the other's."""
    import pypdfium2 as pdfium

    chosen = [pages["mathfuncs"], pages["mathfuncs_colswitch"]]
    refs = bench.reference_answers(chosen)
    for page in chosen:
        doc = pdfium.PdfDocument(str(page.pdf))
        try:
            pdf_page = doc[0]
            image = pdf_page.render(scale=1288 / max(pdf_page.get_size())).to_pil()
        finally:
            doc.close()
        answer, distance, runner_up = nearest_answer(refs, thumbnail(image.convert("RGB")))
        assert answer.name == page.stem and answer.text == bench.replayed(page)
        assert runner_up is not None and distance < runner_up / 2


def test_known_answer_scores(pages: dict[str, Any]) -> None:
    _name, scorer = bench.olmocr_scorer()
    page = pages["test-graphical-text"]
    results = bench.score_text(page, page.answer, scorer)
    assert [r["passed"] for r in results].count(True) == 1  # olmOCR itself misses 2 of 3
    assert all(r["passed"] for r in bench.score_text(pages["small_page_size"],
                                                      pages["small_page_size"].answer, scorer))
    assert not any(r["passed"] for r in bench.score_text(page, None, scorer))
