"""A DOCX read from its own XML into pages of blocks, in reading order.

What a page is: Word's own page breaks where the file records them (the
``w:lastRenderedPageBreak`` marks Word writes when it saves: its last layout), else the
author's explicit breaks (page breaks, "page break before"); a document with neither is
one page. docs/outputs.md says so; ``location`` gives every block its heading path.

Headings come from paragraph styles and outline levels (a Title is level 1, ``Heading
N`` / outline level N-1 is level N+1, so a Title stands above Heading 1); lists from
``numbering.xml`` (:mod:`.docx_numbering`); tables with their merged cells and marked
header rows; footnotes and endnotes as ``[^n]`` marks with Footnote blocks at the end of
their page; comments as labelled text after their paragraph; headers and footers as
Page-Header and Page-Footer blocks on the first page; pictures as Picture blocks with
their alt text and the caption paragraph under them; charts as tables of their data.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from lxml import etree

from folio.formats.docx_inline import Inline, W, read_inline
from folio.formats.docx_numbering import Numbering
from folio.formats.office_blocks import NativeRead, PageDraft, table_block
from folio.formats.office_charts import chart_table, chart_title
from folio.formats.ooxml_parts import Package, Rel
from folio.models import Block, Label, TableCell

__all__ = ["read_docx"]

_HEADING_NAME = re.compile(r"^heading\s*(\d)$")
#: Word's list styles by depth ("List Bullet 2"): each often names a list of its own at
#: level 0, indented by the style, so the style's number is the item's depth
_LIST_STYLE = re.compile(r"^list(?: bullet| number| continue)?\s+(\d)$")
#: a picture's caption: a paragraph styled Caption, or one opening "Figure 3"
_FIGURE_CAPTION = re.compile(r"^(?:fig(?:ure)?|image|photo|chart|diagram)\.?\s*\d", re.I)


@dataclass
class _Style:
    name: str = ""
    based_on: str = ""
    outline: int | None = None
    num: tuple[str, int] | None = None


@dataclass
class _Reader:
    package: Package
    part: str
    read: NativeRead = field(default_factory=lambda: NativeRead(pages=[PageDraft()]))
    styles: dict[str, _Style] = field(default_factory=dict)
    numbering: Numbering = field(default_factory=Numbering)
    rels: dict[str, Rel] = field(default_factory=dict)
    notes: dict[str, dict[str, str]] = field(default_factory=dict)
    comments: dict[str, tuple[str, str]] = field(default_factory=dict)
    marks: dict[tuple[str, str], str] = field(default_factory=dict)
    headings: list[tuple[int, str]] = field(default_factory=list)
    pending_notes: list[str] = field(default_factory=list)
    use_rendered: bool = False

    @property
    def page(self) -> PageDraft:
        return self.read.pages[-1]

    def new_page(self) -> None:
        self._flush_notes()
        if self.page.blocks:
            self.read.pages.append(PageDraft())

    def _flush_notes(self) -> None:
        for text in self.pending_notes:
            self.page.add(Label.FOOTNOTE.value, text, location=self.location())
        self.pending_notes = []

    def location(self) -> str | None:
        return " > ".join(text for _, text in self.headings) or None

    # --- the parts beside the body -------------------------------------------------------
    def load(self) -> etree._Element:
        body = self.package.xml(self.part)
        if body is None:
            raise ValueError("no document part")
        self.rels = self.package.rels(self.part)
        by_type = {rel.type: rel.target for rel in self.rels.values() if not rel.external}
        self._load_styles(self.package.xml(by_type.get("styles", "")))
        self.numbering = Numbering.parse(self.package.xml(by_type.get("numbering", "")))
        for kind in ("footnotes", "endnotes"):
            self.notes[kind] = self._load_notes(by_type.get(kind, ""), kind[:-1])
        self._load_comments(by_type.get("comments", ""))
        # the body's own page marks (Word writes them as it lays pages out), read from the
        # tree already parsed rather than the part inflated a second time
        self.use_rendered = next(body.iter(f"{W}lastRenderedPageBreak"), None) is not None
        return body

    def _load_styles(self, root: etree._Element | None) -> None:
        if root is None:
            return
        for style in root.iter(f"{W}style"):
            found = _Style()
            name = style.find(f"{W}name")
            found.name = (name.get(f"{W}val", "") if name is not None else "").lower()
            based = style.find(f"{W}basedOn")
            found.based_on = based.get(f"{W}val", "") if based is not None else ""
            outline = style.find(f"{W}pPr/{W}outlineLvl")
            if outline is not None:
                found.outline = _int(outline.get(f"{W}val"))
            num = style.find(f"{W}pPr/{W}numPr")
            if num is not None:
                found.num = _num(num)
            self.styles[style.get(f"{W}styleId", "")] = found

    def _load_notes(self, part: str, tag: str) -> dict[str, str]:
        root = self.package.xml(part) if part else None
        if root is None:
            return {}
        found = {}
        for note in root.iter(f"{W}{tag}"):
            if note.get(f"{W}type") in ("separator", "continuationSeparator",
                                        "continuationNotice"):
                continue
            text = " ".join(self._inline(p).text.strip() for p in note.iter(f"{W}p"))
            found[note.get(f"{W}id", "")] = text.strip()
        return found

    def _load_comments(self, part: str) -> None:
        root = self.package.xml(part) if part else None
        if root is None:
            return
        for comment in root.iter(f"{W}comment"):
            text = " ".join(self._inline(p).text.strip() for p in comment.iter(f"{W}p"))
            self.comments[comment.get(f"{W}id", "")] = (comment.get(f"{W}author", ""),
                                                         text.strip())

    # --- inline text -----------------------------------------------------------------------
    def _inline(self, paragraph: etree._Element) -> Inline:
        return read_inline(paragraph, self._link, self._mark)

    def _link(self, rid: str) -> str | None:
        rel = self.rels.get(rid)
        return rel.target if rel is not None and rel.external else None

    def _mark(self, kind: str, note_id: str) -> str:
        key = (kind, note_id)
        if key not in self.marks:
            count = sum(1 for k, _ in self.marks if k == kind) + 1
            self.marks[key] = f"[^{count}]" if kind == "footnote" else f"[^e{count}]"
        return self.marks[key]

    # --- styles ------------------------------------------------------------------------------
    def _style_chain(self, style_id: str) -> list[_Style]:
        chain: list[_Style] = []
        while style_id and style_id in self.styles and len(chain) < 16:
            style = self.styles[style_id]
            chain.append(style)
            style_id = style.based_on
        return chain

    def heading(self, p: etree._Element) -> tuple[str, int] | None:
        """(label, level) of a heading paragraph; None for body text."""
        ppr = p.find(f"{W}pPr")
        style_id = ""
        outline: int | None = None
        if ppr is not None:
            ps = ppr.find(f"{W}pStyle")
            style_id = ps.get(f"{W}val", "") if ps is not None else ""
            ol = ppr.find(f"{W}outlineLvl")
            outline = _int(ol.get(f"{W}val")) if ol is not None else None
        chain = self._style_chain(style_id)
        if chain and chain[0].name == "title":
            return Label.TITLE.value, 1
        for style in chain:
            if outline is None and style.outline is not None:
                outline = style.outline
            named = _HEADING_NAME.match(style.name)
            if outline is None and named:
                outline = int(named.group(1)) - 1
        if outline is None or not 0 <= outline <= 8:
            return None
        return Label.SECTION_HEADER.value, min(outline + 2, 6)

    def style_name(self, p: etree._Element) -> str:
        ps = p.find(f"{W}pPr/{W}pStyle")
        chain = self._style_chain(ps.get(f"{W}val", "") if ps is not None else "")
        return chain[0].name if chain else ""

    def list_marker(self, p: etree._Element) -> tuple[str, int] | None:
        num = p.find(f"{W}pPr/{W}numPr")
        ref = _num(num) if num is not None else None
        if ref is None:
            ps = p.find(f"{W}pPr/{W}pStyle")
            for style in self._style_chain(ps.get(f"{W}val", "") if ps is not None else ""):
                if style.num is not None:
                    ref = style.num
                    break
        if ref is None or ref[0] in ("", "0"):
            return None
        marker = self.numbering.marker(*ref)
        level = ref[1] + 1
        styled = _LIST_STYLE.match(self.style_name(p))
        if level == 1 and styled:
            level = int(styled.group(1))
        return (marker, min(max(level, 1), 6)) if marker else None

    # --- the body ----------------------------------------------------------------------------
    def body(self, container: etree._Element) -> None:
        for child in container:
            if child.tag == f"{W}p":
                self.paragraph(child)
            elif child.tag == f"{W}tbl":
                self.table(child)
            elif child.tag in (f"{W}sdt", f"{W}customXml", f"{W}ins"):
                content = child.find(f"{W}sdtContent")
                self.body(content if content is not None else child)

    def paragraph(self, p: etree._Element) -> None:
        inline = self._inline(p)
        before = p.find(f"{W}pPr/{W}pageBreakBefore")
        breaks = inline.rendered_breaks if self.use_rendered else inline.breaks
        opens = (self.use_rendered and inline.rendered_breaks > 0) or (
            not self.use_rendered and (inline.break_first or (
                before is not None and before.get(f"{W}val", "true") not in ("0", "false"))))
        if opens:
            self.new_page()
        text = inline.text.strip()
        if text:
            self._text_block(p, text)
        for kind, rid, alt in inline.drawings:
            self._drawing(kind, rid, alt)
        for box in inline.boxes:  # a text box's paragraphs and tables, after its anchor
            self.body(box)
        for cid in inline.comments:
            author, said = self.comments.get(cid, ("", ""))
            if said:
                who = f" by {author}" if author else ""
                self.page.add(Label.TEXT.value, f"> Comment{who}: {said}",
                              location=self.location())
        for kind, ids in (("footnote", inline.footnotes), ("endnote", inline.endnotes)):
            for note_id in ids:
                said = self.notes.get(kind + "s", {}).get(note_id, "")
                if said:
                    self.pending_notes.append(f"{self._mark(kind, note_id)}: {said}")
        if breaks and not opens:
            self.new_page()

    def _text_block(self, p: etree._Element, text: str) -> None:
        heading = self.heading(p)
        if heading is not None:
            label, level = heading
            numbered = self.list_marker(p)  # "1.2" that Word shows before a numbered heading
            text = " ".join(text.split())
            if numbered is not None and numbered[0] != "-":
                text = f"{numbered[0].rstrip('.')} {text}"
            while self.headings and self.headings[-1][0] >= level:
                self.headings.pop()
            self.headings.append((level, text))
            self.page.add(label, text, level=level, location=self.location())
            return
        style = self.style_name(p)
        marker = self.list_marker(p)
        if marker is not None:
            self.page.add(Label.LIST_ITEM.value, text, marker=marker[0], level=marker[1],
                          location=self.location())
            return
        last = self.page.blocks[-1] if self.page.blocks else None
        if (last is not None and last.label == Label.PICTURE.value and not last.caption
                and (style == "caption" or _FIGURE_CAPTION.match(text))):
            last.caption = text
            return
        label = Label.CAPTION.value if style == "caption" else Label.TEXT.value
        self.page.add(label, text, location=self.location())

    def _drawing(self, kind: str, rid: str, alt: str) -> None:
        rel = self.rels.get(rid)
        if rel is None or rel.external:
            return
        if kind == "chart":
            root = self.package.xml(rel.target)
            if root is None:
                return
            title = chart_title(root)
            if title:
                self.page.add(Label.CAPTION.value, f"Chart: {title}", location=self.location())
            block = table_block(chart_table(root), header_rows=1, order=0,
                                location=self.location())
            if block is not None:
                self.page.append(block)
            return
        data = self.package.read(rel.target)
        if not data:
            return
        name = self.read.image_name(len(self.read.pages) - 1, rel.target.rsplit(".", 1)[-1])
        self.read.images[name] = data
        self.page.add(Label.PICTURE.value, alt, image=name, alt=alt or None,
                      location=self.location())

    def table(self, tbl: etree._Element) -> None:
        rows: list[list[TableCell]] = []
        origins: dict[int, TableCell] = {}  # column -> the cell a vertical merge continues
        header_rows = 0
        counting_header = True
        for r, tr in enumerate(tbl.findall(f"{W}tr")):
            marked = tr.find(f"{W}trPr/{W}tblHeader")
            if counting_header and marked is not None and marked.get(
                    f"{W}val", "true") not in ("0", "false"):
                header_rows += 1
            else:
                counting_header = False
            before = tr.find(f"{W}trPr/{W}gridBefore")
            col = (_int(before.get(f"{W}val")) or 0) if before is not None else 0
            row: list[TableCell] = []
            for tc in tr.findall(f"{W}tc"):
                span_el = tc.find(f"{W}tcPr/{W}gridSpan")
                span = max(_int(span_el.get(f"{W}val")) or 1, 1) if span_el is not None else 1
                merge = tc.find(f"{W}tcPr/{W}vMerge")
                if merge is not None and merge.get(f"{W}val", "continue") != "restart" \
                        and col in origins:
                    origins[col].row_span += 1
                else:
                    cell = TableCell(row=r, col=col, col_span=span, text=self._cell_text(tc))
                    row.append(cell)
                    origins[col] = cell
                col += span
            rows.append(row)
        block = table_block(rows, header_rows=header_rows or 1, order=0,
                            location=self.location())
        if block is not None:
            self.page.append(block)

    def _cell_text(self, tc: etree._Element) -> str:
        parts = []
        for p in tc.iter(f"{W}p"):
            text = self._inline(p).text.strip()
            marker = self.list_marker(p)
            if text:
                parts.append(f"{marker[0]} {text}" if marker else text)
        return " ".join(parts)

    def heads(self) -> None:
        """Headers and footers, each distinct text once, on the first page."""
        first = self.read.pages[0]
        seen: set[str] = set()
        heads: list[Block] = []
        feet: list[Block] = []
        for rel in self.rels.values():
            if rel.type not in ("header", "footer") or rel.external:
                continue
            root = self.package.xml(rel.target)
            if root is None:
                continue
            text = " ".join(t for t in (self._inline(p).text.strip()
                                        for p in root.iter(f"{W}p")) if t)
            if not text or text in seen:
                continue
            seen.add(text)
            label = Label.PAGE_HEADER.value if rel.type == "header" else Label.PAGE_FOOTER.value
            (heads if rel.type == "header" else feet).append(
                Block(label=label, content=text, order=0))
        blocks = [*heads, *first.blocks, *feet]
        first.blocks = [b.model_copy(update={"order": n}) for n, b in enumerate(blocks)]


def _int(text: str | None) -> int | None:
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None


def _num(num: etree._Element) -> tuple[str, int] | None:
    num_id = num.find(f"{W}numId")
    ilvl = num.find(f"{W}ilvl")
    if num_id is None:
        return None
    return num_id.get(f"{W}val", ""), _int(ilvl.get(f"{W}val") if ilvl is not None else "0") or 0


def read_docx(package: Package) -> NativeRead:
    """The document's pages (see the module's docstring)."""
    reader = _Reader(package=package, part=package.main_part())
    root = reader.load()
    body = root.find(f"{W}body")
    if body is not None:
        reader.body(body)
    reader._flush_notes()
    reader.heads()
    reader.read.why = ("native DOCX: pages at Word's last rendered page breaks" if
                       reader.use_rendered else
                       "native DOCX: pages at the author's page breaks (one page without)")
    return reader.read
