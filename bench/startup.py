"""How long `folio ingest` takes before it does anything, and where that time goes.

Cases, each run ``--runs`` times as a fresh process (median and spread reported):

- ``empty``: a folder with no PDF (answered before Prefect starts: exit 5);
- ``first``: a new one-page PDF, until exit; its first page ended at the flow's start
  (``timing.started_unix`` in its report) plus ``timing.first_page_s``, counted here from
  the process's launch;
- ``cached``: the same PDF again (done-index hit), until exit;
- ``imports``: ``import folio_prefect.flows.ingest`` alone (what every run pays before Prefect).

The gap between a run's wall time and its flow's own ``timing.seconds``, less the
imports, is Prefect's start (its temporary local server) and teardown.

    .venv/bin/python bench/startup.py --runs 5      # -> bench/results/startup.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
last_launch_unix = 0.0  # when timed() last started a process (time.time())


def timed(argv: list[str], cwd: Path, env: dict[str, str] | None = None) -> tuple[float, int]:
    global last_launch_unix
    last_launch_unix = time.time()
    started = time.perf_counter()
    proc = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=600, env=env)
    return time.perf_counter() - started, proc.returncode


def summary(values: list[float]) -> dict[str, float]:
    return {"median_s": round(statistics.median(values), 2), "min_s": round(min(values), 2),
            "max_s": round(max(values), 2)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "startup.json"))
    args = ap.parse_args()
    from folio.samples import report_pages, write_text_pdf
    from folio_prefect.deployments.local_server import MODE_ENV, stop

    cli = [sys.executable, "-m", "folio_prefect.flows.cli", "ingest"]
    results: dict[str, Any] = {"runs": args.runs}
    with tempfile.TemporaryDirectory(prefix="folio-startup-") as tmp:
        work = Path(tmp)
        home = work / "prefect"  # its own local Prefect server, started by the first run
        env = {k: v for k, v in os.environ.items()
               if k not in ("PREFECT_API_URL", MODE_ENV)} | {"FOLIO_PREFECT_HOME": str(home)}
        (work / "empty").mkdir()
        imports, empty, first, first_page, cached, flow_first = [], [], [], [], [], []
        for n in range(args.runs):
            imports.append(timed([sys.executable, "-c", "import folio_prefect.flows.ingest"], ROOT, env)[0])
            empty.append(timed([*cli, str(work / "empty"), "--out", str(work / "o")], work,
                               env)[0])
            pdf = write_text_pdf(work / f"new{n}.pdf", report_pages(seed=100 + n, n=1))
            report = work / f"r{n}.json"
            wall, code = timed([*cli, str(pdf), "--out", str(work / "o"), "--quiet",
                                "--report", str(report)], work, env)
            assert code == 0, f"ingest exited {code}"
            timing = json.loads(report.read_text())["timing"]
            first.append(wall)
            flow_first.append(timing["seconds"])
            # when the first page ended, from the process's launch: the flow's start on the
            # wall clock (its report says when) plus its own time to its first page
            first_page.append(timing["started_unix"] + (timing["first_page_s"] or 0.0)
                              - last_launch_unix)
            cached.append(timed([*cli, str(pdf), "--out", str(work / "o"), "--quiet"], work,
                                env)[0])
        stop(home)  # leave no server behind
    prefect = [w - f - i for w, f, i in zip(first, flow_first, imports, strict=True)]
    results.update({
        "empty_folder": summary(empty), "first_page_of_new_pdf": summary(first_page),
        "new_pdf_total": summary(first), "cached_rerun": summary(cached),
        "imports": summary(imports), "prefect_start_and_teardown": summary(prefect),
        "flow_seconds_new_pdf": summary(flow_first),
        "targets": {"cached_rerun_s": 3.0, "empty_folder_s": 3.0, "first_page_s": 4.0},
        "command": "python bench/startup.py " + " ".join(sys.argv[1:]),
        "machine": "the 2-core development machine",
        "how": "CLI defaults; a fresh local Prefect server in a temporary FOLIO_PREFECT_HOME, "
               "started by the first run (in the max values) and reused by the others",
    })
    Path(args.out).write_text(json.dumps(results, indent=1) + "\n")
    print(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
