"""Bullets the OCR engine did not read, found in the page image (folio.page.visual_bullets),
and the list items they make through the real Tesseract."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
from PIL import Image, ImageDraw, ImageFont

from folio.models import Label, PagePrep
from folio.page.visual_bullets import LineBox, bullet_lines

LINE_H = 40  # pixels: a 10-pt line at about 290 DPI
WORDS = ["Apples keep well in a cool cellar", "Pears ripen best off the tree",
         "Plums are picked when soft", "Quinces need a long warm summer"]


def _page(dots: list[bool], *, dot: int = 9, column_text: bool = False,
          speck_at: int | None = None) -> tuple[np.ndarray, list[LineBox], Image.Image]:
    """A white page with a line of text every 60 px starting at x=300, a dot ``dot`` px
    wide 40 px left of the lines marked in ``dots``; optionally another column's words
    ending just left of each line, or one speck of a different size."""
    img = Image.new("L", (1400, 120 + 60 * len(dots)), 255)
    draw = ImageDraw.Draw(img)
    font = ImageFont.load_default(size=32)
    lines = []
    for i, (text, bullet) in enumerate(zip(WORDS * 3, dots, strict=False)):
        top = 60 + 60 * i
        draw.text((300, top), text, font=font, fill=0)
        if bullet:
            cy = top + LINE_H // 2
            draw.ellipse((300 - 40 - dot, cy - dot // 2, 300 - 40, cy + dot - dot // 2), fill=0)
        if column_text:
            draw.text((40, top), "end of a column.", font=font, fill=0)
        lines.append(LineBox(left=300, top=top, height=LINE_H))
    if speck_at is not None:
        top = 60 + 60 * speck_at
        draw.rectangle((255, top + 15, 265, top + 25), fill=0)
    return np.asarray(img), lines, img


def test_dots_in_a_column_left_of_lines_are_bullets() -> None:
    gray, lines, _ = _page([True, True, False, True])
    assert bullet_lines(gray, lines) == {0, 1, 3}


def test_a_lone_blob_is_a_speck_not_a_bullet() -> None:
    gray, lines, _ = _page([False, False, False, False], speck_at=2)
    assert bullet_lines(gray, lines) == set()
    gray, lines, _ = _page([True, False, False, False])
    assert bullet_lines(gray, lines) == set()


def test_another_columns_words_or_a_big_mark_are_no_bullet() -> None:
    gray, lines, _ = _page([True, True, True, False], column_text=True)
    assert bullet_lines(gray, lines) == set()  # the band holds words, not one blob
    gray, lines, _ = _page([True, True, True, False], dot=34)  # as tall as the line
    assert bullet_lines(gray, lines) == set()
    gray, lines, _ = _page([True, True, True, False], dot=26)  # a digit's or a capital's size
    assert bullet_lines(gray, lines) == set()


def test_bullets_of_different_sizes_do_not_vouch_for_each_other() -> None:
    gray, lines, _ = _page([True, False, False, False], speck_at=2, dot=5)
    assert bullet_lines(gray, lines) == set()


@pytest.mark.skipif(shutil.which("tesseract") is None, reason="tesseract absent")
def test_tesseract_drops_small_bullets_and_the_items_come_back(tmp_path: Path) -> None:
    from folio.engines.tesseract import TesseractEngine

    _, _, img = _page([True, True, True, False], dot=8)
    path = tmp_path / "page.png"
    img.save(path)
    page = PagePrep(index=0, width_pt=img.width * 72 / 290, height_pt=img.height * 72 / 290,
                    image_path=str(path))
    blocks = TesseractEngine(psm=3).recognize(page).blocks
    items = [b for b in blocks if b.label == Label.LIST_ITEM.value]
    assert [b.content.split()[0] for b in items] == ["Apples", "Pears", "Plums"], blocks
    assert all(b.marker == "-" and b.level == 1 for b in items)
    rest = [b.content for b in blocks if b.label != Label.LIST_ITEM.value]
    assert any("Quinces" in text for text in rest)
