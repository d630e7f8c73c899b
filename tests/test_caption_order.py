"""Captions read beside their table or figure (issue 10 item 4): blocks made by hand, as
the text layer's XY cut and the layout model leave them, and through ``apply_layout``."""

from __future__ import annotations

from folio.engines.base import EngineOutput
from folio.models import Attempt, BBox, Block, Label, PagePrep, Region
from folio.page.caption_order import captions_beside, owner
from folio.pipeline.pages import apply_layout


def box(x0: float, y0: float, x1: float, y1: float) -> BBox:
    return BBox(x0=x0, y0=y0, x1=x1, y1=y1)


def block(content: str, bbox: BBox, order: int, label: Label = Label.TEXT) -> Block:
    return Block(label=label.value, bbox=bbox, content=content, order=order)


def two_columns() -> list[Block]:
    """A two-column page as an XY cut reads it: the left column, then the right; the
    figure's caption, under the figure at the foot of the left column, came out after
    the right column (the cut put the full-width band it sits in last)."""
    return [
        block("Left intro", box(50, 80, 290, 200), 0),
        block("[figure]", box(50, 210, 290, 400), 1, Label.FIGURE),
        block("Right column text", box(320, 80, 560, 500), 2),
        block("Right column more", box(320, 510, 560, 700), 3),
        block("Figure 1: growth by year", box(50, 406, 290, 418), 4, Label.CAPTION),
    ]


def test_a_caption_under_a_figure_is_read_right_after_it() -> None:
    out, moved = captions_beside(two_columns())
    assert moved == 1
    assert [b.content for b in out] == ["Left intro", "[figure]", "Figure 1: growth by year",
                                        "Right column text", "Right column more"]
    assert [b.order for b in out] == [0, 1, 2, 3, 4]


def test_a_caption_over_a_table_is_read_right_before_it() -> None:
    blocks = [
        block("Body", box(50, 80, 560, 200), 0),
        block("<table>...</table>", box(60, 240, 550, 400), 1, Label.TABLE),
        block("More body", box(50, 420, 560, 600), 2),
        block("Table 2. Costs", box(60, 222, 300, 234), 3, Label.CAPTION),
    ]
    out, moved = captions_beside(blocks)
    assert moved == 1
    assert [b.content for b in out] == ["Body", "Table 2. Costs", "<table>...</table>",
                                        "More body"]


def test_a_caption_goes_to_the_nearest_of_two_figures() -> None:
    blocks = [
        block("[top figure]", box(50, 80, 290, 200), 0, Label.FIGURE),
        block("[bottom figure]", box(50, 230, 290, 400), 1, Label.FIGURE),
        block("Text", box(320, 80, 560, 400), 2),
        block("Figure 1: the top one", box(50, 204, 290, 214), 3, Label.CAPTION),
    ]
    found = owner(blocks[3], blocks)
    assert found is not None and found[0].content == "[top figure]" and not found[1]
    out, _ = captions_beside(blocks)
    assert [b.content for b in out][:2] == ["[top figure]", "Figure 1: the top one"]


def test_captions_far_away_or_beside_in_another_column_stay_where_the_text_put_them() -> None:
    far = [
        block("[figure]", box(50, 80, 290, 200), 0, Label.FIGURE),
        block("Text", box(50, 210, 290, 500), 1),
        block("Figure 9: far below", box(50, 600, 290, 612), 2, Label.CAPTION),  # 400 pt
    ]
    beside = [
        block("[figure]", box(50, 80, 290, 200), 0, Label.FIGURE),
        block("Text", box(50, 210, 290, 500), 1),
        block("Caption-like words in the other column", box(320, 205, 560, 217), 2,
              Label.CAPTION),
    ]
    for blocks in (far, beside):
        out, moved = captions_beside(blocks)
        assert moved == 0 and out == blocks


def test_a_caption_already_beside_its_table_changes_nothing() -> None:
    blocks = [
        block("Table 1: sizes", box(60, 100, 300, 112), 0, Label.CAPTION),
        block("<table>...</table>", box(60, 118, 550, 300), 1, Label.TABLE),
        block("Body", box(50, 320, 560, 500), 2),
    ]
    out, moved = captions_beside(blocks)
    assert moved == 0 and out == blocks


def test_apply_layout_rebuilds_the_markdown_with_the_caption_beside_its_figure() -> None:
    blocks = [b.model_copy(update={"label": Label.TEXT.value}) for b in two_columns()]
    regions = [Region(label=Label.FIGURE, bbox=box(45, 205, 295, 402), score=0.9,
                      source_class="figure"),
               Region(label=Label.CAPTION, bbox=box(45, 404, 295, 420), score=0.9,
                      source_class="figure_caption")]
    page = PagePrep(index=0, width_pt=612, height_pt=792, layout=regions)
    result = EngineOutput(blocks=blocks, markdown="as the engine wrote it",
                          attempt=Attempt(engine="text-layer"))
    apply_layout(result, "text-layer", page, 0.5)
    assert result.markdown.split("\n\n") == [
        "Left intro", "[figure]", "Figure 1: growth by year", "Right column text",
        "Right column more"]
