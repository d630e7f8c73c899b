"""Headings on born-digital pages against docling's ground truth (issue 30, item 3).

Runs folio's CPU pipeline as a user gets it by default (engine tesseract, route auto,
layout model on, no vector store) over the docling corpus PDFs that come with a ground-truth
JSON, one document at a time, chunks each result as the load stage does
(:func:`folio.output.chunking.chunk_document` with the default chunk settings), and scores:

* ``recall``: the share of ground-truth ``section_header``/``title`` items found as a
  markdown heading (a ``#`` line) on the same page of folio's output, matched by
  normalized text (:func:`same_heading`);
* ``precision``: the share of folio's markdown headings that match some ground-truth
  ``section_header``/``title`` of the same page;
* ``chunks_with_heading_path``: the share of folio's chunks whose heading path is not
  empty.

    .venv/bin/python bench/heading_recall.py --phase before|after [--corpus DIR] [--out PATH]

Each run writes its phase into ``--out`` (default ``bench/results/heading_recall.json``),
keeping the other phase's figures, so one file holds the state before a change and after.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import re
import sys
import tempfile
import time
import traceback
import unicodedata
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from _measure import command, corpus_dir, git
from fidelity_scoring import indel_ratio

from folio.io.sources import discover
from folio.models import Chunk, DocumentResult, PageOutcome
from folio.output.chunking import chunk_document
from folio.pipeline import Services, process_document
from folio.settings.config import PipelineConfig

REPO = Path(__file__).resolve().parents[1]
GT_DIR = "docling/groundtruth"
GT_LABELS = frozenset({"section_header", "title"})
#: two headings are the same when their normalized texts are this close (indel ratio)
MATCH_RATIO = 0.8
_MD_HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$")
SETTINGS = {
    "store.kind": "none: headings and chunks are scored on the markdown and chunk_document's "
                  "output; embeddings would not change them",
    "chunking": "folio.output.chunking.chunk_document(doc, config.chunk) with the default chunk "
                "settings, as the load stage calls it",
    "runner": "folio.pipeline.process_document, one document at a time, no Prefect",
}


def normalize(text: str) -> str:
    """Case, width, markdown emphasis, punctuation and spacing folded away."""
    text = unicodedata.normalize("NFKC", text).lower()
    text = re.sub(r"[*_`#]", "", text)
    text = "".join(c if c.isalnum() else " " for c in text)
    return " ".join(text.split())


def same_heading(truth: str, found: str) -> bool:
    """``found`` names the ground-truth heading: their normalized texts are within
    :data:`MATCH_RATIO`, or they hold the same words in another order (a section's
    number set beside its name, read after it), or one holds the other whole where the shorter is most of it
    (a heading whose number folio kept on a line of its own, or joined to it)."""
    a, b = normalize(truth), normalize(found)
    if not a or not b:
        return False
    if indel_ratio(a, b) >= MATCH_RATIO or sorted(a.split()) == sorted(b.split()):
        return True
    short, long_ = sorted((a, b), key=len)
    return short in long_ and len(short) >= 0.6 * len(long_)


def truth_headings(gt: dict[str, Any]) -> list[tuple[int, str]]:
    """(page from 1, text) of every ground-truth section header and title."""
    out = []
    for item in gt.get("texts", []):
        if item.get("label") in GT_LABELS and item.get("text", "").strip() and item.get("prov"):
            out.append((int(item["prov"][0]["page_no"]), item["text"]))
    return out


def found_headings(doc: DocumentResult | None) -> list[tuple[int, str]]:
    """(page from 1, text) of every markdown heading line folio wrote."""
    if doc is None:
        return []
    out = []
    for page in doc.pages:
        if page.outcome == PageOutcome.QUARANTINED:
            continue
        for line in page.markdown.splitlines():
            match = _MD_HEADING.match(line.strip())
            if match:
                out.append((page.index + 1, match.group(2)))
    return out


def score(truth: list[tuple[int, str]], found: list[tuple[int, str]],
          chunks: list[Chunk]) -> dict[str, Any]:
    hits = [t for t in truth if any(p == t[0] and same_heading(t[1], f) for p, f in found)]
    good = [f for f in found if any(p == f[0] and same_heading(t, f[1]) for p, t in truth)]
    with_path = sum(1 for c in chunks if c.headings)
    return {
        "truth": len(truth), "found": len(found), "truth_found": len(hits),
        "found_true": len(good), "chunks": len(chunks), "chunks_with_heading_path": with_path,
        "missed": [t for t in truth if t not in hits],
        "false": [f for f in found if f not in good],
    }


def run(pdf: Path, services: Services, config: PipelineConfig
        ) -> tuple[DocumentResult | None, list[Chunk], str | None]:
    try:
        doc = process_document(discover([str(pdf)], config.s3)[0], services)
        return doc, chunk_document(doc, config.chunk), None
    except Exception as exc:  # the bench outlives folio's failures
        traceback.print_exc()
        return None, [], f"{type(exc).__name__}: {exc}"


def _share(num: int, den: int) -> float | None:
    return round(num / den, 4) if den else None


@contextmanager
def docling_services(corpus: Path, prefix: str) -> Iterator[tuple[Services, PipelineConfig]]:
    """The pipeline's services for a run over the corpus's docling PDFs (store none, a
    temporary work folder), after checking the ground truth is there (also for
    bench/heading_levels.py)."""
    if not (corpus / GT_DIR).is_dir():
        raise SystemExit(f"corpus absent at {corpus}: pass --corpus or set FOLIO_CORPUS_DIR")
    with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
        config = PipelineConfig.model_validate(
            {"store": {"kind": "none"}, "work_dir": str(Path(tmp) / "work")})
        services = Services(config, str(Path(tmp) / "out"))
        try:
            yield services, config
        finally:
            services.close()


def docling_runs(corpus: Path, services: Services, config: PipelineConfig
                 ) -> Iterator[tuple[Path, Path, DocumentResult | None, list[Chunk], str | None]]:
    """Each docling PDF of the corpus that has a JSON ground truth, run through the
    pipeline: ``(ground truth file, pdf, document, chunks, error)`` (also for
    bench/heading_levels.py)."""
    for gt_file in sorted((corpus / GT_DIR).glob("*.json")):
        pdf = corpus / "docling" / (gt_file.stem + ".pdf")
        if pdf.is_file():
            yield (gt_file, pdf, *run(pdf, services, config))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", default=str(corpus_dir()))
    parser.add_argument("--out", default=str(REPO / "bench" / "results" / "heading_recall.json"))
    parser.add_argument("--phase", default="after", help="the key this run is written under")
    args = parser.parse_args(argv)
    corpus = Path(args.corpus).resolve()
    started = time.monotonic()
    docs: list[dict[str, Any]] = []
    with docling_services(corpus, "folio-headings-") as (services, config):
        for gt_file, pdf, doc, chunks, error in docling_runs(corpus, services, config):
            row = score(truth_headings(json.loads(gt_file.read_text())),
                        found_headings(doc), chunks)
            docs.append({"source": f"docling/{pdf.name}", "error": error, **row})
            print(f"{pdf.name:36} truth {row['truth']:3} found {row['found']:3} "
                  f"hit {row['truth_found']:3} true {row['found_true']:3} chunks "
                  f"{row['chunks_with_heading_path']}/{row['chunks']}", flush=True)
    totals = {k: sum(d[k] for d in docs) for k in
              ("truth", "found", "truth_found", "found_true", "chunks", "chunks_with_heading_path")}
    summary = {
        "heading_recall": _share(totals["truth_found"], totals["truth"]),
        "heading_precision": _share(totals["found_true"], totals["found"]),
        "share_of_chunks_with_heading_path": _share(totals["chunks_with_heading_path"],
                                                    totals["chunks"]),
        "counts": totals,
    }
    print(json.dumps(summary, indent=1))
    commit = git("rev-parse", "--short", "HEAD")
    dirty = bool(git("status", "--porcelain", "--", "folio"))
    out = Path(args.out)
    result: dict[str, Any] = json.loads(out.read_text()) if out.is_file() else {}
    result.update({
        "measure": "docling ground truth (section_header and title items) of the corpus's "
                   "docling PDFs with a JSON ground truth; recall = share of those found as a "
                   "markdown heading line on the same page of folio's output; precision = "
                   "share of folio's markdown headings matching one on the same page; "
                   "chunks_with_heading_path = share of chunk_document's chunks whose heading "
                   "path is not empty",
        "matching": f"NFKC, lower case, markdown marks and punctuation dropped, spaces "
                    f"collapsed; same when indel ratio >= {MATCH_RATIO}, or the same words in "
                    f"another order, or one text holds "
                    f"the other whole and the shorter is >= 0.6 of the longer",
        "settings": SETTINGS,
    })
    result[args.phase] = {
        "command": command(),
        "commit": commit,
        "folio_tree_dirty": dirty,
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "wall_seconds": round(time.monotonic() - started, 1),
        "summary": summary,
        "documents": docs,
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n")
    print(f"wrote {out} [{args.phase}]")


if __name__ == "__main__":
    main()
