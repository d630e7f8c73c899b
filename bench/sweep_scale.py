"""Scale proof of the sweep: real processes, a local S3 endpoint, kills, then an audit.

    .venv/bin/python bench/sweep_scale.py --documents 2000

Starts a Prefect server and an S3 endpoint (moto's server), uploads N distinct
born-digital PDFs, deploys ``folio-ingest/batch`` on a process work pool, starts two
workers and two sweeps (``python -m folio_prefect.flows.sweep``) at once, SIGKILLs one
worker (with its running flow run and page workers: the process group, as a lost
machine) and one sweep once a share of the documents is done, starts them again, waits
for both sweeps, runs a third sweep that must find nothing to do, and audits the outputs:

- processing count per document, independent of the sweep's own ledger: the output
  bucket is versioned and the pipeline writes a document's done-index entry
  (``_index/{sha256}-{config}.json``) once per completed processing, so its number of
  versions is how often the document was processed (``duplicated``: more than once);
- ``lost``: sources without a done record (sweep ledger and done-index);
- the vector table: no duplicate chunk ids, one set of chunks per document (row count per
  document equal to the chunk count its done-index entry records).

moto's conditional PUT is check-then-write in a threaded server, so it is served here
with conditional requests (If-None-Match / If-Match) serialised, which is the atomicity
S3 itself guarantees; everything else is moto as is. Results go to
``bench/results/sweep_scale.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
import urllib.request
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

BUCKET = "bench"
RESULTS = REPO / "bench" / "results" / "sweep_scale.json"


# --- the S3 endpoint --------------------------------------------------------------------


def serve_s3(port: int) -> None:
    """moto's S3 server with conditional writes made atomic (see the module docstring)."""
    from moto.moto_server.werkzeug_app import (
        DomainDispatcherApplication,
        MotoRequestHandler,
        create_backend_app,
    )
    from werkzeug.serving import run_simple

    app = DomainDispatcherApplication(create_backend_app)
    lock = threading.Lock()

    def atomic(environ: dict[str, Any], start_response: Any) -> Any:
        if environ.get("HTTP_IF_NONE_MATCH") or environ.get("HTTP_IF_MATCH"):
            with lock:
                return list(app(environ, start_response))
        return app(environ, start_response)

    run_simple("127.0.0.1", port, atomic, threaded=True, request_handler=MotoRequestHandler)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_http(url: str, timeout_s: float = 120.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except OSError:
            time.sleep(0.5)
    raise RuntimeError(f"{url} did not answer in {timeout_s:.0f} s")


# --- documents --------------------------------------------------------------------------


def _ps_text(s: str) -> str:
    return "(" + s.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)") + ")"


def page_postscript(i: int) -> str:
    from folio.samples import sentences

    lines = [f"Sweep scale document {i:05d}"]
    for para in range(3):
        lines += textwrap.wrap(sentences(seed=i * 7 + para, n=4), 88) + [""]
    shows = [f"72 {720 - 15 * k} moveto {_ps_text(line)} show" for k, line in enumerate(lines)]
    return "/Times-Roman findfont 11 scalefont setfont\n" + "\n".join(shows) + "\nshowpage"


def make_pdfs(folder: Path, n: int) -> list[Path]:
    """N one-page PDFs with distinct text, from one Ghostscript call (one file per page)."""
    folder.mkdir(parents=True, exist_ok=True)
    ps = folder / "all.ps"
    body = "\n".join(page_postscript(i) for i in range(n))
    ps.write_text(f"%!PS\n<< /PageSize [612 792] >> setpagedevice\n{body}\n")
    subprocess.run(["gs", "-q", "-dSAFER", "-dBATCH", "-dNOPAUSE", "-sDEVICE=pdfwrite",
                    f"-sOutputFile={folder}/doc-%05d.pdf", str(ps)], check=True, timeout=1800)
    ps.unlink()
    return sorted(folder.glob("doc-*.pdf"))


def upload(client: Any, pdfs: list[Path]) -> list[str]:
    keys = [f"in/part-{i % 10}/{p.name}" for i, p in enumerate(pdfs)]
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda kp: client.upload_file(str(kp[1]), BUCKET, kp[0]), zip(keys, pdfs)))
    return keys


# --- processes ---------------------------------------------------------------------------


class Procs:
    """Child processes in their own sessions, so one can be killed with its children."""

    def __init__(self, logs: Path, env: dict[str, str]) -> None:
        self.logs, self.env = logs, env
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self._n: Counter[str] = Counter()

    def start(self, name: str, argv: list[str]) -> subprocess.Popen[bytes]:
        self._n[name] += 1
        log = (self.logs / f"{name}.{self._n[name]}.log").open("wb")
        proc = subprocess.Popen(argv, cwd=REPO, env=self.env, stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True)
        self.procs[name] = proc
        return proc

    def kill(self, name: str) -> int:
        """SIGKILL the process and every descendant (flow runs start in sessions of their
        own, so a process group is not enough): what losing the machine does."""
        proc = self.procs[name]
        victims = [proc.pid, *descendants(proc.pid)]
        for pid in victims:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                continue
        proc.wait(timeout=30)
        return len(victims)

    def log_tail(self, name: str) -> str:
        return (self.logs / f"{name}.{self._n[name]}.log").read_text(errors="replace")[-3000:]

    def stop_all(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGTERM)
                except ProcessLookupError:
                    continue
        for proc in self.procs.values():
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)


def descendants(root: int) -> list[int]:
    """Every process below ``root``, from /proc (Linux)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def deploy(env: dict[str, str], job_env: dict[str, str]) -> None:
    """Work pool ``cpu`` (process) and deployment ``folio-ingest/batch`` from local code."""
    code = textwrap.dedent(f"""
        import asyncio, json
        from prefect import flow
        from prefect.client.orchestration import get_client
        from prefect.client.schemas.actions import WorkPoolCreate
        async def pool():
            async with get_client() as c:
                await c.create_work_pool(WorkPoolCreate(name="cpu", type="process"))
        asyncio.run(pool())
        flow.from_source(source={str(REPO)!r}, entrypoint="flows/ingest.py:ingest").deploy(
            name="batch", work_pool_name="cpu", build=False, push=False,
            print_next_steps=False, job_variables={{"env": json.loads({json.dumps(job_env)!r})}})
    """)
    subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, check=True, timeout=300)


# --- the audit ---------------------------------------------------------------------------


def list_keys(client: Any, prefix: str) -> list[str]:
    keys = []
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=prefix):
        keys += [o["Key"] for o in page.get("Contents", [])]
    return keys


def index_versions(client: Any, prefix: str) -> Counter[str]:
    counts: Counter[str] = Counter()
    paginator = client.get_paginator("list_object_versions")
    for page in paginator.paginate(Bucket=BUCKET, Prefix=prefix):
        for version in page.get("Versions", []):
            counts[version["Key"]] += 1
    return counts


def audit(client: Any, s3: Any, sources: list[str], config_hash: str) -> dict[str, Any]:
    import lancedb

    from folio.claims import ClaimLedger
    from folio.io.s3 import ObjectRef, head_object
    from folio.stores.lance_s3 import lance_storage_options

    ledger = ClaimLedger.for_output(f"s3://{BUCKET}/out", s3, config_hash)
    done_names = ledger.done_names()
    versions = index_versions(client, "out/_index/")
    index = {k.rsplit("/", 1)[-1].removesuffix(".json"): n for k, n in versions.items()}
    lost, per_doc, sha_of = [], {}, {}
    for key in sources:
        ref = head_object(client, BUCKET, key)
        assert isinstance(ref, ObjectRef)
        record = ledger.done_record(ref) if ledger.is_done(ref, done_names) else None
        entry = f"{record.sha256}-{config_hash}" if record else ""
        if record is None or entry not in index:
            lost.append(key)
            continue
        per_doc[key] = index[entry]
        sha_of[key] = record.sha256
    rows = lancedb.connect(f"s3://{BUCKET}/out/_vectors",
                           storage_options=lance_storage_options(s3)).open_table("chunks").to_pandas()
    expected = {}
    for sha in sha_of.values():
        text = client.get_object(Bucket=BUCKET, Key=f"out/_index/{sha}-{config_hash}.json")["Body"].read()
        entry = json.loads(text)
        expected[entry["doc_id"]] = int(entry["chunks"])
    actual = rows.groupby("doc_id").size().to_dict()
    return {
        "lost": len(lost), "lost_keys": lost[:20],
        "processed": sum(1 for n in per_doc.values() if n >= 1),
        "processings_total": sum(per_doc.values()),
        "duplicated": sum(1 for n in per_doc.values() if n > 1),
        "duplicated_keys": [k for k, n in per_doc.items() if n > 1][:20],
        "distinct_sha256": len(set(sha_of.values())),
        "vector_rows": len(rows),
        "vector_duplicate_ids": int(len(rows) - rows["id"].nunique()),
        "vector_documents": len(actual),
        "vector_documents_wrong_count": sum(
            1 for d, n in expected.items() if actual.get(d) != n),
        "vector_rows_of_unknown_documents": int(sum(
            n for d, n in actual.items() if d not in expected)),
    }


def child_runs(env: dict[str, str]) -> dict[str, Any]:
    code = textwrap.dedent("""
        import json
        from collections import Counter
        from prefect.client.orchestration import get_client
        from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterTags
        with get_client(sync_client=True) as c:
            runs, offset = [], 0
            while True:
                page = c.read_flow_runs(flow_run_filter=FlowRunFilter(
                    tags=FlowRunFilterTags(all_=["folio-sweep"])), limit=200, offset=offset)
                runs += page; offset += len(page)
                if len(page) < 200: break
        times = sorted(r.total_run_time.total_seconds() for r in runs if r.state and r.state.is_completed())
        print(json.dumps({"by_state": Counter(r.state.name for r in runs if r.state),
                          "completed_run_s_median": times[len(times) // 2] if times else None,
                          "completed_run_s_total": round(sum(times), 1)}))
    """)
    out = subprocess.run([sys.executable, "-c", code], check=False, cwd=REPO, env=env,
                         capture_output=True,
                         text=True, timeout=300)
    return dict(json.loads(out.stdout.strip().splitlines()[-1])) if out.returncode == 0 else {}


# --- the run -----------------------------------------------------------------------------


def busy_worker(procs: Procs, wait_s: float = 300.0) -> str:
    """A worker whose flow run is in the middle of a document (a page worker is running
    under it), so that killing it kills a run mid-way, not one that is just exiting."""
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        for name in ("worker-1", "worker-2"):
            for pid in descendants(procs.procs[name].pid):
                try:
                    cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
                except OSError:
                    continue
                if b"folio.pdf.worker_child" in cmdline:
                    return name
        time.sleep(0.2)
    raise RuntimeError("no worker was processing a document to kill")


def done_count(client: Any) -> int:
    return len(list_keys(client, "out/_ledger/"))


def last_json(text: str) -> dict[str, Any] | None:
    for line in reversed(text.strip().splitlines()):
        if line.startswith("{"):
            try:
                return dict(json.loads(line))
            except ValueError:
                continue
    return None


def run(args: argparse.Namespace) -> dict[str, Any]:
    from pydantic import SecretStr

    from folio.io.s3 import make_client
    from folio.settings.config import S3Settings

    work = Path(tempfile.mkdtemp(prefix="folio-sweep-scale-", dir=args.workdir))
    (work / "logs").mkdir()
    s3_port, api_port = free_port(), free_port()
    endpoint = f"http://127.0.0.1:{s3_port}"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "PREFECT_", "FOLIO_"))}
    env.update({
        "PREFECT_HOME": str(work / "prefect"), "PREFECT_API_URL": f"http://127.0.0.1:{api_port}/api",
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false", "PREFECT_LOGGING_LEVEL": "WARNING",
        "PREFECT_RESULTS_PERSIST_BY_DEFAULT": "true",
        "PREFECT_FLOWS_HEARTBEAT_FREQUENCY": str(args.heartbeat_s),
        "PREFECT_SERVER_API_HOST": "127.0.0.1", "PREFECT_WORKER_QUERY_SECONDS": "2",
        "FOLIO_S3__ENDPOINT_URL": endpoint, "FOLIO_S3__REGION": "us-east-1",
        "FOLIO_S3__ACCESS_KEY_ID": "bench", "FOLIO_S3__SECRET_ACCESS_KEY": "bench",
        "AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench",
        "FOLIO_WORK_DIR": str(work / "scratch"), "OMP_THREAD_LIMIT": "1",
        "PYTHONPATH": str(REPO),
    })
    procs = Procs(work / "logs", env)
    timings: dict[str, float] = {}
    try:
        procs.start("s3", [sys.executable, __file__, "--serve-s3", str(s3_port)])
        procs.start("prefect-server", [sys.executable, "-m", "prefect", "server", "start",
                                       "--host", "127.0.0.1", "--port", str(api_port)])
        wait_http(f"{endpoint}/moto-api/")
        wait_http(f"http://127.0.0.1:{api_port}/api/health", 180)
        s3 = S3Settings(endpoint_url=endpoint, region="us-east-1", access_key_id="bench",
                        secret_access_key=SecretStr("bench"))
        client = make_client(s3)
        client.create_bucket(Bucket=BUCKET)
        client.put_bucket_versioning(Bucket=BUCKET, VersioningConfiguration={"Status": "Enabled"})

        t = time.monotonic()
        pdfs = make_pdfs(work / "pdfs", args.documents)
        timings["generate_s"] = round(time.monotonic() - t, 1)
        t = time.monotonic()
        sources = upload(client, pdfs)
        timings["upload_s"] = round(time.monotonic() - t, 1)

        deploy(env, {"PREFECT_RESULTS_PERSIST_BY_DEFAULT": "true"})
        worker = [sys.executable, "-m", "prefect", "worker", "start", "--pool", "cpu",
                  "--type", "process", "--limit", str(args.worker_limit)]
        sweep = [sys.executable, "-m", "folio_prefect.flows.sweep", f"s3://{BUCKET}/in", f"s3://{BUCKET}/out",
                 "--batch-size", str(args.batch_size), "--max-in-flight", str(args.max_in_flight),
                 "--lease-s", str(args.lease_s), "--zombie-after-s", str(args.zombie_after_s),
                 "--poll-s", "2"]
        t0 = time.monotonic()
        procs.start("worker-1", [*worker, "--name", "worker-1"])
        procs.start("worker-2", [*worker, "--name", "worker-2"])
        procs.start("sweep-1", sweep)
        procs.start("sweep-2", sweep)

        kill_at = int(args.kill_at * args.documents)
        while done_count(client) < kill_at:
            for name in ("sweep-1", "sweep-2"):
                if procs.procs[name].poll() is not None:
                    raise RuntimeError(f"{name} ended early:\n{procs.log_tail(name)}")
            time.sleep(5)
        victim = busy_worker(procs)
        done_at_kill = done_count(client)
        timings["killed_at_s"] = round(time.monotonic() - t0, 1)
        killed = procs.kill(victim)
        procs.kill("sweep-1")
        time.sleep(args.restart_after_s)
        procs.start(victim, [*worker, "--name", f"{victim}-restarted"])
        procs.start("sweep-1", sweep)

        reports = {}
        deadline = time.monotonic() + args.timeout_s
        for name in ("sweep-1", "sweep-2"):
            proc = procs.procs[name]
            proc.wait(timeout=max(1.0, deadline - time.monotonic()))
            reports[name] = last_json(procs.log_tail(name))
            if proc.returncode != 0 or reports[name] is None:
                raise RuntimeError(f"{name} failed ({proc.returncode}):\n{procs.log_tail(name)}")
        timings["sweeps_s"] = round(time.monotonic() - t0, 1)

        t = time.monotonic()
        final = subprocess.run(sweep, check=False, cwd=REPO, env=env, capture_output=True, text=True,
                               timeout=1800)
        verify = last_json(final.stdout)
        timings["verify_sweep_s"] = round(time.monotonic() - t, 1)
        if verify is None:
            raise RuntimeError(f"the verification sweep failed:\n{final.stdout[-2000:]}{final.stderr[-3000:]}")
        config_hash = str(verify["config_hash"])
        found = audit(client, s3, sources, config_hash)
        runs = child_runs(env)
    finally:
        procs.stop_all()
    docs_per_s = args.documents / timings["sweeps_s"] if timings.get("sweeps_s") else 0.0
    return {
        "documents": args.documents,
        "processed": found["processed"],
        "skipped": verify["skipped"],
        "duplicated": found["duplicated"],
        "lost": found["lost"],
        "command": " ".join(shlex.quote(a) for a in [".venv/bin/python", "bench/sweep_scale.py",
                                                     *sys.argv[1:]]),
        "audit": found,
        "verification_sweep": verify,
        "sweep_reports": {**reports, "sweep-1 (killed)": None},
        "killed": {victim: f"SIGKILL to the worker and its {killed - 1} descendant processes "
                           "(its flow run, page workers)",
                   "sweep-1": "SIGKILL", "done_records_at_kill": done_at_kill,
                   "restarted_after_s": args.restart_after_s},
        "child_runs": runs,
        "timings": {**timings, "documents_per_s": round(docs_per_s, 3)},
        "settings": {k: getattr(args, k) for k in ("batch_size", "max_in_flight", "lease_s",
                                                    "zombie_after_s", "heartbeat_s",
                                                    "worker_limit", "kill_at")},
        "environment": {"cpus": os.cpu_count(), "s3": "moto 5.2.5 server, conditional PUTs "
                        "serialised (S3's atomicity); output bucket versioned for the audit",
                        "prefect": "prefect 3.9.1 server (SQLite), 2 process workers"},
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--documents", type=int, default=2000)
    ap.add_argument("--batch-size", type=int, default=50)
    ap.add_argument("--max-in-flight", type=int, default=2)
    ap.add_argument("--worker-limit", type=int, default=1, help="flow runs per worker at once")
    ap.add_argument("--lease-s", type=float, default=60.0)
    ap.add_argument("--zombie-after-s", type=float, default=90.0)
    ap.add_argument("--heartbeat-s", type=int, default=30)
    ap.add_argument("--kill-at", type=float, default=0.3, help="share done when killing")
    ap.add_argument("--restart-after-s", type=float, default=5.0)
    ap.add_argument("--timeout-s", type=float, default=4 * 3600)
    ap.add_argument("--workdir", default=None)
    ap.add_argument("--out", type=Path, default=RESULTS)
    ap.add_argument("--serve-s3", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.serve_s3:
        serve_s3(args.serve_s3)
        return 0
    result = run(args)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    sys.stdout.write(json.dumps(result, indent=2) + "\n")
    return 0 if result["duplicated"] == 0 and result["lost"] == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
