"""Faults that lose nothing (issue "A million documents", item 4), with real components:
the moto S3 server behind a proxy that answers S3's own 503 SlowDown, a PostgreSQL and a
Prefect server of the test's own that stop and start again, and the real flows writing
outputs and LanceDB vectors.

In every case: no document is marked done without all its outputs and vectors, a rerun
converges, no vector is duplicated, and the run report says what happened to each
document.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from folio.samples import report_pages, write_text_pdf
from tests.conftest import RecordProperty
from tests.s3_fault_proxy import FaultProxy


def _ingest(**parameters: Any) -> dict[str, Any]:
    """The ingest flow's report, also of a run that quarantined every document (a Failed
    run that carries its report: flows.ingest.final_state)."""
    from folio_prefect.flows.ingest import ingest, run_report_of

    return run_report_of(ingest(**parameters, return_state=True))

pytestmark = [pytest.mark.usefixtures("prefect_api"), pytest.mark.timeout(900)]


@pytest.fixture()
def proxy(s3_server: Any) -> Iterator[FaultProxy]:
    p = FaultProxy(s3_server.endpoint_url).start()
    try:
        yield p
    finally:
        p.stop()


def _settings(url: str) -> dict[str, Any]:
    # the keys come from the environment (tests/conftest.py), as a worker's do
    return {"s3.endpoint_url": url, "s3.region": "us-east-1"}


def _documents(tmp_path: Path, n: int) -> Path:
    folder = tmp_path / "in"
    folder.mkdir()
    for i in range(n):
        write_text_pdf(folder / f"doc{i}.pdf", report_pages(seed=40 + i, n=1))
    return folder


def _in_s3(s3: Any, bucket: str) -> Callable[[str], bool]:
    keys = set(_keys(s3, bucket))
    return lambda uri: uri.split("/", 3)[3] in keys


def _keys(s3: Any, bucket: str) -> list[str]:
    keys: list[str] = []
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket):
        keys += [o["Key"] for o in page.get("Contents", [])]
    return keys


def _vectors(out: str, settings: dict[str, Any]) -> list[dict[str, Any]]:
    """Every vector row of the run's LanceDB table (id, doc_id), read from S3 directly."""
    import lancedb

    opts = {"aws_endpoint": settings["s3.endpoint_url"], "aws_region": "us-east-1",
            "aws_access_key_id": "test", "aws_secret_access_key": "test",
            "allow_http": "true", "aws_virtual_hosted_style_request": "false"}
    db = lancedb.connect(f"{out}/_vectors", storage_options=opts)
    names = list(db.table_names())
    assert len(names) == 1, names
    rows: list[dict[str, Any]] = db.open_table(names[0]).to_arrow().select(
        ["id", "doc_id"]).to_pylist()
    return rows


def _assert_done_means_complete(report: dict[str, Any], exists: Callable[[str], bool],
                                rows: list[dict[str, Any]]) -> None:
    """Each ok document has its outputs and its vectors; no vector twice."""
    ids = [r["id"] for r in rows]
    assert len(ids) == len(set(ids)), "a vector written twice"
    by_doc: dict[str, int] = {}
    for r in rows:
        by_doc[r["doc_id"]] = by_doc.get(r["doc_id"], 0) + 1
    for doc in report["documents"]:
        if doc["outcome"] != "ok":
            continue
        for kind, uri in doc["outputs"].items():
            assert exists(uri), f"{doc['source']}: {kind} missing ({uri})"
        assert by_doc.get(doc["doc_id"]) == doc["chunks"], doc["source"]


def test_s3_slowing_down_for_a_while_loses_nothing(
        s3_server: Any, proxy: FaultProxy, tmp_path: Path) -> None:
    """Every third request answered 503 SlowDown until 15 have been: the S3 clients'
    retries carry every document through; nothing is missing or doubled."""
    from folio_prefect.flows.ingest import ingest

    bucket = s3_server.create_bucket()
    out = f"s3://{bucket}/results"
    settings = _settings(proxy.url)
    proxy.fail_every, proxy.budget = 3, 15
    report = ingest(sources=[str(_documents(tmp_path, 2))], out=out, settings=settings)
    assert proxy.injected >= 10, f"the fault never bit: {proxy.injected} refused"
    assert [d["outcome"] for d in report["documents"]] == ["ok"] * 2, report["documents"]
    rows = _vectors(out, _settings(s3_server.endpoint_url))
    _assert_done_means_complete(report, _in_s3(s3_server.client, bucket), rows)
    again = ingest(sources=[str(tmp_path / "in")], out=out, settings=settings)
    assert all(d["cached"] for d in again["documents"]), again["documents"]


def test_s3_down_longer_than_the_retries_then_a_rerun_converges(
        s3_server: Any, s3_bucket: str, tmp_path: Path) -> None:
    """Writes to the output bucket refused for the whole first run: every document ends
    retryable with a storage reason, none is marked done; once S3 is back, the rerun does
    them all, once each."""
    out = f"s3://{s3_bucket}/results"
    proxy = FaultProxy(s3_server.endpoint_url, match=f"/{s3_bucket}/results/",
                       methods={"PUT", "POST"}).start()
    try:
        settings = _settings(proxy.url)
        proxy.down = True
        first = _ingest(sources=[str(_documents(tmp_path, 2))], out=out, settings=settings)
        assert proxy.injected > 0
        for doc in first["documents"]:
            assert doc["outcome"] != "ok", doc
            assert doc["retryable"], doc
            assert doc["reason"], doc
        assert not [k for k in _keys(s3_server.client, s3_bucket) if "_index" in k], \
            "a document marked done while its outputs could not be written"
        proxy.down = False
        second = _ingest(sources=[str(tmp_path / "in")], out=out, settings=settings)
    finally:
        proxy.stop()
    assert [d["outcome"] for d in second["documents"]] == ["ok"] * 2, second["documents"]
    assert not any(d["cached"] for d in second["documents"])
    rows = _vectors(out, _settings(s3_server.endpoint_url))
    _assert_done_means_complete(second, _in_s3(s3_server.client, s3_bucket), rows)


def test_postgres_stopped_mid_sweep_then_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                              ) -> None:
    """pgvector as the store, on a PostgreSQL of this test's own: the first documents go
    in; PostgreSQL stops; the next documents end retryable with nothing marked done; it
    starts again and the rerun adds exactly those, once each, and skips the first ones."""
    import shutil
    import tempfile
    import warnings

    import psycopg

    from folio.stores import PG_DSN_ENV

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pgserver = pytest.importorskip("pgserver")
    root = Path(tempfile.mkdtemp(prefix="folio-pg-fault-"))
    server = pgserver.get_server(root / "data", cleanup_mode="stop")
    try:
        dsn = server.get_uri()
        monkeypatch.setenv(PG_DSN_ENV, dsn)
        settings = {"store.kind": "pgvector"}
        docs, out = _documents(tmp_path, 3), tmp_path / "out"
        early = tmp_path / "early"
        early.mkdir()
        (docs / "doc0.pdf").rename(early / "doc0.pdf")
        first = _ingest(sources=[str(early)], out=str(out), settings=settings)
        assert [d["outcome"] for d in first["documents"]] == ["ok"]
        server.cleanup()  # PostgreSQL stops
        down = _ingest(sources=[str(docs)], out=str(out), settings=settings)
        for doc in down["documents"]:
            assert doc["outcome"] != "ok" and doc["retryable"] and doc["reason"], doc
        done = {p.name for p in (out / "_index").rglob("*") if p.is_file()}
        assert not any(d["doc_id"] in name for d in down["documents"] for name in done), \
            "a document marked done without its vectors"
        server = pgserver.get_server(root / "data", cleanup_mode="stop")  # back
        again = _ingest(sources=[str(early), str(docs)], out=str(out), settings=settings)
        outcomes = {Path(d["source"]).name: (d["outcome"], d["cached"]) for d in again["documents"]}
        assert outcomes == {"doc0.pdf": ("ok", True), "doc1.pdf": ("ok", False),
                            "doc2.pdf": ("ok", False)}, outcomes
        with psycopg.connect(dsn) as conn:
            tables = [r[0] for r in conn.execute(
                "SELECT table_name FROM information_schema.columns "
                "WHERE column_name = 'doc_id' AND table_schema = 'public'").fetchall()]
            # the store's table and the side table its writes land in until upkeep moves
            # them (folio.stores.pgvector_store): a row is in one or the other
            main = [t for t in tables if not t.endswith("_delta")]
            assert len(main) == 1 and set(tables) <= {main[0], f"{main[0]}_delta"}, tables
            rows = [{"id": r[0], "doc_id": r[1]} for t in tables for r in conn.execute(
                f'SELECT id, doc_id FROM "{t}"').fetchall()]
        report = {"documents": first["documents"] + [d for d in again["documents"]
                                                     if not d["cached"]]}
        _assert_done_means_complete(report, lambda uri: Path(uri).is_file(), rows)
    finally:
        server.cleanup()
        shutil.rmtree(root, ignore_errors=True)


def test_a_full_working_folder_is_retried_not_lost(tmp_path: Path) -> None:
    """The working folder on a 300 KB tmpfs: rendering fails with ENOSPC, which is the
    machine's fault, so the document ends retryable with a storage reason and is not
    marked done (it was quarantined for good, and marked done, before); with space
    again, the rerun does it whole."""
    import subprocess

    import lancedb

    from folio_prefect.flows.ingest import ingest, run_report_of

    small = tmp_path / "small"
    small.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=300k", "tmpfs", str(small)],
                             capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        src = tmp_path / "in"
        src.mkdir()
        write_text_pdf(src / "long.pdf", report_pages(seed=77, n=3))
        out, settings = tmp_path / "out", {"work_dir": str(small / "work")}
        # a run of quarantined documents fails, with its report (flows.ingest.final_state)
        full = run_report_of(ingest(sources=[str(src)], out=str(out), settings=settings,
                                    route="ocr", return_state=True))
        doc = full["documents"][0]
        assert doc["outcome"] != "ok" and doc["retryable"], doc
        assert "storage" in doc["reason"] or doc["pages_quarantined"], doc
        assert not (out / "_index").exists() or not any((out / "_index").rglob("*.json")), \
            "marked done with pages lost to a full disk"
        subprocess.run(["mount", "-o", "remount,size=64m", str(small)], check=True)
        again = ingest(sources=[str(src)], out=str(out), settings=settings, route="ocr")
    finally:
        subprocess.run(["umount", str(small)], capture_output=True)
    doc = again["documents"][0]
    assert doc["outcome"] == "ok" and not doc["cached"], doc
    db = lancedb.connect(str(out / "_vectors"))
    rows = db.open_table(list(db.table_names())[0]).to_arrow().select(["id", "doc_id"]).to_pylist()
    _assert_done_means_complete(again, lambda uri: Path(uri).is_file(), rows)



class PrefectServer:
    """``prefect server start`` of the test's own, with its database under ``home``:
    stopped and started again on the same port and database (a restart, not a new
    server).

    The port is picked below Linux's ephemeral range (32768-60999): a port from that
    range, free while the server is down, can be taken as the source port of any
    outgoing connection on the machine, and the restarted server could not bind it."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self.port = _free_port_below_ephemeral()
        self.url = f"http://127.0.0.1:{self.port}/api"
        self.proc: Any = None

    def start(self, timeout_s: float = 180.0) -> PrefectServer:
        import os
        import subprocess
        import sys
        import time
        import urllib.request

        from tests.prefect_db_template import copy_migrated_db

        # migrated once a session (tests/prefect_db_template.py); a restart finds its own
        copy_migrated_db(self.home / "prefect.db")
        env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_API_URL")}
        env.update(PREFECT_HOME=str(self.home), PREFECT_SERVER_ANALYTICS_ENABLED="false",
                   PREFECT_UI_ENABLED="false")
        with (self.home / "server.log").open("ab") as log:  # the child keeps its own fd
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "prefect", "server", "start", "--host", "127.0.0.1",
                 "--port", str(self.port)], cwd=self.home, env=env, stdout=log,
                stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and self.proc.poll() is None:
            try:
                with urllib.request.urlopen(f"{self.url}/health", timeout=2):
                    return self
            except OSError:
                time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"prefect server not up on port {self.port}: "
                           + (self.home / "server.log").read_text(errors="replace")[-3000:])

    def up(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self) -> None:
        import os
        import signal
        import subprocess

        if not self.up():
            return
        os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)


def _free_port_below_ephemeral() -> int:
    import random
    import socket

    for _ in range(200):
        port = random.randrange(20000, 32000)
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError("no free port in 20000-32000")


@pytest.mark.timeout(400)  # a hang fails here with every thread's stack, not at 900 s
def test_prefect_server_restarted_mid_sweep(s3_server: Any, tmp_path: Path,
                                           record_property: RecordProperty) -> None:
    """A sweep of 6 documents in batches of 2 on a Prefect server of the test's own,
    events included (routed to it, as in a process that knows one server); once the
    first document is done the server is stopped, stays down a while, and is started
    again on its database. The sweep rides it out, never hangs: the batch in flight and
    those sent while the server is down wait for it and go on (the outage is far shorter
    than ``folio_prefect.deployments.runs.OUTAGE_S``). Every document is done once, with all
    its outputs and vectors, the ledger and the sweep's report say so, and the next sweep has nothing
    left to do.
    """
    import threading
    import time

    from prefect.events.clients import PrefectEventsClient
    from prefect.events.worker import EventsWorker
    from prefect.settings import PREFECT_API_URL, temporary_settings

    from folio.claims import ClaimLedger
    from folio.io.s3 import head_object
    from folio_prefect.flows.sweep import sweep
    from tests.test_sweep import audit, processings

    n = 6
    client, bucket = s3_server.client, s3_server.create_bucket()
    client.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
    problems: list[BaseException] = []

    def upload() -> None:
        try:
            for i in range(n):
                pdf = write_text_pdf(tmp_path / f"doc-{i}.pdf", report_pages(seed=900 + i, n=1))
                client.upload_file(str(pdf), bucket, f"in/doc-{i}.pdf")
        except BaseException as exc:  # surfaced below, not lost in this thread
            problems.append(exc)

    uploading = threading.Thread(target=upload)  # while the server starts
    uploading.start()
    home = tmp_path / "prefect"
    home.mkdir()
    server = PrefectServer(home).start()
    uploading.join()
    assert not problems, problems
    corpus = {"bucket": bucket, "client": client, "s3": s3_server.settings}
    settings = {**_settings(s3_server.endpoint_url), "work_dir": str(tmp_path / "work"),
                "validation.enabled": False}
    timeline: dict[str, float] = {}
    done_at_stop: list[int] = []

    def restart_once_some_are_done() -> None:
        try:
            deadline = time.monotonic() + 240
            while not processings(corpus, "out") and time.monotonic() < deadline:
                time.sleep(0.1)
            server.stop()
            timeline["stopped"] = time.monotonic()
            done_at_stop.append(len(processings(corpus, "out")))
            time.sleep(1)  # down a while: this, and the restart's own seconds
            server.start()
            timeline["restarted"] = time.monotonic()
        except BaseException as exc:  # surfaced below, not lost in this thread
            problems.append(exc)

    def run() -> dict[str, Any]:
        return sweep(prefix=f"s3://{bucket}/in", out=f"s3://{bucket}/out", settings=settings,
                     batch_size=2, max_in_flight=1, lease_s=5.0, poll_s=0.2, inline=True)

    # Prefect keeps one events worker per process, bound to the first API it was made
    # for (the session's harness, in the full suite): events go to this server instead
    EventsWorker.set_client_override(PrefectEventsClient, api_url=server.url)
    try:
        with temporary_settings({PREFECT_API_URL: server.url}):
            watcher = threading.Thread(target=restart_once_some_are_done, daemon=True)
            watcher.start()
            timeline["started"] = time.monotonic()
            first = run()
            timeline["first_ended"] = time.monotonic()
            watcher.join(timeout=300)
            again = run()
            timeline["again_ended"] = time.monotonic()
    finally:
        try:
            if server.up():  # its events sent now, not at exit to a server long gone
                EventsWorker.instance().drain()
        finally:
            EventsWorker.set_client_override(None)
            server.stop()
    seen = {k: round(v - timeline["started"], 1) for k, v in timeline.items()}
    record_property("seconds from the first sweep's start", seen)
    record_property("first sweep", first)
    assert not problems, problems
    assert "restarted" in timeline, ("the server was never restarted", seen)
    assert done_at_stop[0] < n, ("the sweep was over before its server went down", seen)
    assert timeline["first_ended"] > timeline["restarted"], ("it ended while down", seen)
    assert first["documents"] == n and first["failed"] == 0, (first, seen)
    assert first["processed"] + first["cached"] == n, (first, seen)
    assert again["skipped"] == again["documents"] == n, again
    chunks = audit(corpus, "out", n)  # each processed exactly once, no vector twice
    _assert_done_index_complete(client, bucket, "out", chunks)
    ledger = ClaimLedger.for_output(f"s3://{bucket}/out", s3_server.settings,
                                    first["config_hash"])
    for i in range(n):  # and the ledger has each one done
        ref = head_object(client, bucket, f"in/doc-{i}.pdf")
        assert ref is not None and ledger.done_record(ref) is not None, i


def _assert_done_index_complete(s3: Any, bucket: str, out: str, chunks: dict[str, int]) -> None:
    """Every document marked done (its content done-index entry) has each output it
    names and as many vectors as it says."""
    import json

    keys = [k for k in _keys(s3, bucket) if k.startswith(f"{out}/_index/")]
    assert keys
    present = set(_keys(s3, bucket))
    for key in keys:
        entry = json.loads(s3.get_object(Bucket=bucket, Key=key)["Body"].read())
        for kind, uri in entry["outputs"].items():
            assert uri.split("/", 3)[3] in present, f"{entry['source']}: {kind} missing"
        assert chunks.get(entry["doc_id"]) == entry["chunks"], entry["source"]
