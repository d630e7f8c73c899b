from __future__ import annotations

import logging
import shutil
import threading
from pathlib import Path

from prefect import task
from prefect.cache_policies import NO_CACHE

from folio.io.layout import DATA_DOCS
from folio.io.sinks import LocalSink
from folio.models import DocumentOutcome, DocumentResult, PageOutcome
from folio.pipeline import Services, validate_document

log = logging.getLogger(__name__)

#: one Data Docs build at a time per process: the site's files are shared by all documents
_DOCS_LOCK = threading.Lock()


@task(name="validate-pages", cache_policy=NO_CACHE)
def validate(doc: DocumentResult, services: Services) -> DocumentResult:
    """Great Expectations suite over the pages; failing pages are quarantined.

    Data Docs are built only for documents with quarantined pages (what a person needs to
    look at): a file-backed build costs about half a second under the validation lock,
    which on many clean documents became the run's tail on a GPU."""
    before = doc.model_copy(update={"pages": [p.model_copy() for p in doc.pages]})
    doc = validate_document(doc, services)
    if any(p.outcome is PageOutcome.QUARANTINED for p in doc.pages):
        build_data_docs(before, services)
    return doc


def data_docs_dir(services: Services) -> Path | None:
    """Where this run's Data Docs site lives: ``validation.data_docs_dir``, else
    ``{out}/_data_docs`` for a local output; None when off or the output is remote (a
    worker-local site would be unreachable from wherever the s3 outputs are read)."""
    settings = services.config.validation
    if not (settings.enabled and settings.data_docs):
        return None
    if settings.data_docs_dir:
        return Path(settings.data_docs_dir).expanduser().absolute()
    if isinstance(services.sink, LocalSink):
        return Path(services.sink.uri(DATA_DOCS)).absolute()
    return None


def data_docs_index(site: Path) -> Path:
    """The site's entry page (GX's default local site layout)."""
    return site / "gx" / "uncommitted" / "data_docs" / "local_site" / "index.html"


def build_data_docs(doc: DocumentResult, services: Services) -> Path | None:
    """Validate the pages the pipeline is about to validate (same input, so the same
    verdicts) into a file-backed GX context and rebuild the site; index.html or None.

    The pipeline's own validation stays ephemeral and decides quarantines; this one only
    documents them, so any failure here is logged and never changes the document."""
    site = data_docs_dir(services)
    if site is None or doc.cached or not doc.pages or (
            doc.outcome is DocumentOutcome.QUARANTINED and doc.reason):
        return None
    from folio.checks.validation import run_validation

    try:
        with _DOCS_LOCK:
            prune_data_docs(site, keep=services.config.validation.data_docs_keep - 1,
                            replacing=doc.doc_id)
            report = run_validation(doc.doc_id, doc.pages, services.config.validation,
                                    data_docs_dir=site)
    except Exception:
        log.warning("Data Docs for %s not built", doc.source, exc_info=True)
        return None
    return report.data_docs_index


def prune_data_docs(site: Path, *, keep: int, replacing: str) -> None:
    """Bound the site: drop ``replacing``'s earlier results and all but the newest
    ``keep`` other documents (GX keeps every result forever, and rebuilds grow with them).

    Results live under ``validations/<suite>/<doc_id>/`` in the store and in the
    rendered site; both copies go."""
    roots = [site / "gx" / "uncommitted" / "validations",
             site / "gx" / "uncommitted" / "data_docs" / "local_site" / "validations"]
    runs: dict[str, float] = {}
    for root in roots:
        for run_dir in root.glob("*/*"):
            if run_dir.is_dir():
                runs[run_dir.name] = max(runs.get(run_dir.name, 0.0), run_dir.stat().st_mtime)
    newest = sorted((r for r in runs if r != replacing), key=runs.__getitem__, reverse=True)
    drop = set(newest[keep:]) | ({replacing} if replacing in runs else set())
    for root in roots:
        for name in drop:
            for run_dir in root.glob(f"*/{name}"):
                shutil.rmtree(run_dir, ignore_errors=True)
