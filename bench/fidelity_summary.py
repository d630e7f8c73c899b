"""bench/fidelity.py's headline figures and its printed tables, from the per-document
rows the run scored (split from it so that each file keeps one job)."""

from __future__ import annotations

import json
from typing import Any

from _measure import median
from fidelity_scoring import TABLE_LABEL, pass_rates

CATEGORIES = ("olmocr", "docling", "linn")


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
