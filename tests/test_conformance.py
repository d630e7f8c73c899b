"""folio against the reference code of the models it drives, not against a reading of it.

For each preset with a reference pipeline (olmocr2: olmocr 0.4.27's pipeline; chandra:
chandra-ocr 0.1.8; chandra2: chandra-ocr 0.2.0) and corpus pages of several kinds, the
request folio sends (``OpenAIEngine.request_body``, for a page the page worker rendered
with the preset's render settings) equals the reference's (tests/reference_pipelines.py
runs the installed packages): prompt byte for byte, order of the message's parts, image
size and format, max_tokens, the sampling of every attempt, no other sampling
parameter. How folio reads the models' answers is tested against the same reference
code in tests/test_conformance_answers.py.

Where folio deliberately differs, the difference is named here (``deliberate_*``,
``DELIBERATE``) and allowed only in that form:

- olmOCR's image: pdftoppm rounds each side up, so a side that comes out a hair over 1288
  px (float error, or pdfinfo printing a MediaBox of 841.9217 pt as 841.92) is sent as
  1289 px; folio sends 1288.
- olmOCR's page area: pdftoppm renders the MediaBox (olmOCR passes no ``-cropbox``), so
  a page whose CropBox is smaller is sent whole, content outside the CropBox included;
  folio renders what a viewer shows, the CropBox, at olmOCR's size rule (1288 px on its
  longest side).
"""

from __future__ import annotations

import difflib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from folio.engines.openai_engine import OpenAIEngine
from folio.gpu.vllm_server import RemoteEndpoint
from folio.models import PagePrep
from folio.pdf.page_worker import WorkerJob, prepare_pages
from folio.settings.config import RouteSettings
from folio.settings.presets import get_preset
from tests import reference_pipelines as ref
from tests.openai_fake import thumbnail, thumbnail_distance
from tests.reference_records import Order, ReferenceRequest

PRESETS = ("olmocr2", "chandra", "chandra2")
PAGES = tuple(ref.CORPUS_PAGES)
#: folio's request body keys; anything else would be a sampling or decoding parameter the
#: reference does not send
BODY_KEYS = {"model", "messages", "max_tokens", "temperature", "top_p"}
#: mean gray-level difference (0-255) of 32x32 thumbnails of folio's and the reference's
#: image at most: the same page rendered by pdfium instead of poppler, or resampled once
#: fewer, is within 1; the same page upside down is 3.9 to 27 on the corpus pages
SAME_PAGE_THUMB = 2.0

FolioRequest = Callable[[str, str], tuple[PagePrep, dict[int, dict[str, Any]]]]


def _diff(expected: str, got: str, what: str) -> str:
    lines = difflib.unified_diff(expected.splitlines(keepends=True), got.splitlines(keepends=True),
                                 f"reference {what}", f"folio {what}")
    return "".join(lines) or f"{what}: same lines, different bytes ({expected!r} vs {got!r})"


# --- requests --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def folio_request(corpus: Path, tmp_path_factory: pytest.TempPathFactory) -> FolioRequest:
    """(the page as folio's page worker prepared it, folio's request body per attempt) for a
    corpus page and a preset; rendered once per module."""
    out = tmp_path_factory.mktemp("conformance")
    cache: dict[tuple[str, str], tuple[PagePrep, dict[int, dict[str, Any]]]] = {}

    def get(page: str, preset_name: str) -> tuple[PagePrep, dict[int, dict[str, Any]]]:
        if (page, preset_name) not in cache:
            path, index = ref.CORPUS_PAGES[page]
            preset = get_preset(preset_name)
            job = WorkerJob(pdf=corpus / path, pages=[index], out_dir=out / preset_name / page,
                            render_settings=preset.render_settings(),
                            route_settings=RouteSettings(mode="ocr"), timeout_s=300,
                            memory_mb=4096)
            [prep] = list(prepare_pages(job))
            assert prep.error is None and prep.image_path, prep.error
            engine = OpenAIEngine(endpoint=RemoteEndpoint("http://127.0.0.1:9/v1"), model="m",
                                  preset=preset)
            try:
                bodies = {a: engine.request_body(prep, a) for a in range(engine.attempts)}
            finally:
                engine.close()
            cache[page, preset_name] = prep, bodies
        return cache[page, preset_name]

    return get


def _reference(corpus: Path, page: str, preset: str) -> ReferenceRequest:
    path, index = ref.CORPUS_PAGES[page]
    return ref.reference_request(corpus / path, index, preset)


def _parts(body: dict[str, Any]) -> tuple[str, Order, bytes]:
    [message] = body["messages"]
    assert message["role"] == "user"
    return ref.content_parts(message["content"])


def _size_format(image: bytes) -> tuple[tuple[int, int], str]:
    import io

    with Image.open(io.BytesIO(image)) as img:
        return img.size, str(img.format)


def deliberate_poppler_rounds_up(
    corpus: Path, page: str, reference: tuple[int, int], folio: tuple[int, int],
) -> bool:
    """olmOCR's side is folio's plus one, where pdftoppm rounded up a side less than
    0.01 px over folio's (see the module doc)."""
    path, index = ref.CORPUS_PAGES[page]
    exact = ref.olmocr_exact_size(corpus / path, index)
    return reference != folio and all(
        r == f or (r == f + 1 and 0 < x - f < 0.01)
        for r, f, x in zip(reference, folio, exact))


def deliberate_cropbox(corpus: Path, page: str, folio: tuple[int, int]) -> bool:
    """The page's CropBox is not its MediaBox, and folio's size is olmOCR's rule applied
    to the CropBox (see the module doc)."""
    import pypdfium2

    path, index = ref.CORPUS_PAGES[page]
    doc = pypdfium2.PdfDocument(str(corpus / path))
    try:
        mediabox, cropbox = doc[index].get_mediabox(), doc[index].get_cropbox()
        turned = doc[index].get_rotation() in (90, 270)
    finally:
        doc.close()
    if tuple(mediabox) == tuple(cropbox):
        return False
    width, height = cropbox[2] - cropbox[0], cropbox[3] - cropbox[1]
    if turned:
        width, height = height, width
    longest = ref.olmocr_settings()["target_longest_image_dim"]
    scale = longest / max(width, height)
    return max(folio) == longest and all(
        abs(f - x) < 1 for f, x in zip(folio, (width * scale, height * scale)))


on_corpus = pytest.mark.corpus
pages_and_presets = pytest.mark.parametrize(
    ("page", "preset"), [(page, preset) for page in PAGES for preset in PRESETS])


@on_corpus
@pages_and_presets
def test_prompt_byte_for_byte(corpus: Path, folio_request: FolioRequest,
                              page: str, preset: str) -> None:
    expected = _reference(corpus, page, preset).prompt
    _, bodies = folio_request(page, preset)
    for attempt, body in bodies.items():
        got = _parts(body)[0]
        assert got.encode() == expected.encode(), \
            f"attempt {attempt}:\n" + _diff(expected, got, "prompt")


@on_corpus
@pages_and_presets
def test_message_order(corpus: Path, folio_request: FolioRequest, page: str, preset: str) -> None:
    expected = _reference(corpus, page, preset).order
    _, bodies = folio_request(page, preset)
    assert {a: _parts(b)[1] for a, b in bodies.items()} == dict.fromkeys(bodies, expected)


@on_corpus
@pages_and_presets
def test_image_size_and_format(corpus: Path, folio_request: FolioRequest,
                               page: str, preset: str) -> None:
    reference = _reference(corpus, page, preset)
    _, bodies = folio_request(page, preset)
    size, fmt = _size_format(_parts(bodies[0])[2])
    assert fmt == reference.image_format == "PNG"
    if preset == "olmocr2" and (
            deliberate_poppler_rounds_up(corpus, page, reference.image_size, size)
            or deliberate_cropbox(corpus, page, size)):
        return
    assert size == reference.image_size


@on_corpus
@pages_and_presets
def test_image_shows_the_same_page(corpus: Path, folio_request: FolioRequest,
                                   page: str, preset: str) -> None:
    import io

    reference = _reference(corpus, page, preset)
    _, bodies = folio_request(page, preset)
    if preset == "olmocr2" and deliberate_cropbox(corpus, page, _size_format(
            _parts(bodies[0])[2])[0]):
        return  # olmOCR's image shows the whole MediaBox
    with Image.open(io.BytesIO(reference.image)) as a, \
            Image.open(io.BytesIO(_parts(bodies[0])[2])) as b:
        distance = thumbnail_distance(thumbnail(a), thumbnail(b))
    assert distance <= SAME_PAGE_THUMB, f"{distance:.2f}"


@on_corpus
@pytest.mark.parametrize("page", PAGES)
def test_chandra_page_render_pixel_for_pixel(corpus: Path, folio_request: FolioRequest,
                                             page: str) -> None:
    """Chandra renders with pdfium as folio does, and Chandra 1 sends its render as it is:
    the same pixels, or the render options differ (Chandra's load_pdf_images, the same in
    both versions, flattens form fields into the page; annotations; background). Chandra
    2 resizes its render (Lanczos) where folio renders at the size (deliberate, see
    folio.pdf.model_image), so only Chandra 1 can be compared pixel for pixel."""
    import io

    from PIL import ImageChops

    reference = _reference(corpus, page, "chandra")
    _, bodies = folio_request(page, "chandra")
    with Image.open(io.BytesIO(reference.image)) as a, \
            Image.open(io.BytesIO(_parts(bodies[0])[2])) as b:
        assert a.size == b.size
        diff = ImageChops.difference(a.convert("RGB"), b.convert("RGB"))
    assert diff.getbbox() is None, f"pixels differ within {diff.getbbox()}"


@on_corpus
@pages_and_presets
def test_max_tokens(corpus: Path, folio_request: FolioRequest, page: str, preset: str) -> None:
    expected = _reference(corpus, page, preset).max_tokens
    _, bodies = folio_request(page, preset)
    assert {a: b["max_tokens"] for a, b in bodies.items()} == dict.fromkeys(bodies, expected)


def _rounded(sampling: list[tuple[float, float | None]]) -> list[tuple[float, float | None]]:
    return [(round(t, 9), None if p is None else round(p, 9)) for t, p in sampling]


@on_corpus
@pages_and_presets
def test_sampling_of_every_attempt(corpus: Path, folio_request: FolioRequest,
                                   page: str, preset: str) -> None:
    expected = _reference(corpus, page, preset).sampling
    _, bodies = folio_request(page, preset)
    got = [(b["temperature"], b.get("top_p")) for _, b in sorted(bodies.items())]
    # min(0.0 + 0.2 * 3, 0.8) is 0.6000000000000001 in Chandra 2: equal to 1e-9
    assert _rounded(got) == _rounded(expected), f"attempts: folio {len(got)}, " \
        f"reference {len(expected)}"
    assert all("top_p" not in b for b in bodies.values() if expected[0][1] is None)


@on_corpus
@pages_and_presets
def test_no_other_request_parameters(folio_request: FolioRequest, page: str, preset: str) -> None:
    _, bodies = folio_request(page, preset)
    assert {a: sorted(set(b) - BODY_KEYS) for a, b in bodies.items()} \
        == dict.fromkeys(bodies, [])


@on_corpus
@pytest.mark.parametrize("turn", [90, 180, 270])
def test_olmocr_turned_image(corpus: Path, folio_request: FolioRequest, turn: int) -> None:
    """The image of a page olmOCR asks again turned (``build_page_query``'s
    image_rotation: PIL's transpose) is folio's for ``PagePrep.turn``."""
    import io

    path, index = ref.CORPUS_PAGES["letter"]
    reference = ref.reference_request(corpus / path, index, "olmocr2", rotation=turn)
    prep, _ = folio_request("letter", "olmocr2")
    engine = OpenAIEngine(endpoint=RemoteEndpoint("http://127.0.0.1:9/v1"), model="m",
                          preset=get_preset("olmocr2"))
    try:
        body = engine.request_body(prep.model_copy(update={"turn": turn}), 1)
    finally:
        engine.close()
    image = _parts(body)[2]
    assert _size_format(image) == (reference.image_size, "PNG")
    with Image.open(io.BytesIO(reference.image)) as a, Image.open(io.BytesIO(image)) as b:
        assert thumbnail_distance(thumbnail(a), thumbnail(b)) <= SAME_PAGE_THUMB
