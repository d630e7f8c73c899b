"""``sync`` and ``dry_run`` on the ingest flow (what ``folio ingest --sync [--dry-run]``
runs), and an interrupted run's report (issue 48: SIGINT left no report, and the document
in flight with a document.json that said ok)."""

from __future__ import annotations

import json
import signal
import threading
from pathlib import Path
from typing import Any

import pytest

from folio import progress
from folio.samples import report_pages, write_text_pdf

pytestmark = pytest.mark.usefixtures("prefect_api")

FAST = {"route.mode": "text-layer", "compress": False, "validation.enabled": False}


def test_the_flow_counts_lists_and_removes_gone_sources(tmp_path: Path) -> None:
    from folio_prefect.flows.ingest import ingest

    root, out = tmp_path / "in", tmp_path / "out"
    root.mkdir()
    write_text_pdf(root / "a.pdf", report_pages(seed=60, n=1))
    write_text_pdf(root / "b.pdf", report_pages(seed=61, n=1))
    ingest(sources=[str(root)], out=str(out), settings=FAST)
    (root / "b.pdf").unlink()

    dry = ingest(sources=[str(root)], out=str(out), settings=FAST, sync=True, dry_run=True)
    assert dry["documents"] == [] and dry["sync"]["gone"] == [str(root / "b.pdf")]
    assert not dry["sync"]["applied"]
    plain = ingest(sources=[str(root)], out=str(out), settings=FAST)
    assert plain["sync"]["gone_count"] == 1 and not plain["sync"]["applied"]
    assert plain["sync"]["gone"] == [str(root / "b.pdf")]  # which one, not only how many
    synced = ingest(sources=[str(root)], out=str(out), settings=FAST, sync=True)
    assert synced["sync"]["removed"] == [str(root / "b.pdf")]
    assert [p.parent.name.startswith("b-") for p in out.glob("*/document.json")] == [False]
    from folio.errors import ConfigError

    (tmp_path / "typo").mkdir()
    with pytest.raises(ConfigError, match="lists no document"):
        ingest(sources=[str(root), str(tmp_path / "typo")], out=str(out), settings=FAST,
               sync=True)


def test_sigint_writes_the_report_of_what_finished_and_what_did_not(tmp_path: Path) -> None:
    from folio_prefect.flows.ingest import ingest

    root, out = tmp_path / "in", tmp_path / "out"
    root.mkdir()
    write_text_pdf(root / "a-short.pdf", report_pages(seed=62, n=1))
    write_text_pdf(root / "b-long.pdf", report_pages(seed=63, n=8))  # OCR'd page by page
    fired = threading.Event()
    report = tmp_path / "report.json"
    long_pages: list[int] = []

    def stop_in_flight(event: progress.ProgressEvent) -> None:
        # at the long document's third page, five of its pages still to come (the short
        # one's load may wait for the OCR's CPU, so "the first done" is no anchor); as
        # Ctrl-C, to the main thread, where Linux hands a sleeping process's SIGINT
        if event.kind == "page-done" and event.source.endswith("b-long.pdf"):
            long_pages.append(1)
            if len(long_pages) == 3 and not fired.is_set():
                fired.set()
                signal.pthread_kill(threading.main_thread().ident or 0, signal.SIGINT)

    # SIGINT as at a terminal: a shell starts background jobs (`make test &`, some CI runners) with
    # SIGINT ignored, and Python then never raises KeyboardInterrupt for it
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    progress.add_listener(stop_in_flight)
    try:
        with pytest.raises(KeyboardInterrupt):
            ingest(sources=[str(root)], out=str(out), report=str(report),
                   settings={"route.mode": "ocr", "validation.enabled": False})
    finally:
        progress.remove_listener(stop_in_flight)
        signal.signal(signal.SIGINT, previous)
    got: dict[str, Any] = json.loads(report.read_text())
    assert got["interrupted"] == "SIGINT"
    finished = {d["source"] for d in got["documents"]}
    assert set(got["unfinished"]) == {str(p) for p in root.iterdir()} - finished
    assert str(root / "b-long.pdf") in got["unfinished"], "it was still in flight"
    # none says ok without its done marker (written after the vectors): a document in
    # flight at the interrupt may still finish in its thread after the report is written,
    # and is then whole
    from folio.output.outputs import index_path

    for path in out.glob("*/document.json"):
        doc = json.loads(path.read_text())
        if doc["outcome"] == "ok":
            assert (out / index_path(doc["sha256"], doc["config_hash"])).is_file(), path
