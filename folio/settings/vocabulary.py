"""The names a person chooses between, defined once: the engine registry, the CLI's
choices, the flows' parameter types and the Prefect forms all derive from these."""

from __future__ import annotations

from typing import Literal, get_args

#: OCR engines for pages without a trustworthy text layer
EngineName = Literal["tesseract", "text-layer", "vllm", "openai", "rapidocr"]
#: which pages go to the engine: auto (judge each text layer), ocr (all), text-layer (none)
RouteMode = Literal["auto", "ocr", "text-layer"]

ENGINES: tuple[str, ...] = get_args(EngineName)
ROUTE_MODES: tuple[str, ...] = get_args(RouteMode)
#: what a run asks for: a mode, or ``default``, the engine's own (ocr for a vision model,
#: auto for the others: folio.settings.run_config.default_route). A choice, not an optional value,
#: so the Prefect UI's run form shows one list to pick from
RouteRequest = Literal["default", "auto", "ocr", "text-layer"]
ROUTE_REQUESTS: tuple[str, ...] = get_args(RouteRequest)
#: engines that send pages to a vision-language model (sampling, token budgets, retries)
GENERATIVE_ENGINES: frozenset[str] = frozenset({"vllm", "openai"})
#: CPU OCR engines that read a rendered page image (render plan: folio.pdf.ocr_resolution)
CPU_OCR_ENGINES: frozenset[str] = frozenset({"tesseract", "rapidocr"})
#: engines whose flow runs own (or share) a vLLM server on this worker's GPUs
SERVED_ENGINES: frozenset[str] = frozenset({"vllm"})
