"""RapidOCR as ``ocr.engine=rapidocr``: a clear ConfigError without the optional package,
lines grouped into paragraphs in column order, and the real engine on a corpus scan."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from folio.engines.rapidocr_engine import RapidOcrEngine, RawLine, group_paragraphs, raw_lines
from folio.engines.registry import KNOWN_ENGINES, build_engine
from folio.errors import BadInputError, BadOutputError, ConfigError
from folio.models import PagePrep
from folio.page.quality import sequence_similarity, word_recall
from folio.settings.config import PipelineConfig

HAS_RAPIDOCR = importlib.util.find_spec("rapidocr") is not None


def test_without_rapidocr_choosing_it_says_how_to_install(monkeypatch: pytest.MonkeyPatch
                                                          ) -> None:
    monkeypatch.setitem(sys.modules, "rapidocr", None)  # import fails, installed or not
    assert "rapidocr" in KNOWN_ENGINES
    config = PipelineConfig.model_validate({"ocr": {"engine": "rapidocr"}})
    with pytest.raises(ConfigError, match=r"'rapidocr' is not installed.*folio\[rapidocr\]"):
        build_engine(config.ocr.engine, config)


def _line(x0: float, y0: float, x1: float, y1: float, text: str) -> RawLine:
    return RawLine(((x0, y0), (x1, y0), (x1, y1), (x0, y1)), text, 0.9)


def test_two_columns_read_column_by_column_under_a_title() -> None:
    # RapidOCR answers top to bottom across the page: left and right lines interleaved
    lines = [_line(100, 20, 900, 70, "Title across both"),
             _line(100, 100, 480, 130, "left one"), _line(520, 100, 900, 130, "right one"),
             _line(100, 135, 470, 165, "left two"), _line(520, 135, 880, 165, "right two"),
             _line(100, 170, 300, 200, "left three"), _line(520, 170, 700, 200, "right three")]
    paragraphs = group_paragraphs(lines)
    texts = [" ".join(w.text for w in p.words) for p in paragraphs]
    assert texts == ["Title across both", "left one left two left three",
                     "right one right two right three"]


def test_words_take_rapidocr_boxes_or_a_share_of_the_line() -> None:
    quad = ((0.0, 0.0), (100.0, 0.0), (100.0, 10.0), (0.0, 10.0))
    [given] = raw_lines([quad], ["ab cd"], [0.5],
                        [[("ab", 0.9, [[0, 0], [20, 0], [20, 10], [0, 10]]),
                          ("cd", 0.8, [[60, 0], [100, 0], [100, 10], [60, 10]])]])
    [para] = group_paragraphs([given])
    assert [(w.text, w.left, w.width, w.conf) for w in para.words] == [
        ("ab", 0, 20, 90.0), ("cd", 60, 40, 80.0)]
    [shared] = group_paragraphs(raw_lines([quad], ["abcd e"], [0.5]))
    assert [(w.text, w.left, w.width) for w in shared.words] == [("abcd", 0, 67), ("e", 83, 17)]


def test_no_image_and_no_text_are_page_errors(tmp_path: Path) -> None:
    engine = RapidOcrEngine(reader=lambda path: [])
    with pytest.raises(BadInputError, match="no rendered image"):
        engine.recognize(PagePrep(index=0))
    image = tmp_path / "p.png"
    image.write_bytes(b"")
    with pytest.raises(BadOutputError, match="empty: rapidocr found no text") as caught:
        engine.recognize(PagePrep(index=3, image_path=str(image), width_pt=100, height_pt=100))
    assert caught.value.attempt.engine == "rapidocr"  # type: ignore[attr-defined]
    blank = PagePrep(index=4, image_path=str(image), blank=True)
    assert engine.recognize(blank).blocks == []


@pytest.mark.skipif(not HAS_RAPIDOCR, reason="rapidocr not installed (pip install "
                    "'folio[rapidocr]'); its unavailable path is tested above")
def test_real_engine_reads_linn_in_column_order(corpus: Path, tmp_path: Path) -> None:
    from folio.pdf.page_worker import WorkerJob, prepare_pages

    config = PipelineConfig()
    job = WorkerJob(pdf=corpus / "ocrmypdf" / "linn.pdf", pages=[0], out_dir=tmp_path,
                    render_settings=config.render, route_settings=config.route,
                    ocr_resolution=True)
    [page] = list(prepare_pages(job))
    out = build_engine("rapidocr", PipelineConfig.model_validate(
        {"ocr": {"engine": "rapidocr"}})).recognize(page)
    reference = (corpus / "ocrmypdf" / "linn.txt").read_text()
    # measured 0.958 and 0.899; RapidOCR's own line order (columns interleaved line by
    # line) scores 0.737 on sequence similarity, below the bound
    assert word_recall(reference, out.markdown) >= 0.93
    assert sequence_similarity(reference, out.markdown) >= 0.8
    assert out.words and all(b.bbox is not None and b.bbox.x1 <= 612.5 for b in out.blocks)
    assert out.attempt.engine == "rapidocr" and out.attempt.model.startswith("rapidocr 3")
