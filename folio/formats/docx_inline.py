"""One DOCX paragraph's text as its author wrote it: runs, tabs and breaks, hyperlinks as
markdown links (``w:hyperlink`` and ``HYPERLINK`` fields), footnote and endnote marks,
comment marks, pictures and page breaks found on the way. Deleted text (tracked changes)
and field codes are left out; a field's shown result is kept. Pure.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

from lxml import etree

from folio.formats.office_blocks import clean_text, markdown_link

__all__ = ["Inline", "W", "read_inline"]

W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"
R = "{http://schemas.openxmlformats.org/officeDocument/2006/relationships}"
_SKIP = frozenset({f"{W}del", f"{W}moveFrom", f"{W}pPr", f"{W}rPr", f"{W}delText",
                   f"{W}instrText", f"{W}proofErr", f"{W}bookmarkStart", f"{W}bookmarkEnd"})
_HYPERLINK_FIELD = re.compile(r'^\s*HYPERLINK\s+"([^"]+)"', re.IGNORECASE)


@dataclass
class Inline:
    """What a paragraph holds besides its text."""

    text: str = ""
    footnotes: list[str] = field(default_factory=list)  # w:id of each reference, in order
    endnotes: list[str] = field(default_factory=list)
    comments: list[str] = field(default_factory=list)
    #: picture and chart references: ("image" | "chart", relationship id, alt text)
    drawings: list[tuple[str, str, str]] = field(default_factory=list)
    #: text boxes' contents (``w:txbxContent``): read as body after the paragraph
    boxes: list[etree._Element] = field(default_factory=list)
    #: page breaks: explicit ones (w:br type=page) and Word's last rendered ones
    breaks: int = 0
    rendered_breaks: int = 0
    #: whether a break came before any text (the paragraph opens the new page)
    break_first: bool = False


@dataclass
class _Field:
    instr: str = ""
    result: bool = False
    out: list[str] = field(default_factory=list)


def read_inline(paragraph: etree._Element, link: Callable[[str], str | None],
                note_mark: Callable[[str, str], str]) -> Inline:
    """``paragraph``'s text and marks; ``link`` gives a relationship id's URL,
    ``note_mark`` the mark of a footnote or endnote (``("footnote", id)`` -> ``[^1]``)."""
    found = Inline()
    out: list[str] = []
    fields: list[_Field] = []

    def sink() -> list[str]:
        for fld in reversed(fields):
            if fld.result:
                return fld.out
            return []  # inside a field's code: nothing is shown
        return out

    def linked(element: etree._Element, address: str | None) -> None:
        """``element``'s text, as a link to ``address`` where there is one."""
        before = len(sink())
        walk(element)
        target = sink()
        text = "".join(target[before:])
        del target[before:]
        target.append(markdown_link(text, address) if address and text.strip() else text)

    def walk(element: etree._Element) -> None:
        for child in element:
            tag = child.tag
            if not isinstance(tag, str) or tag in _SKIP:
                if tag == f"{W}instrText" and fields:
                    fields[-1].instr += child.text or ""
                continue
            if tag == f"{W}t":
                sink().append(child.text or "")
            elif tag in (f"{W}tab", f"{W}ptab"):
                sink().append("\t")
            elif tag in (f"{W}br", f"{W}cr"):
                if child.get(f"{W}type") == "page":
                    found.breaks += 1
                    found.break_first = found.break_first or not "".join(out).strip()
                else:
                    sink().append("\n")
            elif tag == f"{W}lastRenderedPageBreak":
                found.rendered_breaks += 1
            elif tag == f"{W}noBreakHyphen":
                sink().append("-")
            elif tag == f"{W}footnoteReference":
                sink().append(note_mark("footnote", child.get(f"{W}id", "")))
                found.footnotes.append(child.get(f"{W}id", ""))
            elif tag == f"{W}endnoteReference":
                sink().append(note_mark("endnote", child.get(f"{W}id", "")))
                found.endnotes.append(child.get(f"{W}id", ""))
            elif tag == f"{W}commentReference":
                found.comments.append(child.get(f"{W}id", ""))
            elif tag == f"{W}fldChar":
                kind = child.get(f"{W}fldCharType")
                if kind == "begin":
                    fields.append(_Field())
                elif kind == "separate" and fields:
                    fields[-1].result = True
                elif kind == "end" and fields:
                    done = fields.pop()
                    shown = "".join(done.out)
                    url = _HYPERLINK_FIELD.match(done.instr)
                    sink().append(markdown_link(shown, url.group(1)) if url and shown.strip()
                                  else shown)
            elif tag == f"{W}hyperlink":
                linked(child, link(child.get(f"{R}id", "")) if child.get(f"{R}id") else None)
            elif tag == f"{W}fldSimple":
                url = _HYPERLINK_FIELD.match(child.get(f"{W}instr", ""))
                linked(child, url.group(1) if url else None)
            elif tag in (f"{W}drawing", f"{W}pict", f"{W}object"):
                _drawings(child, found)
            elif tag == f"{_MC}AlternateContent":  # one rendering of the same content
                chosen = child.find(f"{_MC}Choice")
                walk(chosen if chosen is not None else child)
            else:  # runs, insertions, smart tags, content controls: their children
                walk(child)

    walk(paragraph)
    found.text = clean_text("".join(out)).replace("\t", " ")
    return found


_MC = "{http://schemas.openxmlformats.org/markup-compatibility/2006}"
_A = "{http://schemas.openxmlformats.org/drawingml/2006/main}"
_C = "{http://schemas.openxmlformats.org/drawingml/2006/chart}"
_WP = "{http://schemas.openxmlformats.org/drawingml/2006/wordprocessingDrawing}"
_V = "{urn:schemas-microsoft-com:vml}"


def _drawings(element: etree._Element, found: Inline) -> None:
    """Pictures (DrawingML ``a:blip``, VML ``v:imagedata``) and charts in ``element``,
    with the alt text of their ``wp:docPr`` (its description, else its title)."""
    doc_pr = element.find(f".//{_WP}docPr")
    alt = ""
    if doc_pr is not None:
        alt = clean_text(doc_pr.get("descr") or doc_pr.get("title") or "").strip()
    for blip in element.iter(f"{_A}blip"):
        rid = blip.get(f"{R}embed")
        if rid:
            found.drawings.append(("image", rid, alt))
    for data in element.iter(f"{_V}imagedata"):
        rid = data.get(f"{R}id")
        if rid:
            found.drawings.append(("image", rid, alt or clean_text(data.get("title") or "")))
    found.boxes.extend(element.iter(f"{W}txbxContent"))
    for chart in element.iter(f"{_C}chart"):
        rid = chart.get(f"{R}id")
        if rid:
            found.drawings.append(("chart", rid, alt))
