"""Where the time of a deployment run of a one-page PDF goes, from ``folio trigger --wait``
to its exit, on a self-hosted Prefect server with one process worker on ``folio-cpu``.

Each run is split by the flow run's own state history (server timestamps):

- ``to_pending``: submitted until a worker took it: the worker polls its pool every
  ``PREFECT_WORKER_QUERY_SECONDS`` (Prefect's default 10 s; a run waits half that on
  average, all of it at worst);
- ``to_running``: taken until the flow began: the process worker starts a new Python
  process (``python -m prefect.engine``), which imports Prefect and the flow's module and
  runs the deployment's pull step;
- ``running``: the flow run itself: its first loads in a new process (Great
  Expectations, the embedding model, LanceDB) and the document's work;
- ``after_completed``: the flow run's end until ``folio trigger --wait`` exits (it polls
  the run every ``poll_s``, then prints the result).

The worker is started with each ``--query-seconds`` in turn (10: Prefect's default; 2:
the README's worker command). A new PDF per run, so nothing is cached. Medians, with the
1-minute load average before each run (a shared 2-core machine).

    .venv/bin/python bench/deployment_latency.py --runs 3   # -> bench/results/deployment_latency.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def state_times(api_env: dict[str, str], flow_run_id: str) -> dict[str, float]:
    """The first time (unix) the run entered each state type, from the server."""
    os.environ["PREFECT_API_URL"] = api_env["PREFECT_API_URL"]
    from prefect.client.orchestration import get_client

    async def read() -> dict[str, float]:
        async with get_client() as client:
            states = await client.read_flow_run_states(uuid.UUID(flow_run_id))
        seen: dict[str, float] = {}
        for state in sorted(states, key=lambda s: s.timestamp):
            seen.setdefault(state.type.value, state.timestamp.timestamp())
        return seen

    return asyncio.run(read())


def one_run(stack: Any, folio: Path, pdf: Path, out: Path) -> dict[str, Any]:
    load = os.getloadavg()[0]
    submitted = time.time()
    proc = subprocess.run([str(folio), "trigger", str(pdf), "--out", str(out), "--wait"],
                          cwd=out.parent, env=stack.env, capture_output=True, text=True,
                          timeout=600)
    exited = time.time()
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    run = json.loads(proc.stdout.splitlines()[0])
    states = state_times(stack.env, run["flow_run_id"])
    pending, running, done = states["PENDING"], states["RUNNING"], states["COMPLETED"]
    return {"load_1min": round(load, 2), "total_s": round(exited - submitted, 2),
            "to_pending_s": round(pending - submitted, 2),
            "to_running_s": round(running - pending, 2),
            "running_s": round(done - running, 2),
            "after_completed_s": round(exited - done, 2)}


def medians(rows: list[dict[str, Any]]) -> dict[str, float]:
    return {key: round(statistics.median(float(r[key]) for r in rows), 2) for key in rows[0]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--query-seconds", type=float, nargs="+", default=[10.0, 2.0])
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "deployment_latency.json"))
    args = ap.parse_args()
    from folio.samples import report_pages, write_text_pdf
    from tests.prefect_stack import POOL, _spawn, start_prefect_stack

    folio = Path(sys.executable).parent / "folio"
    results: dict[str, Any] = {
        "command": "python bench/deployment_latency.py " + " ".join(sys.argv[1:]),
        "machine": "the 2-core development machine, shared with other agents' work",
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "by_query_seconds": {},
        # the worker's flow-run processes inherit it: without bytecode they compile every
        # module they import (to_running), see bench/startup.py
        "PYTHONDONTWRITEBYTECODE": os.environ.get("PYTHONDONTWRITEBYTECODE", "")}
    with tempfile.TemporaryDirectory(prefix="folio-deploy-lat-") as tmp:
        work = Path(tmp)
        (work / "home").mkdir()
        stack = start_prefect_stack(work / "home", deployments=("document",), worker=False)
        try:
            for query_s in args.query_seconds:
                env = stack.env | {"PREFECT_WORKER_QUERY_SECONDS": str(query_s)}
                worker = _spawn(stack, f"worker-{query_s}", sys.executable, "-m", "prefect",
                                "worker", "start", "--pool", POOL, "--type", "process", env=env)
                time.sleep(5)  # the worker's own start
                rows = []
                for n in range(args.runs):
                    pdf = write_text_pdf(work / f"q{query_s}-{n}.pdf",
                                         report_pages(seed=300 + n + int(query_s * 10), n=1))
                    rows.append(one_run(stack, folio, pdf, work / "out"))
                results["by_query_seconds"][str(query_s)] = {"median": medians(rows),
                                                             "runs": rows}
                os.killpg(worker.pid, signal.SIGTERM)
                worker.wait(timeout=30)
                Path(args.out).write_text(json.dumps(results, indent=1) + "\n")
        finally:
            stack.stop()
    results["finished"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    Path(args.out).write_text(json.dumps(results, indent=1) + "\n")
    print(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
