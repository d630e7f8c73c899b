"""RAG-job triggers against a real self-hosted Prefect server and a process worker: the
``folio.ingest.requested`` event starts the document deployment through the deployment
trigger in prefect.yaml, ``folio.document.indexed`` comes back, and ``folio trigger``
repeated with the same arguments starts one run."""

from __future__ import annotations

import json
import sys
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from folio import trigger
from folio.samples import report_pages, write_text_pdf
from folio_prefect.deployments.trigger import wait_for_indexed
from tests.prefect_stack import DOCUMENT_DEPLOYMENT, PrefectStack


@pytest.mark.slow
def test_posted_event_starts_a_run_and_indexed_event_arrives(
    prefect_stack: PrefectStack, tmp_path: Path
) -> None:
    pdf = write_text_pdf(tmp_path / "event.pdf", report_pages(seed=11, n=2))
    out = tmp_path / "out"
    started = datetime.now(UTC)
    event = {  # what any HTTP client in a RAG job can send: no folio, no prefect needed
        "id": str(uuid.uuid4()),
        "occurred": started.isoformat(),
        "event": trigger.REQUESTED,
        "resource": {"prefect.resource.id": trigger.source_resource_id(str(pdf))},
        "payload": {"source": str(pdf), "out": str(out)},
    }
    resp = httpx.post(f"{prefect_stack.api_url}/events", json=[event], timeout=30)
    assert resp.status_code == 204, resp.text

    try:
        done = wait_for_indexed(str(pdf), since=started, timeout=180, poll_s=1)
    except TimeoutError:
        pytest.fail(f"no indexed event\n{prefect_stack.log_tail()}")
    assert done.indexed and done.outcome == "ok", done
    assert done.source == str(pdf) and done.chunks > 0 and done.doc_id
    assert Path(done.outputs["markdown"]).is_file()
    assert done.payload["out"] == str(out) and done.vector_table
    assert done.flow_run_id  # the flow run is attached to the event by Prefect
    by_doc = wait_for_indexed(doc_id=done.doc_id, since=started, timeout=5)
    assert by_doc.flow_run_id == done.flow_run_id


def _cli_trigger(stack: PrefectStack, *args: str) -> tuple[int, list[dict[str, Any]]]:
    proc = stack.run(sys.executable, "-m", "folio_prefect.flows.cli", "trigger", *args, timeout=300)
    lines = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    assert lines, proc.stdout + proc.stderr + stack.log_tail()
    return proc.returncode, lines


@pytest.mark.slow
def test_cli_trigger_twice_starts_one_run(prefect_stack: PrefectStack, tmp_path: Path) -> None:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import DeploymentFilter, DeploymentFilterName

    pdf = write_text_pdf(tmp_path / "cli.pdf", report_pages(seed=12, n=1))
    args = (str(pdf), "--out", str(tmp_path / "out"), "--wait", "--timeout", "240")
    code, (first, result) = _cli_trigger(prefect_stack, *args)
    assert code == 0, (first, result)
    assert not first["reused"] and result["state"] == "COMPLETED"
    [doc] = result["documents"]
    assert doc["event"] == trigger.INDEXED and doc["outcome"] == "ok" and doc["chunks"] > 0

    code, (again, result2) = _cli_trigger(prefect_stack, *args)  # a retried trigger
    assert code == 0 and again["reused"], again
    assert again["flow_run_id"] == first["flow_run_id"] and again["key"] == first["key"]
    assert result2["documents"] == result["documents"]

    with get_client(sync_client=True) as client:
        runs = client.read_flow_runs(deployment_filter=DeploymentFilter(
            name=DeploymentFilterName(any_=[DOCUMENT_DEPLOYMENT.split("/")[1]])))
    mine = [r for r in runs if r.parameters.get("source") == str(pdf)]
    assert len(mine) == 1, [(r.name, r.parameters) for r in mine]


@pytest.mark.slow
def test_cli_trigger_of_a_failed_run_says_why(prefect_stack: PrefectStack,
                                              tmp_path: Path) -> None:
    """A RAG job logs why a run failed from the trigger's output, without asking the
    Prefect API: the state's message in the result and one line on stderr."""
    missing = tmp_path / "missing.pdf"
    proc = prefect_stack.run(sys.executable, "-m", "folio_prefect.flows.cli", "trigger",
                             str(missing), "--out", str(tmp_path / "out"), "--wait",
                             "--timeout", "240", timeout=300)
    lines = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    assert proc.returncode == 1 and len(lines) == 2, proc.stdout + proc.stderr
    result = lines[1]
    assert result["state"] == "FAILED" and "missing.pdf" in result["message"], result
    assert "FAILED: " in proc.stderr and "missing.pdf" in proc.stderr, proc.stderr


def test_a_run_result_keeps_the_reason() -> None:
    result = trigger.RunResult(flow_run_id=uuid.uuid4(), state="FAILED",
                               message="ConfigError: input not found: /x.pdf")
    assert result.exit_code == 1
    assert json.loads(result.model_dump_json())["message"].endswith("/x.pdf")


def test_a_skipped_entry_has_its_own_event_and_does_not_fail_a_wait() -> None:
    from folio.models import DocumentOutcome, DocumentResult

    doc = DocumentResult(source="s3://b/in/x.zip", outcome=DocumentOutcome.SKIPPED,
                         reason="unsupported format: application/zip")
    name, _, _, payload = trigger.document_event(doc, "s3://b/out")
    assert name == trigger.SKIPPED and name in trigger.DOCUMENT_EVENTS
    assert payload["reason"] == "unsupported format: application/zip"
    now = datetime.now(UTC)
    skipped = trigger.DocumentEvent(event=name, occurred=now, outcome="skipped")
    ok = trigger.DocumentEvent(event=trigger.INDEXED, occurred=now, outcome="ok")
    result = trigger.RunResult(flow_run_id=uuid.uuid4(), state="COMPLETED",
                               documents=[ok, skipped])
    assert result.exit_code == 0
    bad = trigger.DocumentEvent(event=trigger.QUARANTINED, occurred=now, outcome="quarantined")
    assert result.model_copy(update={"documents": [skipped, bad]}).exit_code == 3


def test_idempotency_key_is_the_request_not_its_spelling(tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    base = trigger.IngestRequest(source="a.pdf", out="s3://b/out")
    assert base.key == trigger.IngestRequest(source=str(tmp_path / "a.pdf"), out="s3://b/out").key
    assert base.key == trigger.IngestRequest(source=f"file://{tmp_path}/a.pdf",
                                             out="s3://b/out").key
    assert base.key != base.model_copy(update={"revision": "etag-2"}).key  # new content
    assert base.key != base.model_copy(update={"settings": {"render.max_dpi": 200}}).key
    assert base.parameters()["source"] == str(tmp_path / "a.pdf")
    assert "revision" not in base.parameters()
    assert trigger.source_resource_id("a.pdf") == trigger.source_resource_id(
        str(tmp_path / "a.pdf"))
