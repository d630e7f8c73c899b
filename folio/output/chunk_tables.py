"""Which blocks are tables, and which text is a table's caption: what keeps a table and
its caption in one chunk. Pure (folio.output.chunking)."""

from __future__ import annotations

import re

from folio.models import Block, Label

_HTML_TABLE = re.compile(r"<table\b", re.IGNORECASE)
_PIPE_ROW = re.compile(r"^\s*\|.*\|\s*$")
#: a caption that names a figure (or a chart, a photo): not a table's
_FIGURE_CAPTION = re.compile(
    r"^(?:fig(?:ure)?|chart|graph|image|photo|plate|scheme|diagram|abb(?:ildung)?|illustration)"
    r"\b\.?", re.IGNORECASE)
#: "Table 2: ...", "Table 2-2 Comparison", "Tab. IV. Results", "Tabelle 3 Werte": a table's
#: name and number, then a separator or a capitalised word (not "Table 2 shows that ...")
_TABLE_CAPTION = re.compile(
    r"^(?i:table|tab|tabelle|tabla|tableau|tabella)\.?\s*(?:\d+|[IVXL]+|[A-Z])(?:[-.]\d+)*"
    r"\.?\s*(?:[:.\-\u2013\u2014|]|$|[A-Z(\d])")
#: a caption is short: a paragraph after "Table 3" is the text discussing it
_CAPTION_MAX_CHARS = 400


def is_table_markup(content: str) -> bool:
    """Whether a Table block's content is a table (an HTML table, or markdown pipe rows):
    a block labelled Table over text a grid could not be made of is chunked as text, as
    ``kind: table`` promises a whole table."""
    content = content.strip()
    if _HTML_TABLE.search(content):
        return True
    lines = [line for line in content.splitlines() if line.strip()]
    return len(lines) >= 2 and all(_PIPE_ROW.match(line) for line in lines)


def is_table_caption(block: Block) -> bool:
    """Whether ``block`` can be the caption of a table beside it: a short Caption block
    that names no figure, or a short text block that opens as a table's caption. Where a
    caption sits was settled before (folio.page.caption_order moves it beside its table)."""
    text = " ".join(block.content.split())
    if not text or len(text) > _CAPTION_MAX_CHARS:
        return False
    label = block.label.lower()
    if label == Label.CAPTION.lower():
        return not _FIGURE_CAPTION.match(text)
    return label == Label.TEXT.lower() and bool(_TABLE_CAPTION.match(text))
