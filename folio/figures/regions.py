"""Figure regions of a page, made into one ``Picture`` block each. Pure.

Why: a figure is one thing to a reader: a drawing with its labels, a chart with its axis
titles, a photograph. The engines see it otherwise. A CPU engine reads the words printed
inside a drawing as a dozen short blocks (the layout model labels each ``Figure``), and a
picture without words leaves no block at all; a vision model gives the figure one block
but names its image after itself. Here every figure becomes one block labelled
``Picture``: its box (page points, top-left origin), the words inside it as its content,
the model's description as ``alt``, the caption that belongs to it as ``caption``
(:func:`attach_captions`), and a pending image name the crop replaces later
(:mod:`folio.figures.links`).

Where the regions come from:

* CPU engines (:func:`cpu_pictures`): the layout model's figure regions whose blocks
  stayed a figure (:mod:`folio.page.layout_labels` turns figure regions that hold a table or
  running prose into those, and a region holding many words in long blocks is text
  too), then pdfium's image objects that no figure or table region
  covers, unless text runs over them (a background) or they cover the page (a scan).
* Chandra (:func:`model_pictures`): the model's own Image and Figure boxes.
* Answers without boxes (olmOCR's ``![alt](...)``): the layout model's figure regions on
  the page, matched to the answer's images in reading order (:func:`match_regions`).

A picture whose shorter side is under ``min_side`` points (a logo, a rule, a bullet) is
no figure: its words go back to being text and no image object of that size counts.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from folio.engines.base import EngineOutput
from folio.engines.markdown import BLOCK_MARKDOWN_ENGINES, blocks_to_markdown
from folio.figures.links import literal
from folio.models import BBox, Block, Label, PagePrep, Region
from folio.page.layout_labels import CELL_MAX_WORDS, cover, region_for
from folio.settings.config import FigureSettings

__all__ = ["PENDING_PREFIX", "attach_captions", "cpu_pictures", "find_pictures", "iou",
           "match_regions", "model_pictures", "page_pictures"]

#: the name a CPU path's picture carries until its crop is written (page-local)
PENDING_PREFIX = "folio-figure-"
#: an image object covering more of the page than this is the page's scan or background
MAX_PAGE_SHARE = 0.8
#: text over an image object of more words than this makes it a background, not a figure
MAX_WORDS_OVER_IMAGE = 40
#: image objects this close (points) are one figure drawn in tiles
TILE_GAP_PT = 2.0
_FIGURE_LABELS = frozenset({Label.FIGURE.value, Label.IMAGE.value})
#: the labels a figure region's blocks have where the labelling left them the figure's:
#: its own, and a list item (its bulleted labels; folio.page.layout_labels keeps them)
_IN_FIGURE = frozenset({Label.FIGURE.value, Label.LIST_ITEM.value})
#: alt text may hold brackets of its own (markdownify leaves them unescaped)
_IMAGE_LINK = re.compile(r"!\[([^\n]*?)\]\(([^)\s]*)(?:\s+\"[^\"]*\")?\)")


def iou(a: BBox, b: BBox) -> float:
    """Intersection over union of two boxes (0 when either is empty)."""
    w = min(a.x1, b.x1) - max(a.x0, b.x0)
    h = min(a.y1, b.y1) - max(a.y0, b.y0)
    inter = max(0.0, w) * max(0.0, h)
    union = (a.x1 - a.x0) * (a.y1 - a.y0) + (b.x1 - b.x0) * (b.y1 - b.y0) - inter
    return inter / union if union > 0 else 0.0


def _small(box: BBox, min_side: float) -> bool:
    return min(box.x1 - box.x0, box.y1 - box.y0) < min_side


def _words(blocks: Sequence[Block]) -> str:
    ordered = sorted(blocks, key=lambda b: b.order)
    return "\n".join(t for t in (" ".join(b.content.split()) for b in ordered) if t)


def _picture(box: BBox, members: Sequence[Block], order: float, *, alt: str | None = None,
             image: str | None = None, content: str | None = None) -> tuple[float, Block]:
    text = _words(members) if content is None else content
    return order, Block(label=Label.PICTURE.value, bbox=box, content=text, order=0,
                        alt=alt or None, image=image, confidence=None)


def _renumber(ranked: list[tuple[float, Block]]) -> list[Block]:
    """Blocks by rank, ``order`` renumbered from 0 (a copy where it changes)."""
    ranked.sort(key=lambda pair: pair[0])
    return [b if b.order == i else b.model_copy(update={"order": i})
            for i, (_, b) in enumerate(ranked)]


def _slot(box: BBox, blocks: Sequence[Block]) -> float:
    """Where a picture without blocks of its own goes in the reading order: just before
    the first block below its top in its column (overlapping it horizontally), else
    after the last block above it; at the end when nothing is boxed."""
    below = [b.order for b in blocks if b.bbox is not None and b.bbox.y0 >= box.y0
             and min(b.bbox.x1, box.x1) > max(b.bbox.x0, box.x0)]
    if below:
        return min(below) - 0.5
    above = [b.order for b in blocks if b.bbox is not None and b.bbox.y1 <= box.y1]
    return (max(above) + 0.5) if above else float(len(blocks))


def cpu_pictures(blocks: Sequence[Block], regions: Sequence[Region] | None,
                 images: Sequence[BBox] | None, *, width: float, height: float,
                 min_cover: float, min_side: float) -> list[Block]:
    """A CPU engine's labelled ``blocks`` with each figure made one Picture block (see
    the module's docstring); ``blocks`` unchanged (a new list) when the page has none."""
    regions = list(regions or ())
    taken: dict[int, Block] = {}  # id(block) -> the picture it went into
    ranked: list[tuple[float, Block]] = []
    relabel: dict[int, Block] = {}
    boxes: list[BBox] = []
    tables = [r.bbox for r in regions if r.label is Label.TABLE]
    for region in (r for r in regions if r.label is Label.FIGURE):
        if any(iou(region.bbox, t) >= 0.5 or cover(t, region.bbox) >= 0.5 for t in tables):
            continue  # the model saw a table there too: the table's blocks say which
        members = [b for b in blocks if b.bbox is not None and id(b) not in taken
                   and region_for(b.bbox, regions, min_cover) is region]
        if any(m.label not in _IN_FIGURE for m in members):
            continue  # a table or prose the labelling took out of the figure
        if _prose(members):  # a page of text the model took for a picture: text it stays
            rest = [r for r in regions if r is not region]
            relabel.update({id(m): _as_text(m, rest, min_cover) for m in members})
            continue
        box = region.bbox
        for m in members:
            assert m.bbox is not None
            box = box.union(m.bbox)
        if _small(box, min_side):
            relabel.update({id(m): _as_text(m, (), min_cover) for m in members})
            continue
        order = min((m.order for m in members), default=None)
        pic = _picture(box, members, _slot(box, blocks) if order is None else order - 0.5,
                       image=f"{PENDING_PREFIX}{len(ranked)}")
        ranked.append(pic)
        boxes.append(box)
        taken.update({id(m): pic[1] for m in members})
    # a page's scan or background is left out before tiles are joined: it touches all
    drawn = [b for b in images or () if _page_share(b, width, height) <= MAX_PAGE_SHARE]
    for box in _tiles(drawn):
        if _small(box, min_side) or _page_share(box, width, height) > MAX_PAGE_SHARE:
            continue
        if any(cover(box, other) >= 0.5 or cover(other, box) >= 0.5
               for other in (*boxes, *tables)):
            continue
        inside = [b for b in blocks if b.bbox is not None and id(b) not in taken
                  and cover(b.bbox, box) >= min_cover]
        if sum(len(b.content.split()) for b in inside) > MAX_WORDS_OVER_IMAGE:
            continue  # text set over a picture: a background
        inside = [b for b in inside if b.label in (Label.TEXT.value, Label.FIGURE.value)]
        order = min((m.order for m in inside), default=None)
        pic = _picture(box, inside, _slot(box, blocks) if order is None else order - 0.5,
                       image=f"{PENDING_PREFIX}{len(ranked)}")
        ranked.append(pic)
        boxes.append(box)
        taken.update({id(m): pic[1] for m in inside})
    if not ranked and not relabel:
        return list(blocks)
    ranked += [(float(b.order), relabel.get(id(b), b)) for b in blocks if id(b) not in taken]
    return _renumber(ranked)


def _prose(members: Sequence[Block]) -> bool:
    """Whether a figure region's blocks are text rather than a figure's labels: more
    than :data:`MAX_WORDS_OVER_IMAGE` words, one block of more than
    :data:`folio.page.layout_labels.CELL_MAX_WORDS` among them (a paragraph, a list, a table of
    contents; a drawing's labels, a chart's ticks and titles are short). Hidden in a
    picture, such text would leave document.md; a figure of sentences loses its crop.
    Words are tokens with a letter: a chart's tick values and the marks OCR makes of its
    bars and symbols (``100 - 90 80 ... ~ < >``) are no prose."""
    sizes = [sum(1 for token in m.content.split() if _lettered(token)) for m in members]
    return sum(sizes) > MAX_WORDS_OVER_IMAGE and max(sizes, default=0) > CELL_MAX_WORDS


def _lettered(token: str) -> bool:
    return any(c.isalpha() for c in token)


def _as_text(block: Block, rest: Sequence[Region], min_cover: float) -> Block:
    """A block of a region that is no figure: the label the other regions give it
    (a title, a caption), else Text; a list item stays one."""
    if block.label == Label.LIST_ITEM.value:
        return block
    again = region_for(block.bbox, rest, min_cover) if block.bbox is not None else None
    label = (again.label.value if again is not None
             and again.label not in (Label.FIGURE, Label.TABLE) else Label.TEXT.value)
    return block.relabelled(label)


def _page_share(box: BBox, width: float, height: float) -> float:
    page = width * height
    return (box.x1 - box.x0) * (box.y1 - box.y0) / page if page > 0 else 1.0


def _tiles(images: Sequence[BBox]) -> list[BBox]:
    """Image objects that touch or overlap joined into one box each (a figure drawn as
    strips or tiles), in the order of their first tile."""
    joined: list[BBox] = []
    for box in images:
        grown = BBox(x0=box.x0 - TILE_GAP_PT, y0=box.y0 - TILE_GAP_PT,
                     x1=box.x1 + TILE_GAP_PT, y1=box.y1 + TILE_GAP_PT)
        hits = [j for j in joined if cover(j, grown) > 0]
        for hit in hits:
            joined.remove(hit)
            box = box.union(hit)
        joined.append(box)
    return joined


def _split_link(content: str) -> tuple[str | None, str | None, str]:
    """(alt, src, the rest) of a block holding an image link; (None, None, content)
    without one."""
    found = _IMAGE_LINK.search(content)
    if found is None:
        return None, None, content.strip()
    alt = re.sub(r"\\(.)", r"\1", found.group(1)).strip()
    rest = (content[:found.start()] + content[found.end():]).strip()
    return alt or None, found.group(2) or None, rest


def model_pictures(blocks: Sequence[Block], regions: Sequence[Region] | None = None
                   ) -> list[Block]:
    """A vision model's Image and Figure blocks made Picture blocks: the image link's
    alt text as ``alt``, its file name as the pending image (the name the page
    markdown links to), the rest of the block's words as its content. Blocks without a
    box (olmOCR's ``![alt](...)``) take the page's layout figure regions in reading
    order (:func:`match_regions`). ``blocks`` unchanged when none is a figure."""
    if not any(b.label in _FIGURE_LABELS for b in blocks):
        return list(blocks)
    out: list[Block] = []
    for block in blocks:
        if block.label not in _FIGURE_LABELS:
            out.append(block)
            continue
        alt, src, rest = _split_link(block.content)
        # a figure without an image link (Chandra's Diagram, Chemical-Block) is cropped
        # too: its link goes where its words are (folio.figures.links.resolve_page)
        out.append(block.model_copy(update={
            "label": Label.PICTURE.value, "alt": alt, "content": rest,
            "image": src or f"{PENDING_PREFIX}{len(out)}"}))
    figures = [r.bbox for r in regions or () if r.label is Label.FIGURE]
    if figures:
        pictures = [b for b in out if b.label == Label.PICTURE.value]
        boxes = match_regions([b.bbox for b in pictures], figures)
        swap = {id(p): p.model_copy(update={"bbox": box})
                for p, box in zip(pictures, boxes, strict=True) if box is not p.bbox}
        out = [swap.get(id(b), b) for b in out]
    return out


def match_regions(wanted: Sequence[BBox | None], regions: Sequence[BBox]) -> list[BBox | None]:
    """Boxes for an answer's images in order: one with a box of its own takes the
    region overlapping it best (IoU >= 0.3) or keeps its own; the others take the
    regions left, in reading order (top to bottom, then left to right), one each."""
    free = sorted(regions, key=lambda r: (round(r.y0), r.x0))
    out: list[BBox | None] = list(wanted)
    for i, own in enumerate(wanted):
        if own is None:
            continue
        box: BBox = own
        best = max(free, key=lambda r: iou(r, box), default=None)
        if best is not None and iou(best, box) >= 0.3:
            out[i] = best
            free.remove(best)
    for i, mine in enumerate(wanted):
        if mine is None and free:
            out[i] = free.pop(0)
    return out


def attach_captions(blocks: Sequence[Block]) -> list[Block]:
    """Each Picture given the text of the caption that belongs to it
    (:func:`folio.page.caption_order.owner`: the nearest caption over or under it)."""
    from folio.page.caption_order import owner

    captions: dict[int, list[str]] = {}
    for block in blocks:
        if block.label != Label.CAPTION.value:
            continue
        found = owner(block, blocks)
        if found is not None and found[0].label == Label.PICTURE.value:
            captions.setdefault(id(found[0]), []).append(" ".join(block.content.split()))
    if not captions:
        return list(blocks)
    return [b.model_copy(update={"caption": " ".join(captions[id(b)])})
            if id(b) in captions else b for b in blocks]


def page_pictures(blocks: Sequence[Block], markdown: str, *, block_markdown: bool,
                  layout: Sequence[Region] | None, images: Sequence[BBox] | None,
                  width: float, height: float, min_cover: float, min_side: float
                  ) -> tuple[list[Block], str]:
    """A page's blocks with its figures made Picture blocks, captions attached, and its
    markdown: rebuilt from the blocks for an engine whose markdown is made from them
    (``block_markdown``), else the model's with the links of tiny pictures taken out."""
    if block_markdown:
        found = cpu_pictures(blocks, layout, images, width=width, height=height,
                             min_cover=min_cover, min_side=min_side)
    else:
        found, markdown = _drop_tiny(model_pictures(blocks, layout), markdown, min_side)
    if not any(b.label == Label.PICTURE.value for b in found):
        if block_markdown and found != list(blocks):
            markdown = blocks_to_markdown(found)
        return found, markdown
    found = attach_captions(found)
    if block_markdown:
        markdown = blocks_to_markdown(found)
    return found, markdown


def _drop_tiny(blocks: list[Block], markdown: str, min_side: float) -> tuple[list[Block], str]:
    """A model's pictures under ``min_side`` (a logo, an icon) made text of their alt,
    their links taken out of ``markdown``."""
    out: list[Block] = []
    for block in blocks:
        if (block.label != Label.PICTURE.value or block.bbox is None
                or not _small(block.bbox, min_side)):
            out.append(block)
            continue
        if block.image:
            link = re.compile(r"!\[[^\n]*?\]\(" + re.escape(block.image) + r"[^)]*\)")
            markdown = link.sub(literal(block.alt or ""), markdown, count=1)
        text = "\n".join(t for t in (block.alt, block.content) if t)
        out.append(block.model_copy(update={"label": Label.TEXT.value, "content": text,
                                            "image": None, "alt": None}))
    return out, markdown


def find_pictures(output: EngineOutput, engine: str, page: PagePrep, min_cover: float,
                  settings: FigureSettings) -> None:
    """The pipeline's hook, after the layout labels (:func:`folio.pipeline.pages.
    apply_layout`): ``output``'s figures made Picture blocks (:func:`page_pictures`),
    its markdown rebuilt from the blocks for a CPU engine. Pages the engine found turned
    on their side are left alone: their boxes are the render's as it lies."""
    if output.attempt.rotated:
        return
    output.blocks, output.markdown = page_pictures(
        output.blocks, output.markdown, block_markdown=engine in BLOCK_MARKDOWN_ENGINES,
        layout=page.layout, images=page.images, width=page.width_pt, height=page.height_pt,
        min_cover=min_cover, min_side=settings.min_side_pt)
