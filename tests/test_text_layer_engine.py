"""TextLayerEngine: serves the page's own layer, refuses absent, empty or junk layers."""

from __future__ import annotations

import pytest

from folio.engines.base import OcrEngine
from folio.engines.text_layer import TextLayerEngine
from folio.errors import BadOutputError
from folio.models import BBox, Block, Label, PagePrep, TextLayer


def layer_page(layer: TextLayer | None) -> PagePrep:
    return PagePrep(index=2, width_pt=612, height_pt=792, text_layer=layer)


BLOCKS = [
    Block(label=Label.SECTION_HEADER.value, bbox=BBox(x0=72, y0=60, x1=300, y1=76),
          content="Section 1", order=0),
    Block(label=Label.TEXT.value, bbox=BBox(x0=72, y0=90, x1=540, y1=140),
          content="Body text of the page.", order=1),
    Block(label=Label.TEXT.value, content="   ", order=2),
]


def test_is_an_ocr_engine() -> None:
    assert isinstance(TextLayerEngine(), OcrEngine)


def test_returns_the_layer_blocks_and_markdown() -> None:
    layer = TextLayer(chars=31, text="Section 1\nBody text of the page.", blocks=BLOCKS,
                      score=0.95, trusted=True)
    page = layer_page(layer)
    output = TextLayerEngine().recognize(page)
    assert [b.content for b in output.blocks] == ["Section 1", "Body text of the page."]
    assert output.markdown == "## Section 1\n\nBody text of the page."
    assert output.attempt.engine == "text-layer" and output.attempt.error is None
    output.blocks[0].content = "changed"  # the engine hands out copies
    assert BLOCKS[0].content == "Section 1"


def test_accepts_an_untrusted_but_usable_layer() -> None:
    layer = TextLayer(chars=20, text="Some text from the layer", score=0.5, trusted=False)
    output = TextLayerEngine().recognize(layer_page(layer))
    assert len(output.blocks) == 1
    assert output.blocks[0].label == "Text" and output.blocks[0].bbox is None
    assert output.markdown == "Some text from the layer"


@pytest.mark.parametrize(
    ("layer", "why"),
    [
        (None, "page has none"),
        (TextLayer(score=0.9), "it is empty"),
        (TextLayer(chars=3, text="   ", blocks=[BLOCKS[2]], score=0.9), "it is empty"),
        (TextLayer(chars=40, text="(cid:12)(cid:13)", score=0.1, why="cid glyphs"),
         r"score 0\.10 < 0\.30 \(cid glyphs\)"),
    ],
    ids=["absent", "empty", "whitespace", "junk"],
)
def test_refuses_unusable_layers(layer: TextLayer | None, why: str) -> None:
    with pytest.raises(BadOutputError, match=f"^no usable text layer: {why}"):
        TextLayerEngine().recognize(layer_page(layer))


def test_minimum_score_is_configurable() -> None:
    layer = TextLayer(chars=10, text="ok text", score=0.5)
    with pytest.raises(BadOutputError):
        TextLayerEngine(min_score=0.8).recognize(layer_page(layer))
