"""What a newcomer sees when something is wrong: one line on stderr that says what and
what to do, the README's exit code, no traceback, and nothing done or created first."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from folio.samples import report_pages, write_text_pdf
from tests.s3_server import S3Server

REPO = Path(__file__).resolve().parent.parent
#: the runs that get past the checks attach to the session's local Prefect server, started
#: before them: a run that started it would say so in a second line on stderr
pytestmark = pytest.mark.usefixtures("folio_prefect_server")


def folio(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None
          ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "folio_prefect.flows.cli", *args], capture_output=True,
                          text=True, timeout=300, env=env, cwd=cwd)


def one_line(proc: subprocess.CompletedProcess[str]) -> str:
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert lines[0].startswith("folio: ")
    return lines[0]


@pytest.fixture(scope="module")
def pdf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_text_pdf(tmp_path_factory.mktemp("in") / "one.pdf", report_pages(seed=5, n=1))


def test_missing_source_is_one_line_exit_2(tmp_path: Path) -> None:
    proc = folio("ingest", str(tmp_path / "nope"), "--out", str(tmp_path / "o"))
    assert proc.returncode == 2
    assert "nope" in one_line(proc)
    assert not (tmp_path / "o").exists()


def test_an_empty_source_is_an_error_not_the_current_folder(tmp_path: Path) -> None:
    proc = folio("ingest", "", "--out", str(tmp_path / "o"), cwd=tmp_path)
    assert proc.returncode == 2
    assert "an empty input" in one_line(proc)
    assert not (tmp_path / "o").exists()


def test_folder_without_pdfs_is_an_error_exit_5(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    proc = folio("ingest", str(tmp_path / "empty"), "--out", str(tmp_path / "o"))
    assert proc.returncode == 5
    assert "no PDF under" in one_line(proc)


def test_unwritable_destination_stops_before_any_work(tmp_path: Path, pdf: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("a file where the output folder should be")
    proc = folio("ingest", str(pdf), "--out", str(blocker / "out"))
    assert proc.returncode == 2
    assert "cannot write to" in one_line(proc)


def test_missing_layout_model_stops_before_any_work(tmp_path: Path, pdf: Path) -> None:
    proc = folio("ingest", str(pdf), "--out", str(tmp_path / "o"),
                 "--set", f"layout.model_path={json.dumps(str(tmp_path / 'none.onnx'))}")
    assert proc.returncode == 2
    assert "layout model not found" in one_line(proc)
    assert not (tmp_path / "o").exists()


def test_missing_ghostscript_stops_before_any_work(tmp_path: Path, pdf: Path) -> None:
    """Compression is on by default and kept from failing a document, so a host without
    ``gs`` would run every document uncompressed, saying so only in each one's note."""
    env = {**os.environ, "PATH": str(tmp_path)}  # no gs (the CLI is sys.executable)
    proc = folio("ingest", str(pdf), "--out", str(tmp_path / "o"), env=env)
    assert proc.returncode == 2
    line = one_line(proc)
    assert "Ghostscript (gs) is not installed" in line and "compress=false" in line
    assert not (tmp_path / "o").exists()


def test_without_compression_ghostscript_is_not_needed(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    from folio.checks.run_checks import check_ghostscript
    from folio.errors import ConfigError
    from folio.settings.config import PipelineConfig

    monkeypatch.setenv("PATH", str(tmp_path))
    check_ghostscript(PipelineConfig(compress=False))
    with pytest.raises(ConfigError, match="apt install ghostscript"):
        check_ghostscript(PipelineConfig())


@pytest.mark.parametrize(("args", "env", "says"), [
    (["--set", "render.max_dpi=abc"], {}, "render.max_dpi"),
    (["--set", "render.max_dpi"], {}, "KEY=VALUE"),
    ([], {"FOLIO_RENDER__MAX_DPI": "abc"}, "FOLIO_RENDER__MAX_DPI"),
    ([], {"FOLIO_RENDER__MAX_DPIX": "200"}, "FOLIO_RENDER__MAX_DPIX"),
    (["--s3-endpoint-url", "127.0.0.1:9000"], {}, "s3.endpoint_url"),
])
def test_a_settings_mistake_is_one_line_exit_2(tmp_path: Path, pdf: Path, args: list[str],
                                               env: dict[str, str], says: str) -> None:
    """A value that is not a number, a --set without =, a misspelt FOLIO_ variable, an
    endpoint without its scheme: settings to fix (2), not an internal error (1) with a
    pydantic dump, nor an outage (6, "try again later"), nor silently ignored."""
    proc = folio("ingest", str(pdf), "--out", str(tmp_path / "o"), *args,
                 env={**os.environ, **env})
    assert proc.returncode == 2, proc.stderr[-2000:]
    line = one_line(proc)
    assert says in line and "try again" not in line
    assert not (tmp_path / "o").exists()


def test_trigger_without_a_prefect_server_says_which_setting(tmp_path: Path) -> None:
    """Without PREFECT_API_URL Prefect would start a temporary server with no deployment
    and no worker (and print ``"url": null``); say what to set instead."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env["PREFECT_HOME"] = str(tmp_path / "prefect-home")  # no profile naming a server
    proc = folio("trigger", str(tmp_path / "a.pdf"), "--out", str(tmp_path / "o"), env=env)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "PREFECT_API_URL" in one_line(proc) and proc.stdout == ""


def test_unreachable_s3_is_one_line_exit_6(tmp_path: Path, pdf: Path) -> None:
    env = {**os.environ, "AWS_ACCESS_KEY_ID": "x", "AWS_SECRET_ACCESS_KEY": "y",
           "AWS_DEFAULT_REGION": "us-east-1"}
    proc = folio("ingest", str(pdf), "--out", "s3://bucket/out",
                 "--s3-endpoint-url", "http://127.0.0.1:9", env=env)
    assert proc.returncode == 6
    line = one_line(proc)
    assert "cannot reach the S3 endpoint" in line and "try again later" in line


def test_missing_s3_credentials_say_which_settings(tmp_path: Path, pdf: Path,
                                                   s3_server: S3Server) -> None:
    bucket = s3_server.create_bucket()
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update({"AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "none"),
                "AWS_CONFIG_FILE": str(tmp_path / "none"), "AWS_DEFAULT_REGION": "us-east-1",
                "AWS_EC2_METADATA_DISABLED": "true"})
    proc = folio("ingest", str(pdf), "--out", f"s3://{bucket}/out",
                 "--s3-endpoint-url", s3_server.endpoint_url, env=env)
    assert proc.returncode == 2
    line = one_line(proc)
    assert "AWS_ACCESS_KEY_ID" in line and "--s3-endpoint-url" in line


def test_search_without_vectors_is_exit_5_and_creates_nothing(tmp_path: Path) -> None:
    proc = folio("search", "anything", "--out", str(tmp_path / "mistyped"))
    assert proc.returncode == 5
    assert "no vectors" in one_line(proc)
    assert not (tmp_path / "mistyped").exists()


def test_without_a_terminal_each_document_prints_a_line(tmp_path: Path) -> None:
    """Progress in CI logs and pipes: one line per finished document with pages/s."""
    src = tmp_path / "in"
    src.mkdir()
    for n in range(2):
        write_text_pdf(src / f"d{n}.pdf", report_pages(seed=60 + n, n=2))
    report = tmp_path / "r.json"
    proc = folio("ingest", str(src), "--out", str(tmp_path / "o"), "--report", str(report))
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = [line for line in proc.stderr.splitlines() if line.startswith("folio: [")]
    assert len(lines) == 2 and all("pages/s" in line and ": ok, 2 page(s)" in line
                                   for line in lines), proc.stderr
    # one truth: document.json, the report, the done-index and the vector store agree
    from folio.io.sinks import open_sink
    from folio.settings.config import PipelineConfig
    from folio.stores import open_store

    data = json.loads(report.read_text())
    config = PipelineConfig()
    store = open_store(config.store, default_uri=open_sink(str(tmp_path / "o"), config.s3)
                       .uri("_vectors"), s3=config.s3, dim=384)
    for doc in data["documents"]:
        written = json.loads(Path(doc["outputs"]["json"]).read_text())
        index = json.loads(next((tmp_path / "o" / "_index").glob(f"{doc['sha256']}-*.json"))
                           .read_text())
        assert doc["chunks"] > 0
        assert written["chunks"] == index["chunks"] == doc["chunks"] == store.count(doc["doc_id"])
        assert written["vector_table"] == index["vector_table"] == doc["vector_table"] != ""


@pytest.mark.parametrize("args, says", [
    (["./pdfs", "s3://out/x"], "not an s3:// URI: './pdfs'"),
    (["s3://in/pdfs", "s3://out/x", "--set", "ocr.no_such_setting=1"], "no_such_setting"),
])
def test_a_sweep_with_bad_input_is_one_line_exit_2(args: list[str], says: str) -> None:
    """`python -m folio_prefect.flows.sweep` ends like `folio ingest`: the README's exit
    code and one line, before any Prefect server or S3 request."""
    proc = subprocess.run([sys.executable, "-m", "folio_prefect.flows.sweep", *args],
                          capture_output=True, text=True, timeout=120)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert lines[0].startswith("folio sweep: ") and says in lines[0], lines[0]


@pytest.mark.parametrize(("sig", "code", "words"), [
    (signal.SIGTERM, 143, "stopped by SIGTERM"), (signal.SIGINT, 130, "interrupted")])
def test_a_stopped_run_cleans_up_and_says_so_in_one_line(
    tmp_path: Path, sig: signal.Signals, code: int, words: str
) -> None:
    """SIGTERM (docker stop, an evicted pod) ends a run as Ctrl-C does: its cleanup runs
    (here a ``finally`` that writes a file; in a run, closing the stores), then one line
    and the conventional exit code, no traceback. Python's default would have ended the
    process on SIGTERM at once, cleanup skipped."""
    marker = tmp_path / "closed"
    script = (
        "import sys, time\n"
        "from pathlib import Path\n"
        "from folio.cli import run_mapped\n"
        "def run():\n"
        "    try:\n"
        "        print('ready', flush=True)\n"
        "        time.sleep(60)\n"
        "        return 0\n"
        "    finally:\n"
        f"        Path({str(marker)!r}).write_text('closed')\n"
        "sys.exit(run_mapped(run))\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", script], cwd=REPO, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == code, err
    assert marker.read_text() == "closed"
    assert words in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
