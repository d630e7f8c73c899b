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
  ``bench/ocr_quality.py``): word recall and order.

    .venv/bin/python bench/fidelity.py [--corpus DIR] [--out PATH]
        [--only olmocr,docling,linn] [--limit N] [--set layout.enabled=false ...]
        [--peers folio,pymupdf4llm,pdfium] [--peer-python PEER_VENV/bin/python]

``--peers`` scores other converters beside folio in the same run, with the same scorers
(``bench/fidelity_peers.py``): ``pymupdf4llm`` (PyMuPDF4LLM with PyMuPDF-Layout, headers
and footers off; AGPL, so it runs only in its own virtualenv's interpreter, named by
``--peer-python`` or $FOLIO_PEER_PYTHON, and is skipped, said so in the result, without
one) and ``pdfium`` (the raw text layer, pypdfium2 ``get_text_range`` per page). Each
peer runs in a child process of its own; its CPU seconds are its process tree's. The
result gets one block per system under ``systems`` and a ``side_by_side`` table; folio's
figures stay at the top level as before.

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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from _measure import command, corpus_dir, git, median, tree_cpu_seconds
from fidelity_peers import (
    PEERS,
    SYSTEMS,
    Output,
    PeerRun,
    peer_output,
    peer_python,
    print_side_by_side,
    run_peer,
    side_by_side,
)
from fidelity_scoring import (
    TABLE_LABEL,
    header_footer_scores,
    pass_rates,
    run_olmocr_test,
    strip_html_tags,
    strip_md_markup,
    table_structure_scores,
)

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
CATEGORIES = ("olmocr", "docling", "linn")
LINN_REFERENCE = "ocrmypdf/linn.txt"
DOCLING_GT = "docling/groundtruth/"


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


def _mean(values: list[float]) -> float | None:
    return round(sum(values) / len(values), 4) if values else None


def _table_figures(tables: list[dict[str, Any]]) -> dict[str, Any]:
    """Tables found and cells in place, pooled over ``tables``' ground-truth cells."""
    gt_cells = sum(t["gt_cells"] for t in tables)
    agreed = sum(round((t["cell_position_agreement"] or 0) * t["gt_cells"]) for t in tables)
    return {"tables": len(tables),
            "detected_rate": _mean([float(t["detected"]) for t in tables]),
            "cell_position_agreement": round(agreed / gt_cells, 4) if gt_cells else None,
            "gt_cells": gt_cells}


def summarise(docs: list[dict[str, Any]]) -> dict[str, Any]:
    """Headline figures from the per-document rows."""
    olm = [t for d in docs if d["category"] == "olmocr" for t in d["scores"]["tests"]]
    rates = pass_rates(olm)
    dl = [d for d in docs if d["category"] == "docling"]
    hf_items = sum(d["scores"]["header_footer"]["items"] for d in dl)
    hf_labelled = sum(d["scores"]["header_footer"]["labelled"] for d in dl)
    hf_in_md = sum(round((d["scores"]["header_footer"]["in_markdown"] or 0)
                         * d["scores"]["header_footer"]["items"]) for d in dl)
    mw = sum(d["scores"]["header_footer"]["multiword_items"] for d in dl)
    mw_in = sum(round((d["scores"]["header_footer"]["multiword_in_markdown"] or 0)
                      * d["scores"]["header_footer"]["multiword_items"]) for d in dl)
    every_table = [t for d in dl for t in d["scores"]["tables"]]
    tables = [t for t in every_table if t.get("label", TABLE_LABEL) == TABLE_LABEL]
    indexes = [t for t in every_table if t.get("label", TABLE_LABEL) != TABLE_LABEL]
    recall_rows = [d for d in docs if "word_recall" in d["scores"]]
    pages = sum(d["pages"] for d in docs)
    cpu = [d["cpu_seconds"] for d in docs]
    return {
        "olmocr_tests_pass_rate": rates["pass_rate"],
        "olmocr_tests_counted": rates["tests_counted"],
        "olmocr_table_pass_rate": rates["table_pass_rate"],
        "olmocr_by_type": rates["by_type"],
        "header_footer_recall": round(hf_labelled / hf_items, 4) if hf_items else None,
        "header_footer_in_markdown": round(hf_in_md / hf_items, 4) if hf_items else None,
        "header_footer_in_markdown_multiword": round(mw_in / mw, 4) if mw else None,
        "header_footer_items": hf_items,
        "table_structure": {
            "measure": "per ground-truth table (docling label 'table'): detected = folio "
                       "emitted any table (HTML or markdown) on that page; "
                       "cell_position_agreement = share of non-empty ground-truth cells whose "
                       "normalised words equal those of the folio table cell at the same "
                       "top-left (row, col) slot, best folio table on the page; pooled over "
                       "all cells. docling's 'document_index' items (tables of contents) are "
                       "scored apart under document_index, and with the tables under "
                       "including_document_index",
            **_table_figures(tables),
            "document_index": _table_figures(indexes),
            "including_document_index": _table_figures(every_table),
        },
        "word_recall_born_digital": _mean([d["scores"]["word_recall"] for d in recall_rows
                                           if d["kind"] == "born-digital"]),
        "word_recall_scanned": _mean([d["scores"]["word_recall"] for d in recall_rows
                                      if d["kind"] == "scanned"]),
        "sequence_similarity_born_digital": _mean([d["scores"]["sequence_similarity"]
                                                   for d in recall_rows
                                                   if d["kind"] == "born-digital"]),
        "sequence_similarity_scanned": _mean([d["scores"]["sequence_similarity"]
                                              for d in recall_rows if d["kind"] == "scanned"]),
        "word_recall_by_category": {c: _mean([d["scores"]["word_recall"] for d in recall_rows
                                              if d["category"] == c]) for c in ("docling", "linn")},
        "cpu_seconds_per_page": {
            "median": round(median([d["cpu_seconds"] / max(1, d["pages"]) for d in docs]), 3)
            if docs else None,
            "total": round(sum(cpu), 1),
            "per_page_overall": round(sum(cpu) / pages, 3) if pages else None,
            **_slowest(docs),
            "measure": "process-tree CPU (self + reaped children + live descendants incl. "
                       "what they reaped, from /proc) delta per document; a page's figure "
                       "is its document's CPU over its pages (exact for one-page documents)",
        },
        "wall_seconds_per_page": {
            "median": round(median([d["seconds"] / max(1, d["pages"]) for d in docs]), 3)
            if docs else None,
            "total": round(sum(d["seconds"] for d in docs), 1),
        },
        "documents": len(docs),
        "pages": pages,
        "documents_failed": [d["source"] for d in docs if d["outcome"] != "ok"],
        "documents_failed_count": sum(1 for d in docs if d["outcome"] != "ok"),
    }


def _slowest(docs: list[dict[str, Any]]) -> dict[str, Any]:
    """The highest CPU seconds a page (a document's CPU over its pages) and the document
    with the most CPU seconds, each with its source."""
    if not docs:
        return {"max_page": None, "slowest_document": None}
    by_page = max(docs, key=lambda d: d["cpu_seconds"] / max(1, d["pages"]))
    by_doc = max(docs, key=lambda d: d["cpu_seconds"])
    return {"max_page": {"seconds": round(by_page["cpu_seconds"] / max(1, by_page["pages"]), 2),
                         "source": by_page["source"], "pages": by_page["pages"]},
            "slowest_document": {"cpu_seconds": by_doc["cpu_seconds"],
                                 "source": by_doc["source"], "pages": by_doc["pages"]}}


def print_tables(docs: list[dict[str, Any]], summary: dict[str, Any]) -> None:
    """A readable table per category (the JSON has everything)."""
    for cat in CATEGORIES:
        rows = [d for d in docs if d["category"] == cat]
        if not rows:
            continue
        print(f"\n== {cat} ==")
        if cat == "olmocr":
            print(f"{'document':44} {'pages':>5} {'sec':>6} {'outcome':>11} {'passed':>8}")
            for d in rows:
                s = d["scores"]
                print(f"{d['source']:44} {d['pages']:5} {d['seconds']:6.1f} {d['outcome']:>11} "
                      f"{s['passed']:>3}/{s['counted']:<4}")
            for t, v in summary["olmocr_by_type"].items():
                print(f"  {t:10} {v['passed']:3}/{v['tests']:<3} {v['pass_rate']}")
        else:
            extra = cat == "docling"
            print(f"{'document':44} {'pages':>5} {'sec':>6} {'outcome':>11} {'recall':>7} "
                  f"{'order':>6}" + (f" {'hf lab':>7} {'hf md':>6} {'tables':>7}" if extra else ""))
            for d in rows:
                s = d["scores"]
                line = (f"{d['source']:44} {d['pages']:5} {d['seconds']:6.1f} {d['outcome']:>11} "
                        f"{s['word_recall']:7.3f} {s['sequence_similarity']:6.3f}")
                if extra:
                    hf = s["header_footer"]
                    agree = [t["cell_position_agreement"] for t in s["tables"]]
                    line += (f" {hf['labelled']:>3}/{hf['items']:<3} {hf['in_markdown'] or 0:6.2f}"
                             f" {','.join(f'{a:.2f}' for a in agree) or '-':>7}")
                print(line)
    keys = ("olmocr_tests_pass_rate", "olmocr_table_pass_rate", "header_footer_recall",
            "header_footer_in_markdown", "word_recall_born_digital", "word_recall_scanned",
            "documents", "pages")
    print("\n== headline ==")
    for k in keys:
        print(f"  {k:28} {summary[k]}")
    print(f"  {'table_structure':28} {json.dumps({k: v for k, v in summary['table_structure'].items() if k != 'measure'})}")
    print(f"  {'cpu_seconds_per_page':28} {json.dumps({k: v for k, v in summary['cpu_seconds_per_page'].items() if k != 'measure'})}")


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


def peer_documents(rows: list[Row], corpus: Path, run: PeerRun) -> list[dict[str, Any]]:
    """A peer's per-document rows, scored as folio's are: a document the peer failed
    (``crashed``) or never reached (``not run``: it died or timed out first) has no pages
    and fails its tests."""
    docs = []
    for row in rows:
        record = run.records.get(str(corpus / row.pdf))
        output = peer_output(record)
        pages = output.page_count if output is not None else 0
        seconds = float(record["seconds"]) if record else 0.0
        docs.append({
            "category": row.category, "source": row.pdf, "kind": row.kind,
            "ground_truth": row.truth,
            "outcome": "ok" if output is not None else ("crashed" if record else "not run"),
            "reason": (record or {}).get("error") or "",
            "pages": pages,
            "labels": sorted({label for blocks in (output.blocks.values() if output else [])
                              for label, _ in blocks}),
            "markdown_chars": [len(t or "") for _, t in sorted(output.pages.items())]
            if output else [],
            "seconds": round(seconds, 2),
            "seconds_per_page": round(seconds / max(1, pages), 2),
            "cpu_seconds": round(float(record["cpu_seconds"]), 2) if record else 0.0,
            "scores": _score(row, corpus, output),
        })
    return docs


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
    parser.add_argument("--peers", default=",".join(SYSTEMS),
                        help="comma-separated systems to run and score: " + ",".join(SYSTEMS))
    parser.add_argument("--peer-python", default=None,
                        help="the interpreter of a virtualenv holding bench/requirements-"
                             "peers.txt (default: $FOLIO_PEER_PYTHON); without one the "
                             "pymupdf4llm peer is skipped and the result says so")
    parser.add_argument("--no-warm-up", action="store_true",
                        help="time the first document with each system's start-up in it "
                             "(default: each system converts the first document once, "
                             "untimed, before the timed pass; its CPU is reported apart)")
    parser.add_argument("--peer-timeout", type=float, default=7200.0,
                        help="seconds one peer may take over all documents")
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

    systems_run = [p.strip() for p in args.peers.split(",") if p.strip()]
    if unknown_peers := set(systems_run) - set(SYSTEMS):
        raise SystemExit(f"unknown peers: {sorted(unknown_peers)} (known: {', '.join(SYSTEMS)})")

    started = time.monotonic()
    docs: list[dict[str, Any]] = []
    peer_runs: dict[str, PeerRun] = {}
    system_wall: dict[str, float] = {}
    warm_ups: dict[str, dict[str, Any]] = {}
    warm_up = corpus / rows[0].pdf if rows and not args.no_warm_up else None
    with tempfile.TemporaryDirectory(prefix="folio-fidelity-") as tmp:
        config = PipelineConfig.model_validate(_merged(
            {"store": {"kind": "none"}, "work_dir": str(Path(tmp) / "work")}, extra))
        if "folio" in systems_run:
            docs, warm_ups["folio"] = run_folio(rows, corpus, config, tmp, warm_up)
            system_wall["folio"] = round(time.monotonic() - started, 1)
        for name in systems_run:
            if name == "folio":
                continue
            print(f"running peer {name} on {len(rows)} documents ...", flush=True)
            peer_runs[name] = run_peer(PEERS[name], [corpus / r.pdf for r in rows],
                                       python=peer_python(args.peer_python), workdir=Path(tmp),
                                       timeout=args.peer_timeout, warm_up=warm_up)
            run = peer_runs[name]
            warm_ups[name] = run.warm_up
            if run.status != "ran":
                print(f"peer {name} skipped: {run.reason}", file=sys.stderr)
            elif run.reason:
                print(f"peer {name}: {run.reason}\n{run.log_tail}", file=sys.stderr)
            system_wall[name] = run.wall_seconds
    wall = time.monotonic() - started
    scored = [d for d in docs if "error" not in d["scores"]]
    summary = summarise(scored) if "folio" in systems_run else {}
    if summary:
        print_tables(scored, summary)

    systems: dict[str, dict[str, Any]] = {}
    summaries: dict[str, dict[str, Any]] = {}
    for name in systems_run:
        if name == "folio":
            summaries[name] = summary
            systems[name] = {"status": "ran", "license": "folio's own",
                             "settings": settings, "wall_seconds": system_wall.get(name),
                             "warm_up": warm_ups.get(name),
                             "summary": summary,
                             "per_document": "at the top level: per_document"}
            continue
        run = peer_runs[name]
        spec = PEERS[name]
        block: dict[str, Any] = {"status": run.status, "reason": run.reason,
                                 "license": spec.license, "settings": spec.settings,
                                 "python": run.python, "description": run.description}
        if run.status == "ran":
            pdocs = peer_documents(rows, corpus, run)
            pscored = [d for d in pdocs if "error" not in d["scores"]]
            summaries[name] = summarise(pscored)
            block.update({"exit_code": run.exit_code, "wall_seconds": run.wall_seconds,
                          "warm_up": run.warm_up,
                          "process_cpu_seconds": run.process_cpu_seconds,
                          "process_cpu_note": "the child's whole CPU (rusage), start-up and "
                                              "model loading included; per-document figures "
                                              "leave start-up out",
                          "summary": summaries[name], "per_document": pdocs})
            if run.reason:
                block["log_tail"] = run.log_tail
        else:
            block["log_tail"] = run.log_tail
        systems[name] = block
    table = side_by_side(summaries) if summaries else {}
    if table:
        print_side_by_side(table)

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
        "wall_seconds_by_system": system_wall,
        "warm_up": {"document": str(warm_up.relative_to(corpus)) if warm_up else None,
                    "why": "each system converts it once before the timed pass, so the "
                           "per-document CPU leaves out one-time start-up (imports, models, "
                           "validation), which a long ingestion run amortises; "
                           "cpu_seconds = the process's CPU up to the end of the warm-up",
                    **{k: v.get("cpu_seconds") for k, v in warm_ups.items()}},
        "side_by_side": table,
        **summary,
        "systems": systems,
        "per_document": docs,
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2, default=str) + "\n")
    print(f"\nwrote {out} ({len(rows)} documents, systems {', '.join(systems)}, {wall:.0f}s)")


if __name__ == "__main__":
    main()
