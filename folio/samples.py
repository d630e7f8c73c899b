"""Small PDFs folio makes itself, for the demo, the tests and the benchmarks.

They are written with Ghostscript from PostScript (real text layers with embedded fonts),
with Pillow (image-only "scans"), and by damaging bytes (malformed files), so nothing is
downloaded and no third-party document is copied.
"""

from __future__ import annotations

import io
import random
import subprocess
import tempfile
import textwrap
from pathlib import Path

from pydantic import BaseModel

PAGE_W, PAGE_H = 612, 792  # US Letter, points

_WORDS = (
    "ingestion pipeline document page render table figure section model engine vector "
    "search index query token budget archive contract invoice report summary revenue "
    "quarter customer region market growth policy safety quality review audit system "
    "network storage server cluster worker schedule bucket object prefix retry failure "
    "recovery backup latency throughput memory processor measurement result analysis"
).split()


class SamplePage(BaseModel):
    title: str | None = None
    heading: str | None = None
    paragraphs: list[str] = []
    table: list[list[str]] | None = None

    def text(self) -> str:
        parts = [p for p in (self.title, self.heading) if p]
        parts += self.paragraphs
        if self.table:
            parts += [" ".join(row) for row in self.table]
        return "\n".join(parts)


def sentences(seed: int, n: int) -> str:
    """Deterministic English-like text (real words, so OCR dictionaries apply)."""
    rnd = random.Random(seed)
    out = []
    for _ in range(n):
        words = [rnd.choice(_WORDS) for _ in range(rnd.randint(8, 14))]
        out.append(" ".join(words).capitalize() + ".")
    return " ".join(out)


def _ps_string(s: str) -> str:
    return "(" + s.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)") + ")"


def _page_postscript(page: SamplePage) -> str:
    lines: list[str] = []
    y = PAGE_H - 72.0

    def show(text: str, font: str, size: float, x: float = 72.0) -> None:
        nonlocal y
        lines.append(f"/{font} findfont {size} scalefont setfont {x:.1f} {y:.1f} moveto "
                     f"{_ps_string(text)} show")

    if page.title:
        show(page.title, "Helvetica-Bold", 20)
        y -= 34
    if page.heading:
        show(page.heading, "Helvetica-Bold", 14)
        y -= 24
    for para in page.paragraphs:
        for line in textwrap.wrap(para, 86):
            show(line, "Times-Roman", 11)
            y -= 14
        y -= 10
    if page.table:
        cols = len(page.table[0])
        col_w = 468.0 / cols
        row_h = 18.0
        top = y + 12
        for r, row in enumerate(page.table):
            for c, cell in enumerate(row):
                font = "Helvetica-Bold" if r == 0 else "Helvetica"
                lines.append(f"/{font} findfont 10 scalefont setfont "
                             f"{72 + c * col_w + 4:.1f} {y:.1f} moveto {_ps_string(cell)} show")
            y -= row_h
        bottom = y + 12
        # grid lines
        for r in range(len(page.table) + 1):
            yy = top - r * row_h
            lines.append(f"newpath 72 {yy:.1f} moveto 540 {yy:.1f} lineto 0.5 setlinewidth stroke")
        for c in range(cols + 1):
            xx = 72 + c * col_w
            lines.append(f"newpath {xx:.1f} {top:.1f} moveto {xx:.1f} {bottom:.1f} lineto stroke")
    lines.append("showpage")
    return "\n".join(lines)


def _gs_pdf(postscript: str, out: Path, extra: list[str] | None = None) -> Path:
    with tempfile.TemporaryDirectory(prefix="folio-sample-") as tmp:
        ps = Path(tmp) / "in.ps"
        ps.write_text(f"%!PS\n<< /PageSize [{PAGE_W} {PAGE_H}] >> setpagedevice\n{postscript}\n")
        cmd = ["gs", "-q", "-dSAFER", "-dBATCH", "-dNOPAUSE", "-sDEVICE=pdfwrite",
               *(extra or []), f"-sOutputFile={out}", str(ps)]
        subprocess.run(cmd, check=True, timeout=120, capture_output=True)
    return out


def write_postscript_pdf(out: Path, postscript: str) -> Path:
    """A PDF of one's own PostScript page(s) (each ending in ``showpage``), US Letter."""
    return _gs_pdf(postscript, out)


def write_text_pdf(out: Path, pages: list[SamplePage], extra_gs: list[str] | None = None) -> Path:
    """A born-digital PDF with a real text layer."""
    return _gs_pdf("\n".join(_page_postscript(p) for p in pages), out, extra_gs)


def report_pages(seed: int = 1, n: int = 2) -> list[SamplePage]:
    pages = []
    for i in range(n):
        page = SamplePage(
            title="Quarterly Operations Report" if i == 0 else None,
            heading=f"Section {i + 1}: {' '.join(random.Random(seed + i).sample(_WORDS, 3)).title()}",
            paragraphs=[sentences(seed * 100 + i * 10 + k, 4) for k in range(3)],
        )
        if i == n - 1:
            page.table = [["Region", "Revenue", "Growth"], ["North", "1200", "4.5%"],
                          ["South", "980", "3.1%"], ["West", "1430", "6.2%"]]
        pages.append(page)
    return pages


def write_scanned_pdf(out: Path, source_pdf: Path, dpi: int = 200, seed: int = 7) -> Path:
    """An image-only PDF made by rasterising ``source_pdf`` and adding scanner noise."""
    import pypdfium2 as pdfium
    from PIL import Image, ImageFilter

    rnd = random.Random(seed)
    images: list[Image.Image] = []
    doc = pdfium.PdfDocument(str(source_pdf))
    try:
        for page in doc:
            img = page.render(scale=dpi / 72).to_pil().convert("L")
            img = img.rotate(rnd.uniform(-0.6, 0.6), fillcolor=255, expand=False)
            img = img.filter(ImageFilter.GaussianBlur(0.4))
            images.append(img)
    finally:
        doc.close()
    images[0].save(out, "PDF", resolution=dpi, save_all=True, append_images=images[1:])
    return out


def write_blank_pdf(out: Path, n: int = 1) -> Path:
    return _gs_pdf("\n".join(["showpage"] * n), out)


def write_encrypted_pdf(out: Path, password: str) -> Path:
    return write_text_pdf(
        out, report_pages(seed=5, n=1),
        extra_gs=[f"-sOwnerPassword={password}-owner", f"-sUserPassword={password}"],
    )


def write_malformed_pdf(out: Path, source_pdf: Path) -> Path:
    """A PDF cut off in the middle and with its cross-reference table damaged."""
    data = source_pdf.read_bytes()
    cut = data[: int(len(data) * 0.6)]
    out.write_bytes(cut.replace(b"xref", b"xrfe"))
    return out


def write_not_pdf(out: Path) -> Path:
    out.write_bytes(b"This is a plain text file with a .pdf name.\n")
    return out


def write_long_pdf(out: Path, n_pages: int, seed: int = 3) -> Path:
    """Many text pages, generated in PostScript itself so it stays fast for 1000+ pages."""
    body = sentences(seed, 6)
    wrapped = textwrap.wrap(body, 86)
    show_lines = "\n".join(
        f"72 {700 - 14 * k} moveto {_ps_string(line)} show" for k, line in enumerate(wrapped)
    )
    ps = (
        f"1 1 {n_pages} {{\n  /n exch def\n"
        "  /Helvetica-Bold findfont 14 scalefont setfont 72 730 moveto (Page ) show "
        "n 10 string cvs show\n"
        f"  /Times-Roman findfont 11 scalefont setfont\n{show_lines}\n  showpage\n}} for"
    )
    return _gs_pdf(ps, out)


def make_samples(directory: Path) -> dict[str, Path]:
    """The demo set: each kind of input the pipeline must handle, with a typed outcome."""
    directory.mkdir(parents=True, exist_ok=True)
    report = write_text_pdf(directory / "report.pdf", report_pages(seed=1, n=2))
    scanned = write_scanned_pdf(directory / "scanned-letter.pdf", write_text_pdf(
        Path(tempfile.mkdtemp(prefix="folio-")) / "letter.pdf", report_pages(seed=2, n=1)))
    out = {
        "report": report,
        "scanned": scanned,
        "blank": write_blank_pdf(directory / "blank.pdf"),
        "encrypted": write_encrypted_pdf(directory / "encrypted.pdf", "folio"),
        "malformed": write_malformed_pdf(directory / "truncated.pdf", report),
    }
    return out


def page_text(pdf: Path) -> str:
    """Text of every page via pdfium (used by tests to compare against outputs)."""
    import pypdfium2 as pdfium

    buf = io.StringIO()
    doc = pdfium.PdfDocument(str(pdf))
    try:
        for page in doc:
            buf.write(page.get_textpage().get_text_range())
            buf.write("\n")
    finally:
        doc.close()
    return buf.getvalue()
