"""The host-wide shared server: supervisor process, leases, idle stop, owner death,
restarts seen across processes, and the cross-process in-flight bound.

tests/openai_fake.py plays ``vllm serve`` (a real process on a real port). Other "flow
runs" are separate Python processes, as the process worker makes them. Every test's
state dir is checked at teardown, and any supervisor or server still running is killed.
"""

from __future__ import annotations

import fcntl
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from folio.errors import EngineUnavailableError
from folio.gpu.inflight_slots import SlotSemaphore, slot_semaphore
from folio.gpu.server_probe import probe_server
from folio.gpu.shared_server import (
    SharedServerSpec,
    acquire,
    pid_alive,
    read_state,
)

REPO = Path(__file__).resolve().parent.parent
FAKE = str(Path(__file__).parent / "openai_fake.py")
pytestmark = pytest.mark.timeout(60)


def fake_cmd(*extra: str) -> list[str]:
    return [sys.executable, FAKE, "--port", "{port}", *extra]


def make_spec(command: list[str] | None = None, **kw: object) -> SharedServerSpec:
    fields: dict[str, object] = dict(
        command=command or fake_cmd(), in_flight=4, startup_timeout_s=15.0, max_restarts=2,
        health_interval_s=0.1, idle_timeout_s=1.5,
    )
    fields.update(kw)
    return SharedServerSpec.model_validate(fields)


def wait_for(check: object, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if callable(check) and check():
            return True
        time.sleep(0.05)
    return False


def answers(base_url: str) -> bool:
    try:
        return httpx.get(base_url.removesuffix("/v1") + "/health", timeout=1.0).status_code == 200
    except httpx.HTTPError:
        return False


def spawn_python(code: str, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-c", code, *args], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True, cwd=REPO)


@pytest.fixture
def state_dir(tmp_path: Path) -> Iterator[Path]:
    """A state dir; afterwards, whatever it names as running is killed (and it is an
    error if the test left a supervisor behind that should have stopped)."""
    path = tmp_path / "state"
    yield path
    for state_file in path.glob("*.json"):
        state = read_state(state_file)
        if state is None:
            continue
        for pid in (state.supervisor_pid, state.server_pid):
            if pid is not None and pid_alive(pid):
                try:
                    os.killpg(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass


@pytest.fixture
def owner() -> Iterator[subprocess.Popen[bytes]]:
    """A stand-in for the worker process."""
    proc = subprocess.Popen(["sleep", "120"])
    yield proc
    proc.kill()
    proc.wait()


ACQUIRE_AND_HOLD = """
import json, sys
from pathlib import Path
from folio.gpu.shared_server import SharedServerSpec, acquire
spec = SharedServerSpec.model_validate_json(sys.argv[1])
with acquire(spec, state_dir=Path(sys.argv[2]), owner_pid=int(sys.argv[3])) as ep:
    print(json.dumps({"base_url": ep.base_url, "pid": ep.pid, "supervisor": ep.supervisor_pid,
                      "generation": ep.generation}), flush=True)
    sys.stdin.readline()
"""


def test_key_is_the_server_identity() -> None:
    spec = make_spec()
    assert spec.key() == make_spec(in_flight=64, idle_timeout_s=9.0, startup_timeout_s=1).key()
    assert spec.key() != make_spec(env={"CUDA_VISIBLE_DEVICES": "1"}).key()
    assert spec.key() != make_spec(fake_cmd("--delay", "0.1")).key()


def test_two_processes_share_one_server_which_idles_out(
    state_dir: Path, owner: subprocess.Popen[bytes]
) -> None:
    spec = make_spec()
    runs = [spawn_python(ACQUIRE_AND_HOLD, spec.model_dump_json(), str(state_dir), str(owner.pid))
            for _ in range(2)]
    try:
        seen = [json.loads(run.stdout.readline()) for run in runs if run.stdout]
        assert len(seen) == 2 and seen[0] == seen[1], "same server, same supervisor"
        assert seen[0]["generation"] == 1 and answers(seen[0]["base_url"])
        state = read_state(state_dir / f"{spec.key()}.json")
        assert state is not None and state.state == "ready" and state.owner_pid == owner.pid
        assert wait_for(lambda: (read_state(state_dir / f"{spec.key()}.json") or state).leases == 2)
        # a third user, in this process, attaches too
        with acquire(spec, state_dir=state_dir, owner_pid=owner.pid) as endpoint:
            assert endpoint.base_url == seen[0]["base_url"] and endpoint.pid == seen[0]["pid"]
            assert endpoint.in_flight == 4 and endpoint.served_model_name == "fake-ocr"
    finally:
        for run in runs:
            assert run.stdin is not None
            run.stdin.close()  # the run ends: its lease goes
            run.wait(10)
    released = time.monotonic()
    assert wait_for(lambda: not pid_alive(seen[0]["supervisor"]), 10), "idled out"
    assert time.monotonic() - released >= 1.0, "not before the idle timeout"
    assert not pid_alive(seen[0]["pid"]) and not answers(seen[0]["base_url"])
    assert not (state_dir / f"{spec.key()}.json").exists()


def test_lease_of_a_killed_run_is_dropped(state_dir: Path, owner: subprocess.Popen[bytes]) -> None:
    """A flow run SIGKILLed while attached does not keep the server (and GPU) forever."""
    run = spawn_python(ACQUIRE_AND_HOLD, make_spec().model_dump_json(), str(state_dir),
                       str(owner.pid))
    assert run.stdout is not None
    seen = json.loads(run.stdout.readline())
    run.kill()
    run.wait()
    assert wait_for(lambda: not pid_alive(seen["supervisor"]), 10), "idled out without release"
    assert not pid_alive(seen["pid"]) and not answers(seen["base_url"])


def test_owner_death_stops_the_server_at_once(
    state_dir: Path, owner: subprocess.Popen[bytes]
) -> None:
    endpoint = acquire(make_spec(idle_timeout_s=300), state_dir=state_dir, owner_pid=owner.pid)
    try:
        pid, url = endpoint.pid, endpoint.base_url
        assert pid_alive(pid) and answers(url)
        owner.kill()
        owner.wait()
        assert wait_for(lambda: not pid_alive(endpoint.supervisor_pid), 5)
        assert not pid_alive(pid) and not answers(url)
        assert not endpoint.wait_ready(0.5) and endpoint.state == "stopped"
    finally:
        endpoint.release()


def test_killed_server_is_restarted_and_attached_runs_see_it(
    state_dir: Path, owner: subprocess.Popen[bytes]
) -> None:
    with acquire(make_spec(), state_dir=state_dir, owner_pid=owner.pid) as endpoint:
        pid, generation = endpoint.pid, endpoint.generation
        assert pid is not None and generation == 1
        os.killpg(pid, signal.SIGKILL)
        assert wait_for(lambda: not pid_alive(pid), 5)
        assert endpoint.wait_ready(15), "back after the restart"
        assert endpoint.generation == generation + 1 and endpoint.restarts == 1
        assert endpoint.pid not in (None, pid) and probe_server(endpoint.base_url)[0]
        reply = httpx.post(f"{endpoint.base_url}/chat/completions", timeout=5.0, json={
            "model": "fake-ocr", "messages": [{"role": "user", "content": "hi"}]})
        assert reply.status_code == 200


def test_server_that_exits_at_once_fails_fast_with_its_log(
    state_dir: Path, owner: subprocess.Popen[bytes]
) -> None:
    cmd = [sys.executable, "-c", "import sys; print('CUDA out of memory (fake)'); sys.exit(3)"]
    spec = make_spec(cmd, startup_timeout_s=60)
    started = time.monotonic()
    with pytest.raises(EngineUnavailableError, match="CUDA out of memory") as info:
        acquire(spec, state_dir=state_dir, owner_pid=owner.pid)
    assert time.monotonic() - started < 10
    assert "exited with code 3" in str(info.value)
    state = read_state(state_dir / f"{spec.key()}.json")
    assert state is not None and state.state == "failed"
    assert wait_for(lambda: not pid_alive(state.supervisor_pid), 5), "the supervisor exits"
    assert not list((state_dir / f"{spec.key()}.leases").iterdir()), "no lease left"


SLOT_WORKER = """
import fcntl, json, random, sys, threading, time
from pathlib import Path
from folio.gpu.inflight_slots import slot_semaphore
state_dir, counter = Path(sys.argv[1]), Path(sys.argv[2])
sem = slot_semaphore(state_dir, "k", 4)

def bump(delta):
    with open(counter, "r+") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        data = json.load(fh)
        data["now"] += delta
        data["max"] = max(data["max"], data["now"])
        data["total"] += delta > 0
        fh.seek(0); fh.truncate(); json.dump(data, fh)

def work():
    for _ in range(10):
        with sem:
            bump(1)
            time.sleep(random.uniform(0.005, 0.02))
            bump(-1)

sys.stdin.readline()  # start together
threads = [threading.Thread(target=work) for _ in range(8)]
for t in threads: t.start()
for t in threads: t.join()
"""


def test_slot_semaphore_bounds_threads_of_several_processes(tmp_path: Path) -> None:
    counter = tmp_path / "counter.json"
    counter.write_text(json.dumps({"now": 0, "max": 0, "total": 0}))
    procs = [spawn_python(SLOT_WORKER, str(tmp_path), str(counter)) for _ in range(2)]
    for proc in procs:
        assert proc.stdin is not None
        proc.stdin.write("go\n")
        proc.stdin.flush()
    for proc in procs:
        assert proc.wait(30) == 0
    with open(counter) as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        data = json.load(fh)
    assert data["total"] == 160 and data["now"] == 0
    assert data["max"] == 4, f"never more than 4 holders, and 4 were reached: {data}"


HOLD_SLOTS = """
import sys, time
from pathlib import Path
from folio.gpu.inflight_slots import slot_semaphore
sem = slot_semaphore(Path(sys.argv[1]), "k", 3)
for _ in range(3):
    assert sem.acquire(timeout=5)
print("held", flush=True)
time.sleep(60)
"""


def test_slots_of_a_killed_process_come_free(tmp_path: Path) -> None:
    holder = spawn_python(HOLD_SLOTS, str(tmp_path))
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        sem = slot_semaphore(tmp_path, "k", 3)
        assert not sem.acquire(blocking=False) and not sem.acquire(timeout=0.1)
        holder.send_signal(signal.SIGKILL)
        holder.wait()
        assert all(sem.acquire(timeout=2) for _ in range(3)) and sem.held == 3
        assert not sem.acquire(blocking=False)
        for _ in range(3):
            sem.release()
        with pytest.raises(ValueError):
            sem.release()
    finally:
        holder.kill()
        holder.wait()


def test_slot_semaphore_threads_of_one_process_do_not_share_a_slot(tmp_path: Path) -> None:
    from concurrent.futures import ThreadPoolExecutor

    sem = SlotSemaphore(tmp_path / "slots", 2)
    assert sem.acquire() and sem.acquire()
    with ThreadPoolExecutor(1) as pool:
        assert pool.submit(sem.acquire, True, 0.1).result() is False
        pool.submit(sem.release).result()  # released from another thread, as threading allows
        assert pool.submit(sem.acquire, False).result() is True
    assert sem.held == 2
    sem.release()
    sem.release()
    with pytest.raises(ValueError, match="timeout"):
        sem.acquire(blocking=False, timeout=1)
    fd = os.open(tmp_path / "slots" / "slot-0", os.O_RDWR)
    try:  # nothing held any more: another open file description can lock every slot
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    finally:
        os.close(fd)


def test_engine_resends_through_a_restart_done_by_the_supervisor(
    state_dir: Path, owner: subprocess.Popen[bytes], tmp_path: Path
) -> None:
    """OpenAIEngine waits out a crash using the endpoint's live ``generation``; here the
    restart happens in another process (the supervisor) and no page is lost."""
    from concurrent.futures import ThreadPoolExecutor

    from PIL import Image

    from folio.engines.openai_engine import OpenAIEngine
    from folio.models import PagePrep
    from folio.settings.presets import get_preset

    image = tmp_path / "p.png"
    Image.new("RGB", (400, 518), "white").save(image)
    page = PagePrep(index=0, width_pt=612, height_pt=792, image_path=str(image))
    marker = tmp_path / "died"
    spec = make_spec(fake_cmd("--delay", "0.1", "--die-on", "4", "--die-marker", str(marker)))
    with acquire(spec, state_dir=state_dir, owner_pid=owner.pid) as endpoint:
        engine = OpenAIEngine(endpoint=endpoint, preset=get_preset("generic"), max_retries=1,
                              backoff_s=0.05)
        try:
            with ThreadPoolExecutor(4) as pool:
                outs = list(pool.map(lambda _: engine.recognize(page, 0), range(12)))
        finally:
            engine.close()
        assert marker.exists(), "the server crashed mid-run"
        assert all(out.blocks for out in outs) and len(outs) == 12
        assert endpoint.generation == 2 and endpoint.restarts == 1


def test_threads_beyond_the_slots_wait_without_polling(tmp_path: Path) -> None:
    """A run keeps more page threads than slots: those beyond the slots sleep on this
    process's own bound until one frees, instead of scanning every slot file every few
    milliseconds (with 256 slots, 64 such threads took more than a core of the GIL)."""
    sem = SlotSemaphore(tmp_path / "slots", 2)
    scans = 0
    real_try_all = sem._try_all

    def counted() -> int | None:
        nonlocal scans
        scans += 1
        return real_try_all()

    sem._try_all = counted  # type: ignore[method-assign]
    assert sem.acquire() and sem.acquire()
    done: list[int] = []
    lock = threading.Lock()

    def work(n: int) -> None:
        with sem:
            with lock:
                done.append(n)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(10)]
    for t in threads:
        t.start()
    time.sleep(0.3)
    assert scans == 2 and not done, "the waiting threads scanned the slot files"
    sem.release()
    sem.release()
    for t in threads:
        t.join(10)
    assert sorted(done) == list(range(10)) and sem.held == 0
    # failed tries give their place back: the slots are all usable afterwards
    assert sem.acquire() and sem.acquire() and not sem.acquire(timeout=0.05)
    assert not sem.acquire(blocking=False)
    sem.release()
    sem.release()
    assert sem.acquire(blocking=False) and sem.acquire(blocking=False)
