"""Blocks -> page markdown, shared by the engines that produce blocks, not markdown."""

from __future__ import annotations

from folio.figures.links import picture_markdown
from folio.models import Block, Label

#: engines whose page markdown is made from their blocks (a VLM's own markdown is kept):
#: relabelling their blocks (layout regions, running heads) rebuilds their markdown
BLOCK_MARKDOWN_ENGINES = frozenset({"text-layer", "tesseract", "rapidocr"})

_PREFIX = {Label.TITLE.value: "# ", Label.SECTION_HEADER.value: "## "}


def blocks_to_markdown(blocks: list[Block]) -> str:
    """Blocks in reading order, separated by blank lines; titles and headers get ``#``
    marks: as many as their level where it is known, else ``#`` a title, ``##`` a header.

    Content that already starts with ``#`` is left alone, so blocks that carry their own
    markdown are not prefixed twice.
    """
    parts: list[str] = []
    for block in sorted(blocks, key=lambda b: b.order):
        # a figure shows as its image: the words inside it are its block's and chunk's
        content = (picture_markdown(block) if block.label == Label.PICTURE.value
                   else block.content.strip())
        if not content:
            continue
        prefix = _PREFIX.get(block.label, "")
        if prefix and block.level is not None:  # its level in the document (folio.hierarchy)
            prefix = "#" * block.level + " "
        if prefix and not content.startswith("#"):
            content = prefix + content
        parts.append(content)
    return "\n\n".join(parts)
