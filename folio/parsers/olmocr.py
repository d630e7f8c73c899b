"""olmOCR 2's output: YAML front matter, then markdown (tables as HTML).

The front matter is read as olmOCR reads it (olmocr/train/front_matter.py
``FrontMatterParser`` with ``PageResponse``, olmocr 0.4.27): the answer must start with
``---\\n``; the front matter ends at the next ``\\n---``; it is YAML (``yaml.safe_load``:
plain data only, no tags that build objects); all five keys must be there and no other;
``rotation_correction`` is 0, 90, 180 or 270. An answer that fails any of that is not a
valid answer, and olmOCR asks again (so does folio: :func:`read_answer` raises). The
body is the rest, stripped; an empty body is a valid answer for a page without text.

Example:
    >>> r = read_answer("---\\nprimary_language: en\\nis_rotation_valid: True\\n"
    ...                 "rotation_correction: 0\\nis_table: False\\nis_diagram: False\\n---\\nHello")
    >>> r.is_rotation_valid, r.natural_text
    (True, 'Hello')
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import yaml

from folio.models import Block
from folio.parsers import markdown

FRONT_MATTER_KEYS = (
    "primary_language", "is_rotation_valid", "rotation_correction", "is_table", "is_diagram",
)
_ROTATIONS = frozenset({0, 90, 180, 270})


class AnswerError(ValueError):
    """The answer is not a valid olmOCR answer (olmOCR asks the model again)."""


@dataclass(frozen=True)
class PageResponse:
    """olmOCR's ``PageResponse``: the front matter's five values and the page's text."""

    primary_language: str | None
    is_rotation_valid: bool
    rotation_correction: int
    is_table: bool
    is_diagram: bool
    natural_text: str | None


def split_front_matter(text: str) -> tuple[dict[str, Any], str]:
    """(front matter, body) as olmOCR splits them; ({}, stripped text) without one."""
    if text.startswith("---\n"):
        end = text.find("\n---", 4)
        if end != -1:
            try:
                loaded = yaml.safe_load(text[4:end]) or {}
            except yaml.YAMLError:
                return {}, text.strip()
            body = text[end + 4:].strip()
            return (loaded if isinstance(loaded, dict) else {"": loaded}), body
    return {}, text.strip()


def read_answer(text: str) -> PageResponse:
    """The answer as olmOCR's pipeline reads it; :class:`AnswerError` when olmOCR would
    not accept it (missing, extra or mistyped front matter)."""
    meta, body = split_front_matter(text)
    values: dict[str, Any] = {}
    for key in FRONT_MATTER_KEYS:
        if key not in meta:
            raise AnswerError(f"front matter: missing {key!r}")
        values[key] = meta[key]
    extra = set(meta) - set(FRONT_MATTER_KEYS)
    if extra:
        raise AnswerError(f"front matter: unexpected {sorted(map(str, extra))}")
    language = values["primary_language"]
    # PyYAML reads "no" as False: olmOCR then takes the language as unknown
    if isinstance(language, bool) or not language:
        language = None
    elif not isinstance(language, str):
        raise AnswerError("front matter: primary_language is not text")
    flags = {k: _bool(k, values[k]) for k in ("is_rotation_valid", "is_table", "is_diagram")}
    rotation = values["rotation_correction"]
    if isinstance(rotation, str):
        try:
            rotation = int(rotation)
        except ValueError:
            raise AnswerError(f"front matter: rotation_correction {rotation!r}") from None
    if isinstance(rotation, bool) or not isinstance(rotation, int) or rotation not in _ROTATIONS:
        raise AnswerError(f"front matter: rotation_correction {rotation!r} is not 0/90/180/270")
    return PageResponse(primary_language=language, rotation_correction=rotation,
                        natural_text=body or None, **flags)


def _bool(key: str, value: Any) -> bool:
    if isinstance(value, str):
        return value.lower() == "true"
    if not isinstance(value, bool):
        raise AnswerError(f"front matter: {key} {value!r} is not true or false")
    return value


def parse(
    text: str,
    *,
    width_pt: float,
    height_pt: float,
    image_px: tuple[int, int] | None = None,
) -> tuple[list[Block], str]:
    """Blocks and markdown of the body; the front matter is read and dropped. A text that
    olmOCR would refuse is parsed whole (the engine asks again before it gets here)."""
    _, body = split_front_matter(text)
    return markdown.parse(body, width_pt=width_pt, height_pt=height_pt, image_px=image_px)

