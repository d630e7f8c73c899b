"""build_engine: names from the configuration -> engines; unknown names say what exists."""

from __future__ import annotations

import sys

import pytest

from folio.engines.registry import KNOWN_ENGINES, build_engine
from folio.engines.tesseract import TesseractEngine
from folio.engines.text_layer import TextLayerEngine
from folio.errors import ConfigError
from folio.settings.config import PipelineConfig


def test_builds_cpu_engines() -> None:
    config = PipelineConfig()
    config.limits.page_timeout_s = 33
    tesseract = build_engine("tesseract", config)
    assert isinstance(tesseract, TesseractEngine)
    assert tesseract.timeout_s == 33 and tesseract.languages == "eng"
    assert isinstance(build_engine("text-layer", config), TextLayerEngine)


def test_unknown_engine_lists_the_known_ones() -> None:
    with pytest.raises(ConfigError, match="unknown OCR engine 'abbyy'.*tesseract, text-layer"):
        build_engine("abbyy", PipelineConfig())
    assert {"tesseract", "text-layer", "vllm", "openai"} <= set(KNOWN_ENGINES)


def test_missing_language_is_a_config_error() -> None:
    config = PipelineConfig()
    config.ocr.languages = "eng+zzz"
    with pytest.raises(ConfigError, match="tesseract-ocr-zzz"):
        build_engine("tesseract", config)


def test_gpu_engine_without_its_module_is_a_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "folio.engines.openai_engine", None)  # import fails
    with pytest.raises(ConfigError, match="'vllm' is not available"):
        build_engine("vllm", PipelineConfig())
