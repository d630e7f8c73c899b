"""One Office file to markdown by an anchor (docling or markitdown), run by
bench/office_structure.py with the anchors' own Python (``--anchors-python``, a virtualenv
outside folio's: docling pulls torch). Imports nothing of folio's.

    ANCHORS_PYTHON bench/office_anchor.py docling|markitdown FILE OUT.md

Prints one JSON line: the anchor's version, the CPU seconds of the conversion itself
(its imports excluded) and an error where it failed.
"""

from __future__ import annotations

import importlib
import json
import sys
import time
from importlib.metadata import version
from pathlib import Path
from typing import Any


def docling_markdown(path: Path) -> str:
    converter: Any = importlib.import_module("docling.document_converter").DocumentConverter()
    return str(converter.convert(str(path)).document.export_to_markdown())


def markitdown_markdown(path: Path) -> str:
    reader: Any = importlib.import_module("markitdown").MarkItDown()
    return str(reader.convert(str(path)).text_content)


ANCHORS = {"docling": docling_markdown, "markitdown": markitdown_markdown}


def main() -> None:
    anchor, source, target = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
    convert = ANCHORS[anchor]
    report: dict[str, Any] = {"anchor": anchor, "version": version(anchor)}
    started = time.process_time()
    try:
        target.write_text(convert(source), encoding="utf-8")
    except Exception as exc:  # an anchor's failure on a file is a result, not a crash
        report["error"] = f"{type(exc).__name__}: {exc}"[:500]
    report["convert_cpu_s"] = round(time.process_time() - started, 3)
    print(json.dumps(report))


if __name__ == "__main__":
    main()
