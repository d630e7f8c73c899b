"""``make demo``: make the sample PDFs, ingest them through the real Prefect flow on the
embedded defaults (tesseract OCR, local outputs, a local LanceDB), print where results are.

Nothing to start by hand: the CLI starts (or reuses) folio's local Prefect server,
Ghostscript and tesseract are local programs, the embedding model ships in a package.
It lives in the Prefect layer because it runs the ``folio`` command's ingest, which the
core cannot import.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path


def main() -> int:
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
    from folio_prefect.flows.cli import main as cli_main
    from folio.cli import cmd_samples

    samples, out = Path("samples"), Path("out")
    print(f"writing sample PDFs to {samples}/ ...")
    cmd_samples(type("A", (), {"directory": str(samples)})())
    report = out / "report.json"
    code = cli_main(["ingest", str(samples), "--out", str(out), "--report", str(report)])
    print(f"\noutputs: {out}/<document>-<id>/document.md|document.json|pages.jsonl")
    print(f"vectors: {out}/_vectors (LanceDB); try: .venv/bin/folio search 'revenue growth by region' --out {out}")
    print("\nsearch 'revenue growth by region':")
    cli_main(["search", "revenue growth by region", "--out", str(out), "-k", "3"])
    # encrypted.pdf is meant to end quarantined with its reason (truncated.pdf is repaired
    # by Ghostscript): exit code 3 (not every document ok) is the demo set's expected result.
    return 0 if code in (0, 3) else code


if __name__ == "__main__":
    sys.exit(main())
