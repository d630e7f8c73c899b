"""Engine names -> engines, chosen by configuration.

Engines with heavy or optional dependencies are imported inside :func:`build_engine`, so
a CPU-only install (no ``openai`` package, no GPU engine module) still runs Tesseract and
the text layer.
"""

from __future__ import annotations

from typing import cast

from folio.engines.base import OcrEngine
from folio.errors import ConfigError
from folio.settings.config import PipelineConfig
from folio.settings.vocabulary import ENGINES

#: every name build_engine accepts; the OpenAI-protocol ones need the ``gpu`` extra
KNOWN_ENGINES: tuple[str, ...] = ENGINES


def build_engine(name: str, config: PipelineConfig) -> OcrEngine:
    """Build the engine called ``name`` from ``config``.

    Raises:
        ConfigError: unknown name, a missing language pack, or a missing optional module
            (``rapidocr`` without ``folio[rapidocr]``).
        EngineUnavailableError: the engine's program is not installed (``tesseract``).

    Example:
        >>> build_engine("text-layer", PipelineConfig()).name
        'text-layer'
    """
    if name == "tesseract":
        from folio.engines.tesseract import TesseractEngine

        return TesseractEngine(
            languages=config.ocr.languages, timeout_s=config.limits.page_timeout_s
        )
    if name == "rapidocr":  # optional: folio[rapidocr]; ConfigError with the hint if absent
        from folio.engines.rapidocr_engine import RapidOcrEngine

        return RapidOcrEngine()
    if name == "text-layer":
        from folio.engines.text_layer import TextLayerEngine

        return TextLayerEngine()
    if name in ("vllm", "openai"):
        return _openai_engine(name, config)
    raise ConfigError(f"unknown OCR engine {name!r}; known engines: {', '.join(KNOWN_ENGINES)}")


def _openai_engine(name: str, config: PipelineConfig) -> OcrEngine:
    """OpenAI-protocol engines (a vLLM server or any compatible endpoint)."""
    try:
        from folio.engines.openai_engine import OpenAIEngine
    except ImportError as exc:
        raise ConfigError(
            f"engine {name!r} is not available: {exc}; install folio[gpu]"
        ) from exc
    # cast: OpenAIEngine's ``model`` is a read-only property where the protocol declares a
    # plain attribute; structurally it is an engine (isinstance(..., OcrEngine) holds)
    return cast(OcrEngine, OpenAIEngine.from_config(config))
