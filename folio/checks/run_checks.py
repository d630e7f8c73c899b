"""Checks made before any document is touched: the sources list, the destination takes a
write, the vector store opens, and every host resource a setting names is there (the OCR
language packs, the layout and embedding model files, Ghostscript). A run that cannot
finish says so in one line at once (exit 2, with how to install what is missing),
instead of quarantining every document (or every page) with the same reason."""

from __future__ import annotations

import os
import stat
import uuid

from folio.errors import ConfigError, EngineUnavailableError, NothingToDoError, StorageError
from folio.io.layout import CHECKS, VECTORS
from folio.io.sinks import LocalSink, open_sink
from folio.io.sources import discover_entries, has_documents
from folio.settings.config import PipelineConfig

#: where the write check leaves (and removes) its probe
PROBE_DIR = CHECKS


def check_run(sources: list[str], out: str, config: PipelineConfig) -> None:
    """Return when the run can finish: every source exists, one holds an entry (read only
    up to the first: the run lists them itself), the destination takes a write.

    Raises:
        ConfigError: a source is missing, the destination or store is not usable as
            configured (permissions, credentials, bucket), or a host resource a setting
            names is missing (:func:`check_host`).
        NothingToDoError: no entry under the sources (within the globs).
        StorageError: S3 or the store could not be reached (retry later).
    """
    if not has_documents(sources, config.s3, config.sources, own=[out, str(config.work_dir)]):
        what = "no entry" if not (config.sources.include or config.sources.exclude) \
            else "no entry within --include/--exclude"
        raise NothingToDoError(f"{what} under {', '.join(sources)}")
    check_host(config)
    check_office_converter(sources, out, config)
    check_destination(out, config)


def check_office_converter(sources: list[str], out: str, config: PipelineConfig) -> None:
    """On a host without LibreOffice (only there: the sources are listed once more for
    it), a run whose sources hold an Office file stops before any work, in one line with
    how to install it. The ingest flow checks its own listing the same way, for runs
    started by deployments and triggers."""
    from folio.formats.office import find_soffice, require_for

    if not config.office.enabled or find_soffice() is not None:
        return
    found = discover_entries(sources, config.s3, config.sources, own=[out, str(config.work_dir)])
    require_for((ref.name for ref in found.refs), enabled=True)


def check_work_dir(config: PipelineConfig) -> None:
    """The work folder, if there, is this user's alone, and so is every folder above it
    (exit 2 in one line, before any work: folio.security.work_dirs)."""
    from folio.security.private_dir import check_path_to, check_private_dir

    check_path_to(config.work_dir)
    try:
        info = os.lstat(config.work_dir)
    except FileNotFoundError:
        return  # made private at its first use
    # one folio made before these checks (0755, never writable by others) is closed at
    # its next use; anything else is refused, saying why
    if (stat.S_ISLNK(info.st_mode) or not stat.S_ISDIR(info.st_mode)
            or info.st_uid != os.geteuid() or info.st_mode & 0o022):
        check_private_dir(config.work_dir)


def check_host(config: PipelineConfig) -> None:
    """What the host running the pages must have for this configuration (the CLI's host,
    or a deployment's worker): each resource a setting names, when the run uses it."""
    check_work_dir(config)
    check_ghostscript(config)
    check_layout_model(config)
    check_embedding_model(config)
    check_ocr_languages(config)
    # LibreOffice: check_office_converter, when the sources hold an Office file


def uses_tesseract(config: PipelineConfig) -> bool:
    """Whether a page of this run may go to tesseract: it is the engine or a fallback,
    and the route OCRs some pages (``text-layer`` never does)."""
    engines = [config.ocr.engine, *config.ocr.fallback]
    return "tesseract" in engines and config.route.mode != "text-layer"


def check_ocr_languages(config: PipelineConfig) -> None:
    """The language packs ``ocr.languages`` names (and ``osd``, which tesseract's page
    segmentation reads) must be installed when tesseract reads pages: otherwise every
    page sent to it is quarantined with the same error, found one page at a time."""
    if not uses_tesseract(config):
        return
    from folio.engines.tesseract import check_languages

    try:
        check_languages(config.ocr.languages)
        check_languages("osd")
    except EngineUnavailableError as err:  # no tesseract at all
        raise ConfigError(f"{err} (Debian/Ubuntu: apt-get install tesseract-ocr), or choose "
                          "another --engine") from None
    except ConfigError as err:
        raise ConfigError(f"ocr.languages={config.ocr.languages}: {err}") from None


def check_embedding_model(config: PipelineConfig) -> None:
    """The embedding model and tokenizer files (``embedding.model_path`` and
    ``embedding.tokenizer_path``, or the packaged ones) must exist: every document's
    chunks are embedded, and a missing file would fail each one at its load stage. A run
    without a vector store (``store.kind=none``) embeds nothing."""
    if config.store.kind == "none":
        return
    from folio.output.embeddings import model_files

    model_files(config.embedding)


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
