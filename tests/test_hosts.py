"""A sweep on several hosts (issue 13 item 3): two process workers that share nothing but
the Prefect server (its database on PostgreSQL) and S3.

Each "host" has its own working folder (the worker's cwd and folio's ``work_dir``) and its
own ``PREFECT_HOME``, so Prefect's local result storage is not shared: results live in
the S3 result-storage block that ``folio_prefect.deployments.work_pools --apply
--result-storage`` saves as the server's default; claims, the ledger, outputs and vectors are under ``out`` on S3.
Two sweeps run at once, one from each host, and send their batches to the deployment
``folio-ingest/batch``, which both workers serve (one run at a time each, so both work).
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from folio.samples import report_pages, write_text_pdf
from tests.prefect_stack import PrefectStack, _spawn, start_prefect_stack
from tests.s3_server import S3Server
from tests.test_sweep import audit

pytestmark = pytest.mark.timeout(900)

#: one batch run a host (each a process start): the two workers are polling before the
#: sweeps start (:func:`wait_for_workers`), each takes one run at a time (``--limit 1``),
#: and the two runs are in flight together (``--max-in-flight 2``), so neither host can
#: take both; four documents (two runs a host) took 76 of the file's 108 s here
DOCS = 2
HOSTS = ("host-a", "host-b")
RESULTS = "prefect-results"


@pytest.fixture(scope="module")
def hosts(prefect_pg_url: str, s3_server: S3Server, tmp_path_factory: pytest.TempPathFactory
          ) -> Iterator[dict[str, Any]]:
    """Server on PostgreSQL, the ``batch`` deployment, the S3 result block, two workers."""
    import shutil

    if not shutil.which("gs"):
        pytest.skip("ghostscript absent: the document flow cannot run")
    bucket = s3_server.create_bucket()
    s3_server.client.put_bucket_versioning(
        Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
    stack = start_prefect_stack(
        tmp_path_factory.mktemp("prefect-server"), deployments=("batch",), worker=False,
        server_env={"PREFECT_API_DATABASE_CONNECTION_URL": prefect_pg_url})
    try:
        s3_env = {"FOLIO_S3__ENDPOINT_URL": s3_server.endpoint_url, "FOLIO_S3__REGION": "us-east-1",
                  "FOLIO_S3__ACCESS_KEY_ID": "test", "FOLIO_S3__SECRET_ACCESS_KEY": "test"}
        stack.env.update(s3_env)
        applied = stack.run(sys.executable, "-m", "folio_prefect.deployments.work_pools", "--apply",
                            "--result-storage", f"s3://{bucket}/{RESULTS}")
        assert applied.returncode == 0, applied.stdout + applied.stderr
        assert "set it as the server's default result storage" in applied.stdout
        envs = {}
        for name in HOSTS:
            folder = tmp_path_factory.mktemp(name)
            env = {**stack.env, "PREFECT_HOME": str(folder / "prefect-home"),
                   "FOLIO_WORK_DIR": str(folder / "work")}
            envs[name] = env
            _spawn(stack, f"worker-{name}", sys.executable, "-m", "prefect", "worker", "start",
                   "--pool", "folio-cpu", "--type", "process", "--name", name, "--limit", "1",
                   env=env, cwd=folder)
        wait_for_workers(stack, HOSTS)
        yield {"stack": stack, "bucket": bucket, "envs": envs, "s3": s3_server}
    finally:
        stack.stop()


def wait_for_workers(stack: PrefectStack, names: tuple[str, ...], timeout_s: float = 180.0
                     ) -> None:
    """Until every worker of ``names`` has told the server it polls ``folio-cpu``: a worker
    still starting when the runs are scheduled would leave them all to the other."""
    import time

    from prefect.client.orchestration import get_client
    from prefect.client.schemas.objects import WorkerStatus
    from prefect.settings import PREFECT_API_URL, temporary_settings

    deadline = time.monotonic() + timeout_s
    with temporary_settings({PREFECT_API_URL: stack.api_url}), get_client(sync_client=True) as client:
        while True:
            online = {w.name for w in client.read_workers_for_work_pool("folio-cpu")
                      if w.status == WorkerStatus.ONLINE}
            if set(names) <= online:
                return
            assert time.monotonic() < deadline, (online, stack.log_tail())
            time.sleep(0.2)


def start_sweep(env: dict[str, str], bucket: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "folio_prefect.flows.sweep", f"s3://{bucket}/in", f"s3://{bucket}/out",
         "--deployment", "folio-ingest/batch", "--batch-size", "1", "--max-in-flight", "2",
         "--lease-s", "30", "--poll-s", "0.5", "--zombie-after-s", "300",
         "--set", "validation.enabled=false"],
        cwd=Path(__file__).resolve().parent.parent, env=env, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True)


def batch_runs(stack: PrefectStack) -> list[Any]:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterTags
    from prefect.settings import PREFECT_API_URL, temporary_settings

    with temporary_settings({PREFECT_API_URL: stack.api_url}), get_client(sync_client=True) as client:
        return list(client.read_flow_runs(
            flow_run_filter=FlowRunFilter(tags=FlowRunFilterTags(all_=["folio-sweep"]))))


def reports(stack: PrefectStack, runs: list[Any]) -> list[dict[str, Any] | None]:
    """Each run's report, read here: another PREFECT_HOME than the worker that wrote it."""
    from prefect.settings import PREFECT_API_URL, temporary_settings

    from folio_prefect.deployments.runs import run_report

    with temporary_settings({PREFECT_API_URL: stack.api_url}):
        return [run_report(run) for run in runs]


def prefect_rows(url: str, table: str) -> int:
    import psycopg

    parts = urlsplit(url)
    socket = parse_qs(parts.query)["host"][0]
    with psycopg.connect(host=socket, dbname=parts.path.lstrip("/"), user="postgres") as conn:
        row = conn.execute(f"SELECT count(*) FROM {table}").fetchone()
    return int(row[0]) if row else 0


def test_two_hosts_sweep_every_document_exactly_once(
    hosts: dict[str, Any], prefect_pg_url: str, tmp_path: Path,
) -> None:
    stack, bucket, client = hosts["stack"], hosts["bucket"], hosts["s3"].client
    for i in range(DOCS):
        pdf = write_text_pdf(tmp_path / f"doc-{i}.pdf", report_pages(seed=700 + i, n=1))
        client.upload_file(str(pdf), bucket, f"in/doc-{i}.pdf")

    sweeps = [start_sweep(hosts["envs"][name], bucket) for name in HOSTS]
    summaries = []
    for proc in sweeps:
        out, err = proc.communicate(timeout=800)
        assert proc.returncode == 0, err[-4000:] + stack.log_tail()
        summaries.append(json.loads(out.strip().splitlines()[-1]))

    # the sweeps: every document accounted for by each, processed by exactly one
    assert sum(s["processed"] for s in summaries) == DOCS, summaries
    assert sum(s["cached"] + s["failed"] + s["lost"] for s in summaries) == 0, summaries
    for s in summaries:
        assert s["documents"] == s["processed"] + s["skipped"] == DOCS, s

    # S3, counted independently of the ledger: outputs once, vectors once
    corpus = {"bucket": bucket, "client": client, "s3": hosts["s3"].settings}
    chunks = audit(corpus, "out", DOCS)
    assert all(n > 0 for n in chunks.values())

    # both hosts ran batches; every batch run's report is on S3 and readable from a third
    # PREFECT_HOME, which is how a sweep on one host reads batches run on another
    for name in HOSTS:
        log = (stack.home / f"worker-{name}.log").read_text(errors="replace")
        assert "submitted to infrastructure" in log, stack.log_tail()
    runs = batch_runs(stack)
    assert len(runs) == sum(s["batches"] for s in summaries) >= DOCS
    assert all(run.state.is_completed() for run in runs), [run.state for run in runs]
    read = reports(stack, runs)
    sources = [d["source"] for r in read for d in (r or {}).get("documents", [])]
    assert None not in read and sorted(sources) == sorted(
        f"s3://{bucket}/in/doc-{i}.pdf" for i in range(DOCS))
    stored = client.list_objects_v2(Bucket=bucket, Prefix=f"{RESULTS}/").get("KeyCount", 0)
    assert stored >= len(runs)

    # Prefect's own state is in PostgreSQL
    assert prefect_rows(prefect_pg_url, "flow_run") >= len(runs) + len(HOSTS)
