"""Faults that lose nothing (issue "A million documents", item 4), with real components:
the moto S3 server behind a proxy that answers S3's own 503 SlowDown, and the real flow
writing outputs and LanceDB vectors to it.

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
from tests.s3_fault_proxy import FaultProxy

pytestmark = [pytest.mark.usefixtures("prefect_api"), pytest.mark.timeout(900)]


@pytest.fixture()
def proxy(s3_server: Any) -> Iterator[FaultProxy]:
    p = FaultProxy(s3_server.endpoint_url).start()
    try:
        yield p
    finally:
        p.stop()


def _settings(url: str) -> dict[str, Any]:
    return {"s3.endpoint_url": url, "s3.region": "us-east-1",
            "s3.access_key_id": "test", "s3.secret_access_key": "test"}


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
    from folio_prefect.flows.ingest import ingest

    out = f"s3://{s3_bucket}/results"
    proxy = FaultProxy(s3_server.endpoint_url, match=f"/{s3_bucket}/results/",
                       methods={"PUT", "POST"}).start()
    try:
        settings = _settings(proxy.url)
        proxy.down = True
        first = ingest(sources=[str(_documents(tmp_path, 2))], out=out, settings=settings)
        assert proxy.injected > 0
        for doc in first["documents"]:
            assert doc["outcome"] != "ok", doc
            assert doc["retryable"], doc
            assert doc["reason"], doc
        assert not [k for k in _keys(s3_server.client, s3_bucket) if "_index" in k], \
            "a document marked done while its outputs could not be written"
        proxy.down = False
        second = ingest(sources=[str(tmp_path / "in")], out=out, settings=settings)
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
    from folio_prefect.flows.ingest import ingest

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
        first = ingest(sources=[str(early)], out=str(out), settings=settings)
        assert [d["outcome"] for d in first["documents"]] == ["ok"]
        server.cleanup()  # PostgreSQL stops
        down = ingest(sources=[str(docs)], out=str(out), settings=settings)
        for doc in down["documents"]:
            assert doc["outcome"] != "ok" and doc["retryable"] and doc["reason"], doc
        done = {p.name for p in (out / "_index").rglob("*") if p.is_file()}
        assert not any(d["doc_id"] in name for d in down["documents"] for name in done), \
            "a document marked done without its vectors"
        server = pgserver.get_server(root / "data", cleanup_mode="stop")  # back
        again = ingest(sources=[str(early), str(docs)], out=str(out), settings=settings)
        outcomes = {Path(d["source"]).name: (d["outcome"], d["cached"]) for d in again["documents"]}
        assert outcomes == {"doc0.pdf": ("ok", True), "doc1.pdf": ("ok", False),
                            "doc2.pdf": ("ok", False)}, outcomes
        with psycopg.connect(dsn) as conn:
            tables = [r[0] for r in conn.execute(
                "SELECT table_name FROM information_schema.columns "
                "WHERE column_name = 'doc_id' AND table_schema = 'public'").fetchall()]
            assert len(tables) == 1, tables
            rows = [{"id": r[0], "doc_id": r[1]} for r in conn.execute(
                f'SELECT id, doc_id FROM "{tables[0]}"').fetchall()]
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

    from folio_prefect.flows.ingest import ingest

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
        full = ingest(sources=[str(src)], out=str(out), settings=settings, route="ocr")
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

