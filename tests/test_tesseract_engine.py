"""TesseractEngine on real renders: words recovered, boxes in points, failures typed."""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path

import pytest
from PIL import Image

from folio.engines.base import OcrEngine
from folio.engines.tesseract import TesseractEngine, apt_package, paragraphs_to_blocks, parse_tsv
from folio.errors import (
    BadInputError,
    BadOutputError,
    ConfigError,
    EngineUnavailableError,
    TimeoutExpired,
)
from folio.models import Label, PagePrep, RenderPlan
from folio.page.quality import word_recall
from folio.samples import SamplePage, report_pages, write_text_pdf

DPI = 200


def render_page(pdf: Path, index: int, out: Path, dpi: int = DPI) -> PagePrep:
    """What the page worker would hand over: the PNG, its plan, the page size in points."""
    import pypdfium2 as pdfium

    doc = pdfium.PdfDocument(str(pdf))
    try:
        image = doc[index].render(scale=dpi / 72).to_pil().convert("L")
    finally:
        doc.close()
    image.save(out)
    plan = RenderPlan(dpi=dpi, width_px=image.width, height_px=image.height, reason="test")
    return PagePrep(
        index=index, width_pt=image.width * 72 / dpi, height_pt=image.height * 72 / dpi,
        plan=plan, image_path=str(out),
    )


@pytest.fixture(scope="module")
def engine() -> TesseractEngine:
    return TesseractEngine(languages="eng", timeout_s=60)


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[SamplePage], list[PagePrep]]:
    tmp = tmp_path_factory.mktemp("tess")
    pages = report_pages(seed=1, n=2)
    pdf = write_text_pdf(tmp / "report.pdf", pages)
    return pages, [render_page(pdf, i, tmp / f"p{i}.png") for i in range(len(pages))]


@pytest.fixture(scope="module")
def ocr_first(engine: TesseractEngine, report: tuple[list[SamplePage], list[PagePrep]]):  # type: ignore[no-untyped-def]
    started = time.perf_counter()
    output = engine.recognize(report[1][0])
    return output, time.perf_counter() - started


def test_is_an_ocr_engine(engine: TesseractEngine) -> None:
    assert isinstance(engine, OcrEngine)
    assert engine.model.startswith("tesseract 5.") and engine.model.endswith(" eng")


def test_recovers_the_words(ocr_first, report, record_property) -> None:  # type: ignore[no-untyped-def]
    output, seconds = ocr_first
    recall = word_recall(report[0][0].text(), output.markdown)
    record_property("word_recall", round(recall, 4))
    record_property("seconds_per_page", round(seconds, 2))
    print(f"\ntesseract on samples.report_pages page 0 at {DPI} dpi: "
          f"word recall {recall:.4f}, {seconds:.2f} s")
    assert recall >= 0.9
    assert output.attempt.engine == "tesseract"
    assert output.attempt.model == f"tesseract {output.attempt.model.split()[1]} eng"
    assert output.attempt.seconds > 0


def test_table_page_recovers_the_words(engine, report) -> None:  # type: ignore[no-untyped-def]
    output = engine.recognize(report[1][1])
    assert word_recall(report[0][1].text(), output.markdown) >= 0.9


def test_boxes_are_points_inside_the_page(ocr_first, report) -> None:  # type: ignore[no-untyped-def]
    output, _ = ocr_first
    page = report[1][0]
    assert output.blocks
    for block in output.blocks:
        box = block.bbox
        assert box is not None
        assert 0 <= box.x0 < box.x1 <= page.width_pt
        assert 0 <= box.y0 < box.y1 <= page.height_pt
        assert block.confidence is not None and 0.5 < block.confidence <= 1.0
    # samples draw the title at x=72pt, baseline 72pt below the top edge (20pt font)
    title = output.blocks[0]
    assert title.content == "Quarterly Operations Report"
    assert title.bbox is not None
    assert abs(title.bbox.x0 - 72) < 3 and 50 < title.bbox.y0 < 62 and 70 < title.bbox.y1 < 80


def test_title_is_a_header_and_body_is_text(ocr_first) -> None:  # type: ignore[no-untyped-def]
    output, _ = ocr_first
    assert output.blocks[0].label == Label.SECTION_HEADER
    assert output.markdown.startswith("## Quarterly Operations Report\n\n")
    assert [b.order for b in output.blocks] == list(range(len(output.blocks)))
    assert sum(b.label == Label.TEXT for b in output.blocks) >= 3


def test_without_plan_uses_the_image_size(engine, report) -> None:  # type: ignore[no-untyped-def]
    page = report[1][0].model_copy(update={"plan": None})
    output = engine.recognize(page)
    assert all(b.bbox is not None and b.bbox.x1 <= page.width_pt for b in output.blocks)


def test_blank_image(engine: TesseractEngine, tmp_path: Path) -> None:
    path = tmp_path / "white.png"
    Image.new("L", (850, 1100), 255).save(path)
    plan = RenderPlan(dpi=100, width_px=850, height_px=1100, reason="test")
    page = PagePrep(index=4, width_pt=612, height_pt=792, plan=plan, image_path=str(path))
    with pytest.raises(BadOutputError, match="^empty: .*page 4") as caught:
        engine.recognize(page)
    attempt = caught.value.attempt  # type: ignore[attr-defined]
    assert attempt.engine == "tesseract" and attempt.error.startswith("bad-output: empty")
    assert attempt.seconds > 0
    blank = engine.recognize(page.model_copy(update={"blank": True}))
    assert blank.blocks == [] and blank.markdown == ""


def test_no_image_is_bad_input(engine: TesseractEngine) -> None:
    with pytest.raises(BadInputError, match="no rendered image"):
        engine.recognize(PagePrep(index=0, width_pt=612, height_pt=792))


def test_unreadable_image_is_bad_output(engine: TesseractEngine, tmp_path: Path) -> None:
    path = tmp_path / "broken.png"
    path.write_bytes(b"not a png")
    with pytest.raises(BadOutputError, match="tesseract exit"):
        engine.recognize(PagePrep(index=0, width_pt=612, height_pt=792, image_path=str(path)))


def test_timeout(report) -> None:  # type: ignore[no-untyped-def]
    engine = TesseractEngine(timeout_s=0.05)
    started = time.perf_counter()
    with pytest.raises(TimeoutExpired) as caught:
        engine.recognize(report[1][0])
    assert time.perf_counter() - started < 5
    assert caught.value.attempt.error.startswith("timeout:")  # type: ignore[attr-defined]


def test_timeout_kills_the_process_group(tmp_path: Path) -> None:
    """A stand-in binary that forks a child: the child must die with it."""
    pid_file = tmp_path / "child.pid"
    fake = tmp_path / "tesseract"
    fake.write_text(
        "#!/bin/sh\n"
        'case "$1" in\n'
        '  --version) echo "tesseract 9.9.9"; exit 0;;\n'
        '  --list-langs) printf "List of available languages (2):\\neng\\nosd\\n"; exit 0;;\n'
        "esac\n"
        f"sleep 60 & echo $! > {pid_file}\n"
        "wait\n"
    )
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    engine = TesseractEngine(timeout_s=0.5, binary=str(fake))
    assert engine.model == "tesseract 9.9.9 eng"
    page = PagePrep(index=0, width_pt=612, height_pt=792, image_path=str(tmp_path / "x.png"))
    with pytest.raises(TimeoutExpired):
        engine.recognize(page)
    child = int(pid_file.read_text())
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and _alive(child):
        time.sleep(0.05)
    assert not _alive(child)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat_file = Path(f"/proc/{pid}/stat")  # a zombie still answers kill(0)
    return not (stat_file.exists() and stat_file.read_text().split()[2] == "Z")


def test_missing_binary() -> None:
    with pytest.raises(EngineUnavailableError, match="not found"):
        TesseractEngine(binary="/nonexistent/tesseract")


def test_missing_language_names_the_package() -> None:
    with pytest.raises(ConfigError, match="apt-get install tesseract-ocr-chi-sim"):
        TesseractEngine(languages="eng+chi_sim")
    assert apt_package("deu") == "tesseract-ocr-deu"


TSV = "\n".join(
    [
        "level\tpage_num\tblock_num\tpar_num\tline_num\tword_num\tleft\ttop\twidth\theight\tconf\ttext",
        "1\t1\t0\t0\t0\t0\t0\t0\t1000\t2000\t-1\t",
        "4\t1\t1\t1\t1\t0\t100\t100\t400\t60\t-1\t",
        "5\t1\t1\t1\t1\t1\t100\t100\t180\t60\t90\tBig",
        "5\t1\t1\t1\t1\t2\t300\t100\t200\t60\t80\tTitle",
        *[
            row
            for k in range(4)
            for row in (
                f"4\t1\t2\t{k + 1}\t1\t0\t100\t{300 + 100 * k}\t500\t30\t-1\t",
                f"5\t1\t2\t{k + 1}\t1\t1\t100\t{300 + 100 * k}\t200\t30\t95\tbody",
                f"5\t1\t2\t{k + 1}\t1\t2\t320\t{300 + 100 * k}\t280\t30\t85\ttext.",
            )
        ],
        "4\t1\t3\t1\t1\t0\t100\t900\t100\t30\t-1\t",  # a line with no words: dropped
        "5\t1\t3\t1\t1\t1\t100\t900\t100\t30\t0\t ",
    ]
)


def test_parse_tsv_groups_paragraphs_and_scales_to_points() -> None:
    paragraphs = parse_tsv(TSV)
    assert len(paragraphs) == 5
    blocks = paragraphs_to_blocks(paragraphs, (0.5, 0.25))
    assert [b.content for b in blocks] == ["Big Title"] + ["body text."] * 4
    assert blocks[0].label == Label.SECTION_HEADER and blocks[1].label == Label.TEXT
    assert blocks[0].bbox is not None
    assert blocks[0].bbox.model_dump() == {"x0": 50.0, "y0": 25.0, "x1": 250.0, "y1": 40.0}
    assert blocks[0].confidence == 0.85
    assert paragraphs_to_blocks(paragraphs, None)[0].bbox is None


def upside_down_title(tmp_path: Path, title: str) -> PagePrep:
    """A page holding one line, scanned upside down: too little text for Tesseract's own
    orientation step, which then reads it as mirrored gibberish."""
    pdf = write_text_pdf(tmp_path / "title.pdf", [SamplePage(title=title)])
    page = render_page(pdf, 0, tmp_path / "title.png")
    with Image.open(tmp_path / "title.png") as img:
        img.rotate(180).save(tmp_path / "title.png")
    return page


def test_an_upside_down_scan_is_read_upright_with_boxes_where_the_text_is(
    engine: TesseractEngine, tmp_path: Path,
) -> None:
    page = upside_down_title(tmp_path, "Annual budget review for the northern region")
    output = engine.recognize(page)
    assert output.attempt.rotated == 180
    assert output.markdown.strip("# \n") == "Annual budget review for the northern region"
    box = output.blocks[0].bbox
    assert box is not None  # on the page as it lies: the title is at the bottom right
    assert abs(box.x1 - (page.width_pt - 72)) < 3
    assert page.height_pt - 80 < box.y0 < box.y1 < page.height_pt - 50
    assert not list(tmp_path.glob("*.upright.png")), "the turned image is removed"


def test_a_page_read_as_gibberish_is_never_ok(engine: TesseractEngine, tmp_path: Path) -> None:
    """Where OSD has no answer either, the reading stays gibberish: the page check calls
    it unreadable, so the ladder falls back or quarantines it instead of reporting ok."""
    from folio.pipeline.pages import page_problem
    from folio.settings.config import ValidationSettings

    page = upside_down_title(tmp_path, "Quarterly Operations Report")
    output = engine.recognize(page)
    assert "Quarterly" not in output.markdown
    problem = page_problem(output, page, ValidationSettings(), generative=False)
    assert problem is not None and problem.startswith("unreadable: mean word confidence")
    upright = write_text_pdf(tmp_path / "upright.pdf", report_pages(seed=4, n=1))
    readable = engine.recognize(render_page(upright, 0, tmp_path / "upright.png"))
    assert page_problem(readable, page, ValidationSettings(), generative=False) is None
    assert readable.attempt.rotated == 0  # a readable page is not turned


def test_unrotate_maps_boxes_back_for_every_turn() -> None:
    from folio.engines.tesseract import Line, Paragraph, Word, unrotate

    size = (100, 200)  # original width, height; one word at x 10-30, y 40-50
    turned = {  # the same word's box in the image turned clockwise by the key
        180: Word("w", 70, 150, 20, 10, 90.0),
        90: Word("w", 150, 10, 10, 20, 90.0),
        270: Word("w", 40, 70, 10, 20, 90.0),
    }
    for degrees, word in turned.items():
        paragraphs = [Paragraph(lines=[Line(height=10, words=[word])])]
        unrotate(paragraphs, degrees, size)
        back = paragraphs[0].words[0]
        assert (back.left, back.top, back.width, back.height) == (10, 40, 20, 10), degrees
