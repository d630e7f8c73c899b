"""Vector stores behind one interface, chosen by ``store.kind``.

Example:
    >>> store = open_store(StoreSettings(), default_uri=default_vector_uri("out"),
    ...                    s3=S3Settings(), dim=384)  # doctest: +SKIP
"""

from __future__ import annotations

import os
from pathlib import Path

from folio.errors import ConfigError

# where a pgvector DSN comes from when ``store.uri`` is unset: an environment variable keeps
# the password out of flow parameters and settings files (one name, with the redaction)
from folio.security.redaction import PG_DSN_ENV
from folio.settings.config import S3Settings, StoreSettings
from folio.stores.base import NullStore, VectorStore

__all__ = ["PG_DSN_ENV", "NullStore", "VectorStore", "default_vector_uri", "open_store"]

VECTOR_DIR = ".folio/vectors"


def default_vector_uri(dest: str) -> str:
    """Vectors next to the outputs: ``{dest}/.folio/vectors`` (folder or s3:// URI)."""
    if "://" in dest and not dest.startswith("file://"):
        return f"{dest.rstrip('/')}/{VECTOR_DIR}"
    local = dest.removeprefix("file://")
    return str(Path(local).expanduser().absolute() / VECTOR_DIR)


def open_store(
    settings: StoreSettings, *, default_uri: str, s3: S3Settings, dim: int,
    embedder: str | None = None,
) -> VectorStore:
    """The configured store; ``settings.uri`` wins over ``default_uri``; the rows it
    writes name ``embedder``, the model that made their vectors (Embedder.model_id).

    Raises:
        ConfigError: an unknown kind, a URI the kind cannot use, or pgvector without a
            DSN (``store.uri`` or ``FOLIO_PG_DSN``) or without psycopg installed.
    """
    if settings.kind == "none":
        return NullStore()
    if settings.kind == "lancedb":
        from folio.stores.lance_s3 import lance_storage_options
        from folio.stores.lance_tuning import LanceTuning
        from folio.stores.lancedb_store import LanceDBStore

        uri = settings.uri or default_uri
        scheme, sep, _ = uri.partition("://")
        if sep and scheme.lower() not in ("s3", "file"):
            raise ConfigError(f"store.uri {uri!r}: LanceDB takes a folder or s3:// URI here")
        options = lance_storage_options(s3) if scheme.lower() == "s3" and sep else None
        return LanceDBStore(
            uri,
            dim=dim,
            table=settings.table,
            storage_options=options,
            tuning=LanceTuning.from_settings(settings),
            embedder=embedder,
        )
    if settings.kind == "pgvector":
        dsn = settings.uri or os.environ.get(PG_DSN_ENV)
        if not dsn:
            raise ConfigError(
                f"store.kind 'pgvector' needs a PostgreSQL DSN: set store.uri "
                f"(FOLIO_STORE__URI) or {PG_DSN_ENV}, e.g. postgresql://user@host:5432/db"
            )
        try:  # psycopg is an extra: CPU-only installs without it must still import folio
            from folio.stores.pgvector_store import PgVectorStore
        except ImportError as exc:
            if exc.name and not exc.name.startswith("psycopg"):
                raise
            raise ConfigError(
                "store.kind 'pgvector' needs psycopg: pip install 'folio[server]'"
            ) from None
        return PgVectorStore(
            dsn,
            dim=dim,
            table=settings.table,
            ef_search=settings.hnsw_ef_search,
            maintain_every_writes=settings.maintain_every_writes,
            maintain_every_rows=settings.maintain_every_rows,
            maintain_retry_s=settings.maintain_retry_s,
            embedder=embedder,
        )
    raise ConfigError(f"unknown store.kind {settings.kind!r}")
