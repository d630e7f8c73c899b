"""A document quarantined for good (``retryable: false``: not a PDF, encrypted without its
password, over a limit) is not tried again by every later run with the same settings, and
does not keep every rerun's exit code at 3; ``--reprocess`` tries it again."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import pytest

from folio import cli
from folio.io.sources import discover
from folio.models import DocumentOutcome, DocumentResult
from folio.output.report import build_report
from folio.pipeline import prepare
from folio.pipeline.load import load_document
from folio.pipeline.services import Services
from folio.settings.config import PipelineConfig


def _run(config: PipelineConfig, out: Path, src: Path) -> DocumentResult:
    services = Services(config, str(out))
    try:
        (ref,) = discover([str(src)], config.s3)
        result = prepare.start_document(ref, services)
        assert isinstance(result, DocumentResult)  # nothing to OCR
        return load_document(result, services)
    finally:
        services.close()


def test_a_known_bad_document_is_not_tried_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    src = tmp_path / "bad.pdf"
    src.write_bytes(b"this is not a PDF at all\n" * 20)
    config = PipelineConfig.model_validate({"work_dir": str(tmp_path / "w"), "compress": False})
    first = _run(config, tmp_path / "out", src)
    assert first.outcome is DocumentOutcome.QUARANTINED and not first.retryable
    assert not first.cached

    def no_probe(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("a known-bad document was probed again")

    monkeypatch.setattr(prepare, "_probe_or_repair", no_probe)
    again = _run(config, tmp_path / "out", src)
    assert again.outcome is DocumentOutcome.QUARANTINED and again.cached
    assert again.reason.startswith(first.reason) and "--reprocess" in again.reason

    monkeypatch.undo()
    retried = _run(config.model_copy(update={"reprocess": True}), tmp_path / "out", src)
    assert retried.outcome is DocumentOutcome.QUARANTINED and not retried.cached


def _exit_code(docs: list[DocumentResult]) -> int:
    report = build_report(docs, seconds=1.0, out="out")
    return cli.report_ingest(argparse.Namespace(report=None), report)


def test_a_rerun_exits_3_while_a_document_is_still_quarantined(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A cached quarantine is not a fixed one: every rerun over the folder says so (exit 3,
    a line in the summary) until the file is fixed, removed or excluded."""
    bad = DocumentResult(source="bad.pdf", outcome=DocumentOutcome.QUARANTINED,
                         reason="not-a-pdf: ...")
    ok = DocumentResult(source="ok.pdf", outcome=DocumentOutcome.OK)
    assert _exit_code([ok, bad]) == 3
    assert "from earlier runs" not in capsys.readouterr().out
    assert _exit_code([ok.model_copy(update={"cached": True}),
                       bad.model_copy(update={"cached": True})]) == 3
    summary = capsys.readouterr().out
    assert "1 quarantined" in summary and "Still partial or quarantined from earlier runs: 1" \
        in summary and "| bad.pdf | quarantined (cached) |" in summary
    assert _exit_code([ok.model_copy(update={"cached": True})]) == 0
