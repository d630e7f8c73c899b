"""Other converters scored beside folio by ``bench/fidelity.py --peers``.

Each peer runs in a process of its own, started with the interpreter it needs, and
speaks the protocol of ``bench/peers/_common.py`` (one JSON line a document: markdown
per page, optional labelled blocks, CPU seconds of the peer's process tree). So an AGPL
peer (PyMuPDF4LLM) runs only in its own virtualenv's interpreter: neither folio nor this
file imports it. A peer whose interpreter or package is missing is skipped, and the
result says so and why.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

PEERS_DIR = Path(__file__).resolve().parent / "peers"
#: the environment variable naming the peer virtualenv's interpreter
PEER_PYTHON_ENV = "FOLIO_PEER_PYTHON"
SYSTEMS = ("folio", "pymupdf4llm", "pdfium")


@dataclass
class Output:
    """What a system made of one document, as the scorers read it: 1-based page ->
    markdown (None for a page it failed), 1-based page -> (label, text) blocks (folio's
    labels; a peer's own labels mapped onto them), and its page count."""

    pages: dict[int, str | None] = field(default_factory=dict)
    blocks: dict[int, list[tuple[str, str]]] = field(default_factory=dict)
    page_count: int = 0

    def full_text(self) -> str:
        """The whole document's markdown, pages joined by a blank line."""
        return "\n\n".join(t or "" for _, t in sorted(self.pages.items()))


@dataclass(frozen=True)
class PeerSpec:
    """A peer converter: its script under bench/peers, whether it needs the peer
    interpreter (else folio's own), and the settings it runs with and why."""

    name: str
    script: str
    needs_peer_python: bool
    license: str
    settings: dict[str, dict[str, str]]


PEERS: dict[str, PeerSpec] = {
    "pymupdf4llm": PeerSpec(
        "pymupdf4llm", "pymupdf4llm_markdown.py", True,
        "AGPL-3.0 (PyMuPDF, pymupdf4llm, pymupdf-layout): benchmark-only, own interpreter",
        {
            "layout": {"value": "pymupdf-layout active (import pymupdf.layout before "
                                "pymupdf4llm; pymupdf4llm 2.x activates it whenever it imports)",
                       "why": "its layout model (GNN) is PyMuPDF4LLM's best path: "
                              "headings, tables, reading order, header/footer classes"},
            "to_markdown": {"value": "header=False, footer=False, page_chunks=True",
                            "why": "running headers and footers left out, as a RAG user "
                                   "wants them and as folio does; page_chunks gives one "
                                   "markdown a page so the per-page tests read each page"},
            "ocr": {"value": "its default (use_ocr=True: its OCR-decision model picks "
                             "pages; RapidOCR when installed, as in requirements-peers.txt)",
                    "why": "the peer's own default OCR, so scanned pages have text"},
            "tables": {"value": "its default (markdown pipe tables)",
                       "why": "the scorers read HTML and pipe tables alike"},
            "threads": {"value": "its defaults (onnxruntime picks its thread count)",
                        "why": "as a user runs it; CPU seconds count every thread"},
        }),
    "pdfium": PeerSpec(
        "pdfium", "pdfium_text.py", False,
        "pypdfium2 (Apache-2.0/BSD-3-Clause), folio's own dependency",
        {"text": {"value": "pypdfium2 get_text_range per page, pages joined",
                  "why": "the text layer alone, with no layout, OCR or labels: the floor"}}),
}


def peer_python(option: str | None) -> str | None:
    """The peer virtualenv's interpreter: ``--peer-python``, else $FOLIO_PEER_PYTHON."""
    return option or os.environ.get(PEER_PYTHON_ENV) or None


@dataclass
class PeerRun:
    """One peer's run over the documents: ``status`` "ran" or "skipped" (``reason``)."""

    name: str
    status: str
    reason: str = ""
    python: str = ""
    description: dict[str, Any] = field(default_factory=dict)
    records: dict[str, dict[str, Any]] = field(default_factory=dict)  # pdf path -> line
    process_cpu_seconds: float = 0.0
    wall_seconds: float = 0.0
    exit_code: int | None = None
    log_tail: str = ""
    warm_up: dict[str, Any] = field(default_factory=dict)


def _tail(text: str, n: int = 1500) -> str:
    return text[-n:]


def run_peer(spec: PeerSpec, pdfs: list[Path], *, python: str | None, workdir: Path,
             timeout: float = 7200.0, warm_up: Path | None = None) -> PeerRun:
    """Run one peer over ``pdfs`` in a child process; never raises on the peer's
    failures (a missing interpreter or package: skipped; a crash: the documents it did
    not finish have no record, the log's tail is kept)."""
    exe = python if spec.needs_peer_python else sys.executable
    if not exe:
        return PeerRun(spec.name, "skipped",
                       f"no interpreter for {spec.name}: pass --peer-python or set "
                       f"{PEER_PYTHON_ENV} to a virtualenv with bench/requirements-peers.txt")
    if not Path(exe).is_file():
        return PeerRun(spec.name, "skipped", f"peer interpreter {exe} does not exist", exe)
    script = str(PEERS_DIR / spec.script)
    check = subprocess.run([exe, script, "--check"], capture_output=True, text=True,
                           timeout=600)
    if check.returncode != 0:
        return PeerRun(spec.name, "skipped",
                       f"{spec.name} cannot run in {exe} (exit {check.returncode}): "
                       + (check.stderr.strip().splitlines() or ["no message"])[-1], exe,
                       log_tail=_tail(check.stderr))
    lines = [ln for ln in check.stdout.splitlines() if ln.strip().startswith("{")]
    description = json.loads(lines[-1]) if lines else {}
    out = workdir / f"{spec.name}.jsonl"
    log = workdir / f"{spec.name}.log"
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.monotonic()
    with open(log, "w") as log_fh:
        try:
            extra = ["--warm-up", str(warm_up)] if warm_up is not None else []
            proc = subprocess.run([exe, script, "--out", str(out), *extra, *map(str, pdfs)],
                                  stdout=log_fh, stderr=subprocess.STDOUT, timeout=timeout)
            code: int | None = proc.returncode
        except subprocess.TimeoutExpired:
            code = None
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    records = {}
    warm: dict[str, Any] = {}
    if out.is_file():
        for line in out.read_text().splitlines():
            if line.strip():
                rec = json.loads(line)
                if "warm_up" in rec:
                    warm = rec
                else:
                    records[rec["source"]] = rec
    run = PeerRun(spec.name, "ran", python=exe, description=description, records=records,
                  process_cpu_seconds=round((after.ru_utime + after.ru_stime)
                                            - (before.ru_utime + before.ru_stime), 2),
                  wall_seconds=round(time.monotonic() - started, 1), exit_code=code,
                  log_tail=_tail(log.read_text(errors="replace")), warm_up=warm)
    if code != 0:
        run.reason = ("timed out" if code is None else f"exit {code}") + \
            f" after {len(records)} of {len(pdfs)} documents"
    return run


def peer_output(record: dict[str, Any] | None) -> Output | None:
    """A peer's JSON line as the scorers read it; None when it failed the document."""
    if record is None or record.get("error"):
        return None
    out = Output(page_count=len(record["pages"]))
    for page in record["pages"]:
        out.pages[int(page["page"])] = page["markdown"]
        out.blocks[int(page["page"])] = [(b[0], b[1]) for b in page.get("blocks") or []]
    return out


#: side-by-side rows: (row name, summary key path, how to read it)
SIDE_BY_SIDE_ROWS: list[tuple[str, tuple[str, ...], str]] = [
    ("olmOCR tests pass rate (math excluded)", ("olmocr_tests_pass_rate",), "higher"),
    ("olmOCR tests counted", ("olmocr_tests_counted",), ""),
    ("table cell recall (docling tables, cell at its row/col)",
     ("table_structure", "cell_position_agreement"), "higher"),
    ("tables detected (share of docling tables)", ("table_structure", "detected_rate"), "higher"),
    ("table cell recall incl. table of contents",
     ("table_structure", "including_document_index", "cell_position_agreement"), "higher"),
    ("header/footer recall (labelled as such)", ("header_footer_recall",), "higher"),
    ("header/footer left in the markdown", ("header_footer_in_markdown",), "lower"),
    ("header/footer (multi-word) left in the markdown",
     ("header_footer_in_markdown_multiword",), "lower"),
    ("word recall born-digital (docling)", ("word_recall_born_digital",), "higher"),
    ("word recall scanned (linn)", ("word_recall_scanned",), "higher"),
    ("word order born-digital", ("sequence_similarity_born_digital",), "higher"),
    ("word order scanned", ("sequence_similarity_scanned",), "higher"),
    ("median CPU s/page (per document: CPU / pages)", ("cpu_seconds_per_page", "median"), "lower"),
    ("CPU s/page overall (total CPU / pages)", ("cpu_seconds_per_page", "per_page_overall"),
     "lower"),
    ("max CPU s/page (the slowest document's mean a page)",
     ("cpu_seconds_per_page", "max_page", "seconds"), "lower"),
    ("slowest document CPU s", ("cpu_seconds_per_page", "slowest_document", "cpu_seconds"),
     "lower"),
    ("documents failed", ("documents_failed_count",), "lower"),
]


def _dig(summary: dict[str, Any], path: tuple[str, ...]) -> Any:
    node: Any = summary
    for key in path:
        if not isinstance(node, dict):
            return None
        node = node.get(key)
    return node


def side_by_side(summaries: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """One row per figure, one column per system that ran; the olmOCR tests by type
    (math left out) as passed/tests; folio's median CPU s/page over each peer's."""
    systems = list(summaries)
    rows = []
    for label, path, better in SIDE_BY_SIDE_ROWS:
        rows.append({"figure": label, "better": better,
                     **{s: _dig(summaries[s], path) for s in systems}})
    types = sorted({t for s in systems for t in summaries[s].get("olmocr_by_type", {})
                    if t != "math"})
    for t in types:
        row: dict[str, Any] = {"figure": f"olmOCR {t} tests passed", "better": "higher"}
        for s in systems:
            v = summaries[s].get("olmocr_by_type", {}).get(t)
            row[s] = f"{v['passed']}/{v['tests']}" if v else None
        rows.append(row)
    ratios = {}
    folio = _dig(summaries.get("folio", {}), ("cpu_seconds_per_page", "median"))
    for s in systems:
        peer = _dig(summaries[s], ("cpu_seconds_per_page", "median"))
        if s != "folio" and folio is not None and peer:
            ratios[f"folio / {s}"] = round(folio / peer, 2)
    return {"systems": systems, "rows": rows, "median_cpu_per_page_ratio": ratios}


def print_side_by_side(table: dict[str, Any]) -> None:
    systems = table["systems"]
    print("\n== side by side ==")
    print(f"{'figure':58}" + "".join(f"{s:>13}" for s in systems))
    for row in table["rows"]:
        cells = "".join(f"{'-' if row[s] is None else row[s]!s:>13}" for s in systems)
        print(f"{row['figure'][:58]:58}{cells}")
    for k, v in table["median_cpu_per_page_ratio"].items():
        print(f"  median CPU s/page {k}: {v}x")
