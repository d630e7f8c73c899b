"""Which library reads each OOXML format (docs/office.md, issue 54): CPU seconds of the
candidates on the same files, median of ``--runs`` after an untimed warm-up.

- DOCX: python-docx's object model walked for its paragraphs' and tables' text (all it
  offers: no numbering, footnotes or comments) against folio's reader of the XML
  (folio.formats.docx_reader: everything folio keeps, on lxml as python-docx is);
- XLSX: openpyxl's full load (every cell an object, merges known) against its read-only
  stream, and folio's reader (the stream, plus one pass over the sheet's XML for merges,
  links and drawings);
- PPTX: python-pptx walked for its shapes' text against folio's reader (python-pptx plus
  notes, tables, charts, pictures).

The files are made here with the tests' builders (tests/office_files.py) at a size a
shared drive holds: a report of 40 copies of the tests' content (about 60 pages), a
workbook of 20,000 rows x 4 columns, a deck of 40 slides.

    .venv/bin/python bench/office_readers.py --runs 3
"""

from __future__ import annotations

import argparse
import copy
import statistics
import sys
import tempfile
import time
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(ROOT))
from _measure import save

from folio.formats.docx_reader import read_docx
from folio.formats.ooxml_parts import Package
from folio.formats.pptx_reader import read_pptx
from folio.formats.xlsx_reader import read_xlsx
from tests.office_files import make_docx, make_pptx, make_xlsx


def _big_docx(path: Path, copies: int) -> Path:
    import docx

    make_docx(path)
    document = docx.Document(str(path))
    body = document.element.body
    items = [el for el in body if not el.tag.endswith("sectPr")]
    for _ in range(copies - 1):
        for el in items:
            body.insert(len(body) - 1, copy.deepcopy(el))
    document.save(str(path))
    return path


def _big_pptx(path: Path, copies: int) -> Path:
    from pptx import Presentation

    make_pptx(path)
    deck = Presentation(str(path))
    layout = deck.slide_layouts[1]
    for n in range(copies):
        slide = deck.slides.add_slide(layout)
        slide.shapes.title.text = f"Slide {n}"
        frame = slide.placeholders[1].text_frame
        frame.text = "A point on the slide"
        for k in range(5):
            frame.add_paragraph().text = f"Bullet {k} with some words on it"
        slide.notes_slide.notes_text_frame.text = "Notes for the speaker"
    deck.save(str(path))
    return path


def python_docx_text(path: Path) -> int:
    import docx

    document = docx.Document(str(path))
    words = sum(len(p.text.split()) for p in document.paragraphs)
    for table in document.tables:
        for row in table.rows:
            words += sum(len(cell.text.split()) for cell in row.cells)
    return words


def folio_docx(path: Path) -> int:
    with Package(zipfile.ZipFile(path)) as package:
        return sum(len(p.blocks) for p in read_docx(package).pages)


def openpyxl_full(path: Path) -> int:
    import openpyxl

    book = openpyxl.load_workbook(path, data_only=True)
    return sum(1 for ws in book.worksheets for _ in ws.iter_rows(values_only=True))


def openpyxl_stream(path: Path) -> int:
    import openpyxl

    book = openpyxl.load_workbook(path, read_only=True, data_only=True)
    try:
        return sum(1 for ws in book.worksheets for _ in ws.iter_rows(values_only=True))
    finally:
        book.close()


def folio_xlsx(path: Path) -> int:
    return len(read_xlsx(path, max_rows=100_000, max_cells=2_000_000).pages)


def python_pptx_text(path: Path) -> int:
    from pptx import Presentation

    deck = Presentation(str(path))
    return sum(len(shape.text_frame.text) for slide in deck.slides for shape in slide.shapes
               if shape.has_text_frame)


def folio_pptx(path: Path) -> int:
    return len(read_pptx(path, speaker_notes=True).pages)


def cpu_seconds(read: Callable[[Path], int], path: Path, runs: int) -> float:
    read(path)  # warm-up: imports, caches
    times = []
    for _ in range(runs):
        start = time.process_time()
        read(path)
        times.append(time.process_time() - start)
    return round(statistics.median(times), 3)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        files = {"docx": _big_docx(folder / "report.docx", 40),
                 "xlsx": make_xlsx(folder / "book.xlsx", rows=20_000),
                 "pptx": _big_pptx(folder / "deck.pptx", 40)}
        candidates: dict[str, dict[str, Callable[[Path], int]]] = {
            "docx": {"python-docx (text only)": python_docx_text,
                     "folio docx_reader (lxml)": folio_docx},
            "xlsx": {"openpyxl full load": openpyxl_full,
                     "openpyxl read-only stream": openpyxl_stream,
                     "folio xlsx_reader (stream)": folio_xlsx},
            "pptx": {"python-pptx (text only)": python_pptx_text,
                     "folio pptx_reader (python-pptx)": folio_pptx},
        }
        results: dict[str, Any] = {}
        for kind, readers in candidates.items():
            results[kind] = {"bytes": files[kind].stat().st_size, "cpu_s": {
                name: cpu_seconds(read, files[kind], args.runs) for name, read in readers.items()}}
    save("office_readers", {
        "what": "CPU seconds to read one OOXML file, median of the runs after a warm-up, "
                "in one process (bench/office_readers.py's docstring says what each reads)",
        "runs": args.runs, "results": results})


if __name__ == "__main__":
    main()
