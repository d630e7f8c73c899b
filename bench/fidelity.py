"""Output fidelity of folio's CPU path against ground truth written by others.

Runs folio's pipeline as a user gets it by default (engine tesseract, route auto, no
vector store) over the corpus documents that come with ground truth, one document at a
time, and scores:

* ``olmocr``: olmOCR-bench unit tests (present/absent/order/table/baseline; math reported
  but out of the headline), rules in ``bench/fidelity_scoring.py``;
* ``docling``: docling's ground-truth documents: running header/footer labelling and
  leakage into the markdown, table structure (cell text at the same row/column slot),
  word recall and order of the whole markdown;
* ``linn``: OCRmyPDF's scanned ``linn`` variants against ``linn.txt`` (as
  ``bench/results/ocr_quality.json`` did): word recall and order.

    .venv/bin/python bench/fidelity.py [--corpus DIR] [--out PATH]
        [--only olmocr,docling,linn] [--limit N] [--set layout.enabled=false ...]

Other converters (PyMuPDF4LLM, pdfium's raw text) were scored beside folio with the same
scorers once (``bench/results/fidelity_side_by_side.json``, ``bench/fidelity_peers.py`` at
the commit it names); that comparison's code left with issue 46.

``--set KEY=VALUE`` changes one setting (dotted, as in ``folio.settings.config``; VALUE read as
JSON when it parses, else as a string) so that two runs differ in that setting alone (the
layout model evaluation in ``bench/results/layout_models.json`` compares runs that way);
each one is recorded under ``settings`` in the output.

A document folio fails on (exception, quarantined document, quarantined page) fails its
tests; rows whose files are absent are skipped and listed.
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import json
import os
import resource
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from _measure import command, corpus_dir, git, tree_cpu_seconds
from fidelity_scoring import (
    header_footer_scores,
    pass_rates,
    run_olmocr_test,
    strip_html_tags,
    strip_md_markup,
    table_structure_scores,
)
from fidelity_summary import CATEGORIES, print_tables, summarise

from folio.io.sources import discover
from folio.models import DocumentOutcome, DocumentResult, PageOutcome
from folio.page.quality import sequence_similarity, word_recall
from folio.pipeline import Services, process_document
from folio.settings.config import PipelineConfig

REPO = Path(__file__).resolve().parents[1]
#: every way a run here differs from `folio ingest` with its defaults, and why
SETTINGS: dict[str, dict[str, str]] = {
    "store.kind": {"value": "none", "why": "fidelity is scored on the markdown and blocks, "
                   "which embeddings and the vector store do not change; left on, their CPU "
                   "seconds would count in the per-page figure"},
    "runner": {"value": "folio.pipeline.process_document, one document at a time, no Prefect",
               "why": "the same stages the flow runs (prepare, pages, validation, load), "
                      "timed per document without a flow server's own CPU"},
    "work_dir": {"value": "a temporary folder", "why": "nothing of the run is kept"},
}
SYSTEM = "folio"
LINN_REFERENCE = "ocrmypdf/linn.txt"
DOCLING_GT = "docling/groundtruth/"


@dataclass
class Output:
    """What folio made of one document, as the scorers read it: 1-based page -> markdown
    (None for a page it failed), 1-based page -> (label, text) blocks, and its page count."""

    pages: dict[int, str | None] = field(default_factory=dict)
    blocks: dict[int, list[tuple[str, str]]] = field(default_factory=dict)
    page_count: int = 0

    def full_text(self) -> str:
        """The whole document's markdown, pages joined by a blank line."""
        return "\n\n".join(t or "" for _, t in sorted(self.pages.items()))


@dataclass
class Row:
    """One MANIFEST row this bench scores."""

    category: str
    pdf: str  # local_path, relative to the corpus
    kind: str  # "scanned" | "born-digital" | "other"
    truth: list[str]  # ground-truth files, relative to the corpus


def _kind(manifest_kind: str) -> str:
    k = manifest_kind.lower()
    if "scanned" in k:
        return "scanned"
    return "born-digital" if "born-digital" in k else "other"


def _truth_files(field: str) -> list[str]:
    """``a.md (from x); b.json (from y)`` -> [a.md, b.json]."""
    return [part.split(" (from ")[0].strip() for part in field.split(";") if part.strip()]


def select_rows(corpus: Path, only: set[str]) -> tuple[list[Row], list[str]]:
    """The MANIFEST rows with ground truth this bench knows, and the ones skipped because
    a file is missing (said, never silently dropped)."""
    rows, skipped = [], []
    with open(corpus / "MANIFEST.tsv", newline="") as fh:
        for r in csv.DictReader(fh, delimiter="\t"):
            gt = r["ground_truth_file"]
            files = _truth_files(gt)
            if gt.endswith(".tests.jsonl") and "olmocr/bench/" in gt:
                category = "olmocr"
            elif gt.startswith(DOCLING_GT):
                category = "docling"
            elif gt.startswith(LINN_REFERENCE):
                category = "linn"
            else:
                continue
            if category not in only:
                continue
            missing = [f for f in [r["local_path"], *files] if not (corpus / f).is_file()]
            if missing:
                skipped.append(f"{r['local_path']}: missing {', '.join(missing)}")
                continue
            rows.append(Row(category, r["local_path"], _kind(r["kind"]), files))
    return rows, skipped


def run_document(pdf: Path, services: Services, config: PipelineConfig) -> dict[str, Any]:
    """folio on one document, timed; never raises (a crash becomes ``error``)."""
    rusage_self = resource.getrusage(resource.RUSAGE_SELF)
    rusage_kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu0, wall0 = tree_cpu_seconds(), time.monotonic()
    doc: DocumentResult | None = None
    error = None
    try:
        refs = discover([str(pdf)], config.s3)
        doc = process_document(refs[0], services)
    except Exception as exc:  # the bench must outlive folio's failures
        error = f"{type(exc).__name__}: {exc}"
        traceback.print_exc()
    wall = time.monotonic() - wall0
    cpu = tree_cpu_seconds() - cpu0
    after_self = resource.getrusage(resource.RUSAGE_SELF)
    after_kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    rusage_cpu = ((after_self.ru_utime + after_self.ru_stime)
                  - (rusage_self.ru_utime + rusage_self.ru_stime)
                  + (after_kids.ru_utime + after_kids.ru_stime)
                  - (rusage_kids.ru_utime + rusage_kids.ru_stime))
    return {"doc": doc, "error": error, "seconds": wall, "cpu_seconds": cpu,
            "rusage_cpu_seconds": rusage_cpu}


def folio_output(doc: DocumentResult | None) -> Output | None:
    """folio's document as the scorers read it: None when folio failed the document; a
    page it quarantined has markdown None (and no blocks)."""
    if doc is None or doc.outcome == DocumentOutcome.QUARANTINED:
        return None
    out = Output(page_count=doc.page_count)
    for p in doc.pages:
        ok = p.outcome != PageOutcome.QUARANTINED
        out.pages[p.index + 1] = p.markdown if ok else None
        if ok:
            out.blocks[p.index + 1] = [(b.label, b.content) for b in p.blocks]
    return out


def score_olmocr(row: Row, corpus: Path, doc: Output | None) -> dict[str, Any]:
    texts = doc.pages if doc is not None else {}
    results = []
    for line in (corpus / row.truth[0]).read_text().splitlines():
        if not line.strip():
            continue
        test = json.loads(line)
        passed, why = run_olmocr_test(test, texts.get(int(test.get("page", 1))))
        results.append({"id": test["id"], "type": test["type"], "passed": passed, "why": why})
    rates = pass_rates(results)
    return {"tests": results, "pass_rate": rates["pass_rate"],
            "passed": sum(r["passed"] for r in results if r["type"] != "math"),
            "counted": rates["tests_counted"]}


def score_docling(row: Row, corpus: Path, doc: Output | None) -> dict[str, Any]:
    md_file = next(f for f in row.truth if f.endswith(".md"))
    json_file = next(f for f in row.truth if f.endswith(".json"))
    reference = strip_md_markup((corpus / md_file).read_text())
    gt = json.loads((corpus / json_file).read_text())
    pages: dict[int, tuple[str, list[tuple[str, str]]]] = {}
    if doc is not None:
        for n, markdown in doc.pages.items():
            if markdown is not None:
                pages[n] = (markdown, doc.blocks.get(n, []))
    hypothesis = strip_html_tags(doc.full_text() if doc is not None else "")
    return {
        "word_recall": round(word_recall(reference, hypothesis), 4),
        "sequence_similarity": round(sequence_similarity(reference, hypothesis), 4),
        "header_footer": header_footer_scores(gt, pages),
        "tables": table_structure_scores(gt, {k: v[0] for k, v in pages.items()}),
    }


def score_linn(row: Row, corpus: Path, doc: Output | None) -> dict[str, Any]:
    """Every page of every variant is the same brochure page (cardinal.pdf holds it four
    times, turned), so each page is compared with ``linn.txt`` and the pages averaged;
    joining the pages would cut the order score of a multi-page variant to 1/pages."""
    reference = (corpus / LINN_REFERENCE).read_text()
    texts = doc.pages if doc is not None else {}
    pages = doc.page_count if doc is not None and doc.page_count else 1
    hyps = [strip_html_tags(texts.get(i) or "") for i in range(1, pages + 1)]
    recall = [word_recall(reference, h) for h in hyps]
    order = [sequence_similarity(reference, h) for h in hyps]
    return {"word_recall": round(sum(recall) / len(recall), 4),
            "sequence_similarity": round(sum(order) / len(order), 4),
            "per_page": [{"page": i, "word_recall": round(r, 4), "sequence_similarity": round(o, 4)}
                         for i, (r, o) in enumerate(zip(recall, order), 1)]}


SCORERS = {"olmocr": score_olmocr, "docling": score_docling, "linn": score_linn}


def _score(row: Row, corpus: Path, output: Output | None) -> dict[str, Any]:
    try:
        return SCORERS[row.category](row, corpus, output)
    except Exception as exc:  # a scoring bug must not hide the other documents
        traceback.print_exc()
        return {"error": f"{type(exc).__name__}: {exc}"}


def run_folio(rows: list[Row], corpus: Path, config: PipelineConfig, tmp: str,
              warm_up: Path | None = None) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """folio on every row in this process, one document at a time, scored; ``warm_up``
    first, untimed (engines, layout model, validation loaded: one-time start-up a long
    run amortises), its CPU reported apart."""
    docs: list[dict[str, Any]] = []
    warm: dict[str, Any] = {}
    if warm_up is not None:  # an output of its own: the sink would answer it from there
        scratch = Services(config, str(Path(tmp) / "out-warm-up"))
        try:
            run = run_document(warm_up, scratch, config)
        finally:
            scratch.close()
        warm = {"warm_up": str(warm_up), "error": run["error"],
                "cpu_seconds": round(tree_cpu_seconds(), 3)}
    services = Services(config, str(Path(tmp) / "out"))
    try:
        for n, row in enumerate(rows, 1):
            run = run_document(corpus / row.pdf, services, config)
            doc: DocumentResult | None = run["doc"]
            scores = _score(row, corpus, folio_output(doc))
            pages = doc.page_count if doc is not None and doc.page_count else 0
            docs.append({
                "category": row.category, "source": row.pdf, "kind": row.kind,
                "ground_truth": row.truth,
                "outcome": "crashed" if run["error"] else (doc.outcome.value if doc else "none"),
                "reason": run["error"] or (doc.reason if doc else ""),
                "pages": pages,
                "routes": [p.route for p in doc.pages] if doc else [],
                "page_outcomes": [p.outcome.value for p in doc.pages] if doc else [],
                "labels": sorted({b.label for p in doc.pages for b in p.blocks}) if doc else [],
                "markdown_chars": [len(p.markdown) for p in doc.pages] if doc else [],
                "seconds": round(run["seconds"], 2),
                "seconds_per_page": round(run["seconds"] / max(1, pages), 2),
                "cpu_seconds": round(run["cpu_seconds"], 2),
                "rusage_cpu_seconds": round(run["rusage_cpu_seconds"], 2),
                "scores": scores,
            })
            print(f"[{n}/{len(rows)}] {row.category:7} {row.pdf:44} {docs[-1]['outcome']:>10} "
                  f"{run['seconds']:6.1f}s", flush=True)
    finally:
        services.close()
    return docs, warm


def overrides(pairs: list[str]) -> dict[str, Any]:
    """Nested settings from ``KEY=VALUE`` pairs (``layout.enabled=false`` ->
    ``{"layout": {"enabled": False}}``); a VALUE that is not JSON stays a string."""
    nested: dict[str, Any] = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep or not key.strip():
            raise SystemExit(f"--set expects KEY=VALUE, got {pair!r}")
        try:
            value: Any = json.loads(raw)
        except json.JSONDecodeError:
            value = raw
        *parents, leaf = key.strip().split(".")
        node = nested
        for part in parents:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise SystemExit(f"--set {key}: {part} is set to a value already")
        node[leaf] = value
    return nested


def _merged(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merged(out[key], value)
        else:
            out[key] = value
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", default=str(corpus_dir()))
    parser.add_argument("--out", default=str(REPO / "bench" / "results" / "fidelity.json"))
    parser.add_argument("--only", default=",".join(CATEGORIES),
                        help="comma-separated categories: " + ",".join(CATEGORIES))
    parser.add_argument("--limit", type=int, default=None, help="at most N documents")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="change one setting for this run, e.g. layout.enabled=false")
    parser.add_argument("--no-warm-up", action="store_true",
                        help="time the first document with folio's start-up in it "
                             "(default: folio converts the first document once, "
                             "untimed, before the timed pass; its CPU is reported apart)")
    args = parser.parse_args(argv)
    extra = overrides(args.set)
    settings = dict(SETTINGS)
    for pair in args.set:
        key, _, raw = pair.partition("=")
        settings[key.strip()] = {"value": raw, "why": "--set on the command line"}
    corpus = Path(args.corpus).resolve()
    if not (corpus / "MANIFEST.tsv").is_file():
        raise SystemExit(f"corpus absent at {corpus}: pass --corpus or set FOLIO_CORPUS_DIR")
    only = {c.strip() for c in args.only.split(",") if c.strip()}
    if unknown := only - set(CATEGORIES):
        raise SystemExit(f"unknown categories: {sorted(unknown)}")
    rows, skipped = select_rows(corpus, only)
    for s in skipped:
        print(f"skipped (file absent): {s}", file=sys.stderr)
    selected = len(rows)
    if args.limit is not None:
        rows = rows[: args.limit]

    started = time.monotonic()
    docs: list[dict[str, Any]] = []
    warm_ups: dict[str, dict[str, Any]] = {}
    warm_up = corpus / rows[0].pdf if rows and not args.no_warm_up else None
    with tempfile.TemporaryDirectory(prefix="folio-fidelity-") as tmp:
        config = PipelineConfig.model_validate(_merged(
            {"store": {"kind": "none"}, "work_dir": str(Path(tmp) / "work")}, extra))
        docs, warm_ups[SYSTEM] = run_folio(rows, corpus, config, tmp, warm_up)
    wall = time.monotonic() - started
    scored = [d for d in docs if "error" not in d["scores"]]
    summary = summarise(scored)
    if summary:
        print_tables(scored, summary)

    commit = git("rev-parse", "--short", "HEAD")
    dirty = bool(git("status", "--porcelain", "--", "folio"))
    result = {
        "command": command(),
        "commit": commit,
        "folio_tree_dirty": dirty,
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "configuration": {
            "description": "folio's defaults as a user gets them: engine tesseract, route auto, "
                           "default render plan and validation, layout model "
                           + ("on (CPU engines); " if config.active_layout() else "off; ")
                           + "store none (no embeddings); "
                           "documents run one at a time through folio.pipeline.process_document"
                           + ("; changed by --set: " + ", ".join(args.set) if args.set else ""),
            "engine": config.ocr.engine, "route": config.route.model_dump(mode="json"),
            "layout": config.active_layout() is not None,
            "layout_settings": config.layout.model_dump(mode="json"),
            "host_cpus": os.cpu_count(),
        },
        "settings": settings,
        "coverage": {
            "categories": sorted(only),
            "rows_selected": selected,
            "limit": args.limit,
            "documents_run": len(docs),
            "skipped_missing_files": skipped,
            "scoring_errors": [{"source": d["source"], "error": d["scores"]["error"]}
                               for d in docs if "error" in d["scores"]],
            "not_covered": "MANIFEST ground truth outside these categories (olmocr/sample_dataset "
                           "and olmocr/gnarly .md, docling/ocr .md, pypdf .tex/.html/.txt, "
                           "robustness rows) is not scored here",
        },
        "scoring_rules": {
            "olmocr": "olmOCR-bench rules reimplemented in bench/fidelity_scoring.py: "
                      "present/absent by Levenshtein substring distance <= max_diffs (not "
                      "rapidfuzz partial_ratio); order: some 'before' match starts before some "
                      "'after' match; table: indel-ratio cell match with up/down/left/right/"
                      "top_heading/left_heading relations over HTML and markdown tables; "
                      "baseline: blank-page max_length / text present and no loop; math: exact "
                      "delimited LaTeX match only, excluded from olmocr_tests_pass_rate; a "
                      "failed document or quarantined page fails all its tests",
            "word_recall": "folio.page.quality.word_recall (multiset word recall of the reference), "
                           "sequence_similarity = folio.page.quality.sequence_similarity (difflib "
                           "ratio of word sequences); docling: whole-document markdown vs "
                           "groundtruth .md minus HTML comments; linn: each page vs linn.txt, "
                           "pages averaged; headline = mean over documents (born-digital = "
                           "docling rows, scanned = linn rows; olmocr rows have no reference "
                           "text)",
            "header_footer": "docling page_header/page_footer texts; recall = share held by a "
                             "folio Page-Header/Page-Footer block on the same page (contiguous "
                             "words); in_markdown = share whose words still occur contiguously "
                             "in that page's markdown (lower is better)",
        },
        "wall_seconds": round(wall, 1),
        "warm_up": {"document": str(warm_up.relative_to(corpus)) if warm_up else None,
                    "why": "folio converts it once before the timed pass, so the "
                           "per-document CPU leaves out one-time start-up (imports, models, "
                           "validation), which a long ingestion run amortises; "
                           "cpu_seconds = the process's CPU up to the end of the warm-up",
                    **{k: v.get("cpu_seconds") for k, v in warm_ups.items()}},
        **summary,
        "per_document": docs,
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2, default=str) + "\n")
    print(f"\nwrote {out} ({len(rows)} documents, {wall:.0f}s)")


if __name__ == "__main__":
    main()
