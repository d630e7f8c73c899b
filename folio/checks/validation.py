"""Validate a document's page results with Great Expectations (GX 1.x).

Each document becomes two small tables, one row per page and one row per block, checked
in one batch each (vectorised: 1000 pages take tens of milliseconds). Failures come back
per page index, so the pipeline can quarantine exactly the pages that failed.

The suite is data first (:func:`suite_definitions`, no GX needed to read it), turned into
GX expectations only when validating; operations can use the same list to build Data Docs.
Running GX is :mod:`folio.checks.validation_gx`'s (imported by the validation child too), here or,
with ``child``, in :mod:`folio.checks.validation_child`. GX is imported lazily (about 2.6 s). An
*ephemeral* context is used: a file-backed context keeps every validation result and grows
without bound; one is used only when Data Docs are asked for (:func:`run_validation` with
``data_docs_dir``).

Example:
    >>> validate_pages("doc1", pages, ValidationSettings())  # doctest: +SKIP
    {3: ['repeat-ratio'], 7: ['bbox-right', 'label-known']}
"""

from __future__ import annotations

import functools
import threading
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from folio.checks.validation_gx import ExpectationSpec, Table, failures_here
from folio.engines.base import GENERATIVE_ENGINES
from folio.models import KNOWN_LABELS, DocumentResult, PageOutcome, PageResult
from folio.output.chunking import page_chunk_texts
from folio.page.quality import mean_confidence, repeat_ratio, text_chars
from folio.page.text_agreement import PageAgreement, page_agreement
from folio.settings.config import ChunkSettings, ValidationSettings

if TYPE_CHECKING:
    import pandas as pd

    from folio.settings.config import PipelineConfig

#: boxes may overshoot the page by this much (rounding); the pipeline already clipped
#: overshoots of up to 2% of the page, so anything beyond is really off the page
BBOX_TOLERANCE_PT = 1.0


@dataclass
class ValidationReport:
    """What one validation run found; ``failures`` maps page index -> failed names."""

    failures: dict[int, list[str]] = field(default_factory=dict)
    pages: int = 0
    blocks: int = 0
    seconds: float = 0.0
    data_docs_index: Path | None = None

    @property
    def success(self) -> bool:
        return not self.failures


def suite_definitions(settings: ValidationSettings) -> list[ExpectationSpec]:
    """The validation suite as data, in the order failures are reported."""
    tol = -BBOX_TOLERANCE_PT
    between = "ExpectColumnValuesToBeBetween"
    return [
        ExpectationSpec(
            "text-nonempty", "pages", between, {"column": "text_chars", "min_value": 1},
            "a page with something drawn on it must yield text",
            only_where_false=("blank", "quarantined"),
        ),
        ExpectationSpec(
            "repeat-ratio", "pages", between,
            {"column": "repeat_ratio", "max_value": settings.max_repeat_ratio},
            "a model stuck in a loop repeats the same n-grams",
        ),
        ExpectationSpec(
            "ocr-confidence", "pages", between,
            {"column": "ocr_confidence", "min_value": settings.min_ocr_confidence},
            "gibberish from an upside-down, handwritten or blurred page is not text",
            only_where_false=("quarantined",),
        ),
        ExpectationSpec(
            "markdown-keeps-text", "pages", between,
            {"column": "markdown_recall", "min_value": settings.min_markdown_recall},
            "the page's words reach document.md (running heads aside): a page whose only "
            "line was taken for a running head once lost all its text and passed",
            only_where_false=("quarantined",),
        ),
        ExpectationSpec(
            "chunks-keep-markdown", "pages", between,
            {"column": "chunk_recall", "min_value": settings.min_chunk_recall},
            "the markdown's words reach the chunks the vector store gets",
            only_where_false=("quarantined",),
        ),
        ExpectationSpec(
            "page-unique", "pages", "ExpectColumnValuesToBeUnique", {"column": "page_key"},
            "exactly one result per page index of a document",
        ),
        ExpectationSpec(
            "label-known", "blocks", "ExpectColumnValuesToBeInSet",
            {"column": "label", "value_set": sorted(KNOWN_LABELS)},
            "labels outside the vocabulary break chunking and citations",
        ),
        ExpectationSpec("bbox-left", "blocks", between, {"column": "x0", "min_value": tol},
                        "a box must start inside the page"),
        ExpectationSpec("bbox-top", "blocks", between, {"column": "y0", "min_value": tol},
                        "a box must start inside the page"),
        ExpectationSpec("bbox-right", "blocks", between,
                        {"column": "right_margin", "min_value": tol},
                        "x1 must not pass the page width"),
        ExpectationSpec("bbox-bottom", "blocks", between,
                        {"column": "bottom_margin", "min_value": tol},
                        "y1 must not pass the page height"),
        ExpectationSpec("bbox-ordered", "blocks", between,
                        {"column": "min_side", "min_value": 0},
                        "x0 <= x1 and y0 <= y1"),
    ]


# --- the two tables ----------------------------------------------------------------------------


def pages_frame(doc_id: str, pages: list[PageResult], item: int = 0) -> pd.DataFrame:
    """One row per page result: what the page-level expectations look at (``item``: the
    document's position in a batch of documents)."""
    import pandas as pd

    counts = Counter(p.index for p in pages)
    agreements = [_agreement(doc_id, p) for p in pages]
    return pd.DataFrame(
        {
            "item": [item] * len(pages),
            "doc_id": [doc_id] * len(pages),
            "page": [p.index for p in pages],
            "page_key": [f"{item}:{p.index}" for p in pages],
            "blank": [p.blank for p in pages],
            "quarantined": [p.outcome is PageOutcome.QUARANTINED for p in pages],
            "text_chars": [text_chars(_page_text(p)) for p in pages],
            "repeat_ratio": [
                repeat_ratio(_page_text(p)) if p.engine in GENERATIVE_ENGINES else 0.0
                for p in pages
            ],
            # NaN (not checked) where the engine reports no confidence
            "ocr_confidence": [_confidence(p) for p in pages],
            # NaN (not checked) where there is nothing to owe (folio.page.text_agreement)
            "markdown_recall": [_nan(a.markdown_recall) for a in agreements],
            "chunk_recall": [_nan(a.chunk_recall) for a in agreements],
            "n_results": [counts[p.index] for p in pages],
        }
    )


def blocks_frame(pages: list[PageResult], item: int = 0) -> pd.DataFrame:
    """One row per block; margins are NaN (so not checked) where a size is unknown."""
    import numpy as np
    import pandas as pd

    rows = [
        (item, p.index, b.label, *_box(b.bbox), p.width_pt or np.nan, p.height_pt or np.nan)
        for p in pages
        for b in p.blocks
    ]
    frame = pd.DataFrame(
        rows, columns=["item", "page", "label", "x0", "y0", "x1", "y1", "width", "height"]
    ).astype({"item": "int64", "page": "int64", "label": "object"})
    frame["right_margin"] = frame["width"] - frame["x1"]
    frame["bottom_margin"] = frame["height"] - frame["y1"]
    frame["min_side"] = np.fmin(frame["x1"] - frame["x0"], frame["y1"] - frame["y0"])
    return frame


def _agreement(doc_id: str, page: PageResult) -> PageAgreement:
    """The page's words in its markdown and its chunks. The chunker here keeps running
    heads, so whether a run keeps them in its markdown or not, every word of the markdown
    is owed to the chunks; its sizes do not change which words a page's chunks hold."""
    doc = DocumentResult(source=doc_id, doc_id=doc_id, pages=[page])
    chunks = page_chunk_texts(doc, page, ChunkSettings(keep_headers_footers=True))
    return page_agreement(page, chunks)


def _nan(value: float | None) -> float:
    return float("nan") if value is None else value


def _confidence(page: PageResult) -> float:
    confidence = mean_confidence(page.blocks)
    return float("nan") if confidence is None else confidence


def _page_text(page: PageResult) -> str:
    return page.markdown or "\n\n".join(b.content for b in page.blocks)


def _box(bbox: Any) -> tuple[float, float, float, float]:
    if bbox is None:
        nan = float("nan")
        return nan, nan, nan, nan
    return float(bbox.x0), float(bbox.y0), float(bbox.x1), float(bbox.y1)


# --- running GX --------------------------------------------------------------------------------


def in_child(config: PipelineConfig) -> bool:
    """Whether GX runs in a child process for this run (``validation.child_process``;
    by default when the OCR engine is a GPU model's)."""
    chosen = config.validation.child_process
    return config.ocr.engine in GENERATIVE_ENGINES if chosen is None else chosen


@functools.cache
def preload(child: bool = False, children: int = 1) -> None:
    """Import Great Expectations in the background (it takes seconds), so the first
    document to reach validation does not wait for it at the end of a run; with
    ``child``, start the ``children`` child processes that run it instead, each of which
    imports GX there. Once per process and arguments (cached): later calls do nothing."""
    if child:
        from folio.checks.validation_child import shared_children

        shared_children(children).start()
        return

    def _import() -> None:
        import great_expectations  # noqa: F401

    threading.Thread(target=_import, daemon=True, name="folio-gx-preload").start()


def validate_pages(
    doc_id: str, pages: list[PageResult], settings: ValidationSettings
) -> dict[int, list[str]]:
    """Page index -> names of the failed expectations; empty when every page passes."""
    return validate_documents([(doc_id, pages)], settings)[0]


def validate_documents(
    items: Sequence[tuple[str, list[PageResult]]], settings: ValidationSettings,
    *, child: bool = False,
) -> list[dict[int, list[str]]]:
    """:func:`validate_pages` for many documents in one GX run per table (a run costs
    about the same for one document as for fifty); one failure map per item, in order.
    ``child``: GX runs in the process's validation child (folio/checks/validation_child.py)."""
    if not settings.enabled:
        return [{} for _ in items]
    return [report.failures for report in _run_batch(list(items), settings, None, child)]


def run_validation(
    doc_id: str,
    pages: list[PageResult],
    settings: ValidationSettings,
    data_docs_dir: Path | None = None,
) -> ValidationReport:
    """Validate ``pages``; with ``data_docs_dir``, also keep the results there and build
    GX Data Docs (a file-backed context under ``data_docs_dir/gx``).

    Raises:
        FolioError: (code ``validation-error``) when GX itself failed on an expectation.
    """
    if not settings.enabled:
        return ValidationReport(pages=len(pages))
    return _run_batch([(doc_id, pages)], settings, data_docs_dir)[0]


def _run_batch(items: list[tuple[str, list[PageResult]]], settings: ValidationSettings,
               data_docs_dir: Path | None, child: bool = False) -> list[ValidationReport]:
    import pandas as pd

    reports = [ValidationReport(pages=len(pages)) for _, pages in items]
    live = [(n, doc_id, pages) for n, (doc_id, pages) in enumerate(items) if pages]
    if not live:
        return reports
    started = time.perf_counter()
    frames: dict[Table, pd.DataFrame] = {
        "pages": pd.concat([pages_frame(d, p, n) for n, d, p in live], ignore_index=True)}
    blocks = pd.concat([blocks_frame(p, n) for n, _, p in live], ignore_index=True)
    for n, _, pages in live:
        reports[n].blocks = sum(len(p.blocks) for p in pages)
    if len(blocks):
        frames["blocks"] = blocks
    specs = suite_definitions(settings)
    run_name = items[0][0] if len(items) == 1 else f"{items[0][0]}+{len(items) - 1}"
    docs_index: Path | None = None
    if child and data_docs_dir is None:
        from folio.checks.validation_child import shared_children

        failures = shared_children(settings.child_processes).failures(frames, specs, run_name)
    else:
        failures, docs_index = failures_here(frames, specs, run_name, data_docs_dir)
    order = [s.name for s in specs]
    seconds = time.perf_counter() - started
    for (n, page), names in sorted(failures.items()):
        reports[n].failures[page] = sorted(set(names), key=order.index)
    for report in reports:
        report.seconds, report.data_docs_index = seconds, docs_index
    return reports
