"""olmOCR 2's output: YAML front matter, then markdown (tables as HTML).

The front matter has five keys (primary_language, is_rotation_valid,
rotation_correction, is_table, is_diagram). It is read with ``key: value`` splitting,
not a YAML parser: the model writes five scalars, and a full YAML parser would accept
anchors, aliases and tags from text a model emitted. A missing or unterminated front
matter (a generation cut short) leaves the whole text as the body.

Example:
    >>> meta, body = parse_front_matter("---\\nprimary_language: en\\nis_rotation_valid: True\\n"
    ...                                 "rotation_correction: 0\\nis_table: False\\n"
    ...                                 "is_diagram: False\\n---\\nHello")
    >>> meta["is_rotation_valid"], body
    (True, 'Hello')
"""

from __future__ import annotations

from folio.models import Block
from folio.parsers import markdown

FRONT_MATTER_KEYS = (
    "primary_language", "is_rotation_valid", "rotation_correction", "is_table", "is_diagram",
)
Scalar = str | int | float | bool | None


def parse_front_matter(text: str) -> tuple[dict[str, Scalar], str]:
    """(front matter as scalars, body). No front matter -> ({}, text)."""
    stripped = text.lstrip()
    if not stripped.startswith("---"):
        return {}, text
    lines = stripped.split("\n")
    if lines[0].strip() != "---":
        return {}, text
    for end in range(1, len(lines)):
        if lines[end].strip() == "---":
            break
    else:
        return {}, text  # unterminated: treat everything as body
    meta: dict[str, Scalar] = {}
    for line in lines[1:end]:
        key, sep, value = line.partition(":")
        if sep:
            meta[key.strip()] = _scalar(value.strip())
    return meta, "\n".join(lines[end + 1 :]).strip("\n")


def _scalar(value: str) -> Scalar:
    value = value.strip().strip("'\"") if value[:1] in "'\"" else value.strip()
    low = value.lower()
    if low in ("true", "yes"):
        return True
    if low in ("false", "no"):
        return False
    if low in ("null", "none", "~", ""):
        return None
    try:
        return int(value)
    except ValueError:
        pass
    try:
        return float(value)
    except ValueError:
        return value


def parse(
    text: str,
    *,
    width_pt: float,
    height_pt: float,
    image_px: tuple[int, int] | None = None,
) -> tuple[list[Block], str]:
    """Blocks and markdown of the body; the front matter is read and dropped."""
    _, body = parse_front_matter(text)
    return markdown.parse(body, width_pt=width_pt, height_pt=height_pt, image_px=image_px)
