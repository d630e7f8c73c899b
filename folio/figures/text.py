"""What a figure says in words: the text its chunk embeds. Pure."""

from __future__ import annotations

from folio.models import Block

__all__ = ["picture_text"]


def picture_text(block: Block) -> str:
    """A Picture's caption, the model's description and the words printed inside it,
    each once, a blank line apart: what a question about the figure will match."""
    parts: list[str] = []
    for part in (block.caption, block.alt, block.content):
        text = (part or "").strip()
        if text and text not in parts:
            parts.append(text)
    return "\n\n".join(parts)
