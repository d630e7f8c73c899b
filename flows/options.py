"""Flow parameters a person fills in the Prefect UI, turned into a PipelineConfig."""

from __future__ import annotations

from typing import Any, Literal

from folio.config import PipelineConfig

EngineName = Literal["tesseract", "text-layer", "vllm", "openai"]
RouteMode = Literal["auto", "ocr", "text-layer"]


def build_config(
    *,
    engine: EngineName,
    route: RouteMode,
    reprocess: bool,
    settings: dict[str, Any] | None,
) -> PipelineConfig:
    """Environment (FOLIO_*) first, then the flow's parameters, then free-form overrides."""
    base = PipelineConfig().model_dump()
    base["ocr"]["engine"] = engine
    base["route"]["mode"] = route
    base["reprocess"] = reprocess
    for key, value in (settings or {}).items():
        _merge(base, key.split("."), value)
    return PipelineConfig.model_validate(base)


def _merge(target: dict[str, Any], path: list[str], value: Any) -> None:
    for key in path[:-1]:
        target = target.setdefault(key, {})
    target[path[-1]] = value
