"""Another local user cannot stand in for a server folio starts (issue 58, finding 1 and
the first items of finding 8): the attacks are played by a real second user (``nobody``,
as in tests/test_security_local_user.py) against real server processes.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from folio.errors import EngineUnavailableError
from folio.gpu.server_probe import free_port, probe_server
from folio.gpu.vllm_server import VLLMServer
from folio.security.listeners import ListenerVerdict, listener_verdict, process_holds_listener
from tests.test_security_local_user import SYSTEM_PYTHON, needs_second_user
from tests.test_security_local_user import shared_tmp as shared_tmp  # the fixture

pytestmark = pytest.mark.timeout(90)

FAKE = str(Path(__file__).parent / "openai_fake.py")

#: the squatter: binds ``host:port`` and answers every request like an OpenAI server,
#: logging what it was sent (the Authorization header above all)
SQUATTER = r"""
import http.server, json, socket, sys
host, port, log = sys.argv[1], int(sys.argv[2]), sys.argv[3]
class H(http.server.BaseHTTPRequestHandler):
    def log_message(self, *a): pass
    def _answer(self):
        with open(log, "a") as fh:
            fh.write(f"{self.command} {self.path} {self.headers.get('Authorization')}\n")
        body = json.dumps({"data": [{"id": "evil"}],
                           "choices": [{"message": {"content": "attacker text"}}]}).encode()
        self.send_response(200); self.send_header("Content-Length", str(len(body)))
        self.end_headers(); self.wfile.write(body)
    do_GET = do_POST = _answer
class S(http.server.ThreadingHTTPServer):
    address_family = socket.AF_INET6 if ":" in host else socket.AF_INET
srv = S((host, port), H)
print("bound", flush=True)
srv.serve_forever()
"""


def _squat(host: str, port: int, log: Path) -> subprocess.Popen[str]:
    attacker = subprocess.Popen([SYSTEM_PYTHON, "-c", SQUATTER, host, str(port), str(log)],
                                user="nobody", stdout=subprocess.PIPE, text=True, cwd="/")
    assert attacker.stdout is not None and attacker.stdout.readline().strip() == "bound"
    return attacker


@pytest.fixture
def killed() -> Iterator[list[subprocess.Popen[str]]]:
    procs: list[subprocess.Popen[str]] = []
    yield procs
    for proc in procs:
        proc.kill()
        proc.wait()


@needs_second_user
def test_a_squatted_vllm_port_is_never_sent_the_key_and_a_new_port_is_used(
    shared_tmp: Path, tmp_path: Path, killed: list[subprocess.Popen[str]],
) -> None:
    """Finding 1: the server's port is on its command line; another user binds it while
    the server imports (the fake's start-up delay stands for vLLM's). Before, the first
    answer to ``/health`` made the server "ready": the squatter got the API key with every
    probe and would have got every page. Now nothing is sent until the kernel shows the
    started process holds the socket, and the server is started again on another port."""
    server = VLLMServer([sys.executable, FAKE, "--port", "{port}", "--startup-delay", "2"],
                        api_key="the-users-key", startup_timeout_s=30.0, health_interval_s=0.1,
                        log_path=tmp_path / "vllm.log")
    squatted = server.port
    log = shared_tmp / "heard.log"
    killed.append(_squat("127.0.0.1", squatted, log))
    try:
        server.start()
        assert server.port != squatted, "started again on another port"
        assert server.served_model_name != "evil"
        assert probe_server(server.base_url, api_key="the-users-key") == (True, "fake-ocr")
        assert listener_verdict(server.pid or 0, server.port, group=True) is ListenerVerdict.OURS
    finally:
        server.stop()
    assert not log.exists(), f"the squatter heard: {log.read_text() if log.exists() else ''}"


@needs_second_user
def test_a_vllm_port_squatted_every_time_ends_typed_not_in_a_wait(
    shared_tmp: Path, tmp_path: Path, killed: list[subprocess.Popen[str]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every port picked is taken: the start ends with a typed error naming the cause,
    long before the start-up timeout, and the squatters heard nothing."""
    log = shared_tmp / "heard.log"

    def taken_port(host: str = "127.0.0.1") -> int:
        port = free_port(host)
        killed.append(_squat("127.0.0.1", port, log))
        return port

    monkeypatch.setattr("folio.gpu.vllm_server.free_port", taken_port)
    server = VLLMServer([sys.executable, FAKE, "--port", "{port}", "--startup-delay", "1"],
                        api_key="the-users-key", startup_timeout_s=600.0, health_interval_s=0.1,
                        log_path=tmp_path / "vllm.log")
    with pytest.raises(EngineUnavailableError, match="another process listened"):
        server.start()
    assert not log.exists()


@needs_second_user
def test_a_listener_on_another_address_of_the_port_is_not_a_squatter(
    killed: list[subprocess.Popen[str]], shared_tmp: Path,
) -> None:
    """Finding 8: another user's listener on ``[::1]:N`` beside the server's
    ``127.0.0.1:N`` receives none of its connections. Before, it made the local Prefect
    server's check fail for as long as it was held (every run waited its whole start
    timeout); one on ``127.0.0.1:N`` itself is still foreign."""
    with socket.socket() as ours:
        ours.bind(("127.0.0.1", 0))
        ours.listen()
        port = ours.getsockname()[1]
        killed.append(_squat("::1", port, shared_tmp / "heard.log"))
        assert process_holds_listener(os.getpid(), port), "the server's own address is ours"
        assert listener_verdict(os.getpid(), port, "::1") is ListenerVerdict.FOREIGN
    other = free_port()
    killed.append(_squat("127.0.0.1", other, shared_tmp / "heard.log"))
    assert listener_verdict(os.getpid(), other) is ListenerVerdict.FOREIGN


@needs_second_user
def test_the_vllm_log_is_never_opened_through_a_planted_link(
    shared_tmp: Path, tmp_path: Path,
) -> None:
    """Finding 8: the non-shared server's log was ``/tmp/folio-vllm-<pid>-<port>.log``,
    opened following links: another user's link there made folio append the server's
    output to any file of the user's. Now the default log lives in a private folder of a
    random name, and a link at a given log path is refused."""
    server = VLLMServer([sys.executable, FAKE, "--port", "{port}"])
    assert server.log_path.parent.stat().st_mode & 0o777 == 0o700
    assert server.log_path.parent.parent == Path(os.environ.get("TMPDIR", "/tmp"))
    victim = tmp_path / "victim"
    victim.write_text("mine\n")
    planted = shared_tmp / "vllm.log"
    subprocess.run([SYSTEM_PYTHON, "-c", f"import os; os.symlink({str(victim)!r}, "
                    f"{str(planted)!r})"], user="nobody", check=True)
    server = VLLMServer([sys.executable, FAKE, "--port", "{port}"], log_path=planted,
                        startup_timeout_s=10.0)
    with pytest.raises(EngineUnavailableError):
        server.start()
    assert victim.read_text() == "mine\n"
