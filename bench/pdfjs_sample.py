"""folio on PDFs nobody here wrote (../shared/pdfjs-sample: 250 files from pdf.js's test
suite): outcomes by class, pages without text, and how much of each document's own text
layer reaches its outputs.

There is no ground truth, so the measure is the one any PDF must meet: the distinct words
pdfium's text layer holds for a document (:func:`folio.page.quality.normalize_words`) against
the words folio wrote (document.md, plus the running heads document.json keeps out of the
markdown). A document with at least ``--min-words`` distinct layer words whose share kept
is below ``--target`` is listed with its pages' outcomes and reasons. A layer folio's judge
calls junk (fonts without Unicode maps) can lose words to a better OCR reading: each
document records the layer's judgement so such a loss can be read for what it is.

Each document runs alone through ``folio.pipeline.process_document`` (the CPU defaults:
route auto, tesseract, layout, Great Expectations), timed, with the peak resident memory
of this process and its page workers sampled while it runs. Progress goes to a JSON-lines
file beside the result so a long run can be watched (and a finished document is not run
twice when ``--resume`` is given).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
import time
import traceback
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _measure import REPO, PeakRss, command, git

from folio.io.sources import discover
from folio.models import DocumentResult
from folio.output.outputs import JSON, MARKDOWN, document_folder
from folio.page.quality import normalize_words
from folio.page.running_heads import HEAD_LABELS
from folio.pipeline import Services, process_document
from folio.settings.config import PipelineConfig

SAMPLE = REPO.parent / "shared" / "pdfjs-sample" / "pdfs"
SETTINGS = {
    "store.kind": {"value": "none", "why": "the vector store is not what this measures; "
                                           "embeddings would only add time"},
    "runner": {"value": "folio.pipeline.process_document, one document at a time",
               "why": "per-document seconds and peak memory"},
}


#: a word broken at a line's end: pdfium's marks for a hyphen it believes was inserted
#: there (U+0002, U+FFFE: folio.pdf.text_blocks joins the word across them), or a hyphen
#: or soft hyphen before a line going on in lower case; one word, as folio reads it
_BREAK_MARK = re.compile("[\u0002\ufffe]\r?\n?")
_LINE_BREAK_HYPHEN = re.compile(r"(\w)[-\u00ad]\r?\n(?=[a-z\u00e0-\u00ff])")


def layer_words(pdf: Path) -> tuple[list[set[str]], str]:
    """Each page's distinct layer words as pdfium gives them (words hyphenated at a line
    break joined), or an error note."""
    import pypdfium2 as pdfium

    pages: list[set[str]] = []
    try:
        doc = pdfium.PdfDocument(str(pdf))
    except Exception as err:
        return [], f"pdfium cannot open it: {type(err).__name__}"
    try:
        for page in doc:
            try:
                text = _BREAK_MARK.sub("", page.get_textpage().get_text_range())
                text = _LINE_BREAK_HYPHEN.sub(r"\1", text)
            except Exception:
                text = ""
            pages.append(set(normalize_words(text)))
    finally:
        doc.close()
    return pages, ""


def written_words(out: Path, doc: DocumentResult) -> set[str]:
    """The words of the document's markdown plus the running heads kept only in its JSON."""
    folder = out / document_folder(doc)
    words: set[str] = set()
    md = folder / MARKDOWN
    if md.is_file():
        words |= set(normalize_words(md.read_text(errors="replace")))
    js = folder / JSON
    if js.is_file():
        data = json.loads(js.read_text())
        for page in data.get("pages", []):
            for block in page.get("blocks", []):
                if block.get("label") in HEAD_LABELS:
                    words |= set(normalize_words(block.get("content") or ""))
    return words


def page_class(page: dict[str, Any]) -> str:
    """A page's outcome and the class of its reason (the words before the first colon)."""
    reason = page["reason"] or ""
    if reason.startswith("after: "):
        reason = reason[len("after: "):]
    head = reason.split(":")[0].strip()[:60]
    return f"{page['outcome']}: {head}" if head else page["outcome"]


def run_one(pdf: Path, services: Services, config: PipelineConfig, out: Path
            ) -> dict[str, Any]:
    """folio on one file, timed and scored against its own layer; never raises."""
    doc: DocumentResult | None = None
    error = ""
    started = time.monotonic()
    with PeakRss() as rss:
        try:
            doc = process_document(discover([str(pdf)], config.s3)[0], services)
        except Exception as err:  # the bench must outlive folio's failures
            error = f"{type(err).__name__}: {err}"
            traceback.print_exc()
    seconds = time.monotonic() - started
    layer, layer_error = layer_words(pdf)
    layer_all = set().union(*layer) if layer else set()
    kept = written_words(out, doc) if doc is not None and doc.doc_id else set()
    pages = [{"page": p.index + 1, "outcome": p.outcome.value, "reason": p.reason,
              "route": p.route, "engine": p.engine, "blank": p.blank,
              "layer_words": len(layer[p.index]) if p.index < len(layer) else 0}
             for p in (doc.pages if doc else [])]
    share = len(layer_all & kept) / len(layer_all) if layer_all else None
    return {
        "file": pdf.name,
        "outcome": "crashed" if error else (doc.outcome.value if doc else "none"),
        "reason": error or (doc.reason if doc else ""),
        "pages": doc.page_count if doc else 0,
        "seconds": round(seconds, 2),
        "peak_rss_mib": round(rss.peak_kib / 1024, 1),
        "layer_words": len(layer_all),
        "layer_error": layer_error,
        "kept_share": None if share is None else round(share, 3),
        "lost_words": sorted(layer_all - kept)[:30],
        "page_results": pages,
    }


def summarise(docs: list[dict[str, Any]], *, min_words: int, target: float
              ) -> dict[str, Any]:
    pages = [p for d in docs for p in d["page_results"]]
    n_pages = sum(max(1, d["pages"]) for d in docs)
    below = sorted((d for d in docs if d["layer_words"] >= min_words
                    and (d["kept_share"] or 0.0) < target), key=lambda d: d["kept_share"] or 0)
    slowest = sorted(docs, key=lambda d: -d["seconds"])[:10]
    return {
        "documents": len(docs),
        "pages": len(pages),
        "document_outcomes": dict(Counter(d["outcome"] for d in docs).most_common()),
        "page_outcomes": dict(Counter(p["outcome"] for p in pages).most_common()),
        "page_classes": dict(Counter(page_class(p) for p in pages).most_common()),
        "pages_without_text": sum(1 for p in pages if p["blank"]),
        "documents_with_layer_words_at_least": min_words,
        "documents_scored": sum(1 for d in docs if d["layer_words"] >= min_words),
        "kept_share_target": target,
        "documents_below_target": [
            {"file": d["file"], "kept_share": d["kept_share"], "layer_words": d["layer_words"],
             "outcome": d["outcome"], "lost_words": d["lost_words"][:12],
             "pages": [f"{p['page']} {page_class(p)}" for p in d["page_results"]][:6]}
            for d in below],
        "seconds_total": round(sum(d["seconds"] for d in docs), 1),
        "seconds_per_page": round(sum(d["seconds"] for d in docs) / max(1, n_pages), 3),
        "peak_rss_mib": max((d["peak_rss_mib"] for d in docs), default=0.0),
        "peak_rss_mib_per_page_max": max(
            (round(d["peak_rss_mib"] / max(1, d["pages"]), 1) for d in docs), default=0.0),
        "slowest": [{"file": d["file"], "seconds": d["seconds"], "pages": d["pages"],
                     "why": sorted({page_class(p) for p in d["page_results"]}),
                     "routes": dict(Counter(p["route"] for p in d["page_results"]))}
                    for d in slowest],
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sample", default=str(SAMPLE))
    parser.add_argument("--out", default=str(REPO / "bench" / "results" / "pdfjs_sample.json"))
    parser.add_argument("--limit", type=int, default=None)
    parser.add_argument("--only", default="", help="comma-separated file names")
    parser.add_argument("--min-words", type=int, default=20)
    parser.add_argument("--target", type=float, default=0.9)
    parser.add_argument("--resume", action="store_true",
                        help="keep the documents the progress file already holds")
    args = parser.parse_args(argv)
    sample = Path(args.sample)
    if not sample.is_dir():
        raise SystemExit(f"sample absent at {sample}: pass --sample")
    files = sorted(sample.glob("*.pdf"))
    if args.only:
        names = {n.strip() for n in args.only.split(",")}
        files = [f for f in files if f.name in names]
    files = files[: args.limit] if args.limit else files
    result_path = Path(args.out)
    progress = result_path.with_suffix(".progress.jsonl")
    done: dict[str, dict[str, Any]] = {}
    if args.resume and progress.is_file():
        for line in progress.read_text().splitlines():
            row = json.loads(line)
            done[row["file"]] = row
    else:
        progress.unlink(missing_ok=True)
    started = time.monotonic()
    # the code measured is the code at the start (modules and page workers load then)
    commit = git("rev-parse", "--short", "HEAD")
    tree_changed = bool(git("status", "--porcelain", "--", "folio"))
    with tempfile.TemporaryDirectory(prefix="folio-pdfjs-") as tmp:
        out = Path(tmp) / "out"
        config = PipelineConfig.model_validate(
            {"store": {"kind": "none"}, "work_dir": str(Path(tmp) / "work")})
        services = Services(config, str(out))
        try:
            for n, pdf in enumerate(files, 1):
                if pdf.name in done:
                    continue
                row = run_one(pdf, services, config, out)
                done[pdf.name] = row
                with progress.open("a") as fh:
                    fh.write(json.dumps(row) + "\n")
                print(f"[{n}/{len(files)}] {pdf.name:50} {row['outcome']:>11} "
                      f"{row['seconds']:6.1f}s kept {row['kept_share']}", flush=True)
        finally:
            services.close()
    docs = [done[f.name] for f in files if f.name in done]
    result = {
        "command": command(),
        "commit": commit,
        "tree_changed": tree_changed,
        "settings": SETTINGS,
        "wall_seconds": round(time.monotonic() - started, 1),
        "summary": summarise(docs, min_words=args.min_words, target=args.target),
        "documents": docs,
    }
    result_path.write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n")
    print(json.dumps(result["summary"], indent=1, ensure_ascii=False))


if __name__ == "__main__":
    main()
