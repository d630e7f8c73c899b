"""Office files with known content for bench/office_structure.py: a report (DOCX), a
workbook (XLSX) and a deck (PPTX) written from the fixed spec below (no randomness: the same
bytes of content every run), each returned with its ground truth (bench/office_truth.py),
and LibreOffice's conversions of each to the legacy and OpenDocument formats (DOCX to ODT,
RTF and DOC; XLSX to XLS and ODS; PPTX to ODP and PPT), which carry the same truth.

    report.docx: a Title, headings at three levels, a nested bulleted list and a nested
      numbered list, a bordered table (Table Grid) and a borderless one (python-docx's
      default table style) with merged cells, a comment, a footnote (its XML part written
      here: python-docx has no footnote API), a hyperlink, a PNG picture with alt text and
      a caption
    workbook.xlsx: "Shipments" (a header row and 200 rows: ids, dates, text, numbers, a
      formula per row with its cached value) and "Summary" (formulas over Shipments)
    deck.pptx: a title slide, a slide of nested bullets, a table with a merged cell, a
      column chart with known values, speaker notes

The workbook's formulas carry cached values as Excel writes them (openpyxl writes a
formula without its value; the value is put into the sheet's XML here), so a reader that
takes cached values sees the numbers a user sees.
"""

from __future__ import annotations

import datetime as dt
import re
import subprocess
import tempfile
import zipfile
from pathlib import Path
from typing import Any

from bench.office_deck import build_deck
from bench.office_report import build_report
from bench.office_truth import Cell, Fixture, Heading, Table, Truth

#: the conversions LibreOffice makes of each OOXML file: extension and export filter
CONVERSIONS: dict[str, tuple[tuple[str, str], ...]] = {
    "docx": (("odt", "writer8"), ("rtf", "Rich Text Format"), ("doc", "MS Word 97")),
    "xlsx": (("xls", "MS Excel 97"), ("ods", "calc8")),
    "pptx": (("odp", "impress8"), ("ppt", "MS PowerPoint 97")),
}

_REGIONS = ("North", "South", "East", "West", "Coastal")
_PRODUCTS = (("Pallet wrap", 2.5), ("Cable ties", 4.25), ("Shrink film", 7.75),
             ("Corner boards", 12.0), ("Strapping coil", 3.5), ("Label rolls", 9.25))
SHIPMENT_ROWS = 200
_HEADER = ("Shipment ID", "Ship Date", "Region", "Product", "Quantity", "Unit Price", "Total")


def number_text(value: float) -> str:
    """A number as a person reads it in a cell: no trailing zeros (12.5, 40, 3.25)."""
    return f"{value:.4f}".rstrip("0").rstrip(".")


def shipments() -> list[tuple[str, dt.date, str, str, int, float, float]]:
    """The Shipments sheet's rows (a fixed function of the row number)."""
    rows = []
    for i in range(1, SHIPMENT_ROWS + 1):
        product, price = _PRODUCTS[(i * 7) % len(_PRODUCTS)]
        quantity = 10 + (i * 37) % 90
        rows.append((f"SH-{1000 + i}", dt.date(2025, 7, 1) + dt.timedelta(days=i // 3),
                     _REGIONS[i % len(_REGIONS)], product, quantity, price, quantity * price))
    return rows


def _summary() -> list[tuple[str, int, int]]:
    rows = shipments()
    return [(region, sum(r[2] == region for r in rows),
             sum(r[4] for r in rows if r[2] == region)) for region in _REGIONS]


def _set_cached_values(path: Path, sheet_xml: str, values: dict[str, str]) -> None:
    """Write each formula cell's cached value (``values``: cell reference to value) into
    ``sheet_xml`` of the workbook at ``path``, where openpyxl left ``<v></v>`` empty."""
    with zipfile.ZipFile(path) as archive:
        members = {name: archive.read(name) for name in archive.namelist()}
    xml = members[sheet_xml].decode()

    def fill(match: re.Match[str]) -> str:
        return f"{match.group(1)}<f>{match.group(3)}</f><v>{values[match.group(2)]}</v>"

    xml, count = re.subn(r'(<c r="([A-Z]+[0-9]+)"[^>]*>)<f>([^<]*)</f><v\s*/>', fill, xml)
    xml, more = re.subn(r'(<c r="([A-Z]+[0-9]+)"[^>]*>)<f>([^<]*)</f><v></v>', fill, xml)
    if count + more != len(values):
        raise RuntimeError(f"{sheet_xml}: {count + more} formulas filled of {len(values)}")
    members[sheet_xml] = xml.encode()
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            archive.writestr(name, data)


def build_workbook(path: Path) -> Truth:
    """workbook.xlsx: Shipments (header + 200 rows, a Total formula a row) and Summary."""
    from openpyxl import Workbook

    book = Workbook()
    sheet: Any = book.active
    sheet.title = "Shipments"
    sheet.append(list(_HEADER))
    cached: dict[str, str] = {}
    cells = [Cell(row=0, col=c, text=h) for c, h in enumerate(_HEADER)]
    for r, (ident, date, region, product, qty, price, total) in enumerate(shipments(), 1):
        excel_row = r + 1
        sheet.append([ident, date, region, product, qty, price, f"=E{excel_row}*F{excel_row}"])
        sheet.cell(excel_row, 2).number_format = "yyyy-mm-dd"
        cached[f"G{excel_row}"] = number_text(total)
        texts = (ident, date.isoformat(), region, product, str(qty), number_text(price),
                 number_text(total))
        cells += [Cell(row=r, col=c, text=t) for c, t in enumerate(texts)]
    summary: Any = book.create_sheet("Summary")
    summary.append(["Region", "Orders", "Quantity"])
    summary_cells = [Cell(row=0, col=c, text=t)
                     for c, t in enumerate(("Region", "Orders", "Quantity"))]
    summary_cached: dict[str, str] = {}
    last = SHIPMENT_ROWS + 1
    for r, (region, count, quantity) in enumerate(_summary(), 1):
        summary.append([region, f'=COUNTIF(Shipments!C2:C{last},A{r + 1})',
                        f'=SUMIF(Shipments!C2:C{last},A{r + 1},Shipments!E2:E{last})'])
        summary_cached[f"B{r + 1}"], summary_cached[f"C{r + 1}"] = str(count), str(quantity)
        summary_cells += [Cell(row=r, col=c, text=t)
                          for c, t in enumerate((region, str(count), str(quantity)))]
    # columns as wide as their contents, as Excel makes them while one types (openpyxl
    # leaves the default width, which prints a date as ### and cuts text off)
    for ws, widths in ((sheet, (12, 12, 10, 16, 10, 11, 10)), (summary, (10, 10, 10))):
        for letter, width in zip("ABCDEFG", widths, strict=False):
            ws.column_dimensions[letter].width = width
    book.save(path)
    _set_cached_values(path, "xl/worksheets/sheet1.xml", cached)
    _set_cached_values(path, "xl/worksheets/sheet2.xml", summary_cached)
    return Truth(
        text=[c.text for c in cells] + [c.text for c in summary_cells],
        headings=[Heading(text="Shipments", level=1), Heading(text="Summary", level=1)],
        tables=[Table(name="Shipments", cells=cells), Table(name="Summary", cells=summary_cells)],
        sheets=["Shipments", "Summary"])


def build_sources(folder: Path) -> list[Fixture]:
    """report.docx, workbook.xlsx and deck.pptx in ``folder``, with their truth."""
    folder.mkdir(parents=True, exist_ok=True)
    made = []
    for name, build in (("report.docx", build_report), ("workbook.xlsx", build_workbook),
                        ("deck.pptx", build_deck)):
        path = folder / name
        made.append(Fixture(name=name, format=path.suffix[1:], source=name, path=path,
                            truth=build(path)))
    return made


def convert(source: Fixture, extension: str, export_filter: str, folder: Path,
            soffice: str = "soffice", timeout_s: float = 300) -> Fixture:
    """LibreOffice's conversion of ``source`` to ``extension`` (its own profile, headless),
    named ``STEM-from-SOURCEEXT.EXTENSION`` in ``folder``, with the source's truth."""
    with tempfile.TemporaryDirectory(prefix="lo-profile-") as profile, \
            tempfile.TemporaryDirectory(prefix="lo-out-") as out:
        subprocess.run([soffice, f"-env:UserInstallation={Path(profile).as_uri()}",
                        "--headless", "--norestore", "--convert-to",
                        f"{extension}:{export_filter}", "--outdir", out, str(source.path)],
                       check=True, capture_output=True, timeout=timeout_s,
                       stdin=subprocess.DEVNULL)
        made = Path(out) / f"{source.path.stem}.{extension}"
        if not made.is_file():
            raise RuntimeError(f"LibreOffice made no {extension} of {source.name}")
        name = f"{source.path.stem}-from-{source.format}.{extension}"
        target = folder / name
        target.write_bytes(made.read_bytes())
    return Fixture(name=name, format=extension, source=source.name, path=target,
                   truth=source.truth)


def build_all(folder: Path, soffice: str = "soffice") -> list[Fixture]:
    """The three OOXML files and their seven LibreOffice conversions, in ``folder``."""
    sources = build_sources(folder)
    converted = [convert(source, extension, export_filter, folder, soffice)
                 for source in sources
                 for extension, export_filter in CONVERSIONS[source.format]]
    return sources + converted

