"""The settings sections that bound what a run may take of its host: time, memory, size
and concurrency (:class:`LimitSettings`), the vLLM server a GPU worker runs
(:class:`ServerSettings`) and the LibreOffice conversions of Office documents
(:class:`OfficeSettings`).

Why a module of their own: :mod:`folio.settings.config` passed 500 lines (issue 46), and
these three share one rule that the sections left there do not: they are operational
only, so none of their fields enters :meth:`PipelineConfig.config_hash
<folio.settings.config.PipelineConfig.config_hash>`, and changing one never forces
documents that are done to be read again. :class:`~folio.settings.config.PipelineConfig`
holds them as ``limits``, ``server`` and ``office``, as before.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

__all__ = ["LimitSettings", "OfficeSettings", "ServerSettings"]


class ServerSettings(BaseModel):
    """How a GPU worker runs its vLLM server (``--engine vllm``). Operational only: none
    of it changes what a page turns into, so none of it enters the config hash."""

    shared: bool = Field(
        True, description="the server outlives the flow run: later runs on this host attach "
        "to it (start-up costs minutes); it stops after idle_timeout_s without runs or when "
        "the worker stops")
    idle_timeout_s: float = Field(600.0, gt=0, description="stop a shared server unused this long")
    startup_timeout_s: float = Field(900.0, gt=0)
    max_restarts: int = Field(2, ge=0, description="restarts of a server that dies")
    state_dir: str | None = Field(
        None, description="where shared servers keep their state, locks and API key (a "
        "local folder only you can write: created 0700, refused otherwise; default "
        "$FOLIO_SERVER_STATE_DIR, else $XDG_RUNTIME_DIR/folio-servers, else "
        "~/.folio/servers; docs/security.md)")
    command: list[str] | None = Field(
        None, description="run this instead of vllm serve ({host} and {port} filled in)")
    executable: list[str] | None = Field(
        None, description="how to call vLLM's CLI (default: vllm, else python -m ...)")
    load_format: str | None = Field(None, description="dummy: random weights (benchmarks)")
    max_model_len: int | None = None
    extra_args: list[str] = Field(default_factory=list, description="more vllm serve options")
    log_dir: str | None = None
    engines: int = Field(
        0, ge=0, description="vLLM servers on this host, one per group of the profile's "
        "gpu_count GPUs (CUDA_VISIBLE_DEVICES set for each); pages go to the least busy. 0: "
        "as many as the visible GPUs hold (NVML, or CUDA_VISIBLE_DEVICES when set)")


class LimitSettings(BaseModel):
    document_timeout_s: float = Field(900.0, description=(
        "whole-document wall clock limit, from its start, whatever its pages; pages not done "
        "by then end document-timeout, not retried unless the limit is raised"))
    page_timeout_s: float = Field(120.0, description="one page's OCR limit")
    ghostscript_timeout_s: float = Field(
        120.0, gt=0, description="one Ghostscript run's wall-clock limit (repair, compression); "
        "a hostile file that makes it run longer ends that step")
    ghostscript_memory_mb: int = Field(
        2048, ge=64, description="address-space cap of one Ghostscript process (RLIMIT_AS): "
        "a content stream that inflates to gigabytes ends in an error, not a host out of "
        "memory")
    ghostscript_workers: int = Field(
        0, ge=0, description="Ghostscript compressions at once across the run's documents "
        "(0: a quarter of the cores, at least two). Each is a process on a core of its own: "
        "at a GPU run's start, fourteen of them at once took the cores a vLLM server on the "
        "same host needed to take in its first requests")
    worker_memory_mb: int = Field(
        4096, ge=64, description="address-space cap of a page worker (RLIMIT_AS): a page whose "
        "content inflates past it ends page-too-large or page-crashed, not retried")
    page_cpu_s: float = Field(
        120.0, gt=0, description="CPU seconds one page may take to open, read and render in "
        "its page worker (RLIMIT_CPU): a page with hundreds of millions of path segments "
        "ends resource-limit, not retried")
    worker_nice: int = Field(
        0, ge=0, le=19, description="above 0: the page workers (render, text layer, layout) "
        "run at this nice value in a scheduler session of their own, yielding the CPU to a "
        "vLLM server on the same host when cores are short. Off by default: on one H200 "
        "with 16 cores 10 and 0 measured alike, and on a crowded host the workers then also "
        "yield to folio's own embedding and to anything else, and the GPU waits for pages")
    max_bytes: int = Field(2 * 1024**3, description="larger inputs are rejected")
    max_image_pixels: int = Field(
        180_000_000, gt=0, description="an image file (or one page of a TIFF) with more "
        "pixels is refused before it is decoded (a decompression bomb, or an absurd size); "
        "Pillow's own guard is set to the same figure. 180 million is an A2 page at 600 dpi "
        "and takes about 540 MB decoded, within worker_memory_mb")
    max_pages: int = Field(20000)
    page_concurrency: int = Field(
        2, ge=1, description="pages in a CPU engine at once, across all documents (GPU "
        "engines use ocr.in_flight)")
    document_concurrency: int = Field(
        2, ge=1, description="documents being fetched, probed and compressed at once")
    render_workers: int = Field(
        2, ge=1, description="page-worker children rendering at once, across all documents "
        "(long documents are split into batches taken in turn with the others)")
    render_burst_workers: int = Field(
        0, ge=0, description="page-worker children at once while the engine is short of "
        "pages (none waiting, fewer in flight than its budget); 0: render_workers. A served "
        "engine's CPU is otherwise idle then, at the start of a run above all")
    pages_per_worker: int = Field(16, ge=1, description="pages in one page-worker batch")
    ocr_extra_pages: int | None = Field(
        None, ge=0, description="pages in a GPU engine's ladder beyond its in-flight budget, "
        "being encoded or parsed outside a request slot (None: a quarter of the budget, at "
        "least two; 0: one page per slot)")
    prepared_image_mb: int = Field(
        512, ge=1, description="rendered page images waiting for OCR, in MiB; rendering "
        "pauses above it")


class OfficeSettings(BaseModel):
    """Office documents: DOCX, XLSX and PPTX are read from their own structure
    (folio.formats.office_read); DOC, RTF, ODT, XLS, ODS, PPT and ODP are first converted to
    the matching OOXML format by LibreOffice headless (folio.formats.office), each in a
    process group of its own with these limits. Only ``speaker_notes`` changes outputs
    (it enters the config hash when turned off); the rest is operational."""

    enabled: bool = Field(
        True, description="read Office documents; off: they are skipped with a reason, "
        "and LibreOffice need not be installed")
    speaker_notes: bool = Field(
        True, description="keep a slide's speaker notes (labelled, after the slide's "
        "content, location 'slide N notes')")
    max_rows: int = Field(
        100_000, ge=1, description="rows of one sheet read; the rows past it are not "
        "read, and the sheet's page says so in its notes and its markdown")
    max_cells: int = Field(
        2_000_000, ge=1, description="cells of one workbook read (all sheets); as "
        "max_rows, for the sheets past it")
    max_unpacked_mb: int = Field(
        1024, ge=1, description="what an OOXML package may unpack to in all; a larger one "
        "is refused (too-large) before any part is parsed")
    max_part_mb: int = Field(
        256, ge=1, description="one XML part parsed whole (a document's body, a slide, a "
        "workbook's shared strings; not a sheet, which is streamed); a larger one is "
        "refused (too-large)")
    max_ratio: int = Field(
        200, ge=10, description="unpacked over packed size of one package member of 16 MB "
        "or more; past it the file is refused as a zip bomb")
    timeout_s: float = Field(
        300.0, gt=0, description="one conversion's wall-clock limit; LibreOffice and "
        "everything it started are killed past it and the document is retried on a later "
        "run (small documents convert in 2-4 s, bench/results/office_convert.json)")
    memory_mb: int = Field(
        2048, ge=512, description="address-space cap of one conversion (prlimit --as): "
        "LibreOffice starts and converts small documents under 512 MB; a document that "
        "needs more than the cap fails with a reason instead of exhausting the host")
