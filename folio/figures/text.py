"""What a figure says in words: the text its chunk embeds. Pure.

A figure chunk is found by its words: its caption, the model's description, the words
printed inside it, and the sentences of the document's text that refer to it by its
number (``Figure 3 shows ...``, ``see Fig. 3``), which say what the figure is about where
its caption only names it. A figure whose only words are a generic caption (``Figure 1:
This is an example image.``: no word beyond the figure's name and words like *image*,
*example*, *shown*) and that no sentence refers to says nothing a question could match:
its short text embeds close to any short query and outranked the text that answers it.
Such a figure (:func:`says_nothing`) is embedded with the text around it on its page
(:func:`figure_context`: the paragraph before it and the one after, cut at sentences), so
it ranks with that text, never above it, and keeps its chunk and ``image_uri``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from folio.models import Block, Label

__all__ = ["figure_context", "figure_number", "picture_text", "referring_sentences",
           "says_nothing"]

#: a caption's figure name and number: ``Figure 3``, ``Fig. 3b``, ``FIGURE 2-1``
_NUMBER = re.compile(r"^\s*(?:fig(?:ure)?|abb(?:ildung)?|chart|graph|plate|image|photo)"
                     r"\.?\s*(\d+(?:[.-]\d+)*[a-z]?)\b", re.IGNORECASE)
_SENTENCES = re.compile(r"(?<=[.!?])\s+(?=[A-Z(\"'])")
#: words a caption may hold and still say nothing of what the figure shows
GENERIC_WORDS = frozenset({
    "a", "an", "the", "this", "that", "these", "is", "are", "here", "of", "for", "and",
    "example", "examples", "sample", "image", "images", "figure", "figures", "fig",
    "picture", "pictures", "photo", "photograph", "graphic", "illustration", "placeholder",
    "shown", "shows", "below", "above", "see", "caption", "test", "dummy",
})
#: a referring sentence longer than this is cut (a run-on paragraph without full stops)
_MAX_SENTENCE = 400
#: characters of context a figure that says nothing takes from each side
CONTEXT_CHARS = 300
_PROSE_LABELS = frozenset({Label.TEXT.value, Label.LIST_ITEM.value})


def figure_number(caption: str | None) -> str | None:
    """The number a caption gives its figure (``Figure 3: ...`` -> ``3``), or None."""
    match = _NUMBER.match(caption or "")
    return match.group(1).lower() if match else None


def referring_sentences(number: str, texts: Iterable[str], caption: str = "") -> list[str]:
    """The sentences of ``texts`` that name figure ``number`` (``Figure 3``, ``Fig. 3``,
    ``figures 2 and 3`` not counted), each once, the caption itself left out."""
    pattern = re.compile(r"\b(?:fig(?:ure)?s?\.?)\s*" + re.escape(number) + r"(?!\d|\.\d)",
                         re.IGNORECASE)
    found: list[str] = []
    own = " ".join(caption.split())
    for text in texts:
        for sentence in _SENTENCES.split(" ".join(text.split())):
            if pattern.search(sentence) and sentence != own and sentence not in found:
                found.append(sentence[:_MAX_SENTENCE])
    return found


def says_nothing(block: Block, referring: list[str]) -> bool:
    """Whether a Picture's only words are a generic caption (see the module's docstring)."""
    if (block.alt or "").strip() or block.content.strip() or referring:
        return False
    caption = _NUMBER.sub("", block.caption or "")
    words = re.findall(r"[^\W\d_]+", caption.lower())
    return all(word in GENERIC_WORDS for word in words)


def figure_context(block: Block, page_blocks: Sequence[Block]) -> list[str]:
    """The paragraph before ``block`` on its page (its last sentences) and the one after
    it (its first), up to :data:`CONTEXT_CHARS` each: what the figure sits in."""
    at = next((i for i, b in enumerate(page_blocks) if b is block), None)
    if at is None:
        return []
    before = next((b.content for b in reversed(page_blocks[:at])
                   if b.label in _PROSE_LABELS and b.content.strip()), "")
    after = next((b.content for b in page_blocks[at + 1:]
                  if b.label in _PROSE_LABELS and b.content.strip()), "")
    out = []
    if before:
        out.append(_cut(before, from_end=True))
    if after:
        out.append(_cut(after, from_end=False))
    return out


def _cut(text: str, *, from_end: bool) -> str:
    """Whole sentences of ``text`` up to :data:`CONTEXT_CHARS` from its end or start (at
    least one sentence, itself cut at the limit)."""
    sentences = _SENTENCES.split(" ".join(text.split()))
    if from_end:
        sentences.reverse()
    kept: list[str] = []
    size = 0
    for sentence in sentences:
        if kept and size + len(sentence) > CONTEXT_CHARS:
            break
        kept.append(sentence[:CONTEXT_CHARS])
        size += len(sentence) + 1
    if from_end:
        kept.reverse()
    return " ".join(kept)


def picture_text(block: Block, referring: Iterable[str] = ()) -> str:
    """A Picture's caption, the model's description, the words printed inside it and the
    sentences that refer to it, each once, a blank line apart: what a question about the
    figure will match."""
    parts: list[str] = []
    for part in (block.caption, block.alt, block.content, *referring):
        text = (part or "").strip()
        if text and text not in parts:
            parts.append(text)
    return "\n\n".join(parts)
