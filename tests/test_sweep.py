"""The sweep flow end to end (inline batches) on a real S3 endpoint: re-runs do nothing,
concurrent sweeps and a crashed-then-restarted sweep process every document exactly once.

"Processed" is counted independently of the sweep's own ledger: the output bucket is
versioned, and the pipeline writes a document's done-index entry (``_index/...``) once
per completed processing, so its version count is how often the document was processed.
"""

from __future__ import annotations

import threading
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from folio.claims import ClaimLedger
from folio.samples import report_pages, write_text_pdf

pytestmark = pytest.mark.usefixtures("prefect_api")

#: two folders under ``in/``: 7 documents in "batch 0" (the crash test: with batches of 3
#: and 2 in flight, the sweep dies with documents done but not recorded) and 6 in "batch 1";
#: 20 documents (in three folders) took 76 s of the file's 106 here, with the same checks
DOCS = 13


@pytest.fixture(scope="module")
def corpus(s3_server: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """``DOCS`` distinct born-digital PDFs (one page each) under ``s3://bucket/in/``."""
    client = s3_server.client
    bucket = s3_server.create_bucket()
    client.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
    folder = tmp_path_factory.mktemp("sweep-pdfs")
    for i in range(DOCS):
        pdf = write_text_pdf(folder / f"doc-{i:02d}.pdf", report_pages(seed=500 + i, n=1))
        client.upload_file(str(pdf), bucket, f"in/batch {i % 2}/doc-{i:02d}.pdf")
    settings = {
        # the keys come from the environment (tests/conftest.py), as a worker's do
        "s3.endpoint_url": s3_server.endpoint_url, "s3.region": "us-east-1",
        "work_dir": str(tmp_path_factory.mktemp("work")),
        "validation.enabled": False,  # the sweep is under test here, not Great Expectations
    }
    return {"bucket": bucket, "client": client, "settings": settings, "s3": s3_server.settings}


def run_sweep(corpus: dict[str, Any], out: str, prefix: str = "in", **kw: Any) -> dict[str, Any]:
    from folio_prefect.flows.sweep import sweep

    # a lease that outlasts a renewal delayed by a loaded host (load average 16 on two
    # cores let two 5 s leases lapse and another sweep take them over); the crash test
    # passes its own short one
    options: dict[str, Any] = {"batch_size": 3, "max_in_flight": 2, "lease_s": 15.0,
                               "poll_s": 0.2, "inline": True}
    options.update(kw)
    bucket = corpus["bucket"]
    return sweep(prefix=f"s3://{bucket}/{prefix}", out=f"s3://{bucket}/{out}",
                 settings=corpus["settings"], **options)


def processings(corpus: dict[str, Any], out: str) -> Counter[str]:
    """How many times each document (by content hash) was processed to completion."""
    paginator = corpus["client"].get_paginator("list_object_versions")
    counts: Counter[str] = Counter()
    for page in paginator.paginate(Bucket=corpus["bucket"], Prefix=f"{out}/_index/"):
        for version in page.get("Versions", []):
            counts[version["Key"].rsplit("/", 1)[-1]] += 1
    return counts


def vector_rows(corpus: dict[str, Any], out: str) -> Any:
    import lancedb

    from folio.stores.lance_s3 import lance_storage_options

    db = lancedb.connect(f"s3://{corpus['bucket']}/{out}/_vectors",
                         storage_options=lance_storage_options(corpus["s3"]))
    return db.open_table("chunks").to_pandas()


def audit(corpus: dict[str, Any], out: str, documents: int) -> dict[str, int]:
    """Every document processed exactly once; vectors: no duplicate ids; returns the
    chunk count per document."""
    counts = processings(corpus, out)
    assert len(counts) == documents and set(counts.values()) == {1}, counts
    rows = vector_rows(corpus, out)
    assert rows["id"].is_unique
    per_doc = rows.groupby("doc_id").size().to_dict()
    assert len(per_doc) == documents
    return {str(k): int(v) for k, v in per_doc.items()}


@pytest.fixture(scope="module")
def single_run(corpus: dict[str, Any]) -> dict[str, Any]:
    first = run_sweep(corpus, "single")
    return {"first": first, "chunks": audit(corpus, "single", DOCS)}


def test_sweep_processes_all_then_nothing(corpus: dict[str, Any], single_run: dict[str, Any]) -> None:
    first = single_run["first"]
    assert first["documents"] == first["processed"] == DOCS
    assert first["failed"] == first["skipped"] == 0
    again = run_sweep(corpus, "single")
    assert again["processed"] == again["cached"] == again["batches"] == 0
    assert again["skipped"] == DOCS
    assert audit(corpus, "single", DOCS) == single_run["chunks"]


def test_concurrent_sweeps_process_each_document_once(
    corpus: dict[str, Any], single_run: dict[str, Any],
) -> None:
    results: list[dict[str, Any]] = []
    errors: list[BaseException] = []

    def one() -> None:
        try:
            results.append(run_sweep(corpus, "twice"))
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=one) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert sum(r["processed"] for r in results) == DOCS
    assert sum(r["cached"] + r["failed"] for r in results) == 0
    for r in results:  # each sweep accounts for every document when it returns
        assert r["processed"] + r["skipped"] == DOCS, r
    assert audit(corpus, "twice", DOCS) == single_run["chunks"]


def test_crashed_sweep_restarted_converges(
    corpus: dict[str, Any], single_run: dict[str, Any], monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The sweep dies after recording 4 documents, with batches in flight whose
    documents the pipeline finished but the sweep never recorded, and claims left to
    expire; the restarted sweep takes them over and finds them done, not redoing them."""
    real_complete = ClaimLedger.complete
    recorded: list[str] = []

    def dying_complete(self: ClaimLedger, claim: Any, **kw: Any) -> Any:
        if len(recorded) >= 4:
            raise RuntimeError("sweep killed")
        recorded.append(claim.source)
        return real_complete(self, claim, **kw)

    monkeypatch.setattr(ClaimLedger, "complete", dying_complete)
    with pytest.raises(RuntimeError, match="sweep killed"):
        run_sweep(corpus, "crash", prefix="in/batch 0", lease_s=2.0)
    monkeypatch.setattr(ClaimLedger, "complete", real_complete)
    documents = 7  # "in/batch 0/" holds every second document, from the first
    done_before = len(processings(corpus, "crash"))
    assert len(recorded) == 4 and done_before > 4  # some were processed but not recorded

    again = run_sweep(corpus, "crash", prefix="in/batch 0", lease_s=2.0)
    assert again["documents"] == documents
    assert again["skipped"] == 4
    assert again["taken_over"] > 0  # the dead sweep's expired claims
    assert again["cached"] == done_before - 4  # done by the dead sweep's runs: not redone
    assert again["processed"] == documents - done_before
    chunks = audit(corpus, "crash", documents)
    assert all(single_run["chunks"][doc] == n for doc, n in chunks.items())
    assert run_sweep(corpus, "crash", prefix="in/batch 0")["skipped"] == documents


@pytest.mark.timeout(300)  # before the fix, this sweep waited forever
def test_a_batch_is_over_when_its_task_returns_whatever_the_api_heard(
    corpus: dict[str, Any],
) -> None:
    """The Prefect server learns a task run's states from events, which Prefect sends
    best-effort (a restarted server, or a process whose events go to another server,
    never hears some). Here it hears none: the sweep still sees each batch end, because
    it asks the batch's future in this process, not the API."""
    from prefect.events.clients import NullEventsClient
    from prefect.events.worker import EventsWorker

    EventsWorker.set_client_override(NullEventsClient)
    try:
        first = run_sweep(corpus, "unheard", prefix="in/batch 1")
    finally:
        EventsWorker.set_client_override(None)
    documents = 6  # "in/batch 1/" holds every second document, from the second
    assert first["documents"] == first["processed"] == documents, first
    audit(corpus, "unheard", documents)


def limit(name: str) -> str:
    """A Prefect global concurrency limit of one slot (batches hold it while they run)."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.actions import GlobalConcurrencyLimitCreate

    with get_client(sync_client=True) as client:
        client.create_global_concurrency_limit(GlobalConcurrencyLimitCreate(name=name, limit=1))
    return name


def test_a_document_quarantined_for_good_is_skipped_until_a_rerun_is_forced(
    corpus: dict[str, Any], tmp_path: Path,
) -> None:
    """As ``folio ingest`` does (its known_bad): a document that failed on its own merits
    is not sent to a batch again by the next sweep (issue 48: an encrypted PDF was sent
    every minute); ``reprocess`` tries it again."""
    client, bucket = corpus["client"], corpus["bucket"]
    client.put_object(Bucket=bucket, Key="bad/broken.pdf", Body=b"%PDF-1.4 not really")
    pdf = write_text_pdf(tmp_path / "good.pdf", report_pages(seed=999, n=1))
    client.upload_file(str(pdf), bucket, "bad/good.pdf")
    first = run_sweep(corpus, "bad", prefix="bad")
    assert first["processed"] == 1 and first["failed"] == 1
    ledger = ClaimLedger.for_output(f"s3://{bucket}/bad", corpus["s3"],
                                    first["config_hash"])
    failure = ledger.failure(f"s3://{bucket}/bad/broken.pdf")
    assert failure is not None and failure.attempts == 1 and not failure.retryable
    second = run_sweep(corpus, "bad", prefix="bad", concurrency_limit=limit("folio-sweep-test"))
    assert second["skipped"] == 1 and second["given_up"] == 1 and second["batches"] == 0
    forced = run_sweep(corpus, "bad", prefix="bad", reprocess=True)
    assert forced["failed"] == 1  # tried again, never marked done
    assert ledger.failure(f"s3://{bucket}/bad/broken.pdf").attempts == 2  # type: ignore[union-attr]
    # the sweep's sync: the deleted good.pdf leaves the index (rows, folder, record)
    client.delete_object(Bucket=bucket, Key="bad/good.pdf")
    synced = run_sweep(corpus, "bad", prefix="bad", sync=True)["sync"]
    assert synced["removed"] == [f"s3://{bucket}/bad/good.pdf"] and synced["rows_removed"] > 0


def test_a_sweep_reads_a_scan_saved_as_an_image_and_settles_every_other_object(
    corpus: dict[str, Any], tmp_path: Path,
) -> None:
    """Issue 43 on the sweep: a TIFF scan in the bucket is a document (its chunks in the
    vector table under its own key), a ZIP beside it ends with its line, and the next
    sweep sends neither to a batch again."""
    import io
    import zipfile

    from tests.mixed_folder import page_images

    client, bucket = corpus["client"], corpus["bucket"]
    pdf = write_text_pdf(tmp_path / "page.pdf", report_pages(seed=321, n=1))
    scan = io.BytesIO()
    page_images(pdf, 150)[0].save(scan, format="TIFF", compression="tiff_lzw", dpi=(150, 150))
    client.put_object(Bucket=bucket, Key="scans/scan.tif", Body=scan.getvalue())
    bundle = io.BytesIO()
    with zipfile.ZipFile(bundle, "w") as zf:
        zf.writestr("notes.txt", "not a document folio reads")
    client.put_object(Bucket=bucket, Key="scans/bundle.zip", Body=bundle.getvalue())
    first = run_sweep(corpus, "scan-out", prefix="scans")
    assert first["documents"] == 2 and first["failed"] == 0, first
    rows = vector_rows(corpus, "scan-out")
    assert set(rows["source"]) == {f"s3://{bucket}/scans/scan.tif"}, rows.head()
    assert sum(len(t) for t in rows["text"]) > 200  # the scan's words, OCR'd
    second = run_sweep(corpus, "scan-out", prefix="scans")
    assert second["batches"] == 0 and second["failed"] == 0, second
