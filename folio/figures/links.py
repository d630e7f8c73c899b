"""Figure crops' names and the page markdown's links to them. Pure.

Why: a Picture block carries a pending image name from the moment it is found (the name
the page's markdown links to: Chandra's ``<md5>_<n>_img.webp``, olmOCR's
``page_x_y_w_h.png``, folio's own ``folio-figure-N`` for the CPU path) until its crop is
written; then :func:`resolve_page` puts the crop's path, relative to document.md
(``figures/p0003-1.png``), in both. A picture whose crop was not written (``figures.mode
= none``, a failed render) loses its link, so no link in document.md ever dangles:
Chandra's own image names, which no file ever answered, go the same way.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from folio.models import Block, Label, PageResult

__all__ = ["FIGURES_DIR", "crop_name", "is_written", "link_text", "literal", "picture_markdown",
           "resolve_page"]

#: the crops' folder, beside document.md
FIGURES_DIR = "figures"
_LINK = r"!\[[^\n]*?\]\({src}(?:\s+\"[^\"]*\")?\)"
#: Chandra's image names (chandra/output.py): never written by anyone
_CHANDRA_NAME = re.compile(r"[0-9a-f]{32}_\d+_img\.webp")


def literal(text: str) -> Callable[[re.Match[str]], str]:
    """A ``re.sub`` replacement that inserts ``text`` as it is (no backslash escapes)."""
    return lambda _match: text


def _insert(markdown: str, link: str, content: str) -> str:
    """``link`` on a line of its own before the first line of ``content`` in
    ``markdown`` (where the figure's words are), else at the end."""
    first = next((line.strip() for line in content.splitlines() if line.strip()), "")
    at = markdown.find(first) if first else -1
    if at < 0:
        return f"{markdown.rstrip()}\n\n{link}".strip()
    start = markdown.rfind("\n", 0, at) + 1
    return f"{markdown[:start]}{link}\n\n{markdown[start:]}"


def crop_name(page_index: int, number: int, ext: str) -> str:
    """The crop's path relative to the document's folder: page from 1, figure from 1."""
    return f"{FIGURES_DIR}/p{page_index + 1:04d}-{number}.{ext}"


def link_text(block: Block) -> str:
    """The caption or alt text as a markdown link's text, on one line, brackets escaped."""
    text = " ".join((block.caption or block.alt or "").split())
    return re.sub(r"([\[\]\\])", r"\\\1", text)


def picture_markdown(block: Block) -> str:
    """A Picture's markdown: ``![caption or alt](image)``; empty without an image."""
    if not block.image:
        return ""
    return f"![{link_text(block)}]({block.image})"


def is_written(image: str | None) -> bool:
    """Whether ``image`` names a written crop (not a pending name)."""
    return bool(image) and str(image).startswith(FIGURES_DIR + "/")


def resolve_page(page: PageResult, written: dict[str, str]) -> PageResult:
    """``page`` with each Picture's pending image replaced by its crop's path from
    ``written`` (pending name -> ``figures/...``), in its block and in the markdown
    (the link's text made the caption or the alt text); pictures without a crop lose
    the image and their link, and so does any other link to a Chandra image name."""
    pending = any(b.label == Label.PICTURE.value and b.image and not is_written(b.image)
                  for b in page.blocks)
    if not pending and not _CHANDRA_NAME.search(page.markdown):
        return page
    markdown = page.markdown
    blocks: list[Block] = []
    for block in page.blocks:
        if block.label != Label.PICTURE.value or not block.image or is_written(block.image):
            blocks.append(block)
            continue
        final = written.get(block.image)
        updated = block.model_copy(update={"image": final})
        pattern = re.compile(_LINK.format(src=re.escape(block.image)))
        replacement = picture_markdown(updated) if final else (block.alt or "")
        markdown, n = pattern.subn(literal(replacement), markdown, count=1)
        if not n and final:  # the model's markdown had no link for it: add one
            markdown = _insert(markdown, replacement, block.content)
        blocks.append(updated)
    markdown = re.compile(_LINK.format(src=_CHANDRA_NAME.pattern)).sub("", markdown)
    markdown = re.sub(r"\n{3,}", "\n\n", markdown).strip()
    return page.model_copy(update={"blocks": blocks, "markdown": markdown})
