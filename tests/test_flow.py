"""The whole pipeline through the real Prefect flow: Ghostscript, pypdfium2, tesseract,
Great Expectations, LanceDB and the packaged embedding model, with local and S3 I/O."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from folio.page.quality import word_recall
from folio.samples import report_pages, write_encrypted_pdf, write_text_pdf
from tests.prefect_db_template import copy_migrated_db

pytestmark = pytest.mark.usefixtures("prefect_api")


def by_name(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {Path(d["source"]).name: d for d in report["documents"]}


@pytest.fixture(scope="module")
def first_run(samples: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    from folio_prefect.flows.ingest import ingest

    src = samples["report"].parent
    out = tmp_path_factory.mktemp("out")
    report = ingest(sources=[str(src)], out=str(out), report=str(out / "report.json"))
    return {"report": report, "out": out, "src": src}


def test_every_sample_ends_in_a_typed_outcome(first_run: dict[str, Any]) -> None:
    docs = by_name(first_run["report"])
    assert set(docs) == {"report.pdf", "scanned-letter.pdf", "blank.pdf", "encrypted.pdf",
                         "truncated.pdf"}
    for doc in docs.values():
        assert doc["outcome"] in ("ok", "partial", "quarantined")
        assert doc["pages_ok"] + doc["pages_fallback"] + doc["pages_quarantined"] == doc["pages"]
    assert docs["report.pdf"]["outcome"] == "ok"
    assert docs["blank.pdf"]["outcome"] == "ok"
    enc = docs["encrypted.pdf"]
    assert enc["outcome"] == "quarantined" and enc["reason"].startswith("encrypted")
    bad = docs["truncated.pdf"]
    assert bad["outcome"] == "ok" and bad["repaired"], bad


def test_scanned_page_is_ocrd_and_born_digital_page_is_not(first_run: dict[str, Any]) -> None:
    out: Path = first_run["out"]
    docs = by_name(first_run["report"])
    scanned = json.loads(Path(docs["scanned-letter.pdf"]["outputs"]["json"]).read_text())
    page = scanned["pages"][0]
    assert page["route"] == "ocr" and page["engine"] == "tesseract"
    recall = word_recall(report_pages(seed=2, n=1)[0].text(), page["markdown"])
    assert recall > 0.9, recall
    born = json.loads(Path(docs["report.pdf"]["outputs"]["json"]).read_text())
    assert {p["route"] for p in born["pages"]} == {"text-layer"}
    assert (out / "report.json").is_file()


def test_outputs_and_vectors_written(first_run: dict[str, Any]) -> None:
    docs = by_name(first_run["report"])
    doc = docs["report.pdf"]
    md = Path(doc["outputs"]["markdown"]).read_text()
    assert "Quarterly Operations Report" in md
    lines = Path(doc["outputs"]["pages"]).read_text().splitlines()
    assert len(lines) == doc["pages"] == 2
    assert doc["chunks"] > 0
    import lancedb

    table = lancedb.connect(str(first_run["out"] / "_vectors")).open_table("chunks")
    rows = table.to_pandas()
    assert set(rows["doc_id"]) >= {doc["doc_id"]}
    mine = rows[rows["doc_id"] == doc["doc_id"]]
    assert len(mine) == doc["chunks"]
    with_table = mine[mine["text"].str.contains("North") & mine["text"].str.contains("West")]
    assert len(with_table) == 1  # the table's rows stay together in one chunk
    assert with_table.iloc[0]["page_start"] == 2  # the table is on page 2 (pages from 1)


def test_each_document_is_one_finishing_task_run(first_run: dict[str, Any]) -> None:
    """Validation and loading run inside the document's finish task run, not as task
    runs of their own (each cost as much Prefect bookkeeping as its work)."""
    import time

    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import TaskRunFilter, TaskRunFilterName

    def named(client: Any, like: str) -> list[Any]:
        return client.read_task_runs(
            task_run_filter=TaskRunFilter(name=TaskRunFilterName(like_=like)), limit=200)

    documents = len(first_run["report"]["documents"])
    deadline = time.monotonic() + 30  # task runs reach the API through its event stream
    with get_client(sync_client=True) as client:
        while len(named(client, "finish ")) < documents and time.monotonic() < deadline:
            time.sleep(0.5)
        assert len(named(client, "finish ")) >= documents
        assert named(client, "validate-pages") == [] and named(client, "load-document") == []


def test_the_report_says_where_the_finishing_time_went(first_run: dict[str, Any]) -> None:
    """timing.finishing: each finishing stage's spans over the run (one per document that
    reached it), so a slow tail after the last page can be read off the report."""
    timing = first_run["report"]["timing"]
    finishing = timing["finishing"]
    loaded = [d for d in first_run["report"]["documents"] if d["outcome"] != "quarantined"]
    documents = len(first_run["report"]["documents"])
    assert finishing["task-start"]["n"] == finishing["finish"]["n"] == documents
    for stage in ("validate", "chunk", "embed", "outputs", "vectors", "done-marker"):
        assert finishing[stage]["n"] == len(loaded), stage
        assert 0 <= finishing[stage]["median_s"] <= finishing[stage]["max_s"]
        assert finishing[stage]["last_end_s"] <= timing["loaded_s"]
    assert timing["scheduled_s"] <= timing["loaded_s"] <= timing["seconds"]


def test_a_run_without_its_layout_model_fails_before_any_document(tmp_path: Path,
                                                                   samples: dict[str, Path]
                                                                   ) -> None:
    from folio.errors import ConfigError
    from folio_prefect.flows.ingest import ingest

    with pytest.raises(ConfigError, match="layout model not found"):
        ingest(sources=[str(samples["report"])], out=str(tmp_path / "out"),
               settings={"layout": {"model_path": str(tmp_path / "none.onnx")}})
    assert not (tmp_path / "out").exists()


def test_second_run_is_served_from_the_done_index(first_run: dict[str, Any]) -> None:
    from folio_prefect.flows.ingest import ingest

    report = ingest(sources=[str(first_run["src"])], out=str(first_run["out"]))
    docs = by_name(report)
    done = [d for n, d in docs.items() if n in ("report.pdf", "scanned-letter.pdf", "blank.pdf")]
    assert all(d["cached"] for d in done)
    # quarantined for good (no password: retrying cannot help) and not tried again; a
    # rerun with --password-file or --reprocess does (tests/test_known_bad.py)
    encrypted = docs["encrypted.pdf"]
    assert encrypted["cached"] and encrypted["outcome"] == "quarantined", encrypted


def test_reprocess_replaces_vectors_instead_of_duplicating(first_run: dict[str, Any]) -> None:
    import lancedb

    from folio_prefect.flows.ingest import ingest

    table = lancedb.connect(str(first_run["out"] / "_vectors")).open_table("chunks")
    before = table.count_rows()
    report = ingest(sources=[str(first_run["src"] / "report.pdf")], out=str(first_run["out"]),
                    reprocess=True)
    assert not report["documents"][0]["cached"]
    assert table.count_rows() == before


def test_a_run_that_quarantines_every_document_fails_with_its_report(
        tmp_path: Path) -> None:
    """Not a green Completed: the run is Failed (what Prefect's UI and automations watch
    for), its message says why, and its result is still the report; the trigger's exit
    code for it is 3, as for quarantined documents."""
    from folio.output.report import ALL_QUARANTINED
    from folio.trigger import RunResult
    from folio_prefect.flows.ingest import ingest, run_report_of

    src = tmp_path / "in"
    src.mkdir()
    (src / "bad.pdf").write_bytes(b"not a PDF at all\n" * 20)
    state = ingest(sources=[str(src)], out=str(tmp_path / "out"), return_state=True)
    assert state.is_failed(), state
    assert (state.message or "").startswith(ALL_QUARANTINED), state.message
    report = run_report_of(state)
    assert [d["outcome"] for d in report["documents"]] == ["quarantined"]
    result = RunResult(flow_run_id=state.state_details.flow_run_id,
                       state=state.type.value, message=state.message or "")
    assert result.exit_code == 3
    assert RunResult(flow_run_id=result.flow_run_id, state="FAILED",
                     message="ConfigError: input not found").exit_code == 1


def test_password_opens_encrypted_pdf(samples: dict[str, Path], tmp_path: Path,
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    from folio_prefect.flows.ingest import ingest

    # from the worker's environment: a run's settings are stored by Prefect, and a
    # password among them is refused (docs/security.md)
    monkeypatch.setenv("FOLIO_PASSWORD", "folio")
    report = ingest(sources=[str(samples["encrypted"])], out=str(tmp_path))
    doc = report["documents"][0]
    assert doc["outcome"] == "ok", doc


def test_s3_source_and_destination(s3_server: Any, samples: dict[str, Path]) -> None:
    from folio_prefect.flows.ingest import ingest

    s3 = s3_server.client
    s3.create_bucket(Bucket="in-bucket")
    s3.create_bucket(Bucket="out-bucket")
    s3.upload_file(str(samples["report"]), "in-bucket", "docs/a/report.pdf")
    s3.upload_file(str(samples["blank"]), "in-bucket", "docs/b/blank.pdf")
    s3.put_object(Bucket="in-bucket", Key="docs/readme.txt", Body=b"not a pdf: skipped")
    # the keys come from the environment (tests/conftest.py), as a worker does
    settings = {"s3.endpoint_url": s3_server.endpoint_url, "s3.region": "us-east-1"}
    report = ingest(sources=["s3://in-bucket/docs/"], out="s3://out-bucket/results",
                    settings=settings)
    assert report["totals"]["documents"] == 3  # the text file too: listed, skipped
    outcomes = {d["source"].rsplit("/", 1)[-1]: d["outcome"] for d in report["documents"]}
    assert outcomes == {"report.pdf": "ok", "blank.pdf": "ok", "readme.txt": "skipped"}
    keys = [o["Key"] for o in s3.list_objects_v2(Bucket="out-bucket")["Contents"]]
    assert any(k.endswith("document.md") for k in keys)
    assert any(k.startswith("results/_vectors/") for k in keys)
    again = ingest(sources=["s3://in-bucket/docs/"], out="s3://out-bucket/results",
                   settings=settings)
    assert all(d["cached"] for d in again["documents"])


@pytest.mark.usefixtures("folio_prefect_server")
def test_cli_ingest_writes_report(tmp_path: Path) -> None:
    pdf = write_text_pdf(tmp_path / "one.pdf", report_pages(seed=9, n=1))
    report = tmp_path / "r.json"
    proc = subprocess.run(
        [sys.executable, "-m", "folio_prefect.flows.cli", "ingest", str(pdf), "--out", str(tmp_path / "o"),
         "--report", str(report), "--quiet"],
        capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    data = json.loads(report.read_text())
    doc = data["documents"][0]
    for key in ("source", "sha256", "pages", "outcome", "reason", "pages_ok", "pages_fallback",
                "pages_quarantined", "engine", "seconds"):
        assert key in doc
    assert data["totals"]["documents"] == 1 and "ok" in proc.stdout


@pytest.mark.usefixtures("folio_prefect_server")
def test_cli_defaults_repair_from_another_folder(tmp_path: Path) -> None:
    """With no settings at all (the relative default work dir), run from a folder that is
    not the repo: Ghostscript repairs the truncated PDF and the document ends ok; nothing
    is left in the scratch folder, also of a document that was quarantined."""
    from folio.samples import write_malformed_pdf

    (tmp_path / "in").mkdir()
    write_malformed_pdf(tmp_path / "in" / "truncated.pdf",
                        write_text_pdf(tmp_path / "src.pdf", report_pages(seed=4, n=2)))
    write_encrypted_pdf(tmp_path / "in" / "locked.pdf", "secret")
    cwd = tmp_path / "elsewhere"
    cwd.mkdir()
    # no folio settings, except the session's local Prefect server (tests/folio_server.py:
    # without its home the run would start one in the user's ~/.folio/prefect, which would
    # outlive the test)
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("FOLIO_") or k.startswith("FOLIO_PREFECT_")}
    report = tmp_path / "r.json"
    proc = subprocess.run(
        [sys.executable, "-m", "folio_prefect.flows.cli", "ingest", str(tmp_path / "in"), "--out", "out",
         "--report", str(report), "--quiet"],
        capture_output=True, text=True, timeout=300, cwd=cwd, env=env)
    assert proc.returncode == 3, proc.stdout[-2000:] + proc.stderr[-2000:]
    docs = {Path(d["source"]).name: d for d in json.loads(report.read_text())["documents"]}
    assert docs["truncated.pdf"]["outcome"] == "ok" and docs["truncated.pdf"]["repaired"]
    assert docs["locked.pdf"]["outcome"] == "quarantined"
    assert (cwd / "out").is_dir()
    assert not any((cwd / ".folio" / "work").glob("*")), "scratch folders left behind"


def test_cli_rejects_missing_source(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "folio_prefect.flows.cli", "ingest", str(tmp_path / "nope"), "--out",
         str(tmp_path / "o"), "--quiet"], capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 2 and "nope" in proc.stderr
    assert shutil.which("gs")


def test_cli_keeps_the_pdf_password_out_of_prefect(tmp_path: Path) -> None:
    """The password opens the PDF, yet appears nowhere in Prefect's database (flow-run
    parameters are stored there and shown in the UI)."""
    secret = "pw-7f3a9c-never-stored"
    pdf = write_encrypted_pdf(tmp_path / "locked.pdf", secret)
    home = tmp_path / "prefect-home"
    # Prefect's temporary server in this home, not the session's local server: its
    # database is this run's alone (a migrated empty copy: tests/prefect_db_template.py),
    # and everything is on disk when the run exits (the temporary server stops with it),
    # so the scan below sees all the run stored
    copy_migrated_db(home / "prefect.db")
    env = {**os.environ, "PREFECT_HOME": str(home), "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "120",
           "FOLIO_PREFECT_SERVER": "ephemeral"}
    env.pop("FOLIO_PASSWORD", None)
    report = tmp_path / "r.json"
    proc = subprocess.run(
        [sys.executable, "-m", "folio_prefect.flows.cli", "ingest", str(pdf), "--out", str(tmp_path / "o"),
         "--password-file", "-", "--store", "none", "--report", str(report), "--quiet"],
        capture_output=True, text=True, timeout=600, env=env, input=secret + "\n",
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads(report.read_text())["documents"][0]["outcome"] == "ok"
    stored = [p for p in home.rglob("*") if p.is_file()]
    assert not [p for p in stored if secret.encode() in p.read_bytes()]
    # the run is in this database (its flow run, with its parameters), so the scan above
    # was of what the run stored (read after it: a reader makes and removes WAL files)
    with contextlib.closing(sqlite3.connect(home / "prefect.db")) as db:
        assert db.execute("select count(*) from flow_run").fetchone()[0] >= 1


@pytest.mark.parametrize(("uri", "to_env"), [
    ("postgresql://folio@db:5432/rag", True),  # its password in PGPASSFILE
    ("host=db dbname=rag user=folio", True),
    ("s3://bucket/vectors", False),
    ("/srv/vectors", False),
    ("/srv/run=1/vectors", False),
])
def test_cli_sends_dsns_through_the_environment(uri: str, to_env: bool, tmp_path: Path) -> None:
    from folio import cli
    from folio.stores import PG_DSN_ENV

    (tmp_path / "pw").write_text("pdf-pw\n")
    args = cli._parser().parse_args(["ingest", "x.pdf", "--out", "o", "--store-uri", uri,
                                     "--password-file", str(tmp_path / "pw")])
    env = cli._secret_environment(args)
    settings = cli._settings(args)
    assert env["FOLIO_PASSWORD"] == "pdf-pw" and "password" not in settings
    assert (env.get(PG_DSN_ENV) == uri) is to_env
    assert ("store.uri" in settings) is not to_env
