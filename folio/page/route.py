"""Routing: which pages may skip OCR because their own text layer is trustworthy.

"No text layer means OCR" is wrong both ways: junk layers (fonts without Unicode maps,
bad earlier OCR) must be OCR'd, and good born-digital layers need no model at all.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel

from folio.models import PagePrep
from folio.settings.config import RouteSettings


class Route(BaseModel):
    kind: Literal["text-layer", "ocr", "none"]
    reason: str


def route_page(page: PagePrep, settings: RouteSettings) -> Route:
    """Decide the route of one prepared page (pure)."""
    layer = page.text_layer
    if page.blank:
        return Route(kind="none", reason="blank page: nothing to extract")
    if settings.mode == "text-layer":
        return Route(kind="text-layer", reason="route mode text-layer")
    if settings.mode == "ocr":
        return Route(kind="ocr", reason="route mode ocr")
    if layer is not None and layer.trusted:
        return Route(kind="text-layer", reason=f"trusted text layer ({layer.score:.2f}): {layer.why}")
    if layer is None or layer.chars == 0:
        return Route(kind="ocr", reason="no text layer")
    return Route(kind="ocr", reason=f"untrusted text layer ({layer.score:.2f}): {layer.why}")
