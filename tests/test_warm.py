"""The warm server (folio.warm): a command forked from it is the caller's process in all
that a program can see (streams, folder, umask, environment, exit status, signals), a
changed configuration gets a server of its own, the child never outlives its caller, and
nobody else's connection is served. Real processes throughout; the probe command is
tests/warm_probe.py."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from folio.process_files import pid_alive
from folio.warm import identity
from folio.warm.wire import Request, recv_int
from tests.process_reaper import stop_warm_servers, warm_runs, warm_server_pid

REPO = Path(__file__).resolve().parent.parent
LAUNCH = ("from folio.warm import client; import sys; "
          "s = client.run_command('call', 'tests.warm_probe:main', ['tests.warm_probe'], "
          "['probe', *sys.argv[1:]]); client.exit_with(99 if s is None else s)")

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux only")


@pytest.fixture()
def runtime() -> Iterator[Path]:
    """A runtime folder of the test's own, its servers the test's alone (under /tmp: a
    socket's path holds at most 107 bytes)."""
    folder = Path(tempfile.mkdtemp(prefix="fw-", dir="/tmp"))
    yield folder
    stop_warm_servers(folder)  # what the test started, and the folder


def _env(runtime: Path, **extra: str) -> dict[str, str]:
    env = {**os.environ, "XDG_RUNTIME_DIR": str(runtime), "FOLIO_WARM": "1",
           "FOLIO_WARM_IDLE_S": "120", "PYTHONPATH": str(REPO), **extra}
    return env


def _launch(runtime: Path, cwd: Path, *args: str, stdin: str = "", **extra: str,
            ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", LAUNCH, *args], cwd=cwd, text=True,
                          input=stdin, capture_output=True, env=_env(runtime, **extra),
                          timeout=240)


def _servers(runtime: Path) -> list[Path]:
    return sorted((runtime / "folio-warm").glob("*.sock"))


def test_a_child_is_the_callers_process_and_its_exit_is_the_callers(runtime: Path,
                                                                     tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    facts = tmp_path / "facts.json"
    done = _launch(runtime, work, str(facts), "3", "stdin", stdin="from the caller",
                   FOLIO_PASSWORD="s3cret", SOME_SETTING="a")
    assert done.returncode == 3, done.stderr
    seen = json.loads(facts.read_text())
    [sock] = _servers(runtime)
    server = warm_server_pid(sock)
    assert server is not None and seen["ppid"] == server and seen["pgid"] == seen["pid"]  # forked, own group
    assert seen["after_fork"] and seen["cwd"] == str(work)
    # the parent it would have had without the server is its caller's: this test's process
    # (a worker's flow run: the worker, whose end ends the run's shared GPU server); the
    # variable that told it is not left for the child's own children
    assert seen["parent"] == os.getpid() and "FOLIO_WARM_PARENT_PID" not in seen["env"]
    # its command line is the server's; its name says what it runs (top, ps, bench/host_cpu)
    assert seen["comm"] == "folio:warm_prob"  # folio:<module>, 15 bytes
    assert "folio.warm.server" in Path(f"/proc/{server}/cmdline").read_text()
    assert seen["argv"] == ["probe", str(facts), "3", "stdin"]
    assert seen["stdin"] == "from the caller" and f"probe {seen['pid']} says hello" in done.stdout
    assert seen["env"]["FOLIO_PASSWORD"] == "s3cret" and seen["env"]["SOME_SETTING"] == "a"
    # the long-lived server never holds the caller's secret
    server_env = Path(f"/proc/{server}/environ").read_bytes().split(b"\0")
    assert b"FOLIO_PASSWORD=s3cret" not in server_env and b"SOME_SETTING=a" in server_env
    # nor anywhere in its memory, which every later child (a page worker reading a
    # hostile PDF among them) is a copy of: the environment went to the child by a pipe
    assert b"s3cret" not in _writable_memory(server)

    again = _launch(runtime, work, str(facts), "0", FOLIO_PASSWORD="other", SOME_SETTING="a")
    assert again.returncode == 0 and json.loads(facts.read_text())["ppid"] == server
    assert _servers(runtime) == [sock]  # a secret is not configuration: the same server

    other = _launch(runtime, work, str(facts), "0", SOME_SETTING="b")
    assert other.returncode == 0
    assert json.loads(facts.read_text())["ppid"] != server and len(_servers(runtime)) == 2


def test_the_child_runs_where_and_as_nicely_as_its_caller(runtime: Path, tmp_path: Path) -> None:
    """``taskset``/``nice`` on the command hold for its child, which a fork would otherwise
    give the server's CPUs and niceness (the server started by an unpinned caller)."""
    facts = tmp_path / "facts.json"
    assert _launch(runtime, tmp_path, str(facts), "0").returncode == 0  # the server, unpinned
    server = json.loads(facts.read_text())
    assert server["nice"] == os.getpriority(os.PRIO_PROCESS, 0)
    cpu = sorted(os.sched_getaffinity(0))[-1]

    def pinned() -> None:
        os.sched_setaffinity(0, {cpu})
        os.nice(3)

    done = subprocess.run([sys.executable, "-c", LAUNCH, str(facts), "0"], cwd=tmp_path,
                          text=True, capture_output=True, env=_env(runtime), timeout=240,
                          preexec_fn=pinned)
    assert done.returncode == 0, done.stderr
    seen = json.loads(facts.read_text())
    assert seen["ppid"] == server["ppid"]  # forked by the same server
    assert seen["cpus"] == [cpu] and seen["nice"] == server["nice"] + 3


def test_signals_reach_the_child_and_it_dies_with_its_caller(runtime: Path,
                                                             tmp_path: Path) -> None:
    facts = tmp_path / "facts.json"
    env = _env(runtime)
    # SIGINT: a terminal's Ctrl-C reaches the caller's group only (the child leads its
    # own); relayed to the child's group, it ends by it as Python does on an uncaught one
    for sig, expect in ((signal.SIGTERM, -signal.SIGTERM), (signal.SIGINT, -signal.SIGINT),
                        (signal.SIGKILL, None)):
        facts.unlink(missing_ok=True)
        proc = subprocess.Popen([sys.executable, "-c", LAUNCH, str(facts), "0", "sleep", "60"],
                                cwd=tmp_path, env=env, stdout=subprocess.DEVNULL)
        deadline = time.monotonic() + 120
        while not facts.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        child = json.loads(facts.read_text())["pid"]
        proc.send_signal(sig)
        code = proc.wait(timeout=30)
        if expect is not None:  # relayed: the child ended by it, and the caller the same way
            assert code == expect
        _wait_gone(child)  # SIGKILL cannot be relayed: the server kills the orphan


def test_a_helper_is_forked_by_the_same_server(runtime: Path, tmp_path: Path) -> None:
    facts = tmp_path / "facts.json"
    done = _launch(runtime, tmp_path, str(facts), "0", "helper")
    assert done.returncode == 0, done.stderr
    seen = json.loads(facts.read_text())
    helper = seen["helper"]
    # its parent is the server; the parent it would have had without one is its caller
    assert helper["code"] == 7
    assert helper["answer"].split() == [str(seen["ppid"]), str(seen["pid"]), "ping"]


def test_a_child_finds_what_the_server_imported_frozen(runtime: Path, tmp_path: Path) -> None:
    """The preloaded modules' objects are in the collector's permanent generation: a
    child's collections skip them instead of touching (and so copying) the server's pages
    (issue 57: a one-page ingest's flow body took 0.6 s longer without)."""
    facts = tmp_path / "facts.json"
    done = _launch(runtime, tmp_path, str(facts), "0")
    assert done.returncode == 0, done.stderr
    seen = json.loads(facts.read_text())
    assert seen["gc_enabled"]  # the child's own objects are still collected
    assert seen["frozen"] > 10_000  # every object of the modules imported, not a handful


def test_off_or_unreachable_means_a_new_interpreter(runtime: Path, tmp_path: Path) -> None:
    facts = tmp_path / "facts.json"
    off = _launch(runtime, tmp_path, str(facts), "0", FOLIO_WARM="0")
    assert off.returncode == 99 and not facts.exists()  # run_command said: run it yourself


def test_the_server_ends_when_idle(runtime: Path, tmp_path: Path) -> None:
    done = _launch(runtime, tmp_path, str(tmp_path / "f.json"), "0", FOLIO_WARM_IDLE_S="1")
    assert done.returncode == 0
    [sock] = _servers(runtime)
    pid = warm_server_pid(sock)
    assert pid is not None
    _wait_gone(pid)
    assert not sock.exists()


SYSTEM_PYTHON = "/usr/bin/python3"
#: another user's client, with the standard library only: a well-formed request
ATTACKER = """
import json, socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
s.connect(sys.argv[1])
r = dict(kind="module", target="os", argv=["x"], cwd="/", umask=18, path0="",
         new_session=False)
try:
    socket.send_fds(s, [json.dumps(r).encode()], [0, 1, 2])
    print(s.recv(8).hex() or "eof")
except OSError as err:  # closed unread
    print("refused", err.errno)
"""


def test_another_users_connection_is_not_served(tmp_path: Path) -> None:
    if os.geteuid() != 0 or not Path(SYSTEM_PYTHON).is_file():
        pytest.skip("needs root (to connect as nobody) and /usr/bin/python3")
    runtime = Path(tempfile.mkdtemp(prefix="folio-warm-test-", dir="/tmp"))
    try:
        _launch(runtime, tmp_path, str(tmp_path / "f.json"), "0")
        [sock] = _servers(runtime)
        # opened up on purpose: the folder (0700) and socket (0600) keep others out
        # already; the server's own check of who connects is the second line
        for path in (runtime, sock.parent):
            path.chmod(0o711)
        sock.chmod(0o666)
        other = subprocess.run([SYSTEM_PYTHON, "-c", ATTACKER, str(sock)], capture_output=True,
                               text=True, user="nobody", env={}, cwd="/", timeout=60)
        answer = other.stdout.strip()
        assert answer in ("0" * 16, "eof") or answer.startswith("refused"), other.stderr
        assert "request refused: a connection from uid" in sock.with_suffix(".log").read_text()
    finally:
        stop_warm_servers(runtime)


def test_a_request_from_the_same_user_carries_its_streams(runtime: Path,
                                                          tmp_path: Path) -> None:
    """The wire format itself: a request without three streams is refused, not run."""
    _launch(runtime, tmp_path, str(tmp_path / "f.json"), "0")
    [sock] = _servers(runtime)
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    s.connect(str(sock))
    request = Request(kind="module", target="os", argv=["x"], cwd="/")
    socket.send_fds(s, [request.encode()], [0])
    assert recv_int(s) in (0, None)
    s.close()


def test_a_caller_gone_before_the_server_answers_leaves_no_child(runtime: Path,
                                                                tmp_path: Path) -> None:
    """A caller killed between its request and the server's answer (the pid): the
    server's answer fails, and its child must not run on unattended, nor the server end
    (it did: the failed answer ended the server with its new child not yet counted among
    its children, so nothing killed it; a full test run's SIGKILL case hit it once)."""
    from folio.warm.wire import send_request

    _launch(runtime, tmp_path, str(tmp_path / "first.json"), "0")
    [sock] = _servers(runtime)
    server = warm_server_pid(sock)
    facts = tmp_path / "facts.json"
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    s.connect(str(sock))
    request = Request(kind="call", target="tests.warm_probe:main", cwd=str(tmp_path),
                      argv=["probe", str(facts), "0", "sleep", "60"], path0=str(REPO))
    with open(os.devnull, "rb") as null_in, open(os.devnull, "wb") as null_out:
        send_request(s, request, [null_in.fileno(), null_out.fileno(), null_out.fileno()],
                     _env(runtime))
    s.close()  # gone before the answer
    child = _forked_last(runtime, "tests.warm_probe:main", after=1)
    _wait_gone(child)
    assert pid_alive(server), "the server ended with the failed answer"
    assert _launch(runtime, tmp_path, str(tmp_path / "again.json"), "0").returncode == 0
    assert json.loads((tmp_path / "again.json").read_text())["ppid"] == server


def _forked_last(runtime: Path, target: str, after: int, timeout: float = 60.0) -> int:
    """The pid of the server's child number ``after + 1`` for ``target``, once its log
    says it was forked."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pids = [pid for pid, forked in warm_runs(runtime) if forked == target]
        if len(pids) > after:
            return pids[after]
        time.sleep(0.1)
    raise AssertionError(f"no child number {after + 1} for {target} in the server's log")


def test_the_name_follows_configuration_not_shell_noise_or_secrets() -> None:
    base = {"PATH": "/usr/bin", "FOLIO_OCR__ENGINE": "vllm", "PWD": "/a",
            "AWS_SECRET_ACCESS_KEY": "k1", "PREFECT__FLOW_RUN_ID": "1"}
    name = identity.fingerprint(base, ["m"])
    assert identity.fingerprint({**base, "PWD": "/b", "PREFECT__FLOW_RUN_ID": "2",
                                 "AWS_SECRET_ACCESS_KEY": "k2"}, ["m"]) == name
    assert identity.fingerprint({**base, "FOLIO_OCR__ENGINE": "tesseract"}, ["m"]) != name
    assert identity.fingerprint(base, ["m", "n"]) != name
    assert "AWS_SECRET_ACCESS_KEY" not in identity.server_env(base)


def test_an_edited_source_file_changes_the_name(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    tree = tmp_path / "folio"
    (tree / "sub").mkdir(parents=True)
    (tree / "sub" / "m.py").write_text("x = 1\n")
    out: list[tuple[str, int, int]] = []
    identity._walk(str(tree), out)
    monkeypatch.setattr(identity, "_source_stats", lambda: list(out))
    before = identity.fingerprint({}, [])
    (tree / "sub" / "m.py").write_text("x = 22\n")
    out.clear()
    identity._walk(str(tree), out)
    assert identity.fingerprint({}, []) != before


def _writable_memory(pid: int) -> bytes:
    """Every writable mapping of ``pid``, read as a debugger would (tests run as root)."""
    from tests.test_security_child_env import _writable_memory as read

    return read(pid)


def _wait_gone(pid: int, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        stat = Path(f"/proc/{pid}/stat")
        if stat.exists() and stat.read_text().split(") ")[-1].startswith("Z"):
            return  # a zombie: ended, not yet reaped by a parent that is gone too
        time.sleep(0.1)
    # what it is, for a failure seen once in a full run and not again (state, parent, name)
    status = Path(f"/proc/{pid}/status")
    seen = {k: v.strip() for k, _, v in (ln.partition(":") for ln in status.read_text().splitlines())
            if k in ("Name", "State", "PPid", "SigBlk", "SigIgn")} if status.exists() else {}
    raise AssertionError(f"process {pid} still runs: {seen}")


def test_a_server_of_older_code_is_retired_once_its_children_are_done(
        runtime: Path, tmp_path: Path) -> None:
    """An edited checkout starts a new server; the old one takes no new request, finishes
    the command it runs, and ends (it would otherwise hold its memory for an idle hour)."""
    facts = tmp_path / "facts.json"
    slow = subprocess.Popen([sys.executable, "-c", LAUNCH, str(facts), "5", "sleep", "3"],
                            cwd=tmp_path, env=_env(runtime), stdout=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while not facts.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    [old] = _servers(runtime)
    old_pid = warm_server_pid(old)
    assert old_pid is not None
    # the running server's stamp made another code's, as after an edit of the checkout
    stamp = old.with_suffix(".json")
    data = json.loads(stamp.read_text())
    stamp.write_text(json.dumps({**data, "code": "older"}))
    new = _launch(runtime, tmp_path, str(tmp_path / "g.json"), "0", SOME_SETTING="other")
    assert new.returncode == 0
    assert not old.exists()  # no new request reaches it
    assert slow.wait(timeout=60) == 5  # the command it ran finished as it would have
    _wait_gone(old_pid)
    assert len(_servers(runtime)) == 1


def test_a_removed_socket_ends_the_server_after_its_runs_not_during_them(
        runtime: Path, tmp_path: Path) -> None:
    """A cleaner of /tmp that removes the socket must not cut a run short: the server
    notices at its next event (here another run's end) and ends once the rest are done."""
    long_facts, short_facts = tmp_path / "long.json", tmp_path / "short.json"
    long = subprocess.Popen([sys.executable, "-c", LAUNCH, str(long_facts), "4", "sleep", "4"],
                            cwd=tmp_path, env=_env(runtime), stdout=subprocess.DEVNULL)
    short = subprocess.Popen([sys.executable, "-c", LAUNCH, str(short_facts), "0", "sleep",
                              "1"], cwd=tmp_path, env=_env(runtime), stdout=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while not (long_facts.exists() and short_facts.exists()) and time.monotonic() < deadline:
        time.sleep(0.05)
    [sock] = _servers(runtime)
    pid = warm_server_pid(sock)
    assert pid is not None
    sock.unlink()
    assert short.wait(timeout=60) == 0
    assert long.wait(timeout=60) == 4  # still ran to its end after the server noticed
    _wait_gone(pid)


def test_an_unsafe_socket_folder_means_a_new_interpreter_not_a_crash(tmp_path: Path) -> None:
    """Another user's (or a world-writable) folder where the sockets would go: the
    command runs as before, in a new interpreter, and says why."""
    runtime = Path(tempfile.mkdtemp(prefix="fw-", dir="/tmp"))
    try:
        (runtime / "folio-warm").mkdir(mode=0o777)
        (runtime / "folio-warm").chmod(0o777)  # open to everyone: refused
        done = _launch(runtime, tmp_path, str(tmp_path / "f.json"), "0")
        assert done.returncode == 99, done.stderr  # run_command: run it yourself
        assert "warm server" in done.stderr and "other users could change" in done.stderr
    finally:
        shutil.rmtree(runtime, ignore_errors=True)


def test_the_suites_warm_servers_are_its_own_and_end_with_it(tmp_path: Path) -> None:
    """A test that drops ``FOLIO_WARM=0`` runs warm under the session's own runtime
    folder (tests/conftest.py), whose servers the session's end stops
    (tests/process_reaper.stop_warm_servers, the reaper's too if the session dies)."""
    assert Path(os.environ["XDG_RUNTIME_DIR"]).name.startswith("fws-")
    runtime = Path(tempfile.mkdtemp(prefix="fw-", dir="/tmp"))
    done = _launch(runtime, tmp_path, str(tmp_path / "facts.json"), "0")
    assert done.returncode == 0, done.stderr
    [sock] = _servers(runtime)
    server = warm_server_pid(sock)
    assert server is not None
    assert stop_warm_servers(runtime) == [server]
    _wait_gone(server)
    assert not runtime.exists()
