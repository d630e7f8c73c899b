"""Cutting a block too long for one chunk: at paragraphs, then sentences, then words;
a code block's lines kept whole where they fit. Pure (folio.output.chunking)."""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator

_PARAGRAPHS = re.compile(r"\n\s*\n")
_SENTENCE_END = re.compile(r"(?<=[.!?。！？;])\s+")


def hard_split(text: str, limit: int) -> Iterator[str]:
    """Cut at the last whitespace before ``limit``, or at ``limit`` in unbroken text."""
    while len(text) > limit:
        cut = text.rfind(" ", 0, limit + 1)
        cut = cut if cut > limit // 2 else limit
        yield text[:cut].strip()
        text = text[cut:].strip()
    if text:
        yield text


def code_line_split(line: str, limit: int) -> list[str]:
    """A code line as it is (its indentation kept), cut only when longer than ``limit``."""
    return [line[i:i + limit] for i in range(0, len(line), limit)] if len(line) > limit \
        else [line]


def pack(parts: list[str], limit: int, sep: str) -> Iterator[str]:
    """Greedily join consecutive parts while they fit ``limit``."""
    current = ""
    for part in parts:
        if current and len(current) + len(sep) + len(part) > limit:
            yield current
            current = ""
        current = f"{current}{sep}{part}" if current else part
    if current:
        yield current


def split_long(text: str, limit: int) -> list[str]:
    """Pieces of at most ``limit`` chars, cut at paragraph, then sentence, then word."""
    units: list[str] = []
    for para in (p.strip() for p in _PARAGRAPHS.split(text)):
        if len(para) <= limit:
            units.append(para)
            continue
        sentences: list[str] = []
        for sentence in _SENTENCE_END.split(para):
            sentences.extend(hard_split(sentence, limit))
        units.extend(pack(sentences, limit, " "))
    return list(pack([u for u in units if u], limit, "\n\n"))


def with_overlap(pieces: list[str], overlap: int) -> list[str]:
    """Prefix each piece with the tail (whole words) of the one before it."""
    if overlap <= 0 or len(pieces) < 2:
        return pieces
    out = [pieces[0]]
    for prev, piece in itertools.pairwise(pieces):
        tail = prev[-overlap:]
        space = tail.find(" ")
        tail = tail[space + 1 :] if 0 <= space < len(tail) - 1 else tail
        out.append(f"{tail} {piece}")
    return out
