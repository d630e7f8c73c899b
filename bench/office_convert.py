"""LibreOffice conversion seconds per Office document (folio.formats.office.convert_to_pdf).

For each of DOCX, XLSX, PPTX, ODT, RTF and DOC at two sizes (small: a page, a sheet of 20
rows, 2 slides; medium: about 30 pages of text with a picture every few pages, a workbook
of 3 sheets x 1000 rows x 8 columns, 30 slides), the wall seconds and CPU seconds (the
conversion's whole process tree: prlimit, oosplash, soffice.bin) of one conversion, median
of ``--runs`` after one untimed warm-up, with its peak resident memory and the PDF's pages.
The conversions run one at a time with the default settings (office.timeout_s,
office.memory_mb), as the pipeline calls them.

The documents are made here: ODT, ODS and ODP written by hand (generated text from a
fixed vocabulary, seeded, and a noise picture that compresses as a photo does), DOCX, DOC,
RTF, XLSX and PPTX exported from them by LibreOffice itself (not timed).

    .venv/bin/python bench/office_convert.py --runs 3
"""

from __future__ import annotations

import argparse
import io
import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _measure import PeakRss, git, save

from folio.formats.office import convert_to_pdf, find_soffice
from folio.settings.resources import OfficeSettings

_NS = ('xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" '
       'xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0" '
       'xmlns:table="urn:oasis:names:tc:opendocument:xmlns:table:1.0" '
       'xmlns:draw="urn:oasis:names:tc:opendocument:xmlns:drawing:1.0" '
       'xmlns:xlink="http://www.w3.org/1999/xlink" '
       'xmlns:svg="urn:oasis:names:tc:opendocument:xmlns:svg-compatible:1.0"')
_WORDS = ("the of and to in is that for it as was with be by on not he this are or his from at "
          "which but have an they you were their one all we can her has there been if more "
          "when will would who so no report quarterly revenue figures contract clause party "
          "agreement section shall terms payment delivery schedule annex table results "
          "method analysis sample measured value increase decrease percent total").split()


def _sentence(rng: random.Random) -> str:
    words = [rng.choice(_WORDS) for _ in range(rng.randint(8, 20))]
    return " ".join(words).capitalize() + "."


def _picture(rng: random.Random) -> bytes:
    from PIL import Image

    image = Image.frombytes("RGB", (480, 320), rng.randbytes(480 * 320 * 3))
    out = io.BytesIO()
    image.save(out, "JPEG", quality=85)
    return out.getvalue()


def write_odf(path: Path, kind: str, body: str, pictures: dict[str, bytes]) -> Path:
    entries = "".join(f'<manifest:file-entry manifest:full-path="{name}" '
                      'manifest:media-type="image/jpeg"/>' for name in pictures)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr(zipfile.ZipInfo("mimetype"), f"application/vnd.oasis.opendocument.{kind}")
        archive.writestr("META-INF/manifest.xml", (
            '<?xml version="1.0" encoding="UTF-8"?><manifest:manifest xmlns:manifest='
            '"urn:oasis:names:tc:opendocument:xmlns:manifest:1.0" manifest:version="1.2">'
            '<manifest:file-entry manifest:full-path="/" manifest:media-type='
            f'"application/vnd.oasis.opendocument.{kind}"/><manifest:file-entry '
            f'manifest:full-path="content.xml" manifest:media-type="text/xml"/>{entries}'
            "</manifest:manifest>"))
        for name, data in pictures.items():
            archive.writestr(name, data)
        archive.writestr("content.xml", (
            f'<?xml version="1.0" encoding="UTF-8"?><office:document-content {_NS} '
            f'office:version="1.2"><office:body>{body}</office:body></office:document-content>'))
    return path


def make_text(path: Path, paragraphs: int, picture_every: int, rng: random.Random) -> Path:
    parts, pictures = [], {}
    for i in range(paragraphs):
        if i % 12 == 0:
            parts.append(f"<text:h text:outline-level=\"1\">Section {i // 12 + 1}</text:h>")
        parts.append(f"<text:p>{' '.join(_sentence(rng) for _ in range(5))}</text:p>")
        if picture_every and i % picture_every == picture_every - 1:
            name = f"Pictures/p{i}.jpg"
            pictures[name] = _picture(rng)
            parts.append(f'<text:p><draw:frame svg:width="12cm" svg:height="8cm" '
                         f'text:anchor-type="as-char"><draw:image xlink:href="{name}"/>'
                         "</draw:frame></text:p>")
    return write_odf(path, "text", f"<office:text>{''.join(parts)}</office:text>", pictures)


def make_sheet(path: Path, sheets: int, rows: int, cols: int, rng: random.Random) -> Path:
    def cell(value: str | float) -> str:
        if isinstance(value, float):
            return (f'<table:table-cell office:value-type="float" office:value="{value}">'
                    f"<text:p>{value}</text:p></table:table-cell>")
        return f"<table:table-cell><text:p>{value}</text:p></table:table-cell>"

    tables = []
    for s in range(sheets):
        body = ["<table:table-row>" + "".join(cell(f"Column {c + 1}") for c in range(cols))
                + "</table:table-row>"]
        for _ in range(rows):
            values: list[str | float] = [rng.choice(_WORDS).capitalize()]
            values += [round(rng.uniform(0, 10000), 2) for _ in range(cols - 1)]
            body.append("<table:table-row>" + "".join(cell(v) for v in values)
                        + "</table:table-row>")
        tables.append(f'<table:table table:name="Sheet{s + 1}">{"".join(body)}</table:table>')
    return write_odf(path, "spreadsheet",
                     f"<office:spreadsheet>{''.join(tables)}</office:spreadsheet>", {})


def make_slides(path: Path, slides: int, rng: random.Random) -> Path:
    pages = []
    for s in range(slides):
        bullets = "".join(f"<text:p>{_sentence(rng)}</text:p>" for _ in range(5))
        pages.append(
            f'<draw:page draw:name="s{s + 1}"><draw:frame svg:x="1cm" svg:y="1cm" '
            f'svg:width="24cm" svg:height="2cm"><draw:text-box><text:p>Slide {s + 1}: '
            f"{rng.choice(_WORDS)} {rng.choice(_WORDS)}</text:p></draw:text-box></draw:frame>"
            '<draw:frame svg:x="1cm" svg:y="4cm" svg:width="24cm" svg:height="12cm">'
            f"<draw:text-box>{bullets}</draw:text-box></draw:frame></draw:page>")
    return write_odf(path, "presentation",
                     f"<office:presentation>{''.join(pages)}</office:presentation>", {})


def export(src: Path, extension: str, out: Path) -> Path:
    """LibreOffice's own export of ``src`` (the bench's inputs, not timed)."""
    profile = Path(tempfile.mkdtemp(prefix="lo-export-"))
    subprocess.run([find_soffice() or "soffice", f"-env:UserInstallation={profile.as_uri()}",
                    "--headless", "--norestore", "--convert-to", extension, "--outdir",
                    str(out), str(src)], check=True, capture_output=True, timeout=600,
                   stdin=subprocess.DEVNULL)
    made = out / f"{src.stem}.{extension}"
    return made.rename(out / f"{src.stem}-{extension}.{extension}")


def make_documents(folder: Path) -> dict[str, dict[str, Path]]:
    rng = random.Random(43)
    docs: dict[str, dict[str, Path]] = {}
    for size, (paragraphs, pictures, sheets, rows, slides) in {
            "small": (4, 0, 1, 20, 2), "medium": (120, 8, 3, 1000, 30)}.items():
        odt = make_text(folder / f"{size}.odt", paragraphs, pictures, rng)
        ods = make_sheet(folder / f"{size}.ods", sheets, rows, 8, rng)
        odp = make_slides(folder / f"{size}.odp", slides, rng)
        docs[size] = {"odt": odt, "docx": export(odt, "docx", folder),
                      "doc": export(odt, "doc", folder), "rtf": export(odt, "rtf", folder),
                      "xlsx": export(ods, "xlsx", folder), "pptx": export(odp, "pptx", folder)}
    return docs


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def measure(src: Path, work: Path, settings: OfficeSettings, runs: int) -> dict[str, Any]:
    import pypdfium2 as pdfium

    samples: list[tuple[float, float, float, int]] = []
    pages = 0
    for run in range(runs + 1):
        load = os.getloadavg()[0]
        with PeakRss(0.05, children_only=True) as rss:
            cpu0, t0 = _children_cpu(), time.monotonic()
            pdf = convert_to_pdf(src, work, timeout_s=settings.timeout_s,
                                 memory_mb=settings.memory_mb)
            wall, cpu = time.monotonic() - t0, _children_cpu() - cpu0
        with pdfium.PdfDocument(pdf) as document:
            pages = len(document)
        pdf.unlink()
        if run:  # the first is a warm-up: LibreOffice's libraries into the page cache
            samples.append((wall, cpu, load, rss.peak_kib))
    walls, cpus, loads, peaks = zip(*samples, strict=True)
    return {"bytes": src.stat().st_size, "pdf_pages": pages,
            "wall_s_median": round(statistics.median(walls), 2),
            "wall_s_range": [round(min(walls), 2), round(max(walls), 2)],
            "cpu_s_median": round(statistics.median(cpus), 2),
            "peak_rss_mib_max": round(max(peaks) / 1024, 1),
            "load_1min_median": round(statistics.median(loads), 2), "runs": len(walls)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    settings = OfficeSettings()
    version = subprocess.run([find_soffice() or "soffice", "--version"], capture_output=True,
                             text=True, stdin=subprocess.DEVNULL).stdout.strip()
    started = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    with tempfile.TemporaryDirectory(prefix="office-bench-") as tmp:
        docs = make_documents(Path(tmp))
        results: dict[str, Any] = {}
        for size, by_format in docs.items():
            for fmt, src in by_format.items():
                results[f"{fmt}_{size}"] = row = measure(src, Path(tmp) / "work", settings,
                                                         args.runs)
                print(fmt, size, row, flush=True)
    save("office_convert", {
        "what": "folio.formats.office.convert_to_pdf, one conversion at a time: wall and CPU "
                "seconds of LibreOffice's process tree, median of the runs after a warm-up",
        "settings": {"office.timeout_s": settings.timeout_s,
                     "office.memory_mb": settings.memory_mb, "changed": "none (defaults)"},
        "libreoffice": version,
        "machine": f"the 2-core development machine, shared with other developers' work "
                   f"({os.cpu_count()} CPUs seen); load_1min_median beside every figure",
        "commit": git("rev-parse", "--short", "HEAD"),
        "started": started,
        "documents": results,
    })


if __name__ == "__main__":
    main()
