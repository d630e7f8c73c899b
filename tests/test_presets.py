"""Model presets: prompts, image budgets, parsers and server pixel kwargs."""

from __future__ import annotations

from pathlib import Path

import pytest

from folio.errors import ConfigError
from folio.settings.config import RenderSettings
from folio.settings.presets import PRESETS, get_preset

DATA = Path(__file__).parent / "data" / "model_outputs"


def test_every_preset_parses_its_sample() -> None:
    samples = {"chandra": "chandra1_page.html", "chandra2": "chandra2_page.html",
               "olmocr2": "olmocr2_page.md", "generic": "generic_page.md"}
    for name, file in samples.items():
        blocks, md = get_preset(name).parse((DATA / file).read_text(), width_pt=612, height_pt=792)
        assert blocks and md, name


def test_prompts_carry_the_model_formats() -> None:
    assert "normalized 0-1024" in get_preset("chandra").prompt
    assert "normalized 0-1000" in get_preset("chandra2").prompt
    assert "Blank-Page" in get_preset("chandra2").prompt and "Blank-Page" not in get_preset("chandra").prompt
    olm = get_preset("olmocr2")
    assert "front matter" in olm.prompt and "is_diagram" in olm.prompt and not olm.image_first
    assert olm.longest_side_px == 1288


def test_chandra_versions_scale_boxes_differently() -> None:
    html = '<div data-bbox="0 0 1000 1000" data-label="Text">x</div>'
    v1, _ = get_preset("chandra").parse(html, width_pt=1024, height_pt=1024)
    v2, _ = get_preset("chandra2").parse(html, width_pt=1024, height_pt=1024)
    assert v1[0].bbox is not None and v2[0].bbox is not None
    assert v1[0].bbox.x1 == pytest.approx(1000) and v2[0].bbox.x1 == pytest.approx(1024)


def test_render_settings_and_processor_kwargs() -> None:
    olm = get_preset("olmocr2").render_settings(RenderSettings())
    assert olm.longest_side_px == 1288 and olm.max_pixels == 1288 * 1288
    assert get_preset("qwen3-vl").mm_processor_kwargs(2_000_000) == {
        "size": {"longest_edge": 2_000_000, "shortest_edge": 65536}}
    assert get_preset("olmocr2").mm_processor_kwargs()["max_pixels"] == 1288 * 1288


def test_unknown_preset_lists_known_ones() -> None:
    with pytest.raises(ConfigError, match="chandra"):
        get_preset("nope")
    assert get_preset(" Chandra ").name == "chandra" and len(PRESETS) >= 4
