"""The reference harness (tests/reference_pipelines.py) runs the installed reference code
and reports what it does: the numbers here are the references' own (olmocr 0.4.27,
chandra-ocr 0.1.8 and 0.2.0), checked so that a harness that silently stopped exercising
the reference (a stubbed path, a wrong version on the path) fails here rather than
passing the conformance tests vacuously."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from PIL import Image

from tests import reference_pipelines as ref

DATA = Path(__file__).parent / "data" / "model_outputs"

#: what each reference sends for the corpus pages: (image size, max_tokens)
EXPECTED_REQUESTS: dict[tuple[str, str], tuple[tuple[int, int], int]] = {
    # 612x792 pt: olmOCR 1288 px longest; Chandra 192 DPI (1632x2112), Chandra 2 onto the
    # 28 px grid (58x75 cells)
    ("letter", "olmocr2"): ((996, 1288), 8000),
    ("letter", "chandra"): ((1632, 2112), 8192),
    ("letter", "chandra2"): ((1624, 2100), 12384),
    # 384x470.88 pt: 192 DPI makes the short side exactly 1024 px
    ("scan", "olmocr2"): ((1051, 1288), 8000),
    ("scan", "chandra"): ((1024, 1256), 8192),
    ("scan", "chandra2"): ((1036, 1260), 12384),
    # 180x300 pt: the short side is brought up to 1024 px (409.6 DPI)
    ("olmocr-bench", "olmocr2"): ((773, 1288), 8000),
    ("olmocr-bench", "chandra"): ((1024, 1707), 8192),
    ("olmocr-bench", "chandra2"): ((1036, 1708), 12384),
    # 595.2x841.92 pt (841.9217 in the file): pdftoppm rounds 1288.0026 px up to 1289
    ("a4-scan", "olmocr2"): ((911, 1289), 8000),
    ("a4-scan", "chandra"): ((1588, 2246), 8192),
    ("a4-scan", "chandra2"): ((1596, 2240), 12384),
    # CropBox 301x180 pt in a 612x792 pt MediaBox: pdftoppm renders the MediaBox (olmOCR
    # passes no -cropbox), pypdfium2 the CropBox
    ("cropbox", "olmocr2"): ((996, 1288), 8000),
    ("cropbox", "chandra"): ((1715, 1024), 8192),
    ("cropbox", "chandra2"): ((1708, 1036), 12384),
    ("forms", "olmocr2"): ((996, 1288), 8000),
    ("forms", "chandra"): ((1632, 2112), 8192),
    ("forms", "chandra2"): ((1624, 2100), 12384),
}

OLMOCR_SAMPLING = [(t, None) for t in (0.1, 0.1, 0.2, 0.3, 0.5, 0.8, 0.9, 1.0)]
CHANDRA1_SAMPLING = [(0.0, 0.1)] + [(0.3, 0.95)] * 6
CHANDRA2_SAMPLING = [(0.0, 0.1), (0.2, 0.95), (0.4, 0.95), (0.6000000000000001, 0.95),
                     (0.8, 0.95), (0.8, 0.95), (0.8, 0.95)]


def page_path(corpus: Path, key: str) -> tuple[Path, int]:
    path, index = ref.CORPUS_PAGES[key]
    return (corpus / path).resolve(), index


def test_the_installed_references_are_the_versions_followed() -> None:
    assert ref.olmocr_settings() == {
        "target_longest_image_dim": 1288, "max_page_retries": 8,
        "temperature_by_attempt": [0.1, 0.1, 0.2, 0.3, 0.5, 0.8, 0.9, 1.0],
        "temperatures": [0.1, 0.1, 0.2, 0.3, 0.5, 0.8, 0.9, 1.0], "guided_decoding": False,
    }
    one, two = ref.chandra_info(1), ref.chandra_info(2)
    assert one["version"] == "0.1.8" and Path(one["package"]).is_relative_to(ref.CHANDRA1_DIR)
    assert two["version"] == "0.2.0" and not Path(two["package"]).is_relative_to(ref.CHANDRA1_DIR)
    assert {k: one["settings"][k] for k in ("IMAGE_DPI", "MIN_PDF_IMAGE_DIM",
                                            "MAX_OUTPUT_TOKENS", "MAX_VLLM_RETRIES")} \
        == {"IMAGE_DPI": 192, "MIN_PDF_IMAGE_DIM": 1024, "MAX_OUTPUT_TOKENS": 8192,
            "MAX_VLLM_RETRIES": 6}
    assert {k: two["settings"][k] for k in ("IMAGE_DPI", "MIN_PDF_IMAGE_DIM", "BBOX_SCALE",
                                            "MAX_OUTPUT_TOKENS", "MAX_VLLM_RETRIES")} \
        == {"IMAGE_DPI": 192, "MIN_PDF_IMAGE_DIM": 1024, "BBOX_SCALE": 1000,
            "MAX_OUTPUT_TOKENS": 12384, "MAX_VLLM_RETRIES": 6}


@pytest.mark.corpus
@pytest.mark.parametrize(("page", "preset"), sorted(EXPECTED_REQUESTS))
def test_reference_request_for_a_corpus_page(corpus: Path, page: str, preset: str) -> None:
    pdf, index = page_path(corpus, page)
    got = ref.reference_request(pdf, index, preset)
    size, max_tokens = EXPECTED_REQUESTS[page, preset]
    assert (got.image_size, got.max_tokens) == (size, max_tokens)
    assert got.image_format == "PNG"
    with Image.open(io.BytesIO(got.image)) as image:  # the bytes the request carries
        assert (image.format, image.size) == ("PNG", size)
    if preset == "olmocr2":
        assert got.order == ("text", "image")
        assert got.prompt.startswith("Attached is one page of a document that you must process.")
        assert got.prompt.endswith("rotation_correction, is_table, and is_diagram parameters.")
        assert got.sampling == OLMOCR_SAMPLING
        assert got.extra == {}  # no top_p, no guided decoding
        assert got.rendered_size == size
    else:
        assert got.order == ("image", "text")
        assert got.prompt.startswith("OCR this image to HTML, arranged as layout blocks.")
        box = ("[x0, y0, x1, y1] format.  Bboxes are normalized 0-1024" if preset == "chandra"
               else "x0 y0 x1 y1 format.  Bboxes are normalized 0-1000")
        assert box in got.prompt
        assert ("'chem'" in got.prompt) == (preset == "chandra2")
        assert got.sampling == (CHANDRA1_SAMPLING if preset == "chandra" else CHANDRA2_SAMPLING)
        assert got.extra == {}
        assert got.rendered_size is not None
        if preset == "chandra2":  # scale_to_fit puts every image on the 28 px grid
            assert size[0] % 28 == 0 and size[1] % 28 == 0
        else:  # Chandra 1 sends its render as it is under the area cap
            assert got.rendered_size == size
        assert size[0] * size[1] <= 3072 * 2048


@pytest.mark.corpus
def test_olmocr_rotation_turns_the_image(corpus: Path) -> None:
    pdf, index = page_path(corpus, "letter")
    upright = ref.reference_request(pdf, index, "olmocr2")
    turned = ref.reference_request(pdf, index, "olmocr2", rotation=90)
    assert turned.image_size == upright.image_size[::-1]
    assert turned.prompt == upright.prompt and turned.sampling == upright.sampling
    with pytest.raises(ValueError, match="never rotates"):
        ref.reference_request(pdf, index, "chandra2", rotation=90)


@pytest.mark.corpus
def test_olmocr_exact_size_explains_the_1289(corpus: Path) -> None:
    for key in ("letter", "a4-scan"):
        pdf, index = page_path(corpus, key)
        exact = ref.olmocr_exact_size(pdf, index)
        sent = ref.reference_request(pdf, index, "olmocr2").image_size
        assert all(s - 1 < x <= s + 0.01 for s, x in zip(sent, exact)), (key, exact, sent)
    assert ref.olmocr_exact_size(*page_path(corpus, "a4-scan"))[1] > 1288.001


def test_chandra_markdown_of_the_recorded_answers() -> None:
    one = ref.reference_chandra_markdown((DATA / "chandra1_page.html").read_text(), "chandra")
    assert one.startswith("# Regional revenue review\n\n")
    assert "Quarterly Report" not in one  # Page-Header left out
    assert " $r = \\frac{\\Delta R}{R_0}$ " in one  # inline math, a space each side
    assert "<table><thead>" in one  # tables stay HTML
    assert "![Bar chart of revenue per region, west highest](" in one
    assert one.split("](")[1].endswith("_8_img.webp)\n\n<sup>1</sup> Figures unaudited.")
    two = ref.reference_chandra_markdown((DATA / "chandra2_page.html").read_text(), 2)
    assert two.startswith("## 2 Method\n\n")
    assert "```\nfor key in bucket.list(prefix):\n    process(key)\n```" in two
    # 0.2.0 drops an <img> without src outside Image/Figure blocks: the Diagram's alt too
    assert "Flow diagram" not in two
    assert "Label the parser has never seen." in two
    with_heads = ref.reference_chandra_markdown(
        (DATA / "chandra1_page.html").read_text(), 1, include_headers_footers=True)
    assert with_heads.startswith("Quarterly Report 2024 — Confidential")


def test_chandra_layout_boxes_in_pixels() -> None:
    html = ('<div data-bbox="100 200 500 1000" data-label="Text"><p>x</p></div>'
            '<div data-bbox="0 0 1000 1000" data-label="Blank-Page"></div>'
            '<div data-bbox="bad" data-label="Caption"><p>y</p></div>')
    two = ref.reference_chandra_layout(html, (2000, 3000), 2)
    assert [(b.label, b.bbox) for b in two] == [("Text", (200, 600, 1000, 3000)),
                                                 ("Caption", (0, 0, 2, 3))]
    html1 = ('<div data-bbox="[128, 256, 512, 1024]" data-label="Text"><p>x</p></div>'
             '<div data-bbox="0 0 1000 1000" data-label="Blank-Page"></div>')
    one = ref.reference_chandra_layout(html1, (2048, 1024), "chandra")
    # 0.1.8 reads boxes as JSON lists on a 0-1024 scale, keeps Blank-Page, and falls back
    # to [0, 0, 1, 1] for a box it cannot read
    assert [(b.label, b.bbox) for b in one] == [("Text", (256, 256, 1024, 1024)),
                                                 ("Blank-Page", (0, 0, 2, 1))]
    assert one[0].content == "<p>x</p>"


def test_olmocr_front_matter() -> None:
    good = ref.reference_olmocr_front_matter((DATA / "olmocr2_page.md").read_text())
    assert good.error is None and good.fields is not None
    assert {k: v for k, v in good.fields.items() if k != "natural_text"} == {
        "primary_language": "en", "is_rotation_valid": True, "rotation_correction": 0,
        "is_table": False, "is_diagram": False}
    assert good.fields["natural_text"].startswith("# Network latency audit")
    # YAML 1.1: "no" is False, which an Optional[str] field reads as None
    norwegian = ref.reference_olmocr_front_matter(
        "---\nprimary_language: no\nis_rotation_valid: true\nrotation_correction: 90\n"
        "is_table: no\nis_diagram: False\n---\n")
    assert norwegian.fields == {
        "primary_language": None, "is_rotation_valid": True, "rotation_correction": 90,
        "is_table": False, "is_diagram": False, "natural_text": None}
    missing = ref.reference_olmocr_front_matter("Just text, no front matter.")
    assert missing.fields is None
    assert missing.error == "ValueError: Missing required field 'primary_language' in front matter"
    bad_angle = ref.reference_olmocr_front_matter(
        "---\nprimary_language: en\nis_rotation_valid: false\nrotation_correction: 45\n"
        "is_table: false\nis_diagram: false\n---\nText")
    assert bad_angle.error == "ValueError: rotation_correction must be one of [0, 90, 180, 270]."


def test_unknown_versions_and_presets_are_refused() -> None:
    with pytest.raises(ValueError, match="1 or 2"):
        ref.reference_chandra_markdown("<p>x</p>", 3)
    with pytest.raises(ValueError, match="not a chandra preset"):
        ref.reference_chandra_markdown("<p>x</p>", "olmocr2")
    with pytest.raises(KeyError):
        ref.reference_request(Path("x.pdf"), 0, "generic")
