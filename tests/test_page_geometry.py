"""Boxes are data, not verdicts (issue 50): every block box is clipped to the page, a box
wholly outside it keeps its text as furniture, and what ran over is reported, never a
reason to drop a page's text."""

from __future__ import annotations

from folio.models import BBox, Block, Label
from folio.pipeline.geometry import fit_blocks


def text(x0: float, y0: float, x1: float, y1: float, content: str = "Body text.") -> Block:
    return Block(label=Label.TEXT.value, content=content, order=0,
                 bbox=BBox(x0=x0, y0=y0, x1=x1, y1=y1))


def test_boxes_are_clipped_to_the_page_and_reported_beyond_rounding() -> None:
    blocks, note = fit_blocks([text(-2, 5, 613, 100)], 612, 792)  # a hair over: rounding
    assert blocks[0].bbox == BBox(x0=0, y0=5, x1=612, y1=100) and note == ""
    blocks, note = fit_blocks([text(-40, 12, 1065, 929), text(300, 100, 200, 50)], 798, 596)
    assert blocks[0].bbox == BBox(x0=0, y0=12, x1=798, y1=596)
    assert blocks[1].bbox == BBox(x0=200, y0=50, x1=300, y1=100)  # corners put in order
    assert note.startswith("geometry: 1 block box(es) ran off the page by up to 333 pt")
    assert all(b.label == Label.TEXT.value for b in blocks)


def test_a_block_wholly_outside_the_page_is_furniture_with_its_text() -> None:
    above, below = text(3, -38, 213, -31, "job.qxd 3:46 PM"), text(10, 800, 90, 810, "slug")
    blocks, note = fit_blocks([above, text(50, 50, 300, 400), below], 396, 594)
    assert [b.label for b in blocks] == [Label.PAGE_HEADER.value, Label.TEXT.value,
                                         Label.PAGE_FOOTER.value]
    assert blocks[0].content == "job.qxd 3:46 PM" and blocks[0].bbox == BBox(
        x0=3, y0=0, x1=213, y1=0)
    assert "2 of them wholly outside it" in note


def test_a_page_of_unknown_size_is_left_alone() -> None:
    blocks, note = fit_blocks([text(-5, -5, 900, 900)], 0, 0)
    assert blocks[0].bbox == BBox(x0=-5, y0=-5, x1=900, y1=900) and note == ""
