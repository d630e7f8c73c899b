"""The page-worker zygote: children are forked from it, and nothing outlives its owner."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from folio import samples
from folio.pdf import zygote
from folio.pdf.page_worker import WorkerJob, prepare_pages, probe
from folio.settings.config import RenderSettings, RouteSettings

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def pdf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("zygote")
    return samples.write_long_pdf(root / "six.pdf", 6)


@pytest.fixture(autouse=True)
def fork_mode(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(zygote.MODE_ENV, "fork")


def _ppid(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("PPid:"):
            return int(line.split()[1])
    raise AssertionError(f"no PPid for {pid}")


def _gone(pid: int, within_s: float) -> bool:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        stat = Path(f"/proc/{pid}/stat")
        if stat.exists() and stat.read_text().split(") ")[1].startswith("Z"):
            return True  # a zombie: dead, waiting for its parent to reap it
        time.sleep(0.05)
    return False


def _job(pdf: Path, out: Path, pages: list[int]) -> WorkerJob:
    return WorkerJob(pdf=pdf, pages=pages, out_dir=out,
                     render_settings=RenderSettings(longest_side_px=300, min_dpi=20, min_text_px=4),
                     route_settings=RouteSettings(), timeout_s=60, memory_mb=1024)


def test_children_are_forked_by_the_zygote_in_process_groups_of_their_own(
    pdf: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert probe(pdf, None, timeout_s=30, memory_mb=1024).page_count == 6
    monkeypatch.setenv("FOLIO_TEST_HANG_ON_PAGE", "1")
    pages = prepare_pages(_job(pdf, tmp_path, [0, 1]))
    first = next(pages)  # page 0 arrived; the child now hangs before page 1
    assert first.index == 0 and first.error is None
    worker = zygote.current()
    assert worker is not None and worker.alive()
    children = [int(p) for p in os.listdir("/proc") if p.isdigit() and _is_child_of(int(p), worker._proc.pid)]
    assert len(children) == 1
    child = children[0]
    # a group of its own (killed with it), in this process's session: a session of its
    # own would be a scheduler autogroup of its own, as heavy as a whole vLLM server
    assert os.getpgid(child) == child and os.getsid(child) == os.getsid(0)
    assert os.getpriority(os.PRIO_PROCESS, child) == os.getpriority(os.PRIO_PROCESS, 0)
    pages.close()  # the consumer stops: the child is killed with its group
    assert _gone(child, within_s=5)


def _autogroup_nice(pid: int) -> int | None:
    """The nice value of ``pid``'s scheduler autogroup; None where there are none."""
    try:
        if Path("/proc/sys/kernel/sched_autogroup_enabled").read_text().strip() != "1":
            return None
        return int(Path(f"/proc/{pid}/autogroup").read_text().split()[-1])
    except (OSError, ValueError, IndexError):
        return None


def test_children_at_a_nice_value_share_one_session_that_yields_the_cpu(
    pdf: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ours = os.getpriority(os.PRIO_PROCESS, 0)
    assert probe(pdf, None, timeout_s=30, memory_mb=1024, nice=ours + 7).page_count == 6
    monkeypatch.setenv("FOLIO_TEST_HANG_ON_PAGE", "1")
    job = _job(pdf, tmp_path, [0, 1]).model_copy(update={"nice": ours + 7})
    pages = prepare_pages(job)
    assert next(pages).index == 0  # the child now hangs before page 1
    worker = zygote.current(ours + 7)
    assert worker is not None and worker is not zygote.current(0)
    child = _wait_for_child(worker._proc.pid)
    # the zygote leads a session of its own (one autogroup for all page workers, not one
    # each); the child is in it, in a group of its own, at the nice value asked for
    assert os.getsid(worker._proc.pid) == worker._proc.pid != os.getsid(0)
    assert os.getsid(child) == worker._proc.pid and os.getpgid(child) == child
    assert os.getpriority(os.PRIO_PROCESS, child) == ours + 7
    group = _autogroup_nice(child)
    if group is not None:  # this kernel has autogroups: the session's yields too
        assert group == ours + 7 and _autogroup_nice(os.getpid()) != group
    pages.close()
    assert _gone(child, within_s=5)


def test_exec_mode_children_take_their_nice_value_themselves(
    pdf: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(zygote.MODE_ENV, "exec")
    monkeypatch.setenv("FOLIO_TEST_HANG_ON_PAGE", "1")
    ours = os.getpriority(os.PRIO_PROCESS, 0)
    pages = prepare_pages(_job(pdf, tmp_path, [0, 1]).model_copy(update={"nice": ours + 5}))
    assert next(pages).index == 0  # the child is past its start and hangs before page 1
    children = [int(p) for p in os.listdir("/proc") if p.isdigit() and _is_child_of(int(p), os.getpid())
                and b"folio.pdf.worker_child" in Path(f"/proc/{p}/cmdline").read_bytes()]
    assert len(children) == 1
    # an interpreter started in our session (no zygote): its own nice value only
    assert os.getpriority(os.PRIO_PROCESS, children[0]) == ours + 5
    assert os.getsid(children[0]) == os.getsid(0)
    pages.close()
    assert _gone(children[0], within_s=5)


def _is_child_of(pid: int, parent: int) -> bool:
    try:
        return _ppid(pid) == parent
    except (OSError, AssertionError):
        return False


def test_the_environment_and_directory_of_the_moment_reach_the_child(
    pdf: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    probe(pdf, None, timeout_s=30, memory_mb=1024)  # the zygote exists before the change
    monkeypatch.setenv("FOLIO_TEST_CRASH_ON_PAGE", "2")
    monkeypatch.chdir(tmp_path)
    preps = list(prepare_pages(_job(Path(os.path.relpath(pdf, tmp_path)), Path("out"), [0, 1, 2, 3])))
    assert [p.index for p in preps] == [0, 1, 2, 3]
    assert preps[2].error == "worker-crashed: page 2 killed the page worker (signal SIGABRT)"
    assert (tmp_path / "out" / "p00000.png").exists()


def test_a_killed_zygote_is_replaced(pdf: Path) -> None:
    probe(pdf, None, timeout_s=30, memory_mb=1024)
    first = zygote.current()
    assert first is not None
    os.kill(first._proc.pid, signal.SIGKILL)
    first._proc.wait()
    for _ in range(3):  # every probe still answers, whichever way its child starts
        assert probe(pdf, None, timeout_s=30, memory_mb=1024).page_count == 6
    again = zygote.current()
    assert again is not None and again is not first and again.alive()


def test_exec_mode_starts_no_zygote(pdf: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    zygote.shutdown()
    monkeypatch.setenv(zygote.MODE_ENV, "exec")
    assert probe(pdf, None, timeout_s=30, memory_mb=1024).page_count == 6
    assert zygote.current() is None


@pytest.mark.parametrize("nice", [0, 10], ids=["our-session", "session-of-its-own"])
def test_when_the_owner_dies_the_zygote_and_its_children_die(
    pdf: Path, tmp_path: Path, nice: int
) -> None:
    script = textwrap.dedent(f"""
        import os, sys, threading
        sys.path.insert(0, {str(ROOT)!r})
        os.environ["FOLIO_TEST_HANG_ON_PAGE"] = "0"
        from pathlib import Path
        from folio.settings.config import RenderSettings, RouteSettings
        from folio.pdf import zygote
        from folio.pdf.page_worker import WorkerJob, prepare_pages
        job = WorkerJob(pdf=Path({str(pdf)!r}), pages=[0], out_dir=Path({str(tmp_path)!r}),
                        render_settings=RenderSettings(), route_settings=RouteSettings(),
                        timeout_s=600, nice={nice})
        threading.Thread(target=lambda: list(prepare_pages(job)), daemon=True).start()
        while zygote.current({nice}) is None:
            pass
        print(zygote.current({nice})._proc.pid, flush=True)
        threading.Event().wait()
    """)
    owner = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True,
                             env={**os.environ, zygote.MODE_ENV: "fork"})
    try:
        assert owner.stdout is not None
        zygote_pid = int(owner.stdout.readline())
        child = _wait_for_child(zygote_pid)
        owner.kill()  # SIGKILL: no atexit, no cleanup of any kind
        owner.wait()
        assert _gone(zygote_pid, within_s=10)
        assert _gone(child, within_s=10)
    finally:
        if owner.poll() is None:
            owner.kill()


def _wait_for_child(parent: int) -> int:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        children = [int(p) for p in os.listdir("/proc") if p.isdigit() and _is_child_of(int(p), parent)]
        if children:
            return children[0]
        time.sleep(0.05)
    raise AssertionError("the zygote forked no child")


def test_concurrent_spawns_from_many_threads(pdf: Path) -> None:
    answers: list[int] = []

    def one() -> None:
        answers.append(probe(pdf, None, timeout_s=30, memory_mb=1024).page_count)

    threads = [threading.Thread(target=one) for _ in range(24)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert answers == [6] * 24
