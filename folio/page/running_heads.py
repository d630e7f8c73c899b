"""Running headers and footers: lines that repeat at the top or bottom of nearby pages.

Why: a running head ("TILBURG UNIVERSITY", "Revision 2.4 P/N 119 036", "Page 7 of 40")
is on every page, so left in the text it becomes noise in every retrieval chunk and
breaks sentences that run across a page break. A layout model labels some of them;
these rules catch them on any engine's blocks, by what makes a running head one:

- it sits in the top or bottom band of the page (:data:`BAND`);
- it is short (:data:`MAX_CHARS`);
- it repeats, at about the same height, on a page at most :data:`WINDOW` pages away
  (two, so that books' alternating left/right heads count) once digits are ignored
  (page numbers change); or it is a page number on its own ("7", "- 7 -", "Page 7 of 40",
  "vii"). A page number may sit further in (:data:`NUMBER_BAND`: LaTeX's default
  footer lies 12% up a letter page, 17% up an A4 one) when nothing lies beyond it and it
  is not in brackets (an equation's number) nor set as a heading (a chapter's number in
  display size over its title, :func:`folio.page.headings.chapter_number`);
- a short line on the same baseline as a running head, in its band, belongs to it:
  a footer reads "Chapter 2. Roles and separation of duties   11" or "208 ... Global
  Report" although only the number repeats or is recognisable. The pieces of one head
  line closer than :data:`MERGE_GAP` line heights become one block (a text layer cuts a
  line at wide gaps, and "2   Row and Column Access Control" is one footer, not two),
  and so do the lines of one head stacked one under the other (:data:`STACK_GAP`).

A one-page document (or a page whose neighbours differ) has nothing to repeat on; there
a line at the page's edge is a running head by what it looks like alone (:func:`_alone`):

- a folio line: a page number at one end of a short line of words ("400 BRITISH
  HUSBANDRY. (Ch. XIX.", "Journal of Foo 12"), as a book sets its running head, or
  "page 3 of 12" anywhere in one; not a list item or a section's number ("26. If ...",
  "1.1 Scope": the number carries a point), not a sentence run on from the page before
  (lower case after the number), not a heading (the engine's or the layout model's
  label) nor in display type (taller than :data:`DISPLAY` body type sizes: "Chapter 12"
  set large);
- a line set apart: in smaller type than the page's body (:data:`SMALL_TYPE` of it,
  measured as page area per character, which scales with the type size squared,
  :func:`type_size`), with a gap of :data:`APART_GAP` of its own heights or more between
  it and the rest of the page (a journal's name and volume, a copyright line, a
  "Downloaded from" line). A heading label does not save it: headings are not set
  smaller than the text they head;
- a block in the margin: wholly within half an inch of the top or bottom edge
  (:data:`MARGIN_PT`, or :data:`MARGIN` of a small page's height), where documents set
  no body text, and set apart from the rest by :data:`MARGIN_GAP` of its
  own heights, in any type size ("Electronic Supplementary Material (ESI) for ...",
  a print date line); not a heading.

The first two only for one line (:data:`ONE_LINE`); all three only for a block that
nothing lies beyond towards its edge,
that no engine or layout model called a caption, table, figure, formula or list item,
and at the foot never for a footnote (a line opening with a note mark: "*", "1)", a
number run into its text). Body text keeps its place: a page's only text is never a
running head (:func:`keep_page_text`).

Decisions about page ``k`` need only pages ``k - WINDOW .. k + WINDOW``, so a document's
pages can be judged as they arrive in order (:class:`folio.output.chunking.ChunkStream` lags
:data:`WINDOW` pages behind), and judging a whole document gives the same answer. Pure.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

from folio.engines.markdown import BLOCK_MARKDOWN_ENGINES, blocks_to_markdown
from folio.models import HEADING_LABELS, Block, Label, PageResult, joined_box

__all__ = ["APART_GAP", "BAND", "DISPLAY", "FOLIO_WORDS", "HEAD_LABELS", "MARGIN",
           "MARGIN_GAP", "MARGIN_PT", "MAX_CHARS", "MERGE_GAP", "NUMBER_BAND", "ONE_LINE",
           "SMALL_TYPE", "STACK_GAP", "WINDOW", "body_type", "candidates", "head_blocks",
           "heads", "keep_content_lines", "keep_page_text", "mark_running_heads", "spare_only_text", "type_size"]

#: the share of the page height at the top and the bottom where running heads live
BAND = 0.12
#: a lone page number counts this far from the edge, when no block lies beyond it
NUMBER_BAND = 0.2
#: pieces of one running-head line closer than this many line heights are one block
MERGE_GAP = 3.0
#: two head lines this many line heights apart or closer, one over the other, are one
#: head (lines of one paragraph are under half a line apart; a footnote rule or a blank
#: line between a footer and the text above it is more)
STACK_GAP = 1.0
#: longer blocks are body text even when they repeat (a repeated notice, a form field)
MAX_CHARS = 160
#: pages either side in which a repeat makes a running head
WINDOW = 2
#: the same place: centres at most this share of the page height apart
SAME_HEIGHT = 0.03
#: a line in type this size of the page's body or smaller (area per character, square
#: rooted) is in small type: a running head or a note, not body text
SMALL_TYPE = 0.8
#: a line this many of its own heights away from the rest of the page is set apart
APART_GAP = 2.0
#: a line taller than this many body type sizes (:func:`type_size`; a body line is about
#: 1.5 of it) is in display type, as a chapter's title, never a folio line
DISPLAY = 2.0
#: a block taller than this many of its own type sizes (:func:`type_size`) holds more
#: than one line (one line of Latin type is about 1.5 of them, of CJK about 1.1; two
#: lines twice that)
ONE_LINE = 2.0
#: the page's margins: documents set their body text at least half an inch (36 pt) from
#: the top and bottom edges (a narrow margin; 1 inch is the common default), so what lies
#: wholly within MARGIN_PT of an edge, or MARGIN of the height on a page under 720 pt
#: tall (a small or scanned page), set apart from the rest, is a running head or a folio
MARGIN_PT = 36.0
MARGIN = 0.05
#: a block in the margin this many of its own heights away from the rest is set apart
MARGIN_GAP = 1.0
#: a folio line's words besides its page number (a running title, not a sentence)
FOLIO_WORDS = 12
#: blocks of this many characters or more measure the page's body type
BODY_CHARS = 100
#: a line of this many words or more can be a sentence of the page's prose
SENTENCE_WORDS = 5

#: the labels of running heads: out of the markdown and the chunks unless kept
HEAD_LABELS = frozenset({Label.PAGE_HEADER.value, Label.PAGE_FOOTER.value})
_PAGE_NUMBER = re.compile(
    r"^[\s\-–—.(\[]*(?:page|p\.|seite|página|pagina)?\s*"
    # arabic, or a roman front-matter number up to xxxix ("civil" and "mix" are words)
    r"(?:\d{1,4}|(?=[ivx])x{0,3}(?:ix|iv|v?i{0,3}))"
    r"(?:\s*(?:of|/|von|de|sur)\s*\d{1,4})?[\s\-–—.)\]]*$",
    re.IGNORECASE,
)
_BRACKETED = re.compile(r"^\s*[(\[].*[)\]]\s*$")
#: a bare page number at either end of a line: digits with no point or bracket on them
_FOLIO_START = re.compile(r"^\s*(\d{1,4})\s+(\S.*)$")
_FOLIO_END = re.compile(r"^(.*\S)\s+(\d{1,4})\s*$")
#: a footnote's opening: a note mark, or a number run into its text or closed by ")"
_PAGE_OF = re.compile(r"\b(?:page|seite|página|pagina)\s*\d{1,4}\s*(?:of|/|von|de|sur)\s*\d{1,4}\b",
                      re.IGNORECASE)
_NOTE_MARK = re.compile(r"^\s*(?:[*†‡§¶#]|\d+\s*\)|\d+[^\d\s.,:;\-–—/])")
_DIGITS = re.compile(r"\d+")
_SPACE = re.compile(r"\s+")


@dataclass(frozen=True)
class Candidate:
    block: int  # index into the page's blocks
    band: str  # "top" or "bottom"
    key: str  # the text with digits and spacing normalised
    centre: float  # vertical centre as a share of the page height
    number: bool  # a page number on its own
    top: float = 0.0  # top edge as a share of the page height
    bottom: float = 0.0  # bottom edge as a share of the page height
    labelled: bool = False  # a layout model already labelled it a running head
    alone: bool = False  # a running head by its own look (:func:`_alone`), no repeat needed


def _key(text: str) -> str:
    return _SPACE.sub(" ", _DIGITS.sub("#", text.lower())).strip(" .,:;-–—|")


#: labels that say a block is something other than a running head's kind of text
_NOT_ALONE = frozenset({Label.CAPTION.value, Label.TABLE.value, Label.FIGURE.value,
                        Label.EQUATION.value, Label.LIST_ITEM.value})


def candidates(page: PageResult) -> list[Candidate]:
    """The page's possible running heads: short blocks with a box in its top or bottom
    band (what :func:`heads` compares across pages; computed once a page)."""
    height = page.height_pt
    if height <= 0:
        return []
    found = []
    body = None
    for n, block in enumerate(page.blocks):
        text = block.content.strip()
        box = block.bbox
        if box is None or not text or len(text) > MAX_CHARS or "\n\n" in text:
            continue
        number = bool(_PAGE_NUMBER.match(text))
        reach = NUMBER_BAND if number else BAND
        if box.y1 <= reach * height:
            band = "top"
        elif box.y0 >= (1 - reach) * height:
            band = "bottom"
        else:
            continue
        if box.y1 > BAND * height and box.y0 < (1 - BAND) * height and (
                _BRACKETED.match(text) or block.label in HEADING_LABELS
                or not _outermost(page.blocks, n, band)):
            continue
        key = _key(text)
        if not key:
            continue
        if body is None:
            body = body_type(page.blocks)
        found.append(Candidate(block=n, band=band, key=key,
                               centre=(box.y0 + box.y1) / 2 / height, number=number,
                               top=box.y0 / height, bottom=box.y1 / height,
                               labelled=block.label in HEAD_LABELS,
                               alone=not number and _alone(page.blocks, n, band, body, height)))
    return found


def type_size(block: Block) -> float:
    """A block's type size as page area per character, square rooted (points): a
    paragraph of n lines in type of size s covers about n line heights by the width the
    characters take, so its area over its characters goes as s squared, whatever its
    line count; 0 for a block without a box or characters."""
    box = block.bbox
    chars = sum(1 for c in block.content if not c.isspace())
    if box is None or not chars:
        return 0.0
    return math.sqrt(max(0.0, (box.x1 - box.x0) * (box.y1 - box.y0)) / chars)


def body_type(blocks: Sequence[Block]) -> float:
    """The page's body type size (:func:`type_size`): the median over the characters of
    its text blocks of :data:`BODY_CHARS` characters or more; 0 when it has none."""
    sized = sorted((type_size(b), len(b.content)) for b in blocks
                   if b.label == Label.TEXT.value and b.bbox is not None
                   and len(b.content.strip()) >= BODY_CHARS)
    total, seen = sum(n for _, n in sized), 0
    for size, n in sized:
        seen += n
        if seen * 2 >= total:
            return size
    return 0.0


def _alone(blocks: Sequence[Block], n: int, band: str, body: float, height: float = 0.0
           ) -> bool:
    """Whether block ``n`` (in the ``band``, nothing beyond it) is a running head by its
    own look: a block in the margin, a folio line or a line set apart in small type
    (module docstring)."""
    block = blocks[n]
    text = block.content.strip()
    box = block.bbox
    assert box is not None
    own = box.y1 - box.y0
    if (block.label in _NOT_ALONE or own <= 0 or not _outermost(blocks, n, band)
            or band == "bottom" and _NOTE_MARK.match(text)):
        return False
    margin = min(MARGIN_PT, MARGIN * height)
    if (height > 0 and block.label not in HEADING_LABELS
            and (box.y1 <= margin if band == "top" else box.y0 >= height - margin)
            and _gap(blocks, n, band) >= MARGIN_GAP * own):
        return True
    if "\n" in text or own > ONE_LINE * type_size(block):
        return False
    display = body > 0 and own > DISPLAY * body  # a chapter's "12" over its title
    if block.label not in HEADING_LABELS and not display and _folio_line(text):
        return True
    if body <= 0 or type_size(block) > SMALL_TYPE * body or _sentence(text):
        return False  # a sentence of prose is the page's (one line measures small)
    return _gap(blocks, n, band) >= APART_GAP * own


def _folio_line(text: str) -> bool:
    """A page number at one end of a short line of words, or "page 3 of 12" anywhere in
    one (module docstring)."""
    if len(text.split()) > FOLIO_WORDS + 1:
        return False
    if _PAGE_OF.search(text):
        return True
    for pattern, rest_at in ((_FOLIO_START, 2), (_FOLIO_END, 1)):
        match = pattern.match(text)
        if match:
            rest = match.group(rest_at)
            if not rest[:1].islower() and any(c.isalpha() for c in rest):
                return True
    return False


def _gap(blocks: Sequence[Block], n: int, band: str) -> float:
    """The distance from block ``n`` in the ``band`` to the nearest block with text on its
    inner side (towards the page's middle), leaving out the pieces of its own line;
    infinite when there is none."""
    box = blocks[n].bbox
    assert box is not None
    gaps = []
    for m, other in enumerate(blocks):
        near = other.bbox
        if m == n or near is None or not other.content.strip():
            continue
        overlap = min(box.y1, near.y1) - max(box.y0, near.y0)
        if overlap >= 0.5 * min(box.y1 - box.y0, near.y1 - near.y0):
            continue  # a piece of the same line
        gaps.append(near.y0 - box.y1 if band == "top" else box.y0 - near.y1)
    return min(gaps, default=math.inf)


def _outermost(blocks: Sequence[Block], n: int, band: str) -> bool:
    """Whether no other block lies wholly beyond block ``n`` towards the page's ``band``
    edge (a number with text below it is a list item or a table cell, not a folio)."""
    box = blocks[n].bbox
    assert box is not None
    for m, other in enumerate(blocks):
        if m == n or other.bbox is None or not other.content.strip():
            continue
        if (band == "bottom" and other.bbox.y0 >= box.y1) or (
                band == "top" and other.bbox.y1 <= box.y0):
            return False
    return True


def _same_line(a: Candidate, b: Candidate) -> bool:
    """Whether two candidates overlap vertically by half the smaller one's height."""
    overlap = min(a.bottom, b.bottom) - max(a.top, b.top)
    return a.band == b.band and overlap >= 0.5 * min(a.bottom - a.top, b.bottom - b.top)


def heads(by_page: Sequence[list[Candidate]], k: int) -> dict[int, str]:
    """The running heads of page ``k`` as ``{block index: label}``, from the
    :func:`candidates` of the pages in reading order (only those within :data:`WINDOW`
    of ``k`` are read)."""
    near = [c for j in range(max(0, k - WINDOW), min(len(by_page), k + WINDOW + 1)) if j != k
            for c in by_page[j]]
    found: dict[int, str] = {}
    anchors = []
    for cand in by_page[k]:
        repeated = any(o.band == cand.band and o.key == cand.key
                       and abs(o.centre - cand.centre) <= SAME_HEIGHT for o in near)
        if repeated or cand.number or cand.alone:
            found[cand.block] = _label(cand)
        if repeated or cand.number or cand.labelled or cand.alone:
            anchors.append(cand)
    for cand in by_page[k]:  # the rest of a running head's line
        if cand.block not in found and not cand.labelled and any(
                _same_line(cand, a) for a in anchors):
            found[cand.block] = _label(cand)
    return found


def _label(cand: Candidate) -> str:
    return (Label.PAGE_HEADER if cand.band == "top" else Label.PAGE_FOOTER).value


def head_blocks(pages: Sequence[PageResult], k: int) -> dict[int, str]:
    """The running heads of ``pages[k]`` (``pages`` in reading order, as many as there
    are); see :func:`heads`."""
    return heads([candidates(p) if abs(j - k) <= WINDOW else [] for j, p in enumerate(pages)], k)


def keep_page_text(blocks: Sequence[Block]) -> bool:
    """A page's only text is never a running head: when every block with text is labelled
    a header or footer (a one-page document's only line in the head band, a layout
    model's "header" over a cover's title), they are Text again, so the page does not
    lose all it says. Whether any label changed (in place)."""
    texts = [b for b in blocks if b.content.strip()]
    if not texts or any(b.label not in HEAD_LABELS for b in texts):
        return False
    for block in texts:
        block.label = Label.TEXT.value
    return True


def keep_content_lines(blocks: Sequence[Block], height: float) -> bool:
    """Lines that carry the page's content are never running heads: a block a layout
    model labelled a header or footer is Text again when it reads as a sentence of prose
    (:func:`_sentence`) and lies outside the page's margins (:data:`MARGIN_PT`). The
    model's label rests on position alone, and the first line under the head band ("Table
    3-2 lists the nine built-in global variables.") sits where a head would; if such a
    line repeats on nearby pages, :func:`heads` still finds it. Whether any label changed
    (in place)."""
    margin = min(MARGIN_PT, MARGIN * height) if height > 0 else 0.0
    changed = False
    for block in blocks:
        box = block.bbox
        if (block.label in HEAD_LABELS and box is not None and _sentence(block.content)
                and box.y0 > margin and (height <= 0 or box.y1 < height - margin)):
            block.label = Label.TEXT.value
            changed = True
    return changed


def _sentence(text: str) -> bool:
    """Prose: :data:`SENTENCE_WORDS` words or more, opening with a capital or a digit,
    closing with a full stop, and most words after the first in lower case (a running
    title is in title case, a citation line mostly names and numbers)."""
    words = text.split()
    if len(words) < SENTENCE_WORDS or not words[0][:1].isupper() and not words[0][:1].isdigit():
        return False
    if not text.rstrip().endswith((".", "!", "?")):
        return False
    return sum(1 for w in words[1:] if w[:1].islower()) * 2 > len(words) - 1


def spare_only_text(blocks: Sequence[Block], found: dict[int, str]) -> dict[int, str]:
    """``found`` (heads by block index, as :func:`heads` gives them), or none when they and
    the blocks already labelled heads would take all the page's text: the rule of
    :func:`keep_page_text` for a reader that drops heads without relabelling (the chunk
    stream)."""
    texts = [n for n, b in enumerate(blocks) if b.content.strip()]
    if found and texts and all(n in found or blocks[n].label in HEAD_LABELS for n in texts):
        return {}
    return found


def label_page(page: PageResult, found: dict[int, str], *, keep_in_markdown: bool = False
               ) -> int:
    """Label the page's running heads; unless ``keep_in_markdown``, its markdown is
    rebuilt without them where the engine made it from blocks (those labelled here and
    those a layout model labelled before). The pieces of one head line become one block
    (:func:`merge_lines`). How many blocks were newly labelled."""
    changed = 0
    for n, label in found.items():
        block: Block = page.blocks[n]
        if block.label not in HEAD_LABELS:
            block.label = label
            changed += 1
    page.blocks = merge_lines(page.blocks)
    restored = keep_page_text(page.blocks)
    has_heads = any(b.label in HEAD_LABELS for b in page.blocks)
    if (has_heads or restored) and not keep_in_markdown and page.engine in BLOCK_MARKDOWN_ENGINES:
        page.markdown = blocks_to_markdown(
            [b for b in page.blocks if b.label not in HEAD_LABELS])
    return changed


def merge_lines(blocks: list[Block]) -> list[Block]:
    """``blocks`` with the running-head pieces of one line (same label, overlapping
    vertically, closer than :data:`MERGE_GAP` line heights) joined left to right, and
    such lines stacked one under the other (:func:`_stacked`: an address over a phone
    number, a journal's name over its DOI) joined top to bottom, each into the first
    piece's place; other blocks untouched. A head written on two lines is one item of
    furniture, as a layout model's one region over both says, not two."""
    heads = sorted((b for b in blocks if b.label in HEAD_LABELS and b.bbox is not None),
                   key=lambda b: (b.bbox.x0 if b.bbox else 0.0))
    lines: list[list[Block]] = []
    for block in heads:
        line = next((ln for ln in lines if _joins(ln[-1], block)), None)
        if line is None:
            lines.append([block])
        else:
            line.append(block)
    whole = sorted(((_join(line, " "), line) for line in lines),
                   key=lambda pair: pair[0].bbox.y0 if pair[0].bbox else 0.0)
    stacks: list[list[tuple[Block, list[Block]]]] = []
    for pair in whole:
        stack = next((st for st in stacks if _stacked(st[-1][0], pair[0])), None)
        if stack is None:
            stacks.append([pair])
        else:
            stack.append(pair)
    joined: dict[int, Block] = {}  # id of a piece -> the block it joined
    for stack in stacks:
        pieces = [piece for _, line in stack for piece in line]
        if len(pieces) < 2:
            continue
        merged = _join([line_block for line_block, _ in stack], "\n")
        for piece in pieces:
            joined[id(piece)] = merged
    out: list[Block] = []
    for block in blocks:
        target = joined.get(id(block), block)
        if not any(b is target for b in out):
            out.append(target)
    return out


def _join(pieces: Sequence[Block], sep: str) -> Block:
    """``pieces`` as one block in the first one's place: their boxes' union, their text
    joined by ``sep``; the piece itself when there is one."""
    if len(pieces) == 1:
        return pieces[0]
    return pieces[0].model_copy(update={
        "bbox": joined_box(pieces), "content": sep.join(p.content.strip() for p in pieces),
        "order": min(p.order for p in pieces)})


def _stacked(upper: Block, lower: Block) -> bool:
    """Whether ``lower`` is the next line of ``upper``'s head: the same label, their
    x-ranges overlapping, and ``lower`` starting below ``upper`` within
    :data:`STACK_GAP` of a line's height."""
    a, b = upper.bbox, lower.bbox
    if a is None or b is None or upper.label != lower.label:
        return False
    height = min(a.y1 - a.y0, b.y1 - b.y0)
    return (min(a.x1, b.x1) > max(a.x0, b.x0)
            and a.y1 - 0.5 * height <= b.y0 <= a.y1 + STACK_GAP * height)


def _joins(left: Block, right: Block) -> bool:
    a, b = left.bbox, right.bbox
    if a is None or b is None or left.label != right.label:
        return False
    height = max(a.y1 - a.y0, b.y1 - b.y0)
    overlap = min(a.y1, b.y1) - max(a.y0, b.y0)
    return (overlap >= 0.5 * min(a.y1 - a.y0, b.y1 - b.y0)
            and b.x0 - a.x1 <= MERGE_GAP * height)


def mark_running_heads(pages: Sequence[PageResult], *, keep_in_markdown: bool = False) -> int:
    """Label every running head of a document's pages (in reading order); how many
    blocks were newly labelled. All decisions are made before any label changes, so
    they do not depend on the order pages are labelled in."""
    by_page = [candidates(p) for p in pages]
    decided = [heads(by_page, k) for k in range(len(pages))]
    return sum(label_page(page, found, keep_in_markdown=keep_in_markdown)
               for page, found in zip(pages, decided, strict=True))
