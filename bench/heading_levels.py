"""Heading levels and hierarchical heading paths (issue 49, item 1).

Runs folio's CPU pipeline as a user gets it by default (engine tesseract, route auto,
layout model on, no vector store), one document at a time, levels the headings and
chunks each result as the load stage does (:func:`folio.hierarchy.levels.level_document`,
:func:`folio.output.chunking.chunk_document`), and scores two sets:

* the docling corpus PDFs with a ground-truth JSON (``docling/groundtruth``): heading
  recall and precision as bench/heading_recall.py counts them; the ground truth's own
  levels (docling's ``level`` of each ``section_header``), and how often folio's level of
  a matched heading equals both the ground truth's level and, for a numbered ground-truth
  heading (``1.1``, ``Chapter 3``), its numbering's depth; and the depth of the chunks'
  heading paths.
* PDFs whose outline (bookmarks) has more than one level (``--outline-pdf``, default the
  corpus's): the outline as the truth for the levels of the headings it names, scored
  for folio's levels without the outline (numbering and type size alone: what a document
  without bookmarks gets) and with it (what this document gets).

    .venv/bin/python bench/heading_levels.py [--corpus DIR] [--out PATH]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from _measure import command, corpus_dir, git
from heading_recall import GT_LABELS, docling_runs, docling_services, run, same_heading

from folio.hierarchy.levels import HeadingLeveler, heading_text, level_document
from folio.hierarchy.numbering import numbering_level
from folio.models import HEADING_LABELS, Chunk, DocumentResult, PageOutcome

REPO = Path(__file__).resolve().parents[1]
#: corpus PDFs with a multi-level outline (found by reading every corpus PDF's outline)
OUTLINE_PDFS = ("pypdf_sample_files/GeoTopo-komprimiert.pdf", "ocrmypdf/multipage.pdf")
SETTINGS = {
    "store.kind": "none: levels and chunk paths are scored on the blocks and on "
                  "chunk_document's output; embeddings would not change them",
    "runner": "folio.pipeline.process_document, one document at a time, no Prefect: the "
              "flow adds scheduling and loading, neither of which changes a heading's level",
}


def headings(doc: DocumentResult | None) -> list[tuple[int, str, int | None]]:
    """(page from 1, text, folio's level) of every heading block folio kept."""
    if doc is None:
        return []
    return [(page.index + 1, heading_text(b), b.level)
            for page in sorted(doc.pages, key=lambda p: p.index)
            if page.outcome != PageOutcome.QUARANTINED
            for b in sorted(page.blocks, key=lambda b: b.order)
            if b.label in HEADING_LABELS and b.content.strip()]


def truth_items(gt: dict[str, Any]) -> list[tuple[int, str, int | None]]:
    return [(int(t["prov"][0]["page_no"]), t["text"], t.get("level"))
            for t in gt.get("texts", [])
            if t.get("label") in GT_LABELS and t.get("text", "").strip() and t.get("prov")]


def path_depths(chunks: list[Chunk]) -> dict[str, int]:
    return {str(k): v for k, v in sorted(Counter(len(c.headings) for c in chunks).items())}


def score_docling(truth: list[tuple[int, str, int | None]],
                  found: list[tuple[int, str, int | None]], chunks: list[Chunk]) -> dict[str, Any]:
    matched = []
    for page, text, level in truth:
        hit = next((f for f in found if f[0] == page and same_heading(text, f[1])), None)
        if hit is not None:
            matched.append((text, level, hit[2]))
    numbered = [(t, numbering_level(t), mine) for t, _, mine in matched
                if numbering_level(t) is not None]
    good = [f for f in found if any(p == f[0] and same_heading(t, f[1]) for p, t, _ in truth)]
    return {
        "truth": len(truth), "found": len(found), "truth_found": len(matched),
        "found_true": len(good),
        "truth_levels": {str(k): v for k, v in Counter(lv for _, _, lv in truth).items()},
        "found_levels": {str(k): v for k, v in Counter(lv for _, _, lv in found).items()},
        "matched_same_level_as_truth": sum(1 for _, lv, mine in matched if lv == mine),
        "numbered_truth_found": len(numbered),
        "numbered_same_level_as_numbering": sum(1 for _, want, mine in numbered if want == mine),
        "chunks": len(chunks),
        "chunks_with_path_depth_2_or_more": sum(1 for c in chunks if len(c.headings) >= 2),
        "chunk_path_depths": path_depths(chunks),
        "levels": [[p, t[:60], lv] for p, t, lv in found],
    }


def relevel(doc: DocumentResult, with_outline: bool) -> list[tuple[int, str, int | None]]:
    leveler = HeadingLeveler(doc.outline if with_outline else ())
    for page in sorted(doc.pages, key=lambda p: p.index):
        leveler.page(page)
    return headings(doc)


def score_outline(doc: DocumentResult | None) -> dict[str, Any]:
    """The outline as truth: each entry matched to the first unmatched folio heading on
    its page or the next with the same name; folio's level against the entry's."""
    if doc is None:
        return {"error": "not processed"}
    row: dict[str, Any] = {"outline_entries": len(doc.outline),
                           "outline_levels": dict(Counter(str(e.level) for e in doc.outline))}
    for name, with_outline in (("without_outline", False), ("with_outline", True)):
        found = relevel(doc, with_outline)
        used: set[int] = set()
        pairs = []
        for entry in doc.outline:
            for i, (page, text, level) in enumerate(found):
                near = entry.page is None or 0 <= page - 1 - entry.page <= 1
                if i not in used and near and same_heading(entry.title, text):
                    used.add(i)
                    pairs.append((entry.level, level))
                    break
        # levels compared relative to the top level each side uses (an outline whose
        # entries are all chapters' sections would start at 1 where folio says 2)
        row[name] = {"entries_found": len(pairs),
                     "same_level": sum(1 for want, mine in pairs if want == mine),
                     "pairs": Counter(f"{want}->{mine}" for want, mine in pairs)}
    level_document(doc)
    return row


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", default=str(corpus_dir()))
    parser.add_argument("--out", default=str(REPO / "bench" / "results" / "heading_levels.json"))
    parser.add_argument("--outline-pdf", action="append", default=None,
                        help="a corpus-relative PDF with a multi-level outline (repeatable)")
    args = parser.parse_args(argv)
    corpus = Path(args.corpus).resolve()
    started = time.monotonic()
    docling: list[dict[str, Any]] = []
    outlines: list[dict[str, Any]] = []
    with docling_services(corpus, "folio-levels-") as (services, config):
        for gt_file, pdf, doc, chunks, error in docling_runs(corpus, services, config):
            if doc is not None:
                level_document(doc)
            row = score_docling(truth_items(json.loads(gt_file.read_text())),
                                headings(doc), chunks)
            docling.append({"source": f"docling/{pdf.name}", "error": error, **row})
            print(f"{pdf.name:36} truth {row['truth']:3} hit {row['truth_found']:3} "
                  f"numbered {row['numbered_same_level_as_numbering']}/"
                  f"{row['numbered_truth_found']} paths {row['chunk_path_depths']}",
                  flush=True)
        for rel in args.outline_pdf or OUTLINE_PDFS:
            doc, _, error = run(corpus / rel, services, config)
            row = {"source": rel, "error": error, **score_outline(doc)}
            outlines.append(row)
            print(rel, json.dumps({k: v for k, v in row.items() if k != "source"}),
                  flush=True)
    keys = ("truth", "found", "truth_found", "found_true", "matched_same_level_as_truth",
            "numbered_truth_found", "numbered_same_level_as_numbering", "chunks",
            "chunks_with_path_depth_2_or_more")
    totals = {k: sum(d[k] for d in docling) for k in keys}
    depth_total: Counter[str] = Counter()
    truth_levels: Counter[str] = Counter()
    for d in docling:
        depth_total.update(d["chunk_path_depths"])
        truth_levels.update(d["truth_levels"])

    def outline_share(name: str) -> float | None:
        found = sum(o.get(name, {}).get("entries_found", 0) for o in outlines)
        same = sum(o.get(name, {}).get("same_level", 0) for o in outlines)
        return round(same / found, 4) if found else None

    summary = {
        "docling_truth_levels": dict(truth_levels),
        "docling_matched_same_level_as_truth": _share(
            totals["matched_same_level_as_truth"], totals["truth_found"]),
        "docling_numbered_same_level_as_numbering": _share(
            totals["numbered_same_level_as_numbering"], totals["numbered_truth_found"]),
        "share_of_chunks_with_path_depth_2_or_more": _share(
            totals["chunks_with_path_depth_2_or_more"], totals["chunks"]),
        "chunk_path_depths": dict(sorted(depth_total.items())),
        "outline_same_level_without_outline": outline_share("without_outline"),
        "outline_same_level_with_outline": outline_share("with_outline"),
        "counts": totals,
    }
    print(json.dumps(summary, indent=1))
    result = {
        "measure": __doc__.split("\n\n", 1)[1].split("\n    .venv")[0],
        "settings": SETTINGS,
        "command": command(),
        "commit": git("rev-parse", "--short", "HEAD"),
        "folio_tree_dirty": bool(git("status", "--porcelain", "--", "folio")),
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "wall_seconds": round(time.monotonic() - started, 1),
        "summary": summary,
        "docling": docling,
        "outlines": outlines,
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1, ensure_ascii=False, default=dict) + "\n")
    print(f"wrote {out}")


def _share(num: int, den: int) -> float | None:
    return round(num / den, 4) if den else None


if __name__ == "__main__":
    main()
