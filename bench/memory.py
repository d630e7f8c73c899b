"""Peak memory of a whole ingestion (parent + page workers) against page count.

Ingests generated text PDFs of 50 and 1000 pages through the CLI (the real Prefect flow),
rendering every page (route text-layer renders all pages and skips OCR so the 1000-page
run stays minutes, not hours), and prints the peak summed RSS of the process tree for each.
Flat means: the 1000-page peak is close to the 50-page peak, not 20 times it.

    .venv/bin/python bench/memory.py [--pages 50 1000]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _measure import run_with_peak_rss, save


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pages", type=int, nargs="+", default=[50, 1000])
    args = ap.parse_args()
    from folio.samples import write_long_pdf

    env = dict(os.environ, PREFECT_SERVER_ANALYTICS_ENABLED="false",
               PREFECT_LOGGING_LEVEL="WARNING")
    runs = []
    with tempfile.TemporaryDirectory(prefix="folio-mem-") as tmp:
        for n in args.pages:
            pdf = write_long_pdf(Path(tmp) / f"long-{n}.pdf", n)
            out = Path(tmp) / f"out-{n}"
            cmd = [sys.executable, "-m", "folio_prefect.flows.cli", "ingest", str(pdf), "--out", str(out),
                   "--route", "text-layer", "--quiet"]
            result = run_with_peak_rss(cmd, env=env)
            if result["returncode"] != 0:
                raise SystemExit(f"ingest of {n} pages failed:\n{result['output_tail']}")
            runs.append({"pages": n, "peak_rss_mib": result["peak_rss_mib"],
                         "seconds": round(result["seconds"], 1),
                         "pages_per_s": round(n / result["seconds"], 2)})
            print(f"{n:5d} pages: peak {result['peak_rss_mib']} MiB in {result['seconds']:.1f} s")
    small, large = runs[0], runs[-1]
    save("memory", {
        "runs": runs,
        "ratio_peak_rss": round(large["peak_rss_mib"] / small["peak_rss_mib"], 3),
        "ratio_pages": large["pages"] / small["pages"],
        "note": "peak RSS summed over the CLI process and its page-worker children, "
                "sampled every 50 ms; rendering every page, text-layer route",
    })


if __name__ == "__main__":
    main()
