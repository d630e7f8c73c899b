"""What the reference harness (tests/reference_pipelines.py) hands the conformance tests:
one page's request as a model's own code sends it, one of Chandra's layout blocks,
olmOCR's reading of an answer, and the error for a reference that is not installed.

Why a file of its own: tests/reference_pipelines.py passed 500 lines (issue 46); these
are plain records, without the code that runs the references to fill them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = ["FrontMatter", "Order", "ReferenceBlock", "ReferenceMissingError",
           "ReferenceRequest"]

Order = tuple[Literal["text", "image"], Literal["text", "image"]]


class ReferenceMissingError(RuntimeError):
    """A reference package is not installed (run ``scripts/setup.sh --test``)."""


@dataclass(frozen=True)
class ReferenceRequest:
    """One page's request as the reference sends it."""

    prompt: str
    #: content parts of the user message, in order
    order: Order
    #: (width, height) of the image sent
    image_size: tuple[int, int]
    #: PIL's name for the image's format ("PNG")
    image_format: str
    max_tokens: int
    #: (temperature, top_p) of each attempt in turn, first try first; top_p None: the
    #: request leaves it out (the server's default applies)
    sampling: list[tuple[float, float | None]]
    #: the image bytes as sent
    image: bytes = field(repr=False, compare=False)
    #: every other key of the request body (model name excluded), attempt 0
    extra: dict[str, Any] = field(default_factory=dict, compare=False)
    #: (width, height) of the page render, before the request's own resizing (Chandra's
    #: scale_to_fit; olmOCR sends its render as it is)
    rendered_size: tuple[int, int] | None = field(default=None, compare=False)


@dataclass(frozen=True)
class ReferenceBlock:
    """One of Chandra's ``parse_layout`` blocks: label, box in image pixels, inner HTML."""

    label: str
    bbox: tuple[int, int, int, int]
    content: str


@dataclass(frozen=True)
class FrontMatter:
    """olmOCR's reading of an answer: the PageResponse fields, or why it was rejected.

    ``fields`` holds primary_language, is_rotation_valid, rotation_correction, is_table,
    is_diagram and natural_text (the body, None when empty); ``error`` is the message of
    the exception that makes olmOCR's pipeline discard the attempt."""

    fields: dict[str, Any] | None
    error: str | None = None
