"""Retrieval from Python: open an index once, query it in-process.

Why: a RAG job that spawned ``folio search`` per question paid a process start, the
embedding model's load and the store's open on every question (2-3 s); an :class:`Index`
pays them once, then a query costs one embedding and one store lookup. ``folio search``
is this module's client (one code path), so the records here are those of
``folio search --json``.

Example::

    import folio

    index = folio.open_index(out="folio-out")  # LanceDB under --out
    for hit in index.search("What was the revenue?", k=5):
        print(hit.score, hit.source, hit.page_start, hit.text[:80])

    pg = folio.open_index(store="pgvector", store_uri="postgresql://me@127.0.0.1/rag")
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from folio.stores.search_filter import SearchFilter

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from folio.output.embeddings import Embedder
    from folio.settings.config import EmbeddingSettings
    from folio.stores.base import VectorStore

__all__ = ["Box", "Hit", "Index", "SearchFilter", "open_index"]


class Box(BaseModel):
    """Where a hit's text lies: ``page`` from 1, the box in PDF points (top-left origin)."""

    page: int
    x0: float
    y0: float
    x1: float
    y1: float


class Hit(BaseModel):
    """One chunk a search found, with what a RAG answer cites; ``model_dump()`` is the
    record ``folio search --json`` prints (README, "The vector table")."""

    id: str
    doc_id: str
    source: str
    chunk_index: int
    kind: str
    page_start: int
    page_end: int
    headings: list[str]
    boxes: list[Box]
    score: float
    text: str
    #: a figure chunk's crop (local path or s3:// URI); None for text and tables
    image_uri: str | None = None
    #: where the chunk lies in a source without pages: a sheet's range
    #: (``Shipments!A1:G51``), ``slide 3``, ``slide 3 notes``; None for PDFs and images
    location: str | None = None

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> Hit:
        """A store's row (numpy and Arrow values) as plain Python values."""
        return cls(
            id=str(row["id"]), doc_id=str(row["doc_id"]), source=str(row["source"]),
            chunk_index=int(row["chunk_index"]), kind=str(row["kind"]),
            page_start=int(row["page_start"]), page_end=int(row["page_end"]),
            headings=[str(h) for h in (row.get("headings") or [])],
            boxes=[Box(page=int(b["page"]), x0=float(b["x0"]), y0=float(b["y0"]),
                       x1=float(b["x1"]), y1=float(b["y1"])) for b in (row.get("boxes") or [])],
            score=round(float(row["score"]), 6), text=str(row["text"]),
            image_uri=str(row["image_uri"]) if row.get("image_uri") else None,
            location=str(row["location"]) if row.get("location") else None,
        )

    @property
    def pages(self) -> str:
        """``p3`` or ``p3-4``, as ``folio search`` shows it."""
        return f"p{self.page_start}" + (f"-{self.page_end}" if self.page_end != self.page_start
                                        else "")


def _strings(value: str | Iterable[str] | None) -> tuple[str, ...]:
    if value is None:
        return ()
    return (value,) if isinstance(value, str) else tuple(value)


class Index:
    """An opened index: its store and the embedder that made its vectors. Thread-safe
    for searches; :meth:`close` (or ``with``) releases the store's connections."""

    def __init__(self, store: VectorStore, embedder: Embedder) -> None:
        self.store = store
        self.embedder = embedder

    @property
    def name(self) -> str:
        """Kind and location, e.g. ``lancedb:/out/_vectors``."""
        return self.store.name

    def count(self) -> int:
        """The chunks the index holds."""
        return self.store.count()

    def search(
        self,
        query: str,
        k: int = 5,
        *,
        doc_id: str | Iterable[str] | None = None,
        source: str | Iterable[str] | None = None,
        source_prefix: str | None = None,
        kind: str | Iterable[str] | None = None,
    ) -> list[Hit]:
        """The ``k`` chunks nearest ``query``, best first, among those the filters admit
        (each given filter must hold; a list matches any of its values).

        Raises:
            StorageError: the store could not be reached (transient: retry).
        """
        where = SearchFilter(doc_ids=_strings(doc_id), sources=_strings(source),
                             source_prefix=source_prefix or None, kinds=_strings(kind))
        if k < 1:
            return []
        vector = self.embedder.embed([query])[0]
        return [Hit.from_row(row) for row in self.store.search(vector, k=k, where=where)]

    def close(self) -> None:
        close = getattr(self.store, "close", None)
        if close is not None:
            close()

    def __enter__(self) -> Index:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_index(
    out: str | Path | None = None,
    *,
    store: str | None = None,
    store_uri: str | None = None,
    table: str | None = None,
    s3_endpoint_url: str | None = None,
    s3_region: str | None = None,
    settings: Mapping[str, Any] | None = None,
) -> Index:
    """Open the index an ingest wrote, with the options ``folio ingest`` took: ``out``
    (LanceDB under ``OUT/_vectors``), or ``store`` (``lancedb``/``pgvector``) and
    ``store_uri`` (a LanceDB folder or s3:// URI; a PostgreSQL DSN, else
    ``FOLIO_PG_DSN``). Settings not given come from ``FOLIO_*`` as for ingest. Queries
    are embedded with the model the index's rows name (:func:`index_embedder`).

    Raises:
        ConfigError: bad settings, neither ``out`` nor a store URI, or an index built
            with a model these settings do not load (or of another dimension).
        NothingToDoError: no index at that place, or one with no chunks.
        StorageError: the store could not be reached (transient: retry).
    """
    from folio.errors import ConfigError, NothingToDoError
    from folio.io.layout import VECTORS
    from folio.io.sinks import open_sink
    from folio.output.embeddings import Embedder
    from folio.settings.run_config import resolve_config
    from folio.stores import open_store

    options = {"store.kind": store, "store.uri": store_uri, "store.table": table,
               "s3.endpoint_url": s3_endpoint_url, "s3.region": s3_region, **(settings or {})}
    # the same settings (and the same one-line errors) as ingest: FOLIO_* and the options
    config = resolve_config(engine="tesseract", route="auto",
                            settings={k: v for k, v in options.items() if v is not None})
    wanted = config.store
    if wanted.kind == "none":
        raise ConfigError("store.kind 'none' keeps no vectors to search: give the store the "
                          "ingest wrote (--store lancedb|pgvector)")
    default_uri = open_sink(str(out), config.s3).uri(VECTORS) if out is not None else ""
    where = wanted.uri or default_uri
    if wanted.kind == "lancedb":
        if not where:
            raise ConfigError("no index named: give the ingest's --out (out=) or its "
                              "--store-uri (store_uri=)")
        if "://" not in where and not Path(where).is_dir():
            raise NothingToDoError(f"no vectors under {where}: ingest into --out {out} first, "
                                   "or give --store-uri")  # and create no folder on the way
        # its import (~1 s) beside the embedding model's load
        from folio.stores.lance_import import import_lancedb

        threading.Thread(target=import_lancedb, name="folio-import-lancedb", daemon=True).start()
    embedder = Embedder(config.embedding)
    opened = open_store(wanted, default_uri=default_uri, s3=config.s3, dim=embedder.dim)
    if opened.count() == 0:
        raise NothingToDoError(f"no vectors in {opened.name}: ingest into it first")
    try:
        embedder = index_embedder(opened.recorded_embedder(), embedder, config.embedding)
    except ConfigError:
        Index(opened, embedder).close()
        raise
    return Index(opened, embedder)


def index_embedder(recorded: str | None, configured: Embedder,
                   settings: EmbeddingSettings) -> Embedder:
    """The embedder to query an index with: the one its rows name. The packaged model
    when they name it (whatever ``embedding.model_path`` says: the index decides); the
    configured one when they name it too, or name none (rows written before folio
    recorded it); else a ConfigError that names the index's model and the settings that
    load it, never queries embedded in another model's space."""
    from folio.errors import ConfigError
    from folio.output.embeddings import PACKAGED_MODEL_ID, Embedder

    if recorded is None or recorded == configured.model_id:
        return configured
    if recorded == PACKAGED_MODEL_ID:
        packaged = Embedder(settings.model_copy(update={"model_path": None,
                                                        "tokenizer_path": None}))
        log.info("the index was built with the packaged embedding model: querying with it "
                 "(embedding.model_path %s is not the index's)", settings.model_path)
        return packaged
    raise ConfigError(
        f"the index was built with embedding model {recorded!r}, this process would embed "
        f"queries with {configured.model_id!r}: set FOLIO_EMBEDDING__MODEL_PATH (and "
        "FOLIO_EMBEDDING__TOKENIZER_PATH) to that model's files")
