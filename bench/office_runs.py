"""The readers bench/office_structure.py compares, each run on one file in a process of
its own: folio as a user runs it (``folio ingest FOLDER --out OUT``, its defaults) and the
anchors (bench/office_anchor.py in the anchors' virtualenv). Each run's CPU seconds are the
process's and every descendant it reaped (``os.wait4``'s usage of that one child: the same
figure ``getrusage(RUSAGE_CHILDREN)`` gives around it, and right while others run beside
it). What each reader wrote is read back here: folio's document.json blocks, document.md
and chunks (the LanceDB table under OUT); an anchor's markdown.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from bench.office_markdown import OutTable, Structure, html_table, parse_markdown
from bench.office_truth import Heading, ListItem

REPO = Path(__file__).resolve().parent.parent
#: one reader's longest run on one file
TIMEOUT_S = 600.0


class Run(BaseModel):
    """One reader's run on one file: what it cost and what it wrote."""

    cpu_s: float
    wall_s: float
    returncode: int
    error: str = ""
    markdown: str = ""
    structure: Structure = Structure()
    #: folio only: the chunks' texts (None for an anchor) and the document's outcome
    chunks: list[str] | None = None
    outcome: str = ""
    #: an anchor's own report (its version, the conversion's CPU without its imports)
    detail: dict[str, Any] = {}


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def timed(argv: list[str], env: dict[str, str] | None = None,
          timeout_s: float = TIMEOUT_S) -> tuple[float, float, int, str]:
    """Run ``argv`` in a process group of its own: (CPU s of it and what it reaped, wall s,
    return code, its output's tail). Killed whole past ``timeout_s``."""
    started = time.monotonic()
    with tempfile.TemporaryFile() as log:
        process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL, env=env, start_new_session=True)
        timer = threading.Timer(timeout_s, _kill_group, (process.pid,))
        timer.start()
        try:
            _, status, usage = os.wait4(process.pid, 0)  # this child's usage alone
        finally:
            timer.cancel()
        process.returncode = os.waitstatus_to_exitcode(status)
        log.seek(0)
        output = log.read()[-4000:].decode("utf-8", "replace")
    return (usage.ru_utime + usage.ru_stime, time.monotonic() - started, process.returncode,
            output)


def anchor_run(python: str, anchor: str, source: Path, work: Path) -> Run:
    target = work / f"{anchor}.md"
    cpu, wall, code, output = timed([python, str(REPO / "bench" / "office_anchor.py"), anchor,
                                     str(source), str(target)])
    lines = [line for line in output.splitlines() if line.startswith("{")]
    detail = json.loads(lines[-1]) if lines else {}
    markdown = target.read_text(encoding="utf-8") if target.is_file() else ""
    error = detail.get("error", "") or ("" if code == 0 else output[-500:])
    return Run(cpu_s=round(cpu, 2), wall_s=round(wall, 2), returncode=code, error=error,
               markdown=markdown, structure=parse_markdown(markdown), detail=detail)


def folio_structure(document: dict[str, Any]) -> Structure:
    """Headings, list items and tables from folio's blocks: headings' and items' ``level``,
    items' ``marker``, tables' ``cells`` (else their HTML), a sheet's name from
    ``location`` as the group of its tables."""
    found = Structure()
    for page in document.get("pages", []):
        for block in page.get("blocks", []):
            label, content = block.get("label"), str(block.get("content", ""))
            if label in ("Title", "Section-Header"):
                found.headings.append(Heading(text=content, level=block.get("level") or 1))
            elif label == "List-Item":
                marker = block.get("marker")
                found.list_items.append(ListItem(text=content, level=block.get("level") or 1,
                                                 ordered=marker not in (None, "-")))
            elif label == "Table":
                location = block.get("location") or ""
                group = location.split("!", 1)[0] if "!" in location else None
                table = (OutTable(cells=block["cells"]) if block.get("cells")
                         else html_table(content))
                found.tables.append(table.model_copy(update={"group": group}))
    return found


def folio_chunks(out: Path) -> list[str] | None:
    """The chunks folio wrote to its default store (LanceDB under OUT), each as its
    heading path and its text: a retriever sees both (a heading's words are in the path,
    not in the text)."""
    table_dir = out / "_vectors"
    if not table_dir.is_dir():
        return None
    import lancedb

    table = lancedb.connect(str(table_dir)).open_table("chunks")
    rows = table.to_arrow().select(["headings", "text"]).to_pylist()
    return ["\n".join([*(row["headings"] or []), str(row["text"])]) for row in rows]


def folio_run(folio: str, source: Path, work: Path) -> Run:
    """``folio ingest`` of a folder holding ``source`` alone, as a user runs it."""
    folder, out = work / "in", work / "out"
    folder.mkdir(parents=True)
    shutil.copy2(source, folder / source.name)
    report = work / "report.json"
    cpu, wall, code, output = timed([folio, "ingest", str(folder), "--out", str(out),
                                     "--report", str(report), "--quiet"])
    documents = list(out.glob("*/document.json"))
    if not documents:
        return Run(cpu_s=round(cpu, 2), wall_s=round(wall, 2), returncode=code,
                   error=output[-500:] or "no document.json")
    document = json.loads(documents[0].read_text(encoding="utf-8"))
    markdown_path = documents[0].parent / "document.md"
    markdown = markdown_path.read_text(encoding="utf-8") if markdown_path.is_file() else ""
    return Run(cpu_s=round(cpu, 2), wall_s=round(wall, 2), returncode=code,
               markdown=markdown, structure=folio_structure(document),
               chunks=folio_chunks(out), outcome=str(document.get("outcome", "")),
               error="" if document.get("outcome") == "ok" else str(document.get("reason")))


def server_cpu_s(python: Path = REPO / ".venv" / "bin" / "python") -> float:
    """CPU seconds so far of the local Prefect servers this checkout's folio started
    (``folio ingest`` starts one that outlives it, so no run's own usage holds it): the
    processes run by ``python`` (not another checkout's) whose command line names
    folio_prefect.deployments.local_server, and everything below them."""
    marker = str(python).encode()
    tick = os.sysconf("SC_CLK_TCK")
    stats: dict[int, tuple[int, float]] = {}
    servers: set[int] = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        pid = int(entry.name)
        stats[pid] = (int(fields[1]), sum(int(v) for v in fields[11:15]) / tick)
        if b"folio_prefect.deployments.local_server" in cmdline and cmdline.startswith(marker):
            servers.add(pid)
    total = 0.0
    for pid, (_, cpu) in stats.items():
        ancestor = pid
        while ancestor > 1 and ancestor not in servers:
            ancestor = stats.get(ancestor, (0, 0.0))[0]
        if ancestor in servers:
            total += cpu
    return round(total, 2)
