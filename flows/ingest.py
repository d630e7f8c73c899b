"""The ingestion flows: a batch of sources, or one document (for UI runs and triggers).

Both run the same path: sources are discovered, then :class:`folio.pipeline.PageScheduler`
feeds the OCR engine from the pages of every admitted document while finished documents
are validated and loaded beside it, in this flow's task runner. Prefect stays at the
edges: a task per document for preparing it and one for finishing it (validation,
outputs, vectors), a progress artifact per document, never a task per page.
"""

from __future__ import annotations

import contextvars
import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar, cast

from prefect import flow, get_run_logger, task
from prefect.artifacts import (
    create_link_artifact,
    create_markdown_artifact,
    create_table_artifact,
)
from prefect.cache_policies import NO_CACHE
from prefect.exceptions import TerminationSignal
from prefect.futures import PrefectFuture
from prefect.states import Failed, State
from prefect.task_runners import ThreadPoolTaskRunner

# the S3 result block's class, which Prefect looks up by its slug
import folio_prefect.deployments.result_storage  # noqa: F401
from folio import stop_hooks
from folio.checks.run_checks import check_host
from folio.errors import AllQuarantinedError
from folio.formats.office import require_for as require_office_converter
from folio.index import sync as index_sync
from folio.io.sources import SourceRef
from folio.models import DocumentResult
from folio.output.report import build_report, markdown_summary, nothing_processed
from folio.pipeline import PageScheduler, PreparedDocument, Services
from folio.pipeline.stage_clock import StageClock
from folio.settings.run_config import IngestRequest, resolve_config
from folio.settings.vocabulary import EngineName, RouteRequest
from folio_prefect.flows.vllm_runner import raise_startup_failure
from folio_prefect.tasks.discover import discover_sources
from folio_prefect.tasks.load import flush_announcements, load
from folio_prefect.tasks.prepare import prepare_document
from folio_prefect.tasks.progress import PageProgress
from folio_prefect.tasks.validate import data_docs_dir, data_docs_index, validate

T = TypeVar("T")

#: threads that validate and load finished documents beside the OCR (the scheduler has
#: its own threads for preparing, rendering and OCR)
FINISH_THREADS = max(4, os.cpu_count() or 4)


@flow(
    name="folio-ingest",
    description="Ingest documents (PDFs, images, Office files) from local paths or s3:// "
                "prefixes into outputs and a vector store.",
    task_runner=cast(Any, ThreadPoolTaskRunner(max_workers=FINISH_THREADS)),
)
def ingest(
    sources: list[str],
    out: str = "folio-out",
    engine: EngineName = "tesseract",
    route: RouteRequest = "default",
    reprocess: bool = False,
    report: str | None = None,
    settings: dict[str, Any] | None = None,
    sync: bool = False,
    dry_run: bool = False,
    include: list[str] | None = None,
    exclude: list[str] | None = None,
) -> dict[str, Any]:
    """Ingest every document (PDF, image, Office file) under ``sources`` into ``out``;
    every other entry ends ``skipped`` with its reason. Returns the run report, or (every
    document quarantined) a Failed state carrying it (:func:`final_state`).

    Args:
        sources: local files or folders, or s3://bucket/prefix URIs.
        out: a local folder or an s3://bucket/prefix for outputs (and the default vector store).
        engine: the OCR engine for pages without a trustworthy text layer.
        route: auto (trust good text layers), ocr (OCR every page) or text-layer (never OCR);
            default: ocr for a vision model (vllm, openai), auto for the others.
        reprocess: OCR again even when a document is already done with this configuration.
        report: also write the JSON run report to this local path.
        settings: overrides of any PipelineConfig field, as dotted keys ("render.max_dpi").
        sync: also remove the rows and outputs of every source indexed under ``sources``
            that is gone from them (docs/index-sync.md); a root listing no document is
            refused.
        dry_run: with ``sync``, only list what would be removed; nothing is ingested.
        include: globs of the paths below a source folder or prefix to read (all when
            empty); as the setting sources.include.
        exclude: globs of paths to leave out (counted in the summary); sources.exclude.
    """
    request = IngestRequest(sources=sources, out=out, engine=engine, route=route,
                            reprocess=reprocess,
                            settings=with_scope(settings, include, exclude), sync=sync)
    return final_state(run_request(request, report=report, dry_run=dry_run))


@flow(name="folio-ingest-document", description="Ingest one document (UI runs and triggers).",
      task_runner=cast(Any, ThreadPoolTaskRunner(max_workers=FINISH_THREADS)))
def ingest_document(
    source: str,
    out: str = "folio-out",
    engine: EngineName = "tesseract",
    route: RouteRequest = "default",
    reprocess: bool = False,
    settings: dict[str, Any] | None = None,
    sync: bool = False,
    include: list[str] | None = None,
    exclude: list[str] | None = None,
) -> dict[str, Any]:
    """Ingest one document (a local path or an s3:// URI) and return the run report (or a
    Failed state carrying it, as :func:`ingest`).

    Args:
        source: one document, a PDF, an image or an Office file (a local path the worker
            can read, or s3://bucket/key); a folder or prefix works too and ingests
            everything under it.
        out: a local folder or an s3://bucket/prefix for outputs (and the default vector store).
        engine: the OCR engine for pages without a trustworthy text layer.
        route: auto (trust good text layers), ocr (OCR every page) or text-layer (never OCR);
            default: ocr for a vision model (vllm, openai), auto for the others.
        reprocess: OCR again even when the document is already done with this configuration.
        settings: overrides of any PipelineConfig field, as dotted keys ("render.max_dpi").
        sync: also remove the rows and outputs of the sources indexed under ``source``
            (a folder or prefix) that are gone from it.
        include, exclude: globs scoping a folder or prefix, as for ``folio-ingest``.
    """
    request = IngestRequest(sources=[source], out=out, engine=engine, route=route,
                            reprocess=reprocess,
                            settings=with_scope(settings, include, exclude), sync=sync)
    return final_state(run_request(request, report=None))


def with_scope(settings: dict[str, Any] | None, include: list[str] | None,
               exclude: list[str] | None) -> dict[str, Any]:
    """``settings`` with the include/exclude parameters as sources.include/exclude."""
    merged = dict(settings or {})
    if include:
        merged["sources.include"] = list(include)
    if exclude:
        merged["sources.exclude"] = list(exclude)
    return merged


def final_state(summary: dict[str, Any]) -> dict[str, Any]:
    """The run's report, or a Failed state that carries it when every document the run
    processed was quarantined (:func:`folio.output.report.nothing_processed`).

    Failed, not a Completed state with a name of its own: the UI colours a state by its
    type (a "Completed" type named otherwise is still green), and Prefect's automations
    and notifications match the Failed event and state type that operators already watch
    for; a custom name would emit an event nobody's automation expects. The report rides
    in the state's result as :class:`folio.errors.AllQuarantinedError` (its ``report``:
    :func:`run_report_of` and the sweep still read every document's line, and a Python
    caller of the flow gets that typed error, not Prefect's complaint about a dict), and the message opens with
    :data:`folio.output.report.ALL_QUARANTINED`, so ``folio trigger --wait`` exits 3 as for
    quarantined documents. A run with some documents done stays Completed (its summary
    says which were quarantined), as does one with nothing new to do (all cached)."""
    why = nothing_processed(summary)
    if why is None:
        return summary
    # a flow may return the State of its result (Prefect makes it the run's final state;
    # a caller gets the report from ``return_state=True`` or the run's error): typed as
    # the result, as Prefect's Flow[P, T] types both ``flow()`` and its State[T]
    return cast(dict[str, Any], Failed(message=why, data=AllQuarantinedError(why, summary)))


def run_report_of(state: State[Any]) -> dict[str, Any]:
    """The report of a run of these flows called with ``return_state=True``: a Completed
    run's result, or the one a run whose documents were all quarantined carries.

    Raises:
        BaseException: the exception a run that failed otherwise (or crashed) ended with.
    """
    value = state.result(raise_on_failure=False)
    if isinstance(value, AllQuarantinedError):
        return cast(dict[str, Any], value.report)
    if isinstance(value, BaseException):
        raise value
    if not isinstance(value, dict):
        raise TypeError(f"the run's result is not a report: {type(value).__name__}")
    return value


def run_request(request: IngestRequest, *, report: str | None,
                dry_run: bool = False) -> dict[str, Any]:
    """The body both flows share: resolve the settings, discover, schedule, finish, and
    count (or, with ``sync``, remove) the indexed sources gone from the roots."""
    raise_startup_failure()  # a GPU pool's server that did not start fails the run here
    started, started_unix = time.monotonic(), time.time()
    config = resolve_config(engine=request.engine, route=request.route,
                            reprocess=request.reprocess, settings=request.settings)
    check_host(config)  # a worker without the model or gs fails the run, not every page
    services = Services(config, request.out)
    sync_started = index_sync.now()
    refs: list[SourceRef] = []
    written: list[str] = []

    def report_on_stop(how: str) -> None:
        """The report of the run so far, once: from the SIGTERM handler itself
        (folio.stop_hooks), wherever the run's body is then, or from the stop below."""
        if report and not written:
            written.append(how)
            write_report(interrupted_report(services, refs, request.out, started, how), report)

    stop_hooks.add(report_on_stop)
    # a worker's cancel is acknowledged only while Prefect's SIGTERM handler is the
    # process's own (else the cancelled run ends Crashed): folio's steps aside then
    give_back_sigterm = (stop_hooks.on_sigterm_first() if not _worker_cancels_gracefully()
                         else (lambda: None))
    try:
        found = discover_sources(request.sources, config.s3, config.sources,
                                 own=[request.out, str(config.work_dir)])
        refs = found.refs
        present = [r.uri for r in refs]
        # before any work: Office files need LibreOffice on this host (one line, exit 2)
        require_office_converter((r.name for r in refs), config.office.enabled)
        if request.sync:  # before any work: a root that lists nothing is refused
            index_sync.check_roots(request.sources, present)
        if dry_run:
            return sync_dry_run(request, services, present, started, sync_started, report)
        get_run_logger().info("%d entries to ingest into %s (%d excluded by the globs)",
                              len(refs), request.out, found.excluded)
        docs, scheduler = ingest_documents(refs, services)
        flush_announcements()  # before the run's end: a trigger waiting on it sees both
        loaded = time.monotonic()
        synced = index_sync.sync_roots(
            services.sink, services.store, request.sources, present,
            apply=request.sync, dry_run=False, started=sync_started, s3=config.s3)
    except (KeyboardInterrupt, TerminationSignal) as stop:
        # SIGINT; SIGTERM as folio.cli.Terminated, or as Prefect's TerminationSignal while
        # its flow engine holds the signal (it runs folio's handler only after the flow
        # ended: the report first, and the stop bounded, here)
        how = "SIGINT" if type(stop) is KeyboardInterrupt else "SIGTERM"
        report_on_stop(how)
        if how == "SIGTERM":
            stop_hooks.end_after_sigterm()
        raise
    finally:
        give_back_sigterm()
        stop_hooks.remove(report_on_stop)
        services.close()
    closed = time.monotonic()
    summary = finish_run(docs, started=started, out=request.out, report=None,
                         data_docs=data_docs_dir(services), config=config.public_dump(),
                         excluded=found.excluded)
    summary["sync"] = synced.model_dump(mode="json")
    summary["timing"] = run_timing(started, scheduler, loaded=loaded, closed=closed,
                                   clock=services.clock)
    summary["timing"]["started_unix"] = round(started_unix, 3)  # to time runs from outside
    if report:
        write_report(summary, report)
    return summary


def sync_dry_run(request: IngestRequest, services: Services, present: list[str],
                 started: float, sync_started: Any, report: str | None) -> dict[str, Any]:
    """``--sync --dry-run``: what would be removed; nothing ingested, nothing removed."""
    synced = index_sync.sync_roots(
        services.sink, services.store, request.sources, present, apply=True,
        dry_run=True, started=sync_started, s3=services.config.s3)
    summary = build_report([], seconds=time.monotonic() - started, out=request.out)
    summary["sync"] = synced.model_dump(mode="json")
    if report:
        write_report(summary, report)
    return summary


def interrupted_report(services: Services, refs: list[SourceRef], out: str, started: float,
                       how: str) -> dict[str, Any]:
    """The report of a run stopped by SIGINT or SIGTERM: the documents whose load ended
    (done, quarantined, cached) and the sources that did not finish (a rerun does them)."""
    finished = list(services.loaded)
    summary = build_report(finished, seconds=time.monotonic() - started, out=out)
    ended = {d.source for d in finished}
    summary["interrupted"] = how
    summary["unfinished"] = [r.uri for r in refs if r.uri not in ended]
    return summary


def run_timing(started: float, scheduler: PageScheduler, *, loaded: float, closed: float,
               clock: StageClock) -> dict[str, Any]:
    """When pages first and last ended, when the scheduler handed over its last document,
    when the last document was loaded, the run's resources closed and the run ended, in
    seconds from its start; how long it went on after its last page (validation and
    loading beside the OCR keep that short); the finishing stages over the whole run and
    those that were still running after the last page (what the tail was made of); and
    the scheduler's queue about once a second."""
    now = time.monotonic()

    def since(at: float | None) -> float | None:
        return None if at is None else round(at - started, 3)

    last = scheduler.last_page_at
    return {"first_page_s": since(scheduler.first_page_at), "last_page_s": since(last),
            "scheduled_s": since(scheduler.finished_at), "loaded_s": since(loaded),
            "closed_s": since(closed),
            "after_last_page_s": None if last is None else round(now - last, 3),
            "seconds": round(now - started, 3),
            "finishing": clock.summary(origin=started),
            "finishing_after_last_page": (None if last is None else
                                          clock.summary(origin=started, after=last)),
            "queue": [sample.model_dump() for sample in scheduler.timeline]}


def ingest_documents(refs: list[SourceRef], services: Services
                     ) -> tuple[list[DocumentResult], PageScheduler]:
    """Pages of all documents through one scheduler; each finished document validated
    and loaded by a task in this flow's runner while the OCR goes on."""
    progress_bars: dict[str, PageProgress] = {}

    def prepare(ref: SourceRef) -> PreparedDocument | DocumentResult:
        prep = prepare_document(ref, services)
        if isinstance(prep, PreparedDocument):  # (GX began loading in prepare_document)
            bar = PageProgress(prep.result.source, prep.result.page_count)
            progress_bars[prep.result.source] = bar.__enter__()
        return prep

    scheduler = PageScheduler(services, prepare=_in_this_context(prepare))
    finishing: list[PrefectFuture[DocumentResult]] = []
    for doc in scheduler.run(refs):  # hand over at once: this loop feeds the finishing
        finishing.append(finish_document.submit(doc, services, progress_bars.pop(doc.source, None),
                                                 handed_at=time.monotonic()))
    services.last_document_handed_over()
    return [future.result() for future in finishing], scheduler


@task(name="finish-document", cache_policy=NO_CACHE, task_run_name="finish {doc.source}")
def finish_document(doc: DocumentResult, services: Services,
                    bar: PageProgress | None = None, handed_at: float | None = None
                    ) -> DocumentResult:
    """Close the document's progress bar, then validation, then outputs, vectors (batched
    with other documents) and the done marker: in one thread, so a waiting load never
    holds a thread its own validation needs, and the API calls of hundreds of progress
    bars never queue up in the loop that hands documents over.

    Validation and loading run as plain calls inside this task run (the tasks' ``fn``),
    not as task runs of their own: each nested run cost about as much Prefect bookkeeping
    as its work (three state events, sent under a lock that every finishing thread takes),
    and at the end of a GPU run, when dozens of documents finish at once, that queue was
    the seconds after the last page. The document's outcome, its event and its report
    line say what validation and loading did."""
    if handed_at is not None:  # Prefect's task-run bookkeeping before the body starts
        services.clock.add("task-start", handed_at, time.monotonic())
    with services.clock.span("finish"):
        if bar is not None:
            bar.__exit__(None, None, None)
        return load.fn(validate.fn(doc, services), services)


def _worker_cancels_gracefully() -> bool:
    """Whether this run is connected to its worker's control channel (Prefect 3.9: the
    worker sends its cancel there first and ends the run Cancelled once the run says it
    took it, which Prefect's run does only while its own SIGTERM handler is in place).
    Without one (a CLI run, an older worker) folio's handler goes first, as before."""
    from prefect._internal import control_listener

    return bool(getattr(control_listener, "_started", False))


def _in_this_context(fn: Callable[[SourceRef], T]) -> Callable[[SourceRef], T]:
    """``fn`` run in a copy of the caller's context (the flow run's), from any thread:
    the scheduler's threads call task functions, which need the flow run to attach to."""
    base = contextvars.copy_context()

    def call(ref: SourceRef) -> T:
        return base.copy().run(fn, ref)

    return call


def finish_run(
    docs: list[DocumentResult], *, started: float, out: str, report: str | None,
    data_docs: Path | None = None, config: dict[str, Any] | None = None,
    excluded: int = 0,
) -> dict[str, Any]:
    """Check the accounting, publish the artifacts a person reads, write the report."""
    for doc in docs:
        if doc.page_count and doc.pages:
            doc.check_accounting()
    summary = build_report(docs, seconds=time.monotonic() - started, out=out,
                           excluded=excluded)
    if config is not None:
        summary["config"] = config
    index = data_docs_index(data_docs) if data_docs else None
    publish_artifacts(docs, summary, data_docs=index if index and index.is_file() else None)
    if report:
        write_report(summary, report)
    return summary


def write_report(summary: dict[str, Any], report: str) -> None:
    """Written beside the target, then renamed over it: a reader (or a run killed
    midway) never sees half a report, and a link at the path is replaced, not followed;
    the temporary file has a random name, created exclusively without following a link
    (:func:`folio.process_files.write_atomic`)."""
    from folio.process_files import write_atomic

    path = Path(report)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, json.dumps(summary, indent=2))


def publish_artifacts(docs: list[DocumentResult], summary: dict[str, Any],
                      data_docs: Path | None) -> None:
    """The run summary (markdown, with links), a table of quarantined pages and why, and
    a link to the Great Expectations Data Docs."""
    create_markdown_artifact(
        markdown_summary(summary, links=True, data_docs=str(data_docs) if data_docs else None),
        key="folio-run-summary", description="folio ingestion summary")
    rows = quarantine_rows(docs)
    if rows:
        create_table_artifact(rows, key="folio-quarantine",
                              description=f"{len(rows)} quarantined page(s) and why")
    if data_docs:
        create_link_artifact(data_docs.as_uri(), link_text="Great Expectations Data Docs",
                             key="folio-data-docs",
                             description="validation results of the latest documents in this "
                                         "output folder (a file on the worker's machine)")


def quarantine_rows(docs: list[DocumentResult]) -> list[dict[str, Any]]:
    """One row per quarantined page (1-based page numbers, as a person counts), and one
    per document quarantined before its pages were known."""
    rows: list[dict[str, Any]] = []
    for doc in docs:
        pages = [p for p in doc.pages if p.outcome == "quarantined"]
        rows += [{"document": doc.source, "page": p.index + 1, "reason": p.reason or doc.reason,
                  "retryable": doc.retryable} for p in pages]
        if not pages and doc.outcome == "quarantined":
            rows.append({"document": doc.source, "page": None, "reason": doc.reason,
                         "retryable": doc.retryable})
    return rows
