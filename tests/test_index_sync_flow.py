"""``sync`` and ``dry_run`` on the ingest flow (what ``folio ingest --sync [--dry-run]``
runs), and an interrupted run's report (issue 48: SIGINT left no report, and the document
in flight with a document.json that said ok)."""

from __future__ import annotations

import json
import os
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

    def stop_at_first(event: progress.ProgressEvent) -> None:
        if event.kind == "document-done" and not fired.is_set():
            fired.set()
            os.kill(os.getpid(), signal.SIGINT)  # as Ctrl-C: the main thread is told

    report = tmp_path / "report.json"
    progress.add_listener(stop_at_first)
    try:
        with pytest.raises(KeyboardInterrupt):
            ingest(sources=[str(root)], out=str(out), report=str(report),
                   settings={"route.mode": "ocr", "validation.enabled": False})
    finally:
        progress.remove_listener(stop_at_first)
    got: dict[str, Any] = json.loads(report.read_text())
    assert got["interrupted"] == "SIGINT"
    finished = {d["source"] for d in got["documents"]}
    assert finished and set(got["unfinished"]) == {str(p) for p in root.iterdir()} - finished
    assert got["unfinished"], "the long document was still in flight"
    for path in out.glob("*/document.json"):  # none says ok without vectors and marker
        doc = json.loads(path.read_text())
        if doc["source"] in got["unfinished"]:
            assert doc["outcome"] != "ok", path
