"""The LanceDB store's knobs: its maintenance schedule and ANN search settings.

Why: :class:`~folio.stores.lancedb_store.LanceDBStore` takes them as one frozen value,
built from :class:`~folio.settings.config.StoreSettings` or by a test or benchmark directly;
they are plain data, kept apart from the store that reads them.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from folio.settings.config import StoreSettings

__all__ = ["LanceTuning"]


@dataclass(frozen=True)
class LanceTuning:
    """Maintenance schedule and ANN search knobs (see :class:`~folio.settings.config.StoreSettings`)."""

    maintain_every_writes: int = 20
    maintain_retry_s: float = 30.0
    keep_versions: timedelta = timedelta(minutes=10)
    ann_index_min_rows: int = 10_000
    ann_rows_per_partition: int = 4096
    ann_nprobes: int = 20
    ann_refine_factor: int = 0
    search_staleness_s: float = 1.0
    prewarm_index: bool = True

    @classmethod
    def from_settings(cls, settings: StoreSettings) -> LanceTuning:
        return cls(
            maintain_every_writes=settings.maintain_every_writes,
            maintain_retry_s=settings.maintain_retry_s,
            keep_versions=timedelta(seconds=settings.keep_versions_s),
            ann_index_min_rows=settings.ann_index_min_rows,
            ann_rows_per_partition=settings.ann_rows_per_partition,
            ann_nprobes=settings.ann_nprobes,
            ann_refine_factor=settings.ann_refine_factor,
            search_staleness_s=settings.search_staleness_s,
            prewarm_index=settings.prewarm_index,
        )
