"""Shared helpers for benchmarks: the corpus, result files (command, commit), process-tree
peak RSS, medians. Host CPU by kind of process is bench/host_cpu.py's."""

from __future__ import annotations

import json
import os
import resource
import shlex
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Self

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "bench" / "results"


def corpus_dir() -> Path:
    """The corpus benchmarks read: FOLIO_CORPUS_DIR, else ../shared/corpus beside the checkout."""
    return Path(os.environ.get("FOLIO_CORPUS_DIR", REPO.parent / "shared" / "corpus"))


def readable_pdfs(folder: Path) -> Iterator[tuple[Path, Any]]:
    """The PDFs under ``folder`` (sorted, so the same ones each run), each with its open
    ``pypdfium2.PdfDocument``; files pdfium cannot open are skipped (malformed files are
    tests/test_corpus.py's business, not a benchmark's)."""
    import pypdfium2 as pdfium

    for pdf in sorted(folder.rglob("*.pdf")):
        try:
            doc = pdfium.PdfDocument(str(pdf))
        except Exception:
            continue
        yield pdf, doc


def command(python: str = ".venv/bin/python", argv: list[str] | None = None) -> str:
    """The command line as run, for a result's ``command``."""
    return " ".join(shlex.quote(a) for a in [python, *(sys.argv if argv is None else argv)])


def git(*args: str, cwd: Path | None = None) -> str:
    """``git ARGS`` in the checkout (or ``cwd``), its output stripped: a result's commit
    (``git("rev-parse", "--short", "HEAD")``) and whether the tree differed from it
    (``git("status", "--porcelain", "--", "folio")``)."""
    return subprocess.run(["git", *args], cwd=cwd or REPO, capture_output=True,
                          text=True).stdout.strip()


def _children(pid: int) -> list[int]:
    kids: list[int] = []
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children") as fh:
                kids += [int(c) for c in fh.read().split()]
    except OSError:
        pass
    return kids


def _rss_kib(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def descendants(pid: int) -> list[int]:
    """Every live process below ``pid`` (not ``pid`` itself)."""
    found: list[int] = []
    stack = _children(pid)
    while stack:
        child = stack.pop()
        if child not in found:
            found.append(child)
            stack += _children(child)
    return found


def tree_cpu_seconds() -> float:
    """CPU seconds of this process, its reaped children (tesseract), and its live
    descendants with what they reaped (the page-worker zygote forks one child per page
    and reaps it itself, so RUSAGE_CHILDREN alone would miss render time)."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    total = own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime
    tick = os.sysconf("SC_CLK_TCK")
    for pid in descendants(os.getpid()):
        try:
            with open(f"/proc/{pid}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
            total += sum(int(v) for v in fields[11:15]) / tick  # utime stime cutime cstime
        except (OSError, IndexError, ValueError):
            pass
    return total


def tree_rss_kib(pid: int) -> int:
    """Resident memory of a process and all its descendants, summed."""
    return sum(_rss_kib(p) for p in [pid, *descendants(pid)])


def run_with_peak_rss(cmd: list[str], *, env: dict[str, str] | None = None,
                      interval: float = 0.05) -> dict[str, Any]:
    """Run a command; sample the summed RSS of its process tree; return peak and seconds."""
    started = time.monotonic()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    peak = 0
    stop = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not stop.is_set():
            peak = max(peak, tree_rss_kib(proc.pid))
            time.sleep(interval)

    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    output, _ = proc.communicate()
    stop.set()
    thread.join()
    return {"returncode": proc.returncode, "seconds": time.monotonic() - started,
            "peak_rss_mib": round(peak / 1024, 1), "output_tail": output[-1500:]}


class Sampling:
    """A sampler on a thread of its own while a ``with`` block runs: a subclass's ``_run``
    samples until ``_stop`` is set (:class:`PeakRss`, bench/gpu_sampler.Sampler)."""

    def __init__(self) -> None:
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


class PeakRss(Sampling):
    """The peak RSS of this process's tree while the ``with`` block runs, sampled on a
    thread every ``interval`` seconds; ``children_only`` leaves out what this process
    held when the block began (a conversion's tree apart from the benchmark itself)."""

    def __init__(self, interval: float = 0.1, *, children_only: bool = False) -> None:
        super().__init__()
        self.interval, self.peak_kib = interval, 0
        self._base = tree_rss_kib(os.getpid()) if children_only else 0

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak_kib = max(self.peak_kib, tree_rss_kib(os.getpid()) - self._base)
            self._stop.wait(self.interval)


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def save(name: str, data: dict[str, Any]) -> Path:
    data = {"command": command(), **data}
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{name}.json"
    path.write_text(json.dumps(data, indent=2) + "\n")
    print(json.dumps(data, indent=2))
    return path
