"""The claim ledger against a real S3 endpoint (moto's server over HTTP) and a folder."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from folio.claims import (
    Claim,
    ClaimKeeper,
    ClaimLedger,
    key_hash,
    record_lines,
)
from folio.io.s3 import ObjectRef, make_client
from folio.io.sinks import LocalSink, S3Sink, Sink
from folio.io.sources import list_s3_entries
from folio.settings.config import SourceSettings


class FakeClock:
    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def obj(key: str, etag: str = '"e1"', size: int = 10, bucket: str = "src") -> ObjectRef:
    return ObjectRef(bucket=bucket, key=key, size=size, etag=etag)


@pytest.fixture(params=["s3", "local"])
def make_store(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[[], Sink]:
    """A factory of sinks over one ledger location (each with its own client, like
    separate processes)."""
    if request.param == "local":
        return lambda: LocalSink(tmp_path / "ledger")
    server = request.getfixturevalue("s3_server")
    bucket = server.create_bucket()
    return lambda: S3Sink(bucket, "out/run", make_client(server.settings))


def race(n: int, fn: Callable[[int], Any]) -> list[Any]:
    """Run ``fn(i)`` in ``n`` threads released at the same instant."""
    barrier = threading.Barrier(n)
    results: list[Any] = [None] * n

    def run(i: int) -> None:
        barrier.wait()
        results[i] = fn(i)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


def test_racing_claimers_exactly_one_wins(make_store: Callable[[], Sink]) -> None:
    ledgers = [ClaimLedger(make_store(), "cfg") for _ in range(6)]
    for round_ in range(5):
        doc = obj(f"in/doc-{round_}.pdf")

        def claim(i: int, doc: ObjectRef = doc) -> Claim | None:
            return ledgers[i].try_claim(doc, f"owner-{i}", lease_s=60)

        won = race(6, claim)
        winners = [c for c in won if c is not None]
        assert len(winners) == 1, won
        assert ledgers[0].current(doc.uri).token == winners[0].token  # type: ignore[union-attr]


def test_expired_lease_is_taken_over_by_exactly_one(make_store: Callable[[], Sink]) -> None:
    clock = FakeClock()
    first = ClaimLedger(make_store(), "cfg", clock=clock)
    doc = obj("in/slow.pdf")
    dead = first.try_claim(doc, "dead-worker", lease_s=30)
    assert dead is not None
    clock.now += 10
    takers = [ClaimLedger(make_store(), "cfg", clock=clock) for _ in range(4)]
    assert all(t.try_claim(doc, "early", lease_s=30) is None for t in takers)  # still held
    clock.now += 25  # the lease ran out
    won = race(4, lambda i: takers[i].try_claim(doc, f"taker-{i}", lease_s=30))
    winners = [c for c in won if c is not None]
    assert len(winners) == 1
    assert winners[0].takeovers == 1 and winners[0].previous_owner == "dead-worker"
    assert first.renew(dead, 30) is None  # the dead holder cannot come back
    assert first.release(dead) is False
    assert first.current(doc.uri).owner == winners[0].owner  # type: ignore[union-attr]


def test_renewal_keeps_the_claim_and_records_the_batch(make_store: Callable[[], Sink]) -> None:
    clock = FakeClock()
    ledger = ClaimLedger(make_store(), "cfg", clock=clock)
    other = ClaimLedger(make_store(), "cfg", clock=clock)
    doc = obj("in/long.pdf")
    claim = ledger.try_claim(doc, "a", lease_s=30)
    assert claim is not None
    for _ in range(5):  # far longer than one lease in total, renewed within each
        clock.now += 20
        claim = ledger.renew(claim, 30, batch="b1")  # type: ignore[arg-type]
        assert claim is not None
        assert other.try_claim(doc, "b", lease_s=30) is None
    clock.now += 31
    taken = other.try_claim(doc, "b", lease_s=30)
    assert taken is not None and taken.previous_batch == "b1"


def test_completed_document_is_skipped_and_a_new_version_is_not(
    make_store: Callable[[], Sink],
) -> None:
    ledger = ClaimLedger(make_store(), "cfg")
    doc = obj("in/a.pdf")
    claim = ledger.try_claim(doc, "a", lease_s=60)
    assert claim is not None
    ledger.complete(claim, sha256="f" * 64, doc_id="f" * 32, outcome="ok")
    names = ledger.done_names()
    assert ledger.is_done(doc, names) and ledger.is_done(doc)
    assert ledger.done_record(doc).sha256 == "f" * 64  # type: ignore[union-attr]
    assert not ledger.is_done(obj("in/a.pdf", etag='"e2"'), names)  # the source changed
    assert not ClaimLedger(ledger.store, "other-config").is_done(doc)  # another config
    assert ledger.current(doc.uri).released  # type: ignore[union-attr]


def test_failed_document_is_retried_and_never_done(make_store: Callable[[], Sink]) -> None:
    ledger = ClaimLedger(make_store(), "cfg")
    doc = obj("in/bad.pdf")
    for attempt in (1, 2, 3):
        claim = ledger.try_claim(doc, f"sweep-{attempt}", lease_s=60)
        assert claim is not None  # released by the failure: the next sweep gets it at once
        failure = ledger.fail(claim, "encrypted: needs a password", retryable=False)
        assert failure.attempts == attempt
        assert not ledger.is_done(doc) and not ledger.is_done(doc, ledger.done_names())
    assert key_hash(doc.uri) in ledger.failed_names()
    assert ledger.should_retry(doc, max_attempts=4)
    assert not ledger.should_retry(doc, max_attempts=3)  # bad input: given up...
    assert ledger.should_retry(obj("in/bad.pdf", etag='"fixed"'), max_attempts=3)  # ...until replaced
    claim = ledger.try_claim(doc, "sweep-4", lease_s=60)
    assert claim is not None
    ledger.fail(claim, "storage: timeout", retryable=True)
    assert ledger.should_retry(doc, max_attempts=1)  # transient failures: always retried
    claim = ledger.try_claim(doc, "sweep-5", lease_s=60)
    ledger.complete(claim, sha256="a" * 64)  # type: ignore[arg-type]
    assert ledger.is_done(doc) and ledger.failure(doc.uri) is None


ODD_KEYS = [
    "in/Résumé 2024 (final).pdf",
    "in/../../etc/passwd.pdf",
    "in/a?b*c|d<e>f:g\"h.pdf",
    "in/%2F%00 plus+and&=#frag.pdf",
    "in/日本語/文書.pdf",
    "in/" + "x" * 900 + ".pdf",
]


@pytest.mark.parametrize("key", ODD_KEYS)
def test_odd_keys_are_safe(make_store: Callable[[], Sink], key: str) -> None:
    ledger = ClaimLedger(make_store(), "cfg")
    doc = obj(key)
    claim = ledger.try_claim(doc, "a", lease_s=60)
    assert claim is not None and claim.source == f"s3://src/{key}"
    assert ledger.claim_path(doc.uri).count("/") == 2  # always {dir}/{cfg}/{hash}.json
    assert ledger.try_claim(obj(key + "x"), "a", lease_s=60) is not None  # no collision
    ledger.complete(claim, sha256="b" * 64)
    assert ledger.is_done(doc, ledger.done_names())


def test_keeper_renews_in_the_background_and_reports_loss(s3_server: Any) -> None:
    bucket = s3_server.create_bucket()
    ledger = ClaimLedger(S3Sink(bucket, "out", s3_server.client), "cfg")
    rival = ClaimLedger(S3Sink(bucket, "out", s3_server.client), "cfg")
    kept, stolen = obj("in/kept.pdf"), obj("in/stolen.pdf")
    with ClaimKeeper(ledger, lease_s=1.5, interval_s=0.3) as keeper:
        for doc in (kept, stolen):
            keeper.add(ledger.try_claim(doc, "me", lease_s=1.5))  # type: ignore[arg-type]
        # a rival overwrites one claim (as a taker would after an expiry)
        held = rival.current(stolen.uri)
        assert held is not None
        rival.store.replace(rival.claim_path(stolen.uri), b'{"bad": 1}', held.etag)
        threading.Event().wait(2.5)  # longer than the lease: only renewal keeps it
        assert rival.try_claim(kept, "rival", lease_s=5) is None
        assert keeper.lost == {stolen.uri} and keeper.held() == [kept.uri]
        result = record_lines(ledger, keeper, [kept.uri, stolen.uri], {
            kept.uri: {"source": kept.uri, "outcome": "ok", "sha256": "c" * 64},
            stolen.uri: {"source": stolen.uri, "outcome": "ok"},
        })
    assert result["processed"] == [kept.uri] and result["lost"] == [stolen.uri]
    assert ledger.is_done(kept) and not ledger.is_done(stolen)


def test_list_entries_paginates_keeps_to_the_folder_and_lists_every_object(
        s3_server: Any) -> None:
    """Every object (what it is is read later: a ZIP ends skipped, never unlisted), the
    globs' leftovers counted, folder markers left out."""
    bucket = s3_server.create_bucket()
    keys = [f"in/{i:03d}.pdf" for i in range(7)] + ["in/notes.txt", "inbox/x.pdf", "in/s/d.PDF",
                                                     "in/s/"]
    for key in keys:
        s3_server.client.put_object(Bucket=bucket, Key=key, Body=b"%PDF")
    found = [o.key for o in list_s3_entries(f"s3://{bucket}/in", s3_server.settings, page_size=2)]
    assert found == [f"in/{i:03d}.pdf" for i in range(7)] + ["in/notes.txt", "in/s/d.PDF"]
    assert all(o.etag for o in list_s3_entries(f"s3://{bucket}/in/", s3_server.settings))
    left: list[str] = []
    scoped = [o.key for o in list_s3_entries(f"s3://{bucket}/in", s3_server.settings,
                                          scope=SourceSettings(exclude=["s/*", "00[0-5].pdf"]),
                                          on_excluded=lambda o: left.append(o.key))]
    assert scoped == ["in/006.pdf", "in/notes.txt"] and len(left) == 7


def test_outcome_read_back_from_the_outputs_when_a_report_is_missing(
    s3_server: Any, tmp_path: Path,
) -> None:
    """A batch run that completed without a readable report (results not persisted):
    the pipeline's own done-index and quarantine records say what became of each."""
    import hashlib

    from folio.claims import line_from_outputs
    from folio.io.s3 import head_object
    from folio.io.sinks import open_sink
    from folio.models import DocumentOutcome, DocumentResult
    from folio.output import outputs

    client, bucket = s3_server.client, s3_server.create_bucket()
    out = f"s3://{bucket}/out"
    sink = open_sink(out, s3_server.settings)
    ledger = ClaimLedger.for_output(out, s3_server.settings, "cfg")
    lines = {}
    for name, outcome in (("done", DocumentOutcome.OK), ("bad", DocumentOutcome.QUARANTINED),
                          ("never", None)):
        body = f"%PDF-1.4 {name}".encode()
        client.put_object(Bucket=bucket, Key=f"in/{name}.pdf", Body=body)
        sha = hashlib.sha256(body).hexdigest()
        doc = DocumentResult(source=f"s3://{bucket}/in/{name}.pdf", sha256=sha, doc_id=sha[:32],
                             config_hash="cfg", outcome=outcome or DocumentOutcome.OK,
                             reason="encrypted: no password" if outcome else "")
        if outcome is DocumentOutcome.OK:
            outputs.write_document(sink, doc)
            outputs.mark_done(sink, doc)
        elif outcome is DocumentOutcome.QUARANTINED:
            outputs.write_quarantine(sink, doc)
        ref = head_object(client, bucket, f"in/{name}.pdf")
        claim = ledger.try_claim(ref, "me", lease_s=60)  # type: ignore[arg-type]
        lines[name] = line_from_outputs(claim, out=out, s3=s3_server.settings,  # type: ignore[arg-type]
                                        work_dir=tmp_path)
    assert lines["done"] is not None and lines["done"]["cached"] and lines["done"]["outcome"] == "ok"
    assert lines["bad"] is not None and lines["bad"]["outcome"] == "quarantined"
    assert lines["bad"]["reason"].startswith("encrypted")
    assert lines["never"] is None
    assert not list(tmp_path.iterdir())  # downloads are not left behind


def test_done_set_holds_names_as_hashes_and_answers_membership() -> None:
    from folio.claims.done_set import DoneSet

    names = [f"{i:032x}-{i * 7:016x}" for i in range(5000)]
    done = DoneSet(iter(names))  # a stream: the set never needs the list
    assert len(done) == 5000
    assert all(n in done for n in names[::97])
    assert f"{1:032x}-{8:016x}" not in done and "" not in done and 3 not in done
    assert done._sorted.nbytes == 8 * 5000


def test_done_set_peaks_at_its_own_size_while_built() -> None:
    """Building it holds the hashes and nothing else per name: no copy for sorting or
    de-duplication (``np.unique`` peaked at seven times the set)."""
    import tracemalloc

    from folio.claims.done_set import DoneSet

    n = 200_000
    tracemalloc.start()
    try:
        done = DoneSet(f"{i:032x}-{i:016x}" for i in range(n))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(done) == n and f"{7:032x}-{7:016x}" in done
    assert peak < 10 * n + 256 * 1024, peak  # 8 bytes a name, plus the array's headroom


def test_plan_skips_done_gives_up_on_bad_input_and_lists_the_rest(s3_server: Any) -> None:
    """The sweep's listing pass over a real S3 listing: done sources cost no request of
    their own, a source failed on its own merits max_attempts times is given up, a changed
    or new source is to do."""
    from folio.claims.plan import plan_sweep

    src = s3_server.create_bucket()
    for name in ("a", "b", "c", "d"):
        s3_server.client.put_object(Bucket=src, Key=f"in/{name}.pdf", Body=name.encode())
    listed = {o.key: o for o in list_s3_entries(f"s3://{src}/in", s3_server.settings)}
    ledger = ClaimLedger(S3Sink(s3_server.create_bucket(), "out", make_client(s3_server.settings)),
                         "cfg")  # fmt: skip
    for key in ("in/a.pdf", "in/b.pdf"):
        claim = ledger.try_claim(listed[key], "sweep", lease_s=60)
        assert claim is not None
        ledger.complete(claim)
    claim = ledger.try_claim(listed["in/c.pdf"], "sweep", lease_s=60)
    assert claim is not None
    ledger.fail(claim, "encrypted", retryable=False)
    s3_server.client.put_object(Bucket=src, Key="in/b.pdf", Body=b"b, changed")
    plan = {o.key: v for o, v in plan_sweep(f"s3://{src}/in", ledger, s3_server.settings,
                                            max_attempts=1)}  # fmt: skip
    assert plan == {"in/a.pdf": "skipped", "in/b.pdf": "todo", "in/c.pdf": "given_up",
                    "in/d.pdf": "todo"}  # fmt: skip


def test_a_skipped_line_is_done_so_the_next_sweep_does_not_send_it_again() -> None:
    from folio.claims.outcomes import line_outcome

    assert line_outcome({"outcome": "skipped", "retryable": False,
                         "reason": "unsupported format: application/zip"})[0]
    assert not line_outcome({"outcome": "skipped", "retryable": True})[0]
    assert not line_outcome({"outcome": "quarantined", "retryable": False})[0]
