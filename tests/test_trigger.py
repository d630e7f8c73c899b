"""RAG-job triggers against a real self-hosted Prefect server and a process worker: the
``folio.ingest.requested`` event starts the document deployment through the deployment
trigger in prefect.yaml, ``folio.document.indexed`` comes back, and ``folio trigger``
repeated with the same arguments starts one run."""

from __future__ import annotations

import json
import socket
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


def _edit(path: Path, seed: int) -> None:
    """Replace the file's bytes as an editor saving it does."""
    new = write_text_pdf(path.with_name(f"edit-{seed}.pdf"), report_pages(seed=seed, n=1))
    new.replace(path)


def test_the_version_follows_the_bytes_of_a_file_and_of_a_folder(tmp_path: Path) -> None:
    from folio.io.source_version import source_version

    folder = tmp_path / "in"
    folder.mkdir()
    memo = write_text_pdf(folder / "memo.pdf", report_pages(seed=31, n=1))
    one = trigger.IngestRequest(source=str(memo), out=str(tmp_path / "out"))
    everything = trigger.IngestRequest(source=str(folder), out=str(tmp_path / "out"))
    first, first_all = source_version(one), source_version(everything)
    assert first and first_all and first == source_version(one)  # the same bytes
    assert one.model_copy(update={"version": first}).key == one.model_copy(
        update={"version": first}).key != one.key  # the key holds the version
    assert "version" not in one.parameters()

    _edit(memo, 32)
    assert source_version(one) not in (None, first)
    assert source_version(everything) != first_all
    changed = source_version(everything)
    write_text_pdf(folder / "new.pdf", report_pages(seed=33, n=1))
    assert source_version(everything) != changed  # a new file under the folder
    skipped = everything.model_copy(update={"exclude": ["new.pdf"]})
    assert source_version(skipped) == changed  # the globs scope the version too
    # a source the run will report missing: no version, so retries still start one run
    assert source_version(trigger.IngestRequest(source=str(tmp_path / "no.pdf"))) is None


def test_the_version_of_an_s3_object_is_its_etag_and_size(s3_server: Any, s3_bucket: str,
                                                          tmp_path: Path) -> None:
    from folio.io.source_version import source_version

    client = s3_server.client
    pdf = write_text_pdf(tmp_path / "a.pdf", report_pages(seed=34, n=1))
    client.upload_file(str(pdf), s3_bucket, "in/a.pdf")
    settings = {"s3.endpoint_url": s3_server.endpoint_url, "s3.region": "us-east-1"}
    request = trigger.IngestRequest(source=f"s3://{s3_bucket}/in/a.pdf", settings=settings)
    with pytest.MonkeyPatch.context() as env:
        env.setenv("FOLIO_S3__ACCESS_KEY_ID", "test")
        env.setenv("FOLIO_S3__SECRET_ACCESS_KEY", "test")
        first = source_version(request)
        assert first and first == source_version(request)
        client.upload_file(str(write_text_pdf(tmp_path / "b.pdf", report_pages(seed=35, n=1))),
                           s3_bucket, "in/a.pdf")
        assert source_version(request) not in (None, first)
        missing = request.model_copy(update={"sources": [f"s3://{s3_bucket}/in/none.pdf"]})
        assert source_version(missing) is not None  # an empty listing is a version too
        wrong = request.model_copy(update={"settings": {
            **settings, "s3.endpoint_url": "http://127.0.0.1:9"}})  # nothing listens
        assert (source_version(wrong) or "").startswith("unread-")  # never an old run


@pytest.mark.slow
def test_a_trigger_after_the_file_changed_runs_again(prefect_stack: PrefectStack,
                                                     tmp_path: Path) -> None:
    """Issue 56: trigger, edit the file, trigger again: a new run that indexes the new
    bytes; the same bytes again: the run that did."""
    memo = write_text_pdf(tmp_path / "memo.pdf", report_pages(seed=36, n=1))
    args = (str(memo), "--out", str(tmp_path / "out"), "--wait", "--timeout", "240")
    code, (first, result) = _cli_trigger(prefect_stack, *args)
    assert code == 0 and not first["reused"], (first, result)
    _edit(memo, 37)
    code, (second, result2) = _cli_trigger(prefect_stack, *args)
    assert code == 0 and not second["reused"], (second, result2)
    assert second["flow_run_id"] != first["flow_run_id"] and second["key"] != first["key"]
    [old], [new] = result["documents"], result2["documents"]
    assert new["outcome"] == "ok" and not new["cached"] and new["doc_id"] != old["doc_id"]
    code, (third, _) = _cli_trigger(prefect_stack, *args)  # the same bytes: a retry
    assert code == 0 and third["reused"] and third["flow_run_id"] == second["flow_run_id"]


@pytest.mark.slow
def test_an_s3_trigger_after_the_object_changed_runs_again(
    prefect_stack: PrefectStack, s3_server: Any, s3_bucket: str, tmp_path: Path,
) -> None:
    client = s3_server.client
    pdf = write_text_pdf(tmp_path / "s3.pdf", report_pages(seed=38, n=1))
    client.upload_file(str(pdf), s3_bucket, "in/s3.pdf")
    args = (f"s3://{s3_bucket}/in/s3.pdf", "--out", f"s3://{s3_bucket}/out", "--wait",
            "--timeout", "240", "--s3-endpoint-url", s3_server.endpoint_url,
            "--s3-region", "us-east-1")
    code, (first, result) = _cli_trigger(prefect_stack, *args)
    assert code == 0 and not first["reused"], (first, result, prefect_stack.log_tail())
    code, (again, _) = _cli_trigger(prefect_stack, *args)
    assert code == 0 and again["reused"] and again["flow_run_id"] == first["flow_run_id"]
    edited = write_text_pdf(tmp_path / "s3-2.pdf", report_pages(seed=39, n=1))
    client.upload_file(str(edited), s3_bucket, "in/s3.pdf")
    code, (second, result2) = _cli_trigger(prefect_stack, *args)
    assert code == 0 and not second["reused"] and second["flow_run_id"] != first["flow_run_id"]
    [old], [new] = result["documents"], result2["documents"]
    assert new["outcome"] == "ok" and new["doc_id"] != old["doc_id"]


@pytest.mark.slow
def test_a_wait_hears_the_run_end_and_its_document_from_the_event_stream(
    prefect_stack: PrefectStack, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The run's end and its document come from the server's event stream: with the
    fallback that polls the events API (which has them seconds later) made to fail, the
    wait still returns the document (the flow flushes its events before it ends)."""
    from folio_prefect.deployments import trigger as trig

    def no_polling(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the wait fell back to polling the events API")

    monkeypatch.setattr(trig, "_polled_result", no_polling)
    pdf = write_text_pdf(tmp_path / "stream.pdf", report_pages(seed=40, n=1))
    run = trig.trigger(trigger.IngestRequest(source=str(pdf), out=str(tmp_path / "out")))
    result = trig.wait_for_result(run.flow_run_id, timeout=240)
    assert result.state == "COMPLETED", (result, prefect_stack.log_tail())
    [doc] = result.documents
    assert doc.indexed and doc.source == str(pdf) and doc.flow_run_id == str(run.flow_run_id)
    assert result.exit_code == 0


def test_a_run_s_final_state_is_told_from_its_other_events() -> None:
    from prefect.events import Event

    from folio_prefect.deployments.event_stream import final_state_type

    def event(name: str, state: str | None) -> Event:
        payload = {"validated_state": {"type": state, "name": state}} if state else {}
        return Event(event=name, resource={"prefect.resource.id": "prefect.flow-run.x"},
                     payload=payload)

    assert final_state_type(event("prefect.flow-run.Completed", "COMPLETED")) == "COMPLETED"
    assert final_state_type(event("prefect.flow-run.Crashed", "CRASHED")) == "CRASHED"
    assert final_state_type(event("prefect.flow-run.Running", "RUNNING")) is None
    assert final_state_type(event(trigger.INDEXED, "COMPLETED")) is None  # not a run's state


def test_a_stream_that_cannot_open_says_so_and_the_caller_polls() -> None:
    """No server where the API should be: the stream is broken, never raises, and hands
    out nothing, so the waits poll the events API as before."""
    from prefect.events.filters import EventFilter
    from prefect.settings import PREFECT_API_URL, temporary_settings

    from folio_prefect.deployments.event_stream import EventStream

    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with temporary_settings({PREFECT_API_URL: f"http://127.0.0.1:{port}/api"}), \
            EventStream(EventFilter()) as stream:
        assert stream.next(30) is None
        assert stream.broken
