"""Another local user cannot take over folio's servers (docs/security.md, issue 44 items
1 and 2/6 for the vLLM side): the attacks are played by a real second user.

The suite runs as root, so the attacker is ``nobody`` (a process started with
``user=``), running the system's Python with the standard library only (it cannot read
this checkout's virtualenv). Its files live under /tmp, where any user can create them.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from folio.gpu.shared_server import SharedServerSpec, acquire, default_state_dir
from folio.process_files import pid_owned
from folio.security.private_dir import InsecureLocationError, ensure_private_dir

pytestmark = pytest.mark.timeout(60)

SYSTEM_PYTHON = "/usr/bin/python3"

#: the attacker: a state folder anyone may write (0777) with a "ready" state file naming
#: itself as the supervisor and its own OpenAI-compatible server, which logs every request
ATTACKER = r"""
import http.server, json, os, sys, threading, time
state_dir, key, log = sys.argv[1], sys.argv[2], sys.argv[3]
os.makedirs(state_dir, exist_ok=True)
os.chmod(state_dir, 0o777)
class H(http.server.BaseHTTPRequestHandler):
    def log_message(self, *a): pass
    def _answer(self):
        with open(log, "a") as fh:
            fh.write(self.command + " " + self.path + "\n")
        body = json.dumps({"data": [{"id": "evil"}]}).encode()
        self.send_response(200); self.send_header("Content-Length", str(len(body)))
        self.end_headers(); self.wfile.write(body)
    do_GET = do_POST = _answer
srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
port = srv.server_address[1]
start = int(open(f"/proc/{os.getpid()}/stat").read().rsplit(")", 1)[1].split()[19])
now = time.time()
state = dict(key=key, state="ready", supervisor_pid=os.getpid(), supervisor_start=start,
             owner_pid=os.getpid(), server_pid=os.getpid(), host="127.0.0.1", port=port,
             base_url=f"http://127.0.0.1:{port}/v1", in_flight=4, max_restarts=0,
             started_at=now, updated_at=now, last_used=now)
with open(os.path.join(state_dir, key + ".json"), "w") as fh:
    json.dump(state, fh)
os.chmod(os.path.join(state_dir, key + ".json"), 0o666)
print(port, flush=True)
srv.serve_forever()
"""


def _nobody_can_run() -> bool:
    try:
        pwd.getpwnam("nobody")
    except KeyError:
        return False
    return os.geteuid() == 0 and Path(SYSTEM_PYTHON).is_file()


needs_second_user = pytest.mark.skipif(not _nobody_can_run(),
                                       reason="needs root (to act as nobody) and /usr/bin/python3")


@pytest.fixture
def shared_tmp() -> Iterator[Path]:
    """A folder under /tmp the attacker (nobody) can write in, removed afterwards."""
    path = Path(tempfile.mkdtemp(prefix="folio-attack-", dir="/tmp"))
    os.chmod(path, 0o1777)
    yield path
    shutil.rmtree(path, ignore_errors=True)


@needs_second_user
def test_a_state_folder_another_user_made_is_refused(shared_tmp: Path) -> None:
    """Finding 1: before, ``acquire`` attached to the attacker's "ready" server and would
    have sent it every page image."""
    state_dir = shared_tmp / "folio-servers-0"
    log = shared_tmp / "requests.log"
    spec = SharedServerSpec(command=["never-run"], startup_timeout_s=3.0)
    attacker = subprocess.Popen(
        [SYSTEM_PYTHON, "-c", ATTACKER, str(state_dir), spec.key(), str(log)],
        user="nobody", stdout=subprocess.PIPE, text=True, cwd="/")
    try:
        assert attacker.stdout is not None and int(attacker.stdout.readline())
        assert not pid_owned(attacker.pid), "the attacker is another user"
        with pytest.raises(InsecureLocationError, match="belongs to user id"):
            acquire(spec, state_dir=state_dir, owner_pid=os.getpid())
        assert not log.exists(), "the attacker's server heard nothing"
    finally:
        attacker.kill()
        attacker.wait()


def test_private_folders_are_checked_on_every_use(tmp_path: Path) -> None:
    """Owner and mode are checked when the folder exists already, not only when folio
    makes it (the old code made it 0700 but took an existing one as it was)."""
    made = ensure_private_dir(tmp_path / "state")
    assert made.stat().st_mode & 0o777 == 0o700
    os.chmod(made, 0o777)
    with pytest.raises(InsecureLocationError, match="mode 0777"):
        ensure_private_dir(made)
    os.chmod(made, 0o700)
    link = tmp_path / "link"
    link.symlink_to(made)
    with pytest.raises(InsecureLocationError, match="not a folder"):
        ensure_private_dir(link)


def test_the_default_state_folder_is_not_a_shared_temp_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("FOLIO_SERVER_STATE_DIR", raising=False)
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert default_state_dir() == tmp_path / ".folio" / "servers"
    runtime = tmp_path / "run"
    runtime.mkdir(mode=0o700)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    assert default_state_dir() == runtime / "folio-servers"
    os.chmod(runtime, 0o755)  # not private: not used
    assert default_state_dir() == tmp_path / ".folio" / "servers"


def test_a_shared_vllm_server_requires_the_folders_key(tmp_path: Path) -> None:
    """Finding 6's twin for vLLM: a server folio starts answers only requests with the key
    of its state folder (0600), which it gets in its environment, not on its command
    line (visible to every user in ps)."""
    fake = str(Path(__file__).parent / "openai_fake.py")
    spec = SharedServerSpec(command=[sys.executable, fake, "--port", "{port}"], in_flight=2,
                            startup_timeout_s=15.0, health_interval_s=0.1, idle_timeout_s=1.0)
    owner = subprocess.Popen(["sleep", "60"])
    state_dir = tmp_path / "servers"
    try:
        with acquire(spec, state_dir=state_dir, owner_pid=owner.pid) as endpoint:
            key = endpoint.api_key
            assert (state_dir / "api-key").stat().st_mode & 0o777 == 0o600
            assert (state_dir / "api-key").read_text().strip() == key
            models = f"{endpoint.base_url}/models"
            assert httpx.get(models, timeout=5).status_code == 401
            assert httpx.get(models, timeout=5,
                             headers={"Authorization": f"Bearer {key}"}).status_code == 200
            pid = endpoint.pid
            assert pid is not None
            cmdlines = [Path(f"/proc/{p}/cmdline").read_bytes()
                        for p in (pid, endpoint.supervisor_pid)]
            assert all(key.encode() not in c for c in cmdlines)
    finally:
        owner.kill()
        owner.wait()
    deadline = time.monotonic() + 10
    while any(json.loads(p.read_text()).get("state") != "stopped"
              for p in state_dir.glob("*.json")) and time.monotonic() < deadline:
        time.sleep(0.1)
