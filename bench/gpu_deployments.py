"""bench/gpu_user_path.py's phases through Prefect deployments: the deployment phase (the
benchmark's pages through a GPU deployment, a process work pool and one worker) and the
live phase (a UI run, a trigger and a sweep batch through the GPU deployments), on a
Prefect server, pools and deployments made as a user makes them (:func:`_prefect_stack`).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from bench.gpu_bench_settings import ROOT, SETTINGS, fake_command, resolved, use_gpu, user_settings
from bench.gpu_cli_run import ocr_pages_in
from bench.gpu_documents import round_sources
from bench.gpu_sampler import Sampler

#: the benchmark's command line, whose ``live-client`` step is the live phase's client
SCRIPT = ROOT / "bench" / "gpu_user_path.py"


@contextmanager
def _prefect_stack(args: argparse.Namespace, config: Any, deployments: list[str],
                   deployment_env: dict[str, str] | None = None) -> Iterator[dict[str, str]]:
    """A Prefect server, the pools of folio_prefect.deployments.work_pools --apply,
    ``deployments`` made by `prefect deploy` from prefect.yaml, and one process worker on the GPU pool; yields
    the environment that reaches that server. Everything stops on exit.

    ``deployment_env`` replaces the deployments' environment (their job variables), as a
    user sets the model in prefect.yaml: a flow run's environment is the worker's
    overlaid with the deployment's, so the worker's own would lose to prefect.yaml's
    model."""
    from folio.gpu.profiles import load_profile

    profile = load_profile(config.ocr.profile)
    pool = "folio-h200" if args.fake else f"folio-{profile.name}"
    work = Path(args.work)
    home = work / "prefect-home"
    port = 4321
    env = {**os.environ, "PREFECT_HOME": str(home), "PREFECT_API_URL": f"http://127.0.0.1:{port}/api",
           "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
           "PREFECT_RESULTS_PERSIST_BY_DEFAULT": "true",
           # the UI needs a newer FastAPI than the one vLLM 0.26 is staged with (the server
           # died with "'FastAPI' object has no attribute 'frontend'"); the API is enough here
           "PREFECT_UI_ENABLED": "false"}
    logs = work / "deployment-logs"
    logs.mkdir(exist_ok=True)
    procs: list[subprocess.Popen[bytes]] = []
    try:
        procs.append(_start([sys.executable, "-m", "prefect", "server", "start", "--port", str(port)],
                            env, logs / "server.log"))
        _wait_http(f"http://127.0.0.1:{port}/api/health", 120)
        subprocess.run([sys.executable, "-m", "folio_prefect.deployments.work_pools", "--apply"], env=env,
                       cwd=ROOT, check=True)
        overrides: list[str] = []
        if deployment_env is not None:
            job_env = {"PREFECT_RESULTS_PERSIST_BY_DEFAULT": "true", **deployment_env}
            overrides = ["--job-variable", json.dumps({"env": job_env})]
        for name in deployments:  # one at a time: `prefect deploy` ignores overrides for several
            subprocess.run([sys.executable, "-m", "prefect", "--no-prompt", "deploy", "--name",
                            name, *overrides], env=env, cwd=ROOT, check=True)
        procs.append(_start([sys.executable, "-m", "prefect", "worker", "start", "--pool", pool],
                            env, logs / "worker.log"))
        yield {**env, "FOLIO_BENCH_POOL": pool}
    finally:
        for proc in reversed(procs):
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()


def _gpu_deployment_names(args: argparse.Namespace, config: Any) -> tuple[str, str]:
    """(document deployment, batch deployment) of prefect.yaml for this GPU's profile."""
    from folio.gpu.profiles import load_profile

    name = "h200" if args.fake else load_profile(config.ocr.profile).name
    return f"document-{name}", f"batch-{name}"


def phase_deployment(args: argparse.Namespace) -> dict[str, Any]:
    """The same pages through a Prefect server, a GPU deployment (flows/gpu.py) on a
    process work pool made by folio_prefect.deployments.work_pools, and one worker."""
    use_gpu(args)
    work = Path(args.work)
    config = resolved(args)
    _, deployment = _gpu_deployment_names(args, config)
    # the repository's own GPU deployment, as `prefect deploy` makes it from prefect.yaml
    with _prefect_stack(args, config, [deployment]) as env:
        sources = round_sources(work, 1)
        out = work / "out-deployment"
        report_path = work / "report-deployment.json"
        report_path.unlink(missing_ok=True)
        # the flow's `report` parameter writes the run report (an output, no change to
        # the run) for its timing: the seconds after the last page, the queue timeline
        parameters = {"sources": [str(sources)], "out": str(out), "engine": "vllm",
                      "report": str(report_path), "settings": _flow_settings()}
        script = (
            "import json,sys\nfrom prefect.deployments import run_deployment\n"
            f"r = run_deployment('folio-ingest/{deployment}', parameters=json.loads(sys.argv[1]),"
            " job_variables={'env': json.loads(sys.argv[2])}, timeout=3000)\n"
            "print(json.dumps({'state': r.state.type.value, 'start': r.start_time.timestamp() if r.start_time else None,"
            " 'end': r.end_time.timestamp() if r.end_time else None}))\n")
        with Sampler(args.gpu, None) as sampler:
            t0, wall0 = time.monotonic(), time.time()
            run = subprocess.run([sys.executable, "-c", script, json.dumps(parameters),
                                  json.dumps(_worker_env(args, config))],
                                 env=env, cwd=ROOT, capture_output=True, text=True, check=True)
            t1 = time.monotonic()
        pool = env["FOLIO_BENCH_POOL"]
    info = json.loads(run.stdout.strip().splitlines()[-1])
    pages, tokens, _ = ocr_pages_in(out)
    run_seconds = (info["end"] - info["start"]) if info["end"] and info["start"] else t1 - t0
    start_mono = t0 + ((info["start"] or wall0) - wall0)
    timing = (json.loads(report_path.read_text()).get("timing")
              if report_path.is_file() else None)
    return {"phase": "deployment", "gpu": args.gpu, "state": info["state"], "pool": pool,
            "pages_ocr": pages, "seconds": round(run_seconds, 2), "timing": timing,
            "submit_to_end_seconds": round(t1 - t0, 2),
            "pages_per_s": round(pages / run_seconds, 3),
            "completion_tokens_per_page": tokens // max(pages, 1),
            "queue": sampler.summary(start_mono, t1)}


def _flow_settings() -> dict[str, Any]:
    """The benchmark's settings a flow run takes as its ``settings`` parameter (the
    server's reach it through the worker's environment: :func:`_worker_env`)."""
    return {k: v for k, v in user_settings().items() if not k.startswith("server.")}


def phase_live(args: argparse.Namespace) -> dict[str, Any]:
    """The three ways runs reach a GPU pool, on the GPU: `prefect deploy` of the GPU
    deployments, one worker on the pool, then a person's run from the UI (the document
    deployment's form parameters), a RAG job's trigger (folio_prefect.deployments.trigger)
    and a sweep's batch (folio_prefect.tasks.sweep.submit_batch, the batch deployment),
    one after the other, each on a document of its own. Says, for each run, its state, its engine and profile, its pages
    and the shared server it used (one for all three, alive between them)."""
    use_gpu(args)
    work = Path(args.work)
    config = resolved(args)
    document, batch = _gpu_deployment_names(args, config)
    # three originals of 2-6 pages (a run of a few pages is what a UI run or a trigger is)
    documents = json.loads((work / "corpus.json").read_text())["documents"]
    sources = [Path(d["path"]) for d in documents
               if 2 <= d["pages"] <= 6 and Path(d["path"]).name.startswith("c00-")][:3]
    if len(sources) < 3:
        raise SystemExit(f"live: need 3 PDFs of 2-6 pages in {work / 'corpus.json'}")
    out = work / "out-live"
    shutil.rmtree(out, ignore_errors=True)
    state_dir = Path(os.environ["FOLIO_SERVER__STATE_DIR"])
    with _prefect_stack(args, config, [document, batch], _worker_env(args, config)) as env:
        before = _server_pids(state_dir)
        t0 = time.monotonic()
        client = subprocess.run(
            [sys.executable, str(SCRIPT), "live-client", "--work", args.work],
            input=json.dumps({"document": f"folio-ingest-document/{document}",
                              "batch": f"folio-ingest/{batch}", "out": str(out),
                              "sources": [str(p) for p in sources],
                              "settings": _flow_settings()}),
            env=env, cwd=ROOT, capture_output=True, text=True)
        seconds = time.monotonic() - t0
        after = _server_pids(state_dir)
    if client.returncode != 0:
        raise SystemExit(f"live runs failed:\n{client.stdout[-3000:]}\n{client.stderr[-3000:]}")
    runs = json.loads(client.stdout.strip().splitlines()[-1])
    # the benchmark's model, not prefect.yaml's placeholder, served every run
    ok = all(r["state"] == "COMPLETED" and r["engines"] == ["vllm"] and r["model"] == args.model
             for r in runs)
    return {"phase": "live", "gpu": args.gpu, "deployments": [document, batch],
            "runs": runs, "seconds": round(seconds, 1), "all_on_the_gpu_engine": ok,
            "pages_ocr": ocr_pages_in(out)[0],
            "shared_servers_before": before, "shared_servers_after": after}


def _server_pids(state_dir: Path) -> list[dict[str, Any]]:
    """The shared servers of this GPU's state folder: pid, state, generation."""
    from folio.gpu.shared_server import read_state

    states = [read_state(p) for p in sorted(state_dir.glob("*.json"))]
    return [{"server_pid": st.server_pid, "state": st.state, "generation": st.generation,
             "base_url": st.base_url} for st in states if st is not None]


def live_client(args: argparse.Namespace) -> None:
    """The client side of :func:`phase_live`, in a process whose environment reaches the
    benchmark's Prefect server (PREFECT_API_URL is read when Prefect is imported)."""
    from prefect.deployments import run_deployment

    from folio.settings.run_config import IngestRequest
    from folio_prefect.deployments.runs import wait_for_run
    from folio_prefect.deployments.trigger import trigger
    from folio_prefect.tasks.sweep import submit_batch

    spec = json.loads(sys.stdin.read())
    ui_src, trigger_src, batch_src = spec["sources"]
    # route ocr: every page to the GPU (with auto, the smallest documents' text layers
    # would keep them off it and prove nothing about the pool)
    common = {"out": spec["out"], "engine": "vllm", "route": "ocr", "settings": spec["settings"]}
    runs: list[dict[str, Any]] = []

    def finish(kind: str, run_id: Any, t0: float) -> None:
        run = wait_for_run(run_id, timeout=600)
        state = run.state
        report: dict[str, Any] = {}
        if state is not None and state.is_completed():
            report = state.result()  # type: ignore[assignment]
        docs = report.get("documents", [])
        runs.append({
            "kind": kind, "flow_run_id": str(run_id), "flow_run_name": run.name,
            "state": state.type.value if state else None,
            "seconds": round(time.monotonic() - t0, 1),
            "outcomes": sorted({d.get("outcome") for d in docs}),
            "engines": sorted({d.get("engine") for d in docs}),
            "profile": report.get("config", {}).get("ocr", {}).get("profile"),
            "model": report.get("config", {}).get("ocr", {}).get("model"),
            "in_flight": report.get("config", {}).get("ocr", {}).get("in_flight"),
            "pages": report.get("totals", {}).get("pages")})

    t0 = time.monotonic()  # a person's run from the UI: the document deployment's form
    ui = run_deployment(spec["document"], parameters={"source": ui_src, **common}, timeout=0)
    finish("ui-run", ui.id, t0)  # type: ignore[union-attr]
    t0 = time.monotonic()  # a RAG job's trigger
    triggered = trigger(IngestRequest(source=trigger_src, **common), deployment=spec["document"])
    finish("trigger", triggered.flow_run_id, t0)
    t0 = time.monotonic()  # a sweep's batch
    run_id = submit_batch(spec["batch"], f"live-{int(time.time())}",
                          {"sources": [batch_src], **common})
    finish("sweep-batch", run_id, t0)
    print(json.dumps(runs))


def _worker_env(args: argparse.Namespace, config: Any) -> dict[str, str]:
    """The flow run's job variables: the model, preset and server settings (the flow run
    builds its runner from its environment), and this GPU's shared-server state."""
    env = {"FOLIO_OCR__MODEL": args.model, "FOLIO_OCR__PRESET": args.preset,
           "FOLIO_SERVER__LOAD_FORMAT": str(SETTINGS["server.load_format"][0]),
           "FOLIO_SERVER__EXTRA_ARGS": json.dumps(SETTINGS["server.extra_args"][0]),
           "FOLIO_SERVER__STATE_DIR": os.environ["FOLIO_SERVER__STATE_DIR"],
           "CUDA_VISIBLE_DEVICES": os.environ["CUDA_VISIBLE_DEVICES"]}
    if os.environ.get("FOLIO_SERVER_OWNER_PID"):
        env["FOLIO_SERVER_OWNER_PID"] = os.environ["FOLIO_SERVER_OWNER_PID"]
    if args.fake:
        env.update({"FOLIO_SERVER__COMMAND": json.dumps(fake_command()),
                    "FOLIO_OCR__PROFILE": "cpu"})
    return env


def _start(argv: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(argv, env=env, cwd=ROOT, stdout=log.open("wb"),
                            stderr=subprocess.STDOUT, start_new_session=True)


def _wait_http(url: str, timeout: float) -> None:
    import httpx

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if httpx.get(url, timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    raise SystemExit(f"{url} did not answer in {timeout:.0f} s")
