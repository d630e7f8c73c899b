"""PDFs with known structure, made by LibreOffice from HTML written here (tests and
bench/structure.py): lists, nested lists, numbered steps, headings and a code listing
set in a monospaced face, so what folio reads back can be checked against what was
written."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

TIMEOUT_S = 120

STRUCTURED_HTML = """<html><body>
<h2>1 Introduction</h2>
<p>The system has three parts that work together in every installation we ship:</p>
<ul><li>a reader that takes documents from the source folder</li>
<li>a writer that stores the results in the sink
<ul><li>local folders</li><li>object stores such as S3</li></ul></li>
<li>a scheduler that runs both</li></ul>
<p>The steps are taken in this order:</p>
<ol><li>Fetch the file and compute its hash</li><li>Convert it into pages</li>
<li>Read every page with an engine</li></ol>
<h2>2 Usage</h2>
<p>Run the function below to start it, in the year 2019. It reads its arguments.</p>
<pre>def main(argv):
    for name in argv:
        print(name)
    return 0</pre>
<p>That is all there is to it, and the rest of this document explains why.</p>
</body></html>
"""


def html_to_pdf(html: str, folder: Path, name: str = "doc") -> Path:
    """``html`` as a PDF that LibreOffice Writer lays out, in ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    src = folder / f"{name}.html"
    src.write_text(html, encoding="utf-8")
    profile = folder / "lo-profile"
    subprocess.run([shutil.which("soffice") or "soffice", f"-env:UserInstallation={profile.as_uri()}",
                    "--headless", "--norestore", "--convert-to", "pdf:writer_pdf_Export",
                    "--outdir", str(folder), str(src)], check=True, capture_output=True,
                   timeout=TIMEOUT_S, stdin=subprocess.DEVNULL)
    made = folder / f"{name}.pdf"
    assert made.is_file(), "LibreOffice made no PDF"
    return made
