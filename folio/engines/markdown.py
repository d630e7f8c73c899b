"""Blocks -> page markdown, shared by the engines that produce blocks, not markdown."""

from __future__ import annotations

import re

from folio.figures.links import picture_markdown
from folio.models import Block, Label

#: engines whose page markdown is made from their blocks (a VLM's own markdown is kept):
#: relabelling their blocks (layout regions, running heads) rebuilds their markdown
BLOCK_MARKDOWN_ENGINES = frozenset({"text-layer", "tesseract", "rapidocr"})

_PREFIX = {Label.TITLE.value: "# ", Label.SECTION_HEADER.value: "## "}
#: a marker CommonMark reads as an ordered list's (``1.``, ``12)``)
_ORDERED = re.compile(r"^\d{1,9}[.)]$")
_FENCE_RUN = re.compile(r"`{3,}")


def list_item_markdown(block: Block) -> str:
    """One list item as a markdown line: indented two spaces a level below the first
    (four under an ordered parent would do too; two keeps a bullet list's nesting where
    every renderer reads it), its marker as written where markdown has it (``-``,
    ``1.``, ``2)``), else a bullet followed by the author's marker (``- a. text``), so
    the author's numbering is kept in the text. Continuation lines are indented under
    the item's text."""
    depth = max((block.level or 1) - 1, 0)
    indent = "  " * depth
    marker = (block.marker or "-").strip()
    head = marker if marker == "-" or _ORDERED.match(marker) else f"- {marker}"
    lines = block.content.strip().splitlines() or [""]
    pad = " " * (len(indent) + len(head) + 1)
    rest = [pad + line.strip() if line.strip() else "" for line in lines[1:]]
    return "\n".join([f"{indent}{head} {lines[0].strip()}".rstrip(), *rest])


def code_markdown(block: Block) -> str:
    """A code block as a fenced block, its line breaks and indentation kept; the fence is
    longer than any run of backticks inside it. Content that is already fenced is kept."""
    code = block.content.strip("\n")
    if code.lstrip().startswith("```") and code.rstrip().endswith("```"):
        return code.strip()
    longest = max((len(m) for m in _FENCE_RUN.findall(code)), default=2)
    fence = "`" * max(3, longest + 1)
    return f"{fence}\n{code.rstrip()}\n{fence}"


def _is_structured_item(block: Block) -> bool:
    return block.label == Label.LIST_ITEM.value and block.marker is not None


def blocks_to_markdown(blocks: list[Block]) -> str:
    """Blocks in reading order, separated by blank lines; titles and headers get ``#``
    marks: as many as their level where it is known, else ``#`` a title, ``##`` a header.
    List items with a marker become markdown list lines, consecutive ones one list (no
    blank line between them); code blocks become fenced blocks.

    Content that already starts with ``#`` is left alone, so blocks that carry their own
    markdown are not prefixed twice.
    """
    parts: list[str] = []
    previous_item = False
    for block in sorted(blocks, key=lambda b: b.order):
        if _is_structured_item(block):
            line = list_item_markdown(block)
            if previous_item and parts:
                parts[-1] += "\n" + line
            else:
                parts.append(line)
            previous_item = True
            continue
        previous_item = False
        if block.label == Label.CODE.value:
            if block.content.strip():
                parts.append(code_markdown(block))
            continue
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
