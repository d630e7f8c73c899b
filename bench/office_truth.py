"""The ground truth of an Office fixture (bench/office_docs.py writes the files, beside what
they hold; bench/office_scoring.py scores a reader's output against it).

Kept apart from the builders so the scoring and its tests need neither python-docx nor
LibreOffice: a truth is plain data, written beside the files as JSON.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, Field


class Heading(BaseModel):
    text: str
    #: 1 for a document's Title, a deck's slide titles and a workbook's sheet names; a
    #: DOCX's Heading N is N + 1 (the Title stands above Heading 1)
    level: int


class ListItem(BaseModel):
    text: str
    #: nesting depth, 1 for a top-level item (folio.models.Block.level's meaning)
    level: int
    ordered: bool


class Cell(BaseModel):
    """One cell of a table's grid at its top-left slot (0-based), as the author made it."""

    row: int
    col: int
    text: str
    row_span: int = 1
    col_span: int = 1


class Table(BaseModel):
    #: what the table is, for a reader of the result ("Shipments", "bordered table")
    name: str
    cells: list[Cell]


class Truth(BaseModel):
    """What one Office file holds, by kind of structure."""

    #: the body's text, fragment by fragment (headings, paragraphs, list items, table
    #: cells, captions, slide text, sheet cells): word recall counts its words
    text: list[str] = Field(default_factory=list)
    headings: list[Heading] = Field(default_factory=list)
    list_items: list[ListItem] = Field(default_factory=list)
    tables: list[Table] = Field(default_factory=list)
    sheets: list[str] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)
    comments: list[str] = Field(default_factory=list)
    footnotes: list[str] = Field(default_factory=list)
    links: list[str] = Field(default_factory=list)
    #: a chart's data values, as the author typed them
    chart_values: list[str] = Field(default_factory=list)
    captions: list[str] = Field(default_factory=list)


class Fixture(BaseModel):
    """One file of the benchmark: its name, format, where it lies and what it holds."""

    name: str
    #: the file's format by its extension (docx, odt, rtf, doc, xlsx, xls, ods, pptx, ...)
    format: str
    #: the OOXML file it was made from (itself for docx, xlsx, pptx)
    source: str
    path: Path
    truth: Truth
