"""Validate a document's page results with Great Expectations (GX 1.x).

Each document becomes two small tables, one row per page and one row per block, checked
in one batch each (vectorised: 1000 pages take tens of milliseconds). Failures come back
per page index, so the pipeline can quarantine exactly the pages that failed.

The suite is data first (:func:`suite_definitions`, no GX needed to read it), turned into
GX expectations only when validating; operations can use the same list to build Data Docs.
GX is imported lazily (about 2.6 s). Each call uses a fresh *ephemeral* context: a
file-backed context keeps every validation result and grows without bound; one is used
only when Data Docs are asked for (:func:`run_validation` with ``data_docs_dir``).

Example:
    >>> validate_pages("doc1", pages, ValidationSettings())  # doctest: +SKIP
    {3: ['repeat-ratio'], 7: ['bbox-right', 'label-known']}
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from folio.chunking import page_chunk_texts
from folio.config import ChunkSettings, ValidationSettings
from folio.engines.base import GENERATIVE_ENGINES
from folio.errors import FolioError
from folio.models import KNOWN_LABELS, DocumentResult, PageOutcome, PageResult
from folio.quality import mean_confidence, repeat_ratio, text_chars
from folio.text_agreement import PageAgreement, page_agreement

if TYPE_CHECKING:
    import pandas as pd

    from folio.config import PipelineConfig

#: boxes may overshoot the page by this much (rounding); the pipeline already clipped
#: overshoots of up to 2% of the page, so anything beyond is really off the page
BBOX_TOLERANCE_PT = 1.0

Table = Literal["pages", "blocks"]

RESULT_FORMAT: dict[str, Any] = {
    "result_format": "COMPLETE",
    # "item": the document's position in the validated batch (see validate_documents)
    "unexpected_index_column_names": ["item", "page"],
}

_DATASOURCE = "folio"
_GX_LOCK = threading.Lock()  # GX contexts and metric caches are not meant for threads


@dataclass(frozen=True)
class ExpectationSpec:
    """One expectation as plain data: what GX class, on which table, with which arguments.

    ``only_where_false`` names boolean columns; the expectation applies only to rows
    where all of them are False (a GX row condition).
    """

    name: str  # what the pipeline reports for a failing page
    table: Table
    expectation: str  # class name in great_expectations.expectations
    kwargs: dict[str, Any]
    why: str
    only_where_false: tuple[str, ...] = ()


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
            # NaN (not checked) where there is nothing to owe (folio.text_agreement)
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
def preload(child: bool = False) -> None:
    """Import Great Expectations in the background (it takes seconds), so the first
    document to reach validation does not wait for it at the end of a run; with
    ``child``, start the child process that runs it instead, which imports GX there.
    Once per process and kind (cached): later calls do nothing."""
    if child:
        from folio.validation_child import shared_child

        shared_child().start()
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
    ``child``: GX runs in the process's validation child (folio/validation_child.py)."""
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
        from folio.validation_child import shared_child

        failures = shared_child().failures(frames, specs, run_name)
    else:
        failures, docs_index = failures_here(frames, specs, run_name, data_docs_dir)
    order = [s.name for s in specs]
    seconds = time.perf_counter() - started
    for (n, page), names in sorted(failures.items()):
        reports[n].failures[page] = sorted(set(names), key=order.index)
    for report in reports:
        report.seconds, report.data_docs_index = seconds, docs_index
    return reports


def failures_here(frames: dict[Table, pd.DataFrame], specs: list[ExpectationSpec],
                  run_name: str, data_docs_dir: Path | None = None
                  ) -> tuple[dict[tuple[int, int], list[str]], Path | None]:
    """The GX runs themselves, one per table, in this process (the flow's, or the
    validation child's): failed expectation names by (item, page), and with
    ``data_docs_dir`` the Data Docs site's index.

    Raises:
        FolioError: (code ``validation-error``) when GX itself failed on an expectation.
    """
    failures: dict[tuple[int, int], list[str]] = {}
    with _GX_LOCK:
        runner = _runner(specs, data_docs_dir)
        for table, frame in frames.items():
            table_specs = [s for s in specs if s.table == table]
            result = runner.run(run_name, table, frame, table_specs)
            _collect(result, table_specs, failures)
        docs_index = _build_docs(runner.context) if data_docs_dir is not None else None
    return failures, docs_index


#: validations one GX context serves before it is rebuilt: building a context and its
#: definitions costs 1-2 s (it was the pipeline's bottleneck on many small documents), while
#: an ephemeral context's result store grows with every run, so it is renewed now and then
CONTEXT_RUNS = 200


class _Runner:
    """A GX context with its suites and validation definitions built once, reused for
    ``CONTEXT_RUNS`` validations. Callers hold ``_GX_LOCK``."""

    def __init__(self, specs: list[ExpectationSpec], data_docs_dir: Path | None) -> None:
        self.key = _runner_key(specs, data_docs_dir)
        self.context = _context(data_docs_dir)
        self.datasource = self.context.data_sources.add_or_update_pandas(_DATASOURCE)
        self.definitions: dict[str, Any] = {}
        self.runs = 0

    def run(self, doc_id: str, table: Table, frame: pd.DataFrame,
            specs: list[ExpectationSpec]) -> Any:
        from great_expectations.core.run_identifier import RunIdentifier

        self.runs += 1
        if table not in self.definitions:
            self.definitions[table] = _definition(self.context, self.datasource, table, specs)
        return self.definitions[table].run(
            batch_parameters={"dataframe": frame},
            result_format=RESULT_FORMAT,
            run_id=RunIdentifier(run_name=doc_id or "document"),
        )


_RUNNER: _Runner | None = None


def _runner_key(specs: list[ExpectationSpec], data_docs_dir: Path | None) -> str:
    return f"{specs!r}|{data_docs_dir}"


def _runner(specs: list[ExpectationSpec], data_docs_dir: Path | None) -> _Runner:
    """The process's runner, rebuilt when the suite or folder changes or after many runs."""
    global _RUNNER
    key = _runner_key(specs, data_docs_dir)
    if _RUNNER is None or _RUNNER.key != key or _RUNNER.runs >= CONTEXT_RUNS:
        _RUNNER = _Runner(specs, data_docs_dir)
    return _RUNNER


def _context(data_docs_dir: Path | None) -> Any:
    import great_expectations as gx

    # GX logs every temporary docs folder at INFO; that is noise on every document.
    for name in ("great_expectations", "great_expectations.data_context.types.base"):
        logging.getLogger(name).setLevel(logging.WARNING)
    from great_expectations.data_context.types.base import ProgressBarsConfig

    context: Any
    if data_docs_dir is None:
        context = gx.get_context(mode="ephemeral")
    else:
        data_docs_dir.mkdir(parents=True, exist_ok=True)
        context = gx.get_context(mode="file", project_root_dir=str(data_docs_dir))
    context.variables.progress_bars = ProgressBarsConfig(globally=False, metric_calculations=False)
    return context


def build_suite(name: str, specs: list[ExpectationSpec]) -> Any:
    """A ``gx.ExpectationSuite`` from specs; each expectation's ``meta.folio`` is its name."""
    import great_expectations as gx
    from great_expectations.expectations.row_conditions import Column, Condition

    suite = gx.ExpectationSuite(name=name)
    for spec in specs:
        kwargs = dict(spec.kwargs)
        if spec.only_where_false:
            conditions: list[Condition] = [Column(c) == False for c in spec.only_where_false]  # noqa: E712 (GX's row-condition API)
            condition = conditions[0]
            for extra in conditions[1:]:
                condition = condition & extra
            kwargs["row_condition"] = condition
        expectation_class = getattr(gx.expectations, spec.expectation)
        suite.add_expectation(expectation_class(**kwargs, meta={"folio": spec.name}))
    return suite


def _definition(context: Any, datasource: Any, table: Table, specs: list[ExpectationSpec]) -> Any:
    """The ValidationDefinition of one table: a whole-dataframe batch and its suite (results
    are stored in the context: in memory when ephemeral, on disk for Data Docs)."""
    import great_expectations as gx

    asset = datasource.add_dataframe_asset(table)
    batch_definition = asset.add_batch_definition_whole_dataframe("whole")
    suite = context.suites.add_or_update(build_suite(f"folio-{table}", specs))
    return context.validation_definitions.add_or_update(
        gx.ValidationDefinition(name=f"folio-{table}", data=batch_definition, suite=suite)
    )


def _collect(suite_result: Any, specs: list[ExpectationSpec],
             out: dict[tuple[int, int], list[str]]) -> None:
    """Failed expectation names by (item, page)."""
    known = {s.name for s in specs}
    for result in suite_result.results:
        name = (result.expectation_config.meta or {}).get("folio", "")
        _raise_on_exception(name, result.exception_info)
        if result.success or name not in known:
            continue
        for row in result.result.get("unexpected_index_list") or []:
            out.setdefault((int(row["item"]), int(row["page"])), []).append(name)


def _raise_on_exception(name: str, info: Any) -> None:
    """GX reports a crashed metric as a failed expectation; a crash is a bug, not a verdict."""
    if not isinstance(info, dict):
        return
    items = [info] if "raised_exception" in info else list(info.values())
    for item in items:
        if isinstance(item, dict) and item.get("raised_exception"):
            message = str(item.get("exception_message", ""))[:300]
            raise FolioError(f"great expectations failed on {name}: {message}",
                             code="validation-error")


def _build_docs(context: Any) -> Path | None:
    """Build the local Data Docs site; its index.html path (None if GX made no local site)."""
    urls: dict[str, str] = context.build_data_docs()
    for url in urls.values():
        if url.startswith("file://"):
            return Path(url.removeprefix("file://"))
    return None
