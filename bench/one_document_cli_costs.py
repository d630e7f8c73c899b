"""What one small document costs on the CLI besides its own work (issue 57, point 2:
``folio ingest ONE_PAGE.pdf`` <= 3 s wall with the local Prefect server warm).

Runs ``folio ingest DOC --out OUT --report R`` with the warm server on (FOLIO_WARM=1, the
default) for each checkout given, alternating run by run so that every checkout meets the
same load, and splits each run's wall time into the flow's own body (the report's
``timing.seconds``, with its stages' spans) and what lies outside it (the launcher, the
warm server's fork, the pre-run checks, attaching to the local server, creating the flow
run and its states, the report, the exit). A new one-page born-digital PDF per run (made
here, bench/one_document.py's ``pdf``), so nothing is cached.

A checkout other than this one (``--base LABEL=DIR``, e.g. ``git archive BASE | tar -x -C DIR``)
runs with ``PYTHONPATH=DIR`` on this checkout's virtual environment: its own folio code,
its own warm server (the server's name hashes folio's source files), the same packages,
the same local Prefect server.

    .venv/bin/python bench/one_document_cli_costs.py --base before=/tmp/base --runs 7
        # -> bench/results/one_document_cli_costs.json
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

RESULT = ROOT / "bench" / "results" / "one_document_cli_costs.json"


def one_run(env: dict[str, str], doc: Path, out: Path) -> dict[str, Any]:
    report = out.with_suffix(".report.json")
    load = os.getloadavg()[0]
    started = time.perf_counter()
    proc = subprocess.run([str(Path(sys.executable).parent / "folio"), "ingest", str(doc),
                           "--out", str(out), "--report", str(report)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=600,
                          check=False)
    wall = time.perf_counter() - started
    row: dict[str, Any] = {"load_1min": round(load, 2), "wall_s": round(wall, 3),
                           "exit": proc.returncode}
    if proc.returncode != 0:
        row["stderr"] = proc.stderr[-800:]
        return row
    timing = json.loads(report.read_text())["timing"]
    row["stages"] = {"flow_body": timing["seconds"],
                     "outside_flow_body": round(wall - timing["seconds"], 3)}
    for stage, span in (timing.get("finishing") or {}).items():
        row["stages"][f"stage.{stage}"] = float(span["median_s"])
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", action="append", default=[], metavar="LABEL=DIR",
                    help="another checkout to compare (its root), under LABEL; repeatable")
    ap.add_argument("--label", default="after", help="this checkout's key in the result")
    ap.add_argument("--runs", type=int, default=7, help="runs of each checkout")
    ap.add_argument("--note", default="")
    ap.add_argument("--out", type=Path, default=RESULT)
    args = ap.parse_args()
    from bench._measure import command, git
    from bench.one_document import make_document
    from bench.one_document_stats import summary

    checkouts: dict[str, dict[str, str]] = {}
    with tempfile.TemporaryDirectory(prefix="folio-cli-costs-") as tmp:
        work = Path(tmp)
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("PREFECT_API", "FOLIO_WARM"))}
        # each checkout its own local Prefect server (one serves one installation), stopped
        # in finally
        for n, base in enumerate(args.base):
            label, _, folder = base.partition("=")
            checkouts[label] = env | {"PYTHONPATH": str(Path(folder).resolve()),
                                      "FOLIO_PREFECT_HOME": str(work / f"home-{n}")}
        checkouts[args.label] = env | {"FOLIO_PREFECT_HOME": str(work / "home")}
        rows: dict[str, list[dict[str, Any]]] = {name: [] for name in checkouts}
        try:
            for name, cenv in checkouts.items():  # warm: the local server, each warm server
                for n in range(2):
                    one_run(cenv, make_document("pdf", work, 9000 + n), work / f"warm-{name}-{n}")
            for n in range(args.runs):
                for name, cenv in checkouts.items():
                    doc = make_document("pdf", work, 100 + n)
                    rows[name].append(one_run(cenv, doc, work / f"out-{name}-{n}"))
                    print(name, json.dumps(rows[name][-1]), flush=True)
        finally:
            for cenv in checkouts.values():
                subprocess.run([sys.executable, "-m", "folio_prefect.deployments.local_server",
                                "--stop"], cwd=ROOT, env=cenv, capture_output=True,
                               check=False, timeout=60)
    result = {"command": command(argv=sys.argv), "commit": git("rev-parse", "--short", "HEAD"),
              "bases": args.base, "note": args.note,
              "finished": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
              "machine": f"{os.cpu_count()} cores, shared with other engineers' test runs",
              "settings": "the user's defaults (FOLIO_WARM unset: on)",
              "results": {name: summary(r) | {"rows": r} for name, r in rows.items()}}
    walls = {name: [r["wall_s"] for r in rs if r["exit"] == 0] for name, rs in rows.items()}
    if walls[args.label]:
        result["wall_p50_saved_s"] = {  # each base's median wall less this checkout's
            name: round(statistics.median(w) - statistics.median(walls[args.label]), 3)
            for name, w in walls.items() if w and name != args.label}
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps({k: {kk: vv for kk, vv in v.items() if kk != "rows"}
                      for k, v in result["results"].items()}, indent=1))


if __name__ == "__main__":
    main()
