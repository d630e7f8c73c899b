"""One document's latency through the three ways a RAG job asks for it (issue 57): ``folio
trigger --wait`` on a warm deployment, a ``folio.ingest.requested`` event (``folio trigger
--event --wait``), and ``folio ingest`` on the CLI with the local server warm.

Documents (a new one per run, so nothing is cached; made here, not taken from the corpus,
so the figures say what any such document costs):

- ``pdf``: a one-page born-digital PDF (Ghostscript-made text: a title, a heading, three
  paragraphs and a table), read from its text layer;
- ``scan``: the same kind of page as a 200-dpi image-only PDF with scanner noise
  (Tesseract reads it);
- ``docx``: a one-page Word document (a heading and four paragraphs), read natively by
  ``folio/formats/docx_reader.py``: no LibreOffice, no PDF;
- ``pdf10``: a ten-page born-digital PDF of the same pages.

Stack: a real ``prefect server start`` (own home, free port), the ``document`` deployment
from prefect.yaml deployed with the CLI, the pools applied as the README says
(``folio_prefect.deployments.work_pools --apply``: folio-cpu with the cpu profile's
environment; listed in the entry's ``pools``), one process worker on ``folio-cpu`` started
as the README says, run from the repository root (so it reads the repository's Prefect settings,
``prefect.toml``, and prefect.yaml's work-pool command, as a team following the README
does). The user's defaults otherwise: the test stack's thread limit and S3 keys are taken
out of the runs' environment. What still differs from them is listed in the entry's
``settings`` with its reason: ``--query-seconds`` (``PREFECT_WORKER_QUERY_SECONDS``) when
given, and any ``FOLIO_*`` or ``PREFECT_*`` variable of the bench's own environment
(``FOLIO_WARM=0``, say, to measure without the warm process).

Each trigger or event run is split by the flow run's own state history (server timestamps)
and by the report the run returns (``timing``, with the finishing stages' spans):

- ``trigger_start``: the command started until the server created the run (the CLI
  process's own start and imports, the request);
- ``poll``: created until a worker took it (Pending): the worker's poll;
- ``flow_start``: taken until the flow's body began (a flow-run process: Python, Prefect,
  the flow's modules, the pull step, the engine's Running state; forked from the warm
  process where there is one);
- ``to_first_page`` / ``pages``: the flow's body until the first page ended (fetch,
  the Office read or the probe, then the first page; a natively read DOCX, XLSX or PPTX:
  until its read ended), and from it to the last page's end;
- ``finishing``: the last page until the flow's body ended (validation, embedding,
  outputs, the vector write, the done marker);
- ``run_end``: the body's end until the run's final state;
- ``after_end``: the run's final state until the command returned (its wait for the run's
  end and for the document's ``folio.document.indexed`` event);
- ``unaccounted``: the command's wall minus the sum of the stages above. They tile the
  wall, so it is about 0; where a timestamp is missing (no report) the gap shows here.
- ``stage.NAME``: the report's own spans inside the run (``fetch``, ``convert``: the
  Office read, ``probe``, ``validate``, ``embed``, ``vectors``, ``done-marker``; ``finish``
  holds the finishing ones), each run's median span. They overlap the stages above.

The CLI path (``folio ingest``, with ``--report`` beside OUT: listed in ``settings``) is
split by its report into ``cli_start`` (the command's start until the flow's body began:
the process, its imports, the local server, the flow run's start), the body's stages as
above, ``cli_end`` (the body's end until the command returned) and ``unaccounted``. Each cell (document x path) gets
p50 and p95 over its runs, the stages' medians and p95s, and its failures; each label its
``goals``: issue 57 point 2 evaluated, a missed goal naming the stage that holds it.
Percentiles and "pages' own time" are defined in bench/one_document_stats.py.

    .venv/bin/python bench/one_document.py --label after --runs 20
        # -> bench/results/one_document.json (one entry per --label)
    .venv/bin/python bench/one_document.py --compare before after
        # the two labels side by side, printed and saved as the file's "comparison"
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
import zipfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import one_document_stats as stats

if TYPE_CHECKING:
    from tests.prefect_stack import PrefectStack

DOCS = ("pdf", "scan", "docx", "pdf10")
PATHS = ("trigger", "event", "cli")
RESULT = ROOT / "bench" / "results" / "one_document.json"
COMPARISON = "comparison"  # the result file's key for --compare's table (not a label)
RUN_TIMEOUT_S = 600
#: the test stack's settings that are not a user's (a thread limit for the suite, moto's
#: keys), and its 1 s poll: the worker polls as prefect.toml says unless --query-seconds
_REMOVED = {"OMP_THREAD_LIMIT", "FOLIO_S3__ACCESS_KEY_ID", "FOLIO_S3__SECRET_ACCESS_KEY",
            "PREFECT_WORKER_QUERY_SECONDS"}

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


# --- one run of each path ----------------------------------------------------------------


def one_run(path: str, env: dict[str, str], folio: Path, doc: Path, out: Path,
            api_url: str) -> dict[str, Any]:
    """One command, timed; a trigger's or event's run split into its stages. A command
    that fails or runs past RUN_TIMEOUT_S is a row with its exit code (124: timed out)."""
    load = os.getloadavg()[0]
    report = out.with_name(f"{out.name}-report.json")  # the CLI's, beside OUT, not in it
    report.unlink(missing_ok=True)
    argv = {"trigger": ["trigger", str(doc), "--out", str(out), "--wait"],
            "event": ["trigger", str(doc), "--out", str(out), "--event", "--wait"],
            "cli": ["ingest", str(doc), "--out", str(out), "--report", str(report)]}[path]
    started = time.time()
    try:
        proc = subprocess.run([str(folio), *argv], cwd=ROOT, env=env, capture_output=True,
                              text=True, timeout=RUN_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired:
        return {"load_1min": round(load, 2), "wall_s": round(time.time() - started, 3),
                "exit": 124, "stderr": f"timed out after {RUN_TIMEOUT_S} s"}
    ended = time.time()
    row: dict[str, Any] = {"load_1min": round(load, 2), "wall_s": round(ended - started, 3),
                           "exit": proc.returncode}
    if proc.returncode != 0:
        row["stderr"] = proc.stderr[-800:]
        return row
    if path == "cli":
        with contextlib.suppress(OSError, ValueError):
            timing = json.loads(report.read_text()).get("timing") or {}
            row["stages"] = stats.cli_stages(started, ended, timing)
            row["pages_own_s"] = stats.pages_own_s(timing)
    else:
        lines = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
        run_id = next((d.get("flow_run_id") for d in reversed(lines) if d.get("flow_run_id")),
                      None)
        if run_id:
            facts = run_facts(api_url, run_id)
            row["stages"] = stats.stages(started, ended, facts)
            row["pages_own_s"] = stats.pages_own_s(facts["timing"])
    return row


# --- what a label records ----------------------------------------------------------------


def machine() -> dict[str, Any]:
    """The host's facts a reader needs to judge the walls (the load is per run)."""
    cpu = ""
    with contextlib.suppress(OSError), open("/proc/cpuinfo") as fh:
        cpu = next((line.split(":", 1)[1].strip() for line in fh
                    if line.startswith("model name")), "")
    pages = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    return {"cores": os.cpu_count(), "cpu": cpu, "memory_gib": round(pages / 2**30, 1),
            "load_1min_at_start": round(os.getloadavg()[0], 2)}


def settings(query_seconds: float | None, environ: dict[str, str], *, cli: bool = False
             ) -> dict[str, Any]:
    """Every setting of the runs that differs from a user's defaults, with its reason
    (expected: none). The bench's own environment reaches the runs (the stack copies it),
    so a FOLIO_ or PREFECT_ variable set there is a change, FOLIO_WARM above all."""
    out: dict[str, Any] = {}
    if cli:
        out["folio ingest --report"] = {
            "value": "a file beside OUT",
            "reason": "the run report's timing splits the CLI's wall into stages; writing "
                      "one small JSON file at the run's end is all it adds"}
    if query_seconds is not None:
        out["PREFECT_WORKER_QUERY_SECONDS"] = {
            "value": str(query_seconds),
            "reason": "--query-seconds: the worker's poll as the measured code's README set "
                      "it (prefect.toml's worker.query_seconds otherwise)"}
    for key in sorted(environ):
        if key == "FOLIO_WARM":
            out[key] = {"value": environ[key], "reason": "set in the bench's environment: "
                        "FOLIO_WARM=0 runs without the warm process (the default is on)"}
        elif key.startswith(("FOLIO_", "PREFECT_")) and key not in _PLUMBING:
            out[key] = {"value": environ[key],
                        "reason": "set in the bench's environment, reaches every run"}
    return out


#: variables of the bench's environment that do not reach the runs as set: the stack
#: replaces them (its own server, home) or the bench removes them
_PLUMBING = {"PREFECT_HOME", "PREFECT_API_URL", "PREFECT_UI_API_URL",
             "PREFECT_WORKER_QUERY_SECONDS", "FOLIO_PREFECT_HOME", "FOLIO_CORPUS_DIR",
             "FOLIO_S3__ACCESS_KEY_ID", "FOLIO_S3__SECRET_ACCESS_KEY"}


def apply_pools(stack: PrefectStack) -> list[str]:
    """The pools as the README makes them (``work_pools --apply``): folio-cpu's template
    carries the cpu profile's environment (the tesseract engine, its in-flight pages,
    quiet task logs), which the test stack's plain process pool lacks."""
    done = stack.run(sys.executable, "-m", "folio_prefect.deployments.work_pools", "--apply")
    if done.returncode != 0:
        raise RuntimeError(f"work_pools --apply failed:\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
    return [line for line in done.stdout.splitlines() if line.strip()]


def label_entry(args: argparse.Namespace) -> dict[str, Any]:
    from bench._measure import command, git

    return {
        "command": command(argv=sys.argv), "commit": git("rev-parse", "--short", "HEAD"),
        "dirty": bool(git("status", "--porcelain", "--", "folio", "folio_prefect", "flows",
                          "tasks", "deployments", "prefect.yaml", "prefect.toml")),
        "note": args.note, "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "machine": machine(), "settings": settings(args.query_seconds, dict(os.environ),
                                               cli="cli" in args.paths),
        "worker_query_seconds": args.query_seconds, "results": {}}


def finish_entry(entry: dict[str, Any]) -> None:
    """The label's load median over every run, and its goals."""
    loads = [r["load_1min"] for cell in entry["results"].values() for r in cell["rows"]]
    if loads:
        entry["machine"]["load_1min_median"] = round(stats.p50(loads), 2)
    entry["goals"] = stats.evaluate_goals(entry["results"])


def compare_labels(out: Path, before: str, after: str) -> None:
    """``--compare BEFORE AFTER``: print the table, save it as the file's ``comparison``."""
    results = json.loads(out.read_text())
    missing = [label for label in (before, after) if label not in results]
    if missing or COMPARISON in (before, after):
        sys.exit(f"no label {', '.join(missing) or COMPARISON} in {out}: "
                 f"{', '.join(k for k in results if k != COMPARISON)}")
    comparison = stats.compare(before, results[before], after, results[after])
    results[COMPARISON] = comparison
    out.write_text(json.dumps(results, indent=1) + "\n")
    print(stats.comparison_table(comparison))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--label", help="the result's key (before, after, ...)")
    ap.add_argument("--compare", nargs=2, metavar=("BEFORE", "AFTER"),
                    help="compare two labels of --out instead of running")
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--docs", nargs="+", default=list(DOCS), choices=DOCS)
    ap.add_argument("--paths", nargs="+", default=list(PATHS), choices=PATHS)
    ap.add_argument("--query-seconds", type=float, default=None,
                    help="PREFECT_WORKER_QUERY_SECONDS for the worker (default: unset)")
    ap.add_argument("--note", default="", help="what this label's code is")
    ap.add_argument("--out", type=Path, default=RESULT)
    args = ap.parse_args()
    if args.compare:
        compare_labels(args.out, *args.compare)
        return
    if not args.label or args.label == COMPARISON:
        ap.error(f"--label is required (and not {COMPARISON!r}) unless --compare is given")
    from tests.prefect_stack import POOL, _spawn, start_prefect_stack

    folio = Path(sys.executable).parent / "folio"
    entry = label_entry(args)
    results = json.loads(args.out.read_text()) if args.out.exists() else {}
    with tempfile.TemporaryDirectory(prefix="folio-one-doc-") as tmp:
        work = Path(tmp)
        (work / "home").mkdir()
        stack = start_prefect_stack(work / "home", deployments=("document",), worker=False)
        try:
            entry["pools"] = apply_pools(stack)
            env = {k: v for k, v in stack.env.items() if k not in _REMOVED}  # user's defaults
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
                    entry["results"][f"{kind}/{path}"] = stats.summary(rows) | {"rows": rows}
                    finish_entry(entry)
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
    finish_entry(entry)
    results[args.label] = entry
    args.out.write_text(json.dumps(results, indent=1) + "\n")
    print(json.dumps({k: {kk: vv for kk, vv in v.items() if kk != "rows"}
                      for k, v in entry["results"].items()}, indent=1))
    print(json.dumps(entry["goals"], indent=1))


if __name__ == "__main__":
    main()
