"""Checks made before any document is touched: the sources list, the destination takes a
write, the vector store opens. A run that cannot finish says so in one line at once,
instead of quarantining every document with the same infrastructure reason."""

from __future__ import annotations

import uuid

from folio.errors import ConfigError, NothingToDoError, StorageError
from folio.io.layout import CHECKS, VECTORS
from folio.io.sinks import LocalSink, open_sink
from folio.io.sources import has_documents
from folio.settings.config import PipelineConfig

#: where the write check leaves (and removes) its probe
PROBE_DIR = CHECKS


def check_run(sources: list[str], out: str, config: PipelineConfig) -> None:
    """Return when the run can finish: every source exists, one holds a PDF (read only
    up to the first: the run lists them itself), the destination takes a write.

    Raises:
        ConfigError: a source is missing, the destination or store is not usable as
            configured (permissions, credentials, bucket), the layout model or (with
            compression on) Ghostscript is missing.
        NothingToDoError: no PDF under the sources.
        StorageError: S3 or the store could not be reached (retry later).
    """
    if not has_documents(sources, config.s3):
        raise NothingToDoError(f"no PDF under {', '.join(sources)}")
    check_host(config)
    check_destination(out, config)


def check_host(config: PipelineConfig) -> None:
    """What the host running the pages must have for this configuration (the CLI's host,
    or a deployment's worker): the layout model and Ghostscript when they are used."""
    check_layout_model(config)
    check_ghostscript(config)


def check_ghostscript(config: PipelineConfig) -> None:
    """With compression on, Ghostscript must be on PATH. Compression failing is kept from
    failing a document (the original is used, and the document's report says why), so
    without this check a host that lacks ``gs`` runs every document uncompressed and
    says so only in each document's note."""
    if not config.compress:
        return
    from folio.pdf.ghostscript import gs_binary

    try:
        gs_binary()
    except ConfigError as err:
        raise ConfigError(
            f"{err}, and compression is on: install it (Debian/Ubuntu: apt install "
            "ghostscript) or run with --set compress=false") from None


def check_layout_model(config: PipelineConfig) -> None:
    """When the run detects layout, its model must be there: the page workers would only
    log a missing one and leave every page without its labels."""
    layout = config.active_layout()
    if layout is not None:
        from folio.page.layout import layout_model_path

        layout_model_path(layout.model_path)


def check_destination(out: str, config: PipelineConfig) -> None:
    """Write and remove a probe under ``out``; open the vector store when it is not the
    default one under ``out`` (that one is created on the first write)."""
    sink = open_sink(out, config.s3)
    probe = f"{PROBE_DIR}/{uuid.uuid4().hex}"
    try:
        sink.write_text(probe, "folio write check\n")
        sink.delete_prefix(PROBE_DIR)
    except StorageError as err:
        if isinstance(sink, LocalSink):  # a local folder does not come back by retrying
            raise ConfigError(f"cannot write to {out}: {err}") from None
        raise
    if config.store.kind == "pgvector":
        from folio.output.embeddings import Embedder
        from folio.stores import open_store

        dim = Embedder(config.embedding).dim
        store = open_store(config.store, default_uri=sink.uri(VECTORS), s3=config.s3, dim=dim)
        try:
            store.count()
        finally:
            close = getattr(store, "close", None)
            if callable(close):
                close()
