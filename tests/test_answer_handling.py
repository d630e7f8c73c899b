"""A vision model's answers handled as its reference pipeline handles them (issue 29):
olmOCR's front matter and ladder, Chandra's cut answers and repeating tails, an answer
never swapped for the text layer, a page the model finds empty. Real HTTP to the fake
server; the pipeline's page ladder where the ladder is what is tested."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from folio.engines.openai_engine import EngineBadOutputError, OpenAIEngine
from folio.gpu.vllm_server import RemoteEndpoint
from folio.models import PagePrep, PageResult, TextLayer
from folio.settings.config import PipelineConfig
from folio.settings.presets import get_preset
from tests.openai_fake import FakeServer

FRONT = ("---\nprimary_language: en\nis_rotation_valid: True\nrotation_correction: 0\n"
         "is_table: False\nis_diagram: False\n---\n")
TABLE = "<table>" + "".join(f"<tr><td>{i}</td><td>{i * 7}</td></tr>" for i in range(40)) + "</table>"


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> PagePrep:
    path = tmp_path_factory.mktemp("img") / "p.png"
    Image.new("RGB", (996, 1288), "white").save(path)
    return PagePrep(index=0, width_pt=612, height_pt=792, image_path=str(path))


def engine(fake: FakeServer, preset: str) -> OpenAIEngine:
    return OpenAIEngine(endpoint=RemoteEndpoint(fake.url, in_flight=4), model="fake-ocr",
                        preset=get_preset(preset), backoff_s=0.01)


def run_page(fake: FakeServer, page: PagePrep, tmp_path: Path, preset: str,
             **ocr: Any) -> PageResult:
    from folio.pipeline import Services, process_page

    config = PipelineConfig.model_validate({
        "ocr": {"engine": "openai", "endpoint": fake.url, "model": "fake-ocr", "preset": preset,
                "request_retries": 1, **ocr},
        "route": {"mode": "ocr"}, "store": {"kind": "none"}, "work_dir": str(tmp_path / "w")})
    services = Services(config, str(tmp_path / "out"))
    image = tmp_path / "p.png"
    Image.open(page.image_path or "").save(image)
    try:
        return process_page(page.model_copy(update={"image_path": str(image)}), services)
    finally:
        services.close()


@pytest.mark.parametrize("fake", [{"output": FRONT + "Hello page"}], indirect=True)
def test_olmocr_request_is_olmocrs(fake: FakeServer, page: PagePrep) -> None:
    """Text before image, 8000 tokens, olmOCR's temperature for the attempt, no top_p."""
    eng = engine(fake, "olmocr2")
    first, last = eng.request_body(page, 0), eng.request_body(page, 7)
    assert [c["type"] for c in first["messages"][0]["content"]] == ["text", "image_url"]
    assert first["max_tokens"] == 8000 and "top_p" not in first
    assert (first["temperature"], last["temperature"], eng.attempts) == (0.1, 1.0, 8)
    out = eng.recognize(page, 0)
    assert out.markdown == "Hello page" and out.attempt.error is None and not out.no_text


@pytest.mark.parametrize("fake", [{"output": "Hello page, no front matter"}], indirect=True)
def test_olmocr_answer_without_front_matter_is_asked_again(fake: FakeServer, page: PagePrep) -> None:
    """olmOCR's FrontMatterParser refuses it and olmOCR asks again: so does folio, where
    it used to keep the text as the page."""
    with pytest.raises(EngineBadOutputError, match="front matter: missing"):
        engine(fake, "olmocr2").recognize(page, 0)


@pytest.mark.parametrize("fake", [{"output": FRONT.replace("rotation_correction: 0",
                                                           "rotation_correction: 45") + "x"}],
                         indirect=True)
def test_olmocr_rotation_must_be_a_right_angle(fake: FakeServer, page: PagePrep) -> None:
    with pytest.raises(EngineBadOutputError, match="rotation_correction 45"):
        engine(fake, "olmocr2").recognize(page, 0)


@pytest.mark.parametrize("fake", [{"output": FRONT + "Half a page", "always_length": True}],
                         indirect=True)
def test_a_cut_answer_olmocr_asks_again_chandra_keeps(fake: FakeServer, page: PagePrep) -> None:
    with pytest.raises(EngineBadOutputError, match="token limit"):
        engine(fake, "olmocr2").recognize(page, 0)
    kept = engine(fake, "chandra2").recognize(page, 0)
    assert kept.attempt.finish_reason == "length" and kept.attempt.error is None
    assert kept.attempt.max_tokens == 12384


@pytest.mark.parametrize("fake", [{"output": '<div data-bbox="0 0 9 9" data-label="Text"><p>'
                                   + "ab " + "12 " * 60 + "</p></div>"}], indirect=True)
def test_chandra_retries_a_repeating_tail(fake: FakeServer, page: PagePrep) -> None:
    with pytest.raises(EngineBadOutputError, match="repeating"):
        engine(fake, "chandra2").recognize(page, 0)
    body = engine(fake, "chandra2").request_body(page, 1)
    assert (body["temperature"], body["top_p"]) == (0.2, 0.95)


@pytest.mark.parametrize("fake", [{"output": FRONT}], indirect=True)
def test_a_page_the_model_finds_empty_is_read_not_failed(fake: FakeServer, page: PagePrep,
                                                         tmp_path: Path) -> None:
    """olmOCR keeps a valid answer with no text (a blank book page): one request, the
    page ok and marked blank, not retried eight times and replaced by the text layer."""
    layered = page.model_copy(update={"text_layer": TextLayer(
        text="Running head 12\nshow-through", chars=28, score=0.95, trusted=True)})
    result = run_page(fake, layered, tmp_path, "olmocr2")
    assert result.outcome == "ok" and result.blank and result.markdown == ""
    assert result.engine == "openai" and fake.state.requests == 1


@pytest.mark.parametrize("fake", [{"output": FRONT + TABLE}], indirect=True)
def test_a_table_answer_is_never_replaced_by_the_text_layer(fake: FakeServer, page: PagePrep,
                                                            tmp_path: Path) -> None:
    """A 40-row HTML table scores low as text against a good layer; the layer used to
    win. A vision model's answer stands, as in its reference pipeline."""
    words = " ".join(f"{i} {i * 7}" for i in range(40))
    layered = page.model_copy(update={"text_layer": TextLayer(
        text=words, chars=len(words), score=0.95, trusted=True)})
    result = run_page(fake, layered, tmp_path, "olmocr2")
    assert result.engine == "openai" and result.markdown.startswith("<table>")
    assert [a.engine for a in result.attempts] == ["openai"]


@pytest.mark.parametrize("fake", [{"output": FRONT + "Recovered text",
                                   "garbage_below_temperature": 0.15}], indirect=True)
def test_olmocr_ladder_climbs_its_temperatures(fake: FakeServer, page: PagePrep,
                                               tmp_path: Path) -> None:
    """Two looping answers at 0.1, the third attempt at 0.2 reads: olmOCR's ladder."""
    result = run_page(fake, page, tmp_path, "olmocr2")
    assert result.outcome == "recovered" and result.markdown == "Recovered text"
    assert [a.temperature for a in result.attempts] == [0.1, 0.1, 0.2]
