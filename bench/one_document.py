"""One document's latency through the three ways a RAG job asks for it (issue 57): ``folio
trigger --wait`` on a warm deployment, a ``folio.ingest.requested`` event (``folio trigger
--event --wait``), and ``folio ingest`` on the CLI with the local server warm.

Documents (a new one per run, so nothing is cached; made here, not taken from the corpus,
so the figures say what any such document costs):

- ``pdf``: a one-page born-digital PDF (Ghostscript-made text);
- ``scan``: the same kind of page as a 200-dpi image-only PDF (Tesseract reads it);
- ``docx``: a one-page Word document (LibreOffice turns it into a PDF first);
- ``pdf10``: a ten-page born-digital PDF.

Stack: a real ``prefect server start`` (own home, free port), the ``document`` deployment
from prefect.yaml deployed with the CLI, one process worker on ``folio-cpu`` started as the
README says, run from the repository root (so it reads the repository's Prefect settings, as
a team following the README does). The worker's poll interval is whatever that gives, unless
``--query-seconds`` sets ``PREFECT_WORKER_QUERY_SECONDS`` (listed in the result).

Each trigger or event run is split by the flow run's own state history (server timestamps)
and by the report the run returns (``timing``, with the finishing stages' spans):

- ``trigger_start``: the command started until the server created the run (the CLI
  process's own start and imports, the request);
- ``poll``: created until a worker took it (Pending): the worker's poll;
- ``flow_start``: taken until the flow's body began (a new process: Python, Prefect, the
  flow's modules, the pull step, the engine's Running state);
- ``to_first_page`` / ``pages``: the flow's body until the first page, and from it to the
  last (fetch, probe, conversion, then the pages);
- ``finishing``: the last page until the flow's body ended (validation, embedding,
  outputs, the vector write, the done marker: each stage's median span is listed too);
- ``run_end``: the body's end until the run's final state;
- ``after_end``: the run's final state until the command returned (waiting for the run's
  end and for the document's done event).

    .venv/bin/python bench/one_document.py --label after --runs 20
        # -> bench/results/one_document.json (one entry per --label)
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
import zipfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

DOCS = ("pdf", "scan", "docx", "pdf10")
PATHS = ("trigger", "event", "cli")
RESULT = ROOT / "bench" / "results" / "one_document.json"

_DOCX_TYPES = (
    '<?xml version="1.0" encoding="UTF-8" standalone="yes"?><Types xmlns="http://schemas.'
    'openxmlformats.org/package/2006/content-types"><Default Extension="rels" ContentType='
    '"application/vnd.openxmlformats-package.relationships+xml"/><Default Extension="xml" '
    'ContentType="application/xml"/><Override PartName="/word/document.xml" ContentType='
    '"application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"/>'
    '</Types>')
_DOCX_RELS = (
    '<?xml version="1.0" encoding="UTF-8" standalone="yes"?><Relationships xmlns="http://'
    'schemas.openxmlformats.org/package/2006/relationships"><Relationship Id="rId1" Type='
    '"http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument" '
    'Target="word/document.xml"/></Relationships>')


def write_docx(out: Path, paragraphs: list[str]) -> Path:
    """A minimal one-page Word document: a heading and a few paragraphs."""
    ns = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
    heading = '<w:pPr><w:pStyle w:val="Heading1"/></w:pPr>'
    body = "".join(
        f'<w:p>{heading if n == 0 else ""}<w:r><w:t xml:space="preserve">{text}</w:t></w:r></w:p>'
        for n, text in enumerate(paragraphs))
    document = (f'<?xml version="1.0" encoding="UTF-8" standalone="yes"?>'
                f'<w:document xmlns:w="{ns}"><w:body>{body}</w:body></w:document>')
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("[Content_Types].xml", _DOCX_TYPES)
        zf.writestr("_rels/.rels", _DOCX_RELS)
        zf.writestr("word/document.xml", document)
    return out


def make_document(kind: str, work: Path, seed: int) -> Path:
    from folio.samples import report_pages, sentences, write_scanned_pdf, write_text_pdf

    if kind == "pdf":
        return write_text_pdf(work / f"pdf-{seed}.pdf", report_pages(seed=seed, n=1))
    if kind == "pdf10":
        return write_text_pdf(work / f"pdf10-{seed}.pdf", report_pages(seed=seed, n=10))
    if kind == "scan":
        text = write_text_pdf(work / f"scan-src-{seed}.pdf", report_pages(seed=seed, n=1))
        return write_scanned_pdf(work / f"scan-{seed}.pdf", text, seed=seed)
    if kind == "docx":
        words = sentences(seed, 12).split(". ")
        paragraphs = [f"Quarterly memo {seed}"] + [". ".join(words[i:i + 3]) + "."
                                                   for i in range(0, len(words), 3)]
        return write_docx(work / f"memo-{seed}.docx", paragraphs)
    raise ValueError(kind)


# --- what the server and the run say -----------------------------------------------------


def run_facts(api_url: str, flow_run_id: str) -> dict[str, Any]:
    """The first time (unix) the run entered each state type, and its report's timing."""
    from prefect.client.orchestration import get_client
    from prefect.settings import PREFECT_API_URL, temporary_settings

    from folio_prefect.deployments.runs import run_report

    with temporary_settings({PREFECT_API_URL: api_url}), get_client(sync_client=True) as c:
        run = c.read_flow_run(uuid.UUID(flow_run_id))
        states = c.read_flow_run_states(uuid.UUID(flow_run_id))
        seen: dict[str, float] = {"created": run.created.timestamp() if run.created else 0.0}
        for state in sorted(states, key=lambda s: s.timestamp):
            seen.setdefault(state.type.value, state.timestamp.timestamp())
        report = run_report(run) or {}
    return {"states": seen, "timing": report.get("timing") or {}}


def stages(started: float, ended: float, facts: dict[str, Any]) -> dict[str, float]:
    """The run split into the stages listed in the module's docstring (seconds)."""
    st, timing = facts["states"], facts["timing"]
    final = next((st[k] for k in ("COMPLETED", "FAILED", "CRASHED") if k in st), ended)
    body = timing.get("started_unix") or st.get("RUNNING", final)
    out = {"trigger_start": st["created"] - started,
           "poll": st.get("PENDING", st["created"]) - st["created"],
           "flow_start": body - st.get("PENDING", st["created"])}
    first, last, total = (timing.get(k) for k in ("first_page_s", "last_page_s", "seconds"))
    if total is not None:
        first = total if first is None else first
        last = first if last is None else last
        out |= {"to_first_page": first, "pages": last - first, "finishing": total - last,
                "run_end": final - (body + total)}
        for stage, span in (timing.get("finishing") or {}).items():
            out[f"stage.{stage}"] = float(span["median_s"])
    out["after_end"] = ended - final
    return {k: round(v, 3) for k, v in out.items()}


# --- one run of each path ----------------------------------------------------------------


def one_run(path: str, env: dict[str, str], folio: Path, doc: Path, out: Path,
            api_url: str) -> dict[str, Any]:
    load = os.getloadavg()[0]
    argv = {"trigger": ["trigger", str(doc), "--out", str(out), "--wait"],
            "event": ["trigger", str(doc), "--out", str(out), "--event", "--wait"],
            "cli": ["ingest", str(doc), "--out", str(out)]}[path]
    started = time.time()
    proc = subprocess.run([str(folio), *argv], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=600, check=False)
    ended = time.time()
    row: dict[str, Any] = {"load_1min": round(load, 2), "wall_s": round(ended - started, 3),
                           "exit": proc.returncode}
    if proc.returncode != 0:
        row["stderr"] = proc.stderr[-800:]
        return row
    if path != "cli":
        lines = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
        run_id = next((d.get("flow_run_id") for d in reversed(lines) if d.get("flow_run_id")),
                      None)
        if run_id:
            row["stages"] = stages(started, ended, run_facts(api_url, run_id))
    return row


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    ok = [r for r in rows if r["exit"] == 0]
    walls = sorted(r["wall_s"] for r in ok)
    out: dict[str, Any] = {"runs": len(rows), "failed": len(rows) - len(ok)}
    if walls:
        out |= {"p50_s": round(statistics.median(walls), 2),
                "p95_s": round(walls[min(len(walls) - 1, round(0.95 * (len(walls) - 1)))], 2),
                "load_1min_median": round(statistics.median(r["load_1min"] for r in ok), 2)}
        keys = sorted({k for r in ok for k in r.get("stages", {})})
        if keys:
            out["stages_median_s"] = {
                k: round(statistics.median(r["stages"][k] for r in ok if k in r.get("stages", {})),
                         3) for k in keys}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--label", required=True, help="the result's key (before, after, ...)")
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--docs", nargs="+", default=list(DOCS), choices=DOCS)
    ap.add_argument("--paths", nargs="+", default=list(PATHS), choices=PATHS)
    ap.add_argument("--query-seconds", type=float, default=None,
                    help="PREFECT_WORKER_QUERY_SECONDS for the worker (default: unset)")
    ap.add_argument("--note", default="", help="what this label's code is")
    ap.add_argument("--out", type=Path, default=RESULT)
    args = ap.parse_args()
    from bench._measure import command, git
    from tests.prefect_stack import POOL, _spawn, start_prefect_stack

    folio = Path(sys.executable).parent / "folio"
    entry: dict[str, Any] = {
        "command": command(argv=sys.argv), "commit": git("rev-parse", "--short", "HEAD"),
        "dirty": bool(git("status", "--porcelain", "--", "folio", "folio_prefect")),
        "note": args.note, "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "machine": f"{os.cpu_count()} cores, shared with other engineers' test runs",
        "worker_query_seconds": args.query_seconds, "results": {}}
    results = json.loads(args.out.read_text()) if args.out.exists() else {}
    with tempfile.TemporaryDirectory(prefix="folio-one-doc-") as tmp:
        work = Path(tmp)
        (work / "home").mkdir()
        stack = start_prefect_stack(work / "home", deployments=("document",), worker=False)
        try:
            env = {k: v for k, v in stack.env.items() if k != "PREFECT_WORKER_QUERY_SECONDS"}
            env.pop("OMP_THREAD_LIMIT", None)  # the user's defaults
            if args.query_seconds is not None:
                env["PREFECT_WORKER_QUERY_SECONDS"] = str(args.query_seconds)
            _spawn(stack, "worker", sys.executable, "-m", "prefect", "worker", "start",
                   "--pool", POOL, "--type", "process", env=env)
            cli_env = {k: v for k, v in env.items() if not k.startswith("PREFECT_API")}
            cli_env["FOLIO_PREFECT_HOME"] = str(work / "cli-home")  # stopped in finally
            # warm: the deployment's first run and the CLI's local server
            first = make_document("pdf", work, 9999)
            one_run("trigger", env, folio, first, work / "out-warm", stack.api_url)
            one_run("cli", cli_env, folio, first, work / "out-warm-cli", stack.api_url)
            seed = 100
            for kind in args.docs:
                for path in args.paths:
                    rows = []
                    for _ in range(args.runs):
                        seed += 1
                        doc = make_document(kind, work, seed)
                        rows.append(one_run(path, cli_env if path == "cli" else env, folio, doc,
                                            work / f"out-{path}", stack.api_url))
                        print(kind, path, json.dumps(rows[-1]), flush=True)
                    entry["results"][f"{kind}/{path}"] = summary(rows) | {"rows": rows}
                    results[args.label] = entry
                    args.out.write_text(json.dumps(results, indent=1) + "\n")
        finally:
            subprocess.run([sys.executable, "-m", "folio_prefect.deployments.local_server",
                            "--stop"], cwd=ROOT, env={**os.environ, "FOLIO_PREFECT_HOME": str(
                                work / "cli-home")}, capture_output=True, check=False, timeout=60)
            for proc in stack.processes[1:]:
                if proc.poll() is None:
                    os.killpg(proc.pid, signal.SIGTERM)
            stack.stop()
    entry["finished"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    results[args.label] = entry
    args.out.write_text(json.dumps(results, indent=1) + "\n")
    print(json.dumps({k: {kk: vv for kk, vv in v.items() if kk != "rows"}
                      for k, v in entry["results"].items()}, indent=1))


if __name__ == "__main__":
    main()
