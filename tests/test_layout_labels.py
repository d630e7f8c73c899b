"""Block labels from layout regions (pure logic, regions made by hand): coverage, priority,
no region -> unchanged, the engine's specific labels kept, table cells joined; and the
page worker's side with a fake detector (render size, one detector per process)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest
from PIL import Image

from folio.engines.base import EngineOutput
from folio.models import Attempt, BBox, Block, Label, PagePrep, Region, WordBox
from folio.page.layout_labels import cover, label_blocks, region_for
from folio.pdf import page_layout
from folio.pipeline.pages import apply_layout
from folio.settings.config import LayoutSettings, PipelineConfig


def box(x0: float, y0: float, x1: float, y1: float) -> BBox:
    return BBox(x0=x0, y0=y0, x1=x1, y1=y1)


def region(label: Label, bbox: BBox, score: float = 0.9, source: str = "x") -> Region:
    return Region(label=label, bbox=bbox, score=score, source_class=source)


def block(content: str, bbox: BBox | None, order: int = 0, label: Label = Label.TEXT) -> Block:
    return Block(label=label.value, bbox=bbox, content=content, order=order)


def test_cover_is_the_share_of_the_block_inside_the_region() -> None:
    assert cover(box(0, 0, 10, 10), box(0, 0, 100, 100)) == 1.0
    assert cover(box(0, 0, 10, 10), box(5, 0, 100, 100)) == pytest.approx(0.5)
    assert cover(box(0, 0, 10, 10), box(20, 20, 30, 30)) == 0.0
    assert cover(box(5, 5, 5, 5), box(0, 0, 10, 10)) == 0.0  # an empty block is nowhere


def test_a_block_takes_the_label_of_a_region_covering_most_of_it() -> None:
    header = region(Label.PAGE_HEADER, box(50, 20, 400, 40))
    blocks = [block("Annual report", box(60, 22, 300, 38)),
              block("Body text", box(60, 100, 500, 300), order=1)]
    out, changed = label_blocks(blocks, [header], min_cover=0.5)
    assert [b.label for b in out] == [Label.PAGE_HEADER.value, Label.TEXT.value]
    assert changed == 1
    assert blocks[0].label == Label.TEXT.value  # the input is not changed


def test_a_region_covering_less_than_the_threshold_does_not_label() -> None:
    figure = region(Label.FIGURE, box(0, 0, 100, 100))
    touching = block("paragraph beside the figure", box(60, 0, 160, 100))  # 40 % inside
    out, changed = label_blocks([touching], [figure], min_cover=0.5)
    assert out[0].label == Label.TEXT.value and changed == 0
    assert region_for(touching.bbox or box(0, 0, 1, 1), [figure], 0.3) == figure


def test_blocks_without_a_region_or_a_box_keep_their_label() -> None:
    blocks = [block("a list item", box(0, 0, 10, 10), label=Label.LIST_ITEM),
              block("no geometry", None, order=1, label=Label.SECTION_HEADER)]
    out, changed = label_blocks(blocks, [region(Label.TABLE, box(500, 500, 600, 600))], 0.5)
    assert [b.label for b in out] == [Label.LIST_ITEM.value, Label.SECTION_HEADER.value]
    assert changed == 0


def test_specific_kinds_win_over_text_whatever_the_score() -> None:
    cell = block("42", box(110, 110, 130, 120))
    regions = [region(Label.TEXT, box(100, 100, 140, 125), score=0.99),
               region(Label.TABLE, box(90, 90, 400, 300), score=0.55)]
    out, _ = label_blocks([cell], regions, 0.5)
    assert out[0].label == Label.TABLE.value
    caption = region(Label.CAPTION, box(100, 100, 140, 125), score=0.6)
    header = region(Label.PAGE_HEADER, box(100, 100, 140, 125), score=0.9)
    assert region_for(box(110, 110, 130, 120), [header, caption], 0.5) == caption


def test_text_regions_do_not_erase_the_engines_own_labels() -> None:
    heading = block("1 Introduction", box(0, 0, 100, 20), label=Label.SECTION_HEADER)
    out, changed = label_blocks([heading], [region(Label.TEXT, box(0, 0, 200, 40))], 0.5)
    assert out[0].label == Label.SECTION_HEADER.value and changed == 0


def test_blocks_of_one_table_become_one_block_in_reading_order() -> None:
    table = region(Label.TABLE, box(0, 100, 300, 200))
    cells = [block("b2", box(150, 150, 200, 160), order=4),
             block("a1", box(10, 110, 60, 120), order=1),
             block("b1", box(150, 111, 200, 119), order=2),
             block("a2", box(10, 150, 60, 160), order=3)]
    after = block("Next paragraph", box(0, 300, 300, 400), order=5)
    out, changed = label_blocks([*cells, after], [table], 0.5)
    assert [b.label for b in out] == [Label.TABLE.value, Label.TEXT.value]
    assert out[0].content == "a1\nb1\na2\nb2"
    assert out[0].order == 1 and out[0].bbox == box(10, 110, 200, 160)
    assert changed >= 4


def _word(text: str, b: BBox) -> WordBox:
    return WordBox(text=text, x0=b.x0, y0=b.y0, x1=b.x1, y1=b.y1)


def test_a_table_gets_its_grid_from_the_words_inside_its_blocks() -> None:
    table = region(Label.TABLE, box(0, 100, 300, 200))
    slots = {"a1": box(10, 110, 30, 120), "b1": box(150, 110, 170, 120),
             "a2": box(10, 130, 30, 140), "b2": box(150, 130, 170, 140)}
    cells = [block(text, b, order=n) for n, (text, b) in enumerate(slots.items())]
    words = [_word(text, b) for text, b in slots.items()]
    words.append(_word("elsewhere", box(10, 300, 60, 310)))  # not in the table's blocks
    out, changed = label_blocks(cells, [table], 0.5, words)
    (merged,) = out
    assert merged.cells is not None and changed >= 4
    assert [(c.row, c.col, c.text) for c in merged.cells] == [
        (0, 0, "a1"), (0, 1, "b1"), (1, 0, "a2"), (1, 1, "b2")]
    assert merged.content.startswith("<table>") and "elsewhere" not in merged.content

    # a word of the blocks missing from the words given (outside the region the page
    # worker kept words in): no grid, the block's text is kept whole
    out, _ = label_blocks(cells, [table], 0.5, words[1:])
    assert out[0].cells is None and out[0].content == "a1\nb1\na2\nb2"


def output(blocks: list[Block]) -> EngineOutput:
    return EngineOutput(blocks=blocks, markdown="unchanged", attempt=Attempt(engine="x"))


def test_cpu_engines_pages_are_relabelled_and_their_markdown_rebuilt() -> None:
    regions = [region(Label.SECTION_HEADER, box(0, 0, 300, 30))]
    page = PagePrep(index=0, width_pt=612, height_pt=792, layout=regions)
    result = output([block("Results", box(10, 5, 100, 25)), block("Text", box(10, 50, 100, 60), 1)])
    apply_layout(result, "tesseract", page, 0.5)
    assert result.blocks[0].label == Label.SECTION_HEADER.value
    assert result.markdown == "## Results\n\nText"


def test_a_page_the_engine_turned_upright_is_left_alone() -> None:
    """The model saw the page on its side; its regions describe a picture of sideways text."""
    page = PagePrep(index=0, width_pt=612, height_pt=792,
                    layout=[region(Label.FIGURE, box(0, 0, 612, 792))])
    result = output([block("Results", box(10, 5, 100, 25))])
    result.attempt.rotated = 90
    apply_layout(result, "tesseract", page, 0.5)
    assert result.blocks[0].label == Label.TEXT.value and result.markdown == "unchanged"


def test_figure_blocks_are_labelled_but_not_joined() -> None:
    figure = region(Label.FIGURE, box(0, 0, 600, 700))
    blocks = [block("left column", box(10, 10, 290, 600)),
              block("right column", box(310, 10, 590, 600), order=1)]
    out, _ = label_blocks(blocks, [figure], 0.5)
    assert [(b.label, b.content) for b in out] == [(Label.FIGURE.value, "left column"),
                                                    (Label.FIGURE.value, "right column")]


@pytest.mark.parametrize("engine, layout", [("vllm", [region(Label.TABLE, box(0, 0, 612, 792))]),
                                            ("tesseract", None)])
def test_vlm_pages_and_pages_without_regions_are_left_alone(
        engine: str, layout: list[Region] | None) -> None:
    page = PagePrep(index=0, width_pt=612, height_pt=792, layout=layout)
    result = output([block("Results", box(10, 5, 100, 25))])
    apply_layout(result, engine, page, 0.5)
    assert result.blocks[0].label == Label.TEXT.value and result.markdown == "unchanged"


def test_layout_runs_for_cpu_engines_only_and_enters_the_hash_only_then() -> None:
    tesseract = PipelineConfig.model_validate({"ocr": {"engine": "tesseract"}})
    off = PipelineConfig.model_validate({"ocr": {"engine": "tesseract"},
                                         "layout": {"enabled": False}})
    vlm = PipelineConfig.model_validate({"ocr": {"engine": "vllm"}})
    vlm_other_threshold = PipelineConfig.model_validate(
        {"ocr": {"engine": "vllm"}, "layout": {"score_threshold": 0.7}})
    assert tesseract.active_layout() is not None
    assert off.active_layout() is None and vlm.active_layout() is None
    assert tesseract.config_hash() != off.config_hash()
    assert vlm.config_hash() == vlm_other_threshold.config_hash()
    threads = PipelineConfig.model_validate({"layout": {"threads": 2}})
    assert threads.config_hash() == tesseract.config_hash()  # operational only
    stricter = PipelineConfig.model_validate({"layout": {"score_threshold": 0.7}})
    assert stricter.config_hash() != tesseract.config_hash()


class FakeDetector:
    """Records what it was given; one region over the whole page."""

    def __init__(self) -> None:
        self.seen: list[tuple[int, int]] = []

    def detect(self, image: Image.Image | npt.NDArray[np.uint8], page_width_pt: float,
               page_height_pt: float) -> list[Region]:
        size = image.size if isinstance(image, Image.Image) else (image.shape[1], image.shape[0])
        self.seen.append((int(size[0]), int(size[1])))
        return [region(Label.TEXT, box(0, 0, page_width_pt, page_height_pt))]


def test_the_page_worker_renders_small_pages_for_detection_and_reuses_renders(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import pypdfium2 as pdfium

    fake = FakeDetector()
    monkeypatch.setattr(page_layout, "detector", lambda settings: fake)
    pdf = pdfium.PdfDocument.new()
    pdf.new_page(612, 792)
    page = pdf[0]
    try:
        regions = page_layout.detect_page(page, None, 612, 792, LayoutSettings(render_dpi=100))
        rendered = Image.new("RGB", (1275, 1650), "white")
        page_layout.detect_page(page, rendered, 612, 792, LayoutSettings())
    finally:
        page.close()
        pdf.close()
    assert regions is not None and regions[0].bbox == box(0, 0, 612, 792)
    assert fake.seen == [(850, 1100), (1275, 1650)]


def test_one_detector_per_process_and_settings() -> None:
    first = page_layout.detector(LayoutSettings())
    assert page_layout.detector(LayoutSettings()) is first
    assert page_layout.detector(LayoutSettings(score_threshold=0.6)) is not first


def test_render_size_is_capped_for_huge_pages() -> None:
    assert page_layout.layout_render_size(612, 792, 100) == (850, 1100)
    width, height = page_layout.layout_render_size(7200, 3600, 100)
    assert width == page_layout.LONGEST_SIDE_PX and height == page_layout.LONGEST_SIDE_PX // 2


def test_a_detector_failure_costs_the_labels_not_the_page(
        monkeypatch: pytest.MonkeyPatch) -> None:
    class Broken:
        def detect(self, *args: object) -> list[Region]:
            raise RuntimeError("model gone")

    monkeypatch.setattr(page_layout, "detector", lambda settings: Broken())
    image = Image.new("RGB", (10, 10), "white")
    assert page_layout.detect_page(None, image, 10, 10, LayoutSettings()) is None  # type: ignore[arg-type]


def test_the_zygote_stays_single_threaded() -> None:
    """The zygote preloads numpy and imports the page worker, then forks: neither may
    start a thread (onnxruntime, which would, loads in the forked child)."""
    import subprocess
    import sys

    probe = ("import os, sys; from folio.pdf import zygote; zygote._preload_numpy(); "
             "from folio.pdf import worker_child; "
             "print(len(os.listdir('/proc/self/task')), "
             "'numpy' in sys.modules, 'onnxruntime' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         check=True).stdout.split()
    assert out == ["1", "True", "False"]


def test_a_block_freed_from_a_table_or_figure_keeps_what_labelling_would_keep() -> None:
    """A list item a figure or table region let go of (a page of prose taken for a
    picture, a page number beyond a table) is labelled as label_blocks labels: a text
    region does not make it Text (the item would keep its marker on a Text block), a
    title region does not make it a heading; a plain line takes the title."""
    from folio.page.layout_labels import _outside

    item = block("point one", box(80, 200, 400, 214), label=Label.LIST_ITEM).model_copy(
        update={"marker": "-", "level": 1})
    text_region = [region(Label.TEXT, box(60, 180, 560, 400))]
    title_region = [region(Label.TITLE, box(60, 180, 560, 400))]
    assert _outside(item, text_region, 0.5) is item
    assert _outside(item, title_region, 0.5) is item
    line = block("A Title", box(80, 200, 400, 214))
    assert _outside(line, title_region, 0.5).label == Label.TITLE.value
