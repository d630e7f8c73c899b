"""No secret lands on disk, in Prefect or on a command line (docs/security.md; issue 44
items 3, 4, 5 and 7): a real CLI run is given secrets every way a user can, and the
Prefect database, the report, every output and the command lines and environments of
the run's child processes are searched for them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from folio.errors import ConfigError
from folio.pdf import ghostscript
from folio.samples import write_encrypted_pdf
from folio.security import work_dirs
from folio.security.secret_settings import split
from folio.settings.config import PipelineConfig
from folio.settings.run_config import IngestRequest
from tests.folio_server import session_home

pytestmark = pytest.mark.timeout(300)

PASSWORD = "pdf-pw-9c1e"
API_KEY = "ocr-key-9c1e"
S3_SECRET = "s3-secret-9c1e"
ENDPOINT_TOKEN = "endpoint-token-9c1e"
SECRETS = (PASSWORD, API_KEY, S3_SECRET, ENDPOINT_TOKEN)


def _children_of(root: int) -> set[int]:
    """Every descendant of ``root`` (from /proc), at this moment."""
    parents: dict[int, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            parents[int(stat.parent.name)] = int(stat.read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
    found: set[int] = set()
    frontier = {root}
    while frontier:
        frontier = {pid for pid, ppid in parents.items() if ppid in frontier} - found
        found |= frontier
    return found


def _watch(root: int, seen: dict[int, bytes], stop: threading.Event) -> None:
    """Collect the command line and environment of every process the run starts."""
    while not stop.is_set():
        for pid in _children_of(root):
            if pid in seen:
                continue
            try:
                seen[pid] = (Path(f"/proc/{pid}/cmdline").read_bytes() + b"\0" +
                             Path(f"/proc/{pid}/environ").read_bytes())
            except OSError:
                continue
        time.sleep(0.02)


def _found_in(blob: bytes) -> list[str]:
    return [s for s in SECRETS if s.encode() in blob]


@pytest.mark.usefixtures("folio_prefect_server")
def test_secrets_given_to_the_cli_reach_no_parameter_file_or_child(tmp_path: Path) -> None:
    """Before: ``--set`` secrets were flow-run parameters (in Prefect's database and its
    API), the DSN/endpoint credentials were in the report, and the run's children held
    FOLIO_PASSWORD in their environment."""
    pdf = write_encrypted_pdf(tmp_path / "locked.pdf", PASSWORD)
    out, report = tmp_path / "out", tmp_path / "report.json"
    endpoint = f"http://folio:{ENDPOINT_TOKEN}@127.0.0.1:9/v1"
    env = {**os.environ, "FOLIO_OCR__API_KEY": API_KEY, "FOLIO_S3__SECRET_ACCESS_KEY": S3_SECRET,
           "FOLIO_OCR__ENDPOINT": endpoint}  # the ways docs/security.md gives (and stdin)
    env.pop("FOLIO_PASSWORD", None)
    proc = subprocess.Popen(
        [sys.executable, "-m", "folio_prefect.flows.cli", "ingest", str(pdf), "--out", str(out),
         "--report", str(report), "--password-file", "-"], env=env, stdin=subprocess.PIPE,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdin is not None
    proc.stdin.write(PASSWORD + "\n")
    proc.stdin.flush()
    assert not _found_in(Path(f"/proc/{proc.pid}/cmdline").read_bytes())
    seen: dict[int, bytes] = {}
    stop = threading.Event()
    watcher = threading.Thread(target=_watch, args=(proc.pid, seen, stop), daemon=True)
    watcher.start()
    try:
        stdout, stderr = proc.communicate(timeout=240)  # closes stdin
    finally:
        stop.set()
        watcher.join()
    assert proc.returncode == 0, stderr[-3000:]
    summary = json.loads(report.read_text())
    assert summary["documents"][0]["outcome"] == "ok", "the password reached the pages"
    assert seen, "the run started child processes (page workers, validation)"
    leaks = {pid: _found_in(blob) for pid, blob in seen.items() if _found_in(blob)}
    assert not leaks, f"secrets in the children's command lines or environments: {leaks}"
    assert not _found_in(report.read_bytes())
    assert "folio:***@127.0.0.1" in summary["config"]["ocr"]["endpoint"]
    for path in out.rglob("*"):
        if path.is_file():
            assert not _found_in(path.read_bytes()), path
    assert not _found_in((stdout + stderr).encode())
    database = b"".join(p.read_bytes() for p in session_home().glob("prefect.db*"))
    assert b"locked.pdf" in database, "the run is in this database"
    assert not _found_in(database), "no secret among the flow-run parameters"


def test_a_request_or_trigger_with_a_secret_setting_is_refused() -> None:
    """A UI run or a trigger whose settings hold a secret would store it in Prefect."""
    for settings in ({"password": "x"}, {"ocr.api_key": "k"},
                     {"store.uri": "postgresql://rag:pw@db/rag"},
                     {"ocr.endpoints": ["http://u:tok@gpu1/v1"]}):
        with pytest.raises(ConfigError, match="carries a secret"):
            IngestRequest(source="/x.pdf", settings=settings)
    IngestRequest(source="/x.pdf", settings={"store.uri": "postgresql://rag@db/rag"})
    env = {k: v for k, v in os.environ.items() if not k.startswith("FOLIO_")}
    env["PREFECT_API_URL"] = "http://127.0.0.1:9/api"
    proc = subprocess.run([sys.executable, "-m", "folio_prefect.flows.cli", "trigger", "/x.pdf",
                           "--set", "password=hunter2"], capture_output=True, text=True,
                          timeout=120, env=env)
    assert proc.returncode == 2 and "FOLIO_PASSWORD" in proc.stderr, proc.stderr
    assert "hunter2" not in proc.stderr


def test_the_cli_hands_secret_settings_over_as_environment_variables() -> None:
    public, env = split({"render.max_dpi": 200, "password": "pw", "s3.session_token": "t",
                         "store.uri": "host=db user=rag password=pw dbname=rag",
                         "ocr.endpoint": "http://u:tok@gpu/v1"})
    assert public == {"render.max_dpi": 200}
    assert env == {"FOLIO_PASSWORD": "pw", "FOLIO_S3__SESSION_TOKEN": "t",
                   "FOLIO_PG_DSN": "host=db user=rag password=pw dbname=rag",
                   "FOLIO_OCR__ENDPOINT": "http://u:tok@gpu/v1"}


def test_the_report_masks_credentials_in_uris(monkeypatch: pytest.MonkeyPatch) -> None:
    """Finding 4: ``--report`` wrote ``store.uri`` whole, PostgreSQL password included."""
    monkeypatch.setenv("FOLIO_STORE__URI", "postgresql://rag:db-pw-9c1e@db:5432/rag")
    config = PipelineConfig.model_validate(
        {"ocr": {"endpoint": "https://user:tok-9c1e@gpu.example/v1"}})
    dumped = json.dumps(config.public_dump())
    assert "db-pw-9c1e" not in dumped and "tok-9c1e" not in dumped
    assert "postgresql://rag:***@db:5432/rag" in dumped
    # a password holding a raw "/" (issue 58): masked whole, not cut at the "/"
    monkeypatch.setenv("FOLIO_STORE__URI", "postgresql://rag:db/pw-9c1e@db:5432/rag")
    dumped = json.dumps(PipelineConfig().public_dump())
    assert "pw-9c1e" not in dumped and "postgresql://rag:***@db:5432/rag" in dumped


def test_ghostscript_gets_the_password_in_a_private_file_not_its_command_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Finding 5: ``-sPDFPassword=...`` was on gs's command line, which every local user
    reads in ``ps``; and the decrypted copy was left 0644."""
    password = 'gs pw "9c1e" with\\back'
    pdf = write_encrypted_pdf(tmp_path / "locked.pdf", password)
    monkeypatch.setenv("FOLIO_PASSWORD", password)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", S3_SECRET)
    started: list[dict[str, Any]] = []
    real_popen = subprocess.Popen

    def recording_popen(argv: list[str], **kw: Any) -> Any:
        started.append({"argv": list(argv), "env": dict(kw.get("env") or {})})
        return real_popen(argv, **kw)

    monkeypatch.setattr(ghostscript.subprocess, "Popen", recording_popen)
    dst = tmp_path / "work" / "copy.pdf"
    ghostscript.repair(pdf, dst, timeout_s=60, password=password)
    assert dst.stat().st_mode & 0o777 == 0o600, "the decrypted copy is private"
    (call,) = started
    assert not any(password in arg or "9c1e" in arg for arg in call["argv"])
    assert not any(password in v or S3_SECRET in v for v in call["env"].values())
    assert any(arg.startswith("@") for arg in call["argv"])
    assert not Path(next(a for a in call["argv"] if a.startswith("@"))[1:]).exists()


def test_scratch_folders_of_a_killed_run_are_removed(tmp_path: Path) -> None:
    """Finding 9: after a kill, the decrypted Ghostscript copy stayed in the work folder
    and nothing cleaned it."""
    root = tmp_path / "work"
    code = ("import sys, time; from pathlib import Path; from folio.security import work_dirs;"
            "d = work_dirs.make(Path(sys.argv[1])); (d / 'repaired.pdf').write_text('x');"
            "print(d, flush=True); time.sleep(60)")
    killed = subprocess.Popen([sys.executable, "-c", code, str(root)], stdout=subprocess.PIPE,
                              text=True)
    assert killed.stdout is not None
    left = Path(killed.stdout.readline().strip())
    assert left.stat().st_mode & 0o777 == 0o700
    mine = work_dirs.make(root)
    assert work_dirs.sweep(root) == 0, "the folders of live processes stay"
    killed.kill()
    killed.wait()
    assert work_dirs.sweep(root) == 1
    assert not left.exists() and mine.exists()


def test_a_childs_environment_holds_no_secret() -> None:
    from folio.security.redaction import child_env

    env = child_env({"PATH": "/bin", "FOLIO_PASSWORD": "p", "FOLIO_PG_DSN": "host=x",
                     "AWS_SECRET_ACCESS_KEY": "s", "AWS_ACCESS_KEY_ID": "a",
                     "FOLIO_S3__ACCESS_KEY_ID": "a", "PREFECT_API_AUTH_STRING": "folio:x",
                     "FOLIO_OCR__ENDPOINT": "https://u:tok@gpu/v1", "HF_TOKEN": "h",
                     "FOLIO_RENDER__MAX_DPI": "200"}, keep=("HF_TOKEN",), TMPDIR="/t")
    assert env == {"PATH": "/bin", "HF_TOKEN": "h", "FOLIO_RENDER__MAX_DPI": "200",
                   "TMPDIR": "/t"}


CLI = [sys.executable, "-m", "folio_prefect.flows.cli"]


@pytest.mark.parametrize(("given", "instead"), [
    (["--password", PASSWORD], "FOLIO_PASSWORD"),
    (["--set", f"password={PASSWORD}"], "FOLIO_PASSWORD"),
    (["--set", f"ocr.api_key={API_KEY}"], "FOLIO_OCR__API_KEY"),
    (["--set", f"s3.secret_access_key={S3_SECRET}"], "FOLIO_S3__SECRET_ACCESS_KEY"),
    (["--store-uri", f"postgresql://rag:{PASSWORD}@db/rag"], "FOLIO_PG_DSN"),
    (["--store-uri", f"host=db user=rag password={PASSWORD}"], "FOLIO_PG_DSN"),
    (["--store-uri", f"postgresql://rag:a/{PASSWORD}@db/rag"], "FOLIO_PG_DSN"),  # a raw "/"
    (["--endpoint", f"http://u:{ENDPOINT_TOKEN}@gpu/v1"], "FOLIO_OCR__ENDPOINT"),
    (["--set", f'ocr.endpoints=["http://u:{ENDPOINT_TOKEN}@gpu/v1"]'], "FOLIO_OCR__ENDPOINT"),
])
def test_a_secret_on_the_command_line_is_refused_in_one_line(
        given: list[str], instead: str, tmp_path: Path) -> None:
    """Issue 58 finding 5: each of these ran, the secret in ``/proc/<pid>/cmdline`` (every
    local user's to read) for the whole run. Now: exit 2 before any work, one line that
    names where to give it instead, and no secret in it."""
    (tmp_path / "a.pdf").write_bytes(b"%PDF-1.4")
    proc = subprocess.run([*CLI, "ingest", str(tmp_path / "a.pdf"), "--out",
                           str(tmp_path / "out"), *given], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and instead in proc.stderr, proc.stderr
    assert "readable by every local user" in proc.stderr
    assert not _found_in(proc.stderr.encode()) and not (tmp_path / "out").exists()


#: the attacker: another user reading a process's command line, as ``ps`` does
READ_CMDLINE = "import sys; print(open(f'/proc/{sys.argv[1]}/cmdline', 'rb').read())"


def test_another_user_reads_no_secret_from_a_runs_command_line(tmp_path: Path) -> None:
    """The password from stdin (``--password-file -``), the other secrets from the
    environment: a second local user reading the running ``folio``'s command line finds
    none of them (before, docs showed ``--password`` and ``--set ocr.api_key=``)."""
    from tests.test_security_local_user import SYSTEM_PYTHON, _nobody_can_run

    if not _nobody_can_run():
        pytest.skip("needs root (to act as nobody) and /usr/bin/python3")
    (tmp_path / "a.pdf").write_bytes(b"%PDF-1.4")
    env = {**os.environ, "FOLIO_OCR__API_KEY": API_KEY}
    run = subprocess.Popen([*CLI, "ingest", str(tmp_path / "a.pdf"), "--out",
                            str(tmp_path / "out"), "--password-file", "-"], env=env,
                           stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
    try:  # the run waits on stdin: alive while the attacker looks
        seen = subprocess.run([SYSTEM_PYTHON, "-c", READ_CMDLINE, str(run.pid)], user="nobody",
                              capture_output=True, text=True, timeout=30, cwd="/")
        assert "--password-file" in seen.stdout, seen.stderr  # it did read the command line
        assert not _found_in(seen.stdout.encode())
    finally:
        run.kill()
        run.wait()
