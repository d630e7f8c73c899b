"""Page workers forked by the zygote against new interpreters, side by side in one run.

1. Start cost: probes of a one-page PDF, one child each, wall ms per probe, in rounds
   that alternate the two modes.
2. End to end: the CLI ingests a folder of small PDFs (the real Prefect flow, text-layer
   route, no vector store) with ``FOLIO_WORKER_START=fork`` and ``=exec``, alternating;
   documents per second and the peak RSS of the process tree.

    .venv/bin/python bench/worker_start.py [--documents 40] [--rounds 2]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from _measure import median, run_with_peak_rss, save

MODES = ("fork", "exec")


def probe_ms(pdf: Path, mode: str, n: int) -> list[float]:
    from folio.pdf import zygote
    from folio.pdf.page_worker import probe

    os.environ[zygote.MODE_ENV] = mode
    probe(pdf, None, 60, 1024)  # the zygote (fork mode) starts outside the timing
    times = []
    for _ in range(n):
        started = time.perf_counter()
        probe(pdf, None, 60, 1024)
        times.append((time.perf_counter() - started) * 1000)
    return times


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--documents", type=int, default=40)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--probes", type=int, default=10, help="probes per mode per round")
    args = ap.parse_args()
    from folio import samples
    from folio.pdf import zygote

    env = dict(os.environ, PREFECT_SERVER_ANALYTICS_ENABLED="false", PREFECT_LOGGING_LEVEL="WARNING")
    with tempfile.TemporaryDirectory(prefix="folio-start-") as tmp:
        folder = Path(tmp) / "pdfs"
        folder.mkdir()
        for i in range(args.documents):
            samples.write_text_pdf(folder / f"doc-{i:03d}.pdf", samples.report_pages(seed=i, n=1))
        one = next(folder.iterdir())

        probes: dict[str, list[float]] = {m: [] for m in MODES}
        for _ in range(args.rounds):
            for mode in MODES:
                probes[mode] += probe_ms(one, mode, args.probes)

        ingest: dict[str, list[dict[str, float]]] = {m: [] for m in MODES}
        for r in range(args.rounds):
            for mode in MODES:
                out = Path(tmp) / f"out-{mode}-{r}"
                cmd = [sys.executable, "-m", "folio_prefect.flows.cli", "ingest", str(folder), "--out", str(out),
                       "--route", "text-layer", "--store", "none", "--quiet"]
                result = run_with_peak_rss(cmd, env={**env, zygote.MODE_ENV: mode})
                if result["returncode"] != 0:
                    raise SystemExit(f"ingest ({mode}) failed:\n{result['output_tail']}")
                ingest[mode].append({"seconds": round(result["seconds"], 2),
                                     "peak_rss_mib": result["peak_rss_mib"]})
                print(f"round {r} {mode}: {args.documents} documents in {result['seconds']:.1f} s, "
                      f"peak {result['peak_rss_mib']} MiB", flush=True)

    summary = {}
    for mode in MODES:
        seconds = median([run["seconds"] for run in ingest[mode]])
        summary[mode] = {
            "probe_ms_median": round(median(probes[mode]), 1),
            "ingest_seconds_median": seconds,
            "documents_per_s": round(args.documents / seconds, 2),
            "peak_rss_mib_median": median([run["peak_rss_mib"] for run in ingest[mode]]),
            "runs": ingest[mode],
        }
    result = {
        "command": "python bench/worker_start.py " + " ".join(sys.argv[1:]),
        "cpus": os.cpu_count(), "documents": args.documents, "pages_per_document": 1,
        "rounds": args.rounds, **summary,
        "probe_speedup": round(summary["exec"]["probe_ms_median"] / summary["fork"]["probe_ms_median"], 1),
        "ingest_speedup": round(summary["exec"]["ingest_seconds_median"]
                                / summary["fork"]["ingest_seconds_median"], 2),
        "note": "ingest = the whole CLI run (Prefect start-up included), text-layer route, store none",
    }
    save("worker_start", result)
    print(f"probe: fork {summary['fork']['probe_ms_median']} ms, exec {summary['exec']['probe_ms_median']} ms "
          f"({result['probe_speedup']}x); ingest: {result['ingest_speedup']}x faster with fork")


if __name__ == "__main__":
    main()
