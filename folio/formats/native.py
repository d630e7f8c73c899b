"""Whether a page was read from an Office file's own structure. Kept apart (no imports)
so the stages that treat such pages differently can ask without loading the readers.

Native text is exact and its labels and heading levels come from the file's own styles:
such a page goes through no OCR, no running-head detection (a sheet's repeated row is
data, not a running head) and no heading levelling (folio.hierarchy would guess levels
the styles already give).
"""

from __future__ import annotations

from typing import Protocol

__all__ = ["NATIVE_ENGINE", "is_native_page"]

#: the engine name of a page read from an Office file's own structure
NATIVE_ENGINE = "office"


class _Page(Protocol):
    engine: str


def is_native_page(page: _Page) -> bool:
    """Whether ``page`` (a :class:`folio.models.PageResult`) was read natively."""
    return page.engine == NATIVE_ENGINE
