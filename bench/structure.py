"""Lists, code and heading order (issue 55): what folio keeps of a page's structure.

Runs folio's CPU pipeline as a user gets it by default (engine tesseract, route auto,
layout model on, no vector store), one document at a time, levels the headings as the load
stage does, and scores two sets:

* the corpus's docling PDFs with a JSON ground truth (``docling/groundtruth``), whose
  items are labelled ``list_item`` and ``code``: the share of ground-truth list items that
  folio wrote as a List-Item block (``list_item_recall``; the ground truth's own leading
  glyph tokens, such as ``r`` or ``SM590000`` from a bullet font without Unicode, left
  out), the share found with all their words, none cut off at a line
  (``list_items_whole``), the share of folio's List-Items that are a ground-truth list item
  (``list_item_precision``), the share of ground-truth code items inside one of folio's
  Code-Blocks (``code_recall``: fenced in document.md);
* PDFs made here by LibreOffice from HTML with known lists (bulleted, numbered,
  lettered, nested), headings and code listings (``tests/office_pdf.py``): items found
  with the right marker kind and level, code blocks whose lines come back exactly;

and, on both, heading-order errors (``folio.hierarchy.order``'s rules): a first heading
with no body text before it deeper than the shallowest heading after it (a title under its
sections), a document whose shallowest heading is not level 1, a heading more than one
level under the heading before it.

``--code DIR`` runs another checkout's ``folio`` (``git archive <commit> | tar -x -C DIR``)
with this script, so a ``before`` (main) and an ``after`` run land in one result:

    git archive <main> | tar -x -C /tmp/main
    cd /tmp/main && PYTHONPATH=/tmp/main /path/to/.venv/bin/python /path/to/bench/structure.py \
        --code /tmp/main --phase before --out /path/to/bench/results/structure.json
    .venv/bin/python bench/structure.py --phase after

(the page workers are new interpreters that import folio from their working directory and
``PYTHONPATH``: both must point at the other tree for a ``before`` run).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import re
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]


def _code_path(argv: list[str]) -> str | None:
    if "--code" in argv:
        return argv[argv.index("--code") + 1]
    return None


_CODE = _code_path(sys.argv)
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(REPO))
if _CODE:  # before the editable install's finder, which would find this checkout's folio
    sys.path.insert(0, _CODE)
    sys.meta_path[:] = [f for f in sys.meta_path if "Editable" not in getattr(
        f, "__name__", type(f).__name__)]
    import folio  # noqa: F401  (that checkout's: heading_recall puts this one first)
from _measure import command, corpus_dir, git
from heading_recall import docling_runs, docling_services, normalize, run

from folio.hierarchy.levels import level_document
from folio.models import DocumentResult, PageOutcome


def _office_pdf() -> Any:
    """tests/office_pdf.py of this checkout (``--code``'s tree may not have it)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("office_pdf", REPO / "tests" / "office_pdf.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module

HEADINGS = ("Title", "Section-Header")
#: leading tokens of a ground-truth list item that are its bullet glyph read without
#: Unicode (``r``, ``SM590000``, C1 controls), not its words
_GT_GLYPHS = re.compile(r"^(?:(?:[^\w\s]|\w|SM\d+|[\x80-\x9f]+)\s+)+")

#: documents with known structure: (name, html, [(marker kind, level, text)], [code])
_LISTS = """<h1>Field Guide to Garden Birds</h1>
<h2>Feeding</h2><p>Birds visit a feeder for three reasons:</p>
<ul><li>seeds in winter, when insects are scarce</li><li>water on hot days</li>
<li>shelter near the hedge<ul><li>dense shrubs</li><li>nest boxes
<ul><li>open fronted</li><li>hole fronted</li></ul></li></ul></li></ul>
<p>Fill the feeder in this order:</p>
<ol><li>Clean the tray with hot water</li><li>Let it dry in the sun</li>
<li>Pour the seed mix</li></ol>
<h2>Watching</h2><h3>Equipment</h3><p>Three things make watching easier:</p>
<ol type="a"><li>binoculars with a wide field</li><li>a notebook</li><li>patience</li></ol>
<p>Count the birds in 2019. The count was repeated in 2020 and gave the same numbers.</p>
"""
_LISTS_TRUTH = [
    ("-", 1, "seeds in winter, when insects are scarce"), ("-", 1, "water on hot days"),
    ("-", 1, "shelter near the hedge"), ("-", 2, "dense shrubs"), ("-", 2, "nest boxes"),
    ("-", 3, "open fronted"), ("-", 3, "hole fronted"),
    ("1", 1, "Clean the tray with hot water"), ("1", 1, "Let it dry in the sun"),
    ("1", 1, "Pour the seed mix"),
    ("a", 1, "binoculars with a wide field"), ("a", 1, "a notebook"), ("a", 1, "patience"),
]
_CODE_HTML = """<h2>Setup</h2><p>Install the package and run the checker below.</p>
<pre>import sys

def check(paths):
    for path in paths:
        if not path.endswith(".pdf"):
            print("skip", path)
    return 0</pre>
<p>The function returns zero when every file was read.</p>
<pre>$ folio ingest ./pdfs --out ./results</pre>
"""
_CODE_TRUTH = [
    'import sys\n\ndef check(paths):\n    for path in paths:\n        if not path.endswith'
    '(".pdf"):\n            print("skip", path)\n    return 0',
    "$ folio ingest ./pdfs --out ./results"]


def _blocks(doc: DocumentResult | None) -> list[Any]:
    if doc is None:
        return []
    return [b for p in sorted(doc.pages, key=lambda p: p.index)
            if p.outcome != PageOutcome.QUARANTINED
            for b in sorted(p.blocks, key=lambda b: b.order)]


def heading_order_errors(doc: DocumentResult | None) -> dict[str, int]:
    """Violations of the document's heading order (see the module's docstring)."""
    blocks = _blocks(doc)
    heads = [(b, b.level) for b in blocks if b.label in HEADINGS and b.level is not None]
    errors = {"title_below_sections": 0, "top_not_level_1": 0, "jumps": 0}
    if not heads:
        return errors
    levels = [level for _, level in heads]
    first = heads[0][0]
    body_before = any(b.label in ("Text", "List-Item", "Table", "Code-Block")
                      for b in blocks[:blocks.index(first)])
    if len(levels) > 1 and not body_before and levels[0] > min(levels[1:]):
        errors["title_below_sections"] = 1
    errors["top_not_level_1"] = int(min(levels) != 1)
    previous = 0
    for level in levels:
        errors["jumps"] += int(level > previous + 1)
        previous = level
    return errors


def _gt_items(gt: dict[str, Any], label: str) -> list[str]:
    out = []
    for item in gt.get("texts", []):
        if item.get("label") == label and item.get("text", "").strip():
            text = item["text"] if label == "code" else _GT_GLYPHS.sub("", item["text"])
            if normalize(text):
                out.append(normalize(text))
    return out


def _matches(truth: str, found: str) -> bool:
    """One holds the other (the first 60 characters of the longer one's words), or they
    are the same item split or joined differently."""
    if not truth or not found:
        return False
    short, long_ = sorted((truth, found), key=len)
    return short[:60] in long_ and len(short) >= 0.5 * min(len(long_), 60)


def score_docling(gt: dict[str, Any], doc: DocumentResult | None) -> dict[str, Any]:
    blocks = _blocks(doc)
    items = [normalize(b.content) for b in blocks if b.label == "List-Item"]
    code = " ".join(normalize(b.content) for b in blocks if b.label == "Code-Block")
    truth_items, truth_code = _gt_items(gt, "list_item"), _gt_items(gt, "code")
    return {
        "truth_list_items": len(truth_items),
        "list_items_found": sum(any(_matches(t, f) for f in items) for t in truth_items),
        # found with all their words: a wrapped item cut at its line is found above
        "list_items_whole": sum(t in items for t in truth_items),
        "folio_list_items": len(items),
        "folio_list_items_true": sum(any(_matches(t, f) for t in truth_items) for f in items),
        "truth_code": len(truth_code),
        "code_found": sum(bool(t) and t[:60] in code for t in truth_code),
        "heading_order_errors": heading_order_errors(doc),
    }


def _kind(marker: str | None) -> str | None:
    if marker is None:
        return None
    if marker == "-":
        return "-"
    return "1" if marker.strip("().").isdigit() else "a"


def score_made(doc: DocumentResult | None, items: list[tuple[str, int, str]],
               code: list[str]) -> dict[str, Any]:
    blocks = _blocks(doc)
    got = [(_kind(b.marker), b.level, normalize(b.content)) for b in blocks
           if b.label == "List-Item"]
    code_found = [b.content for b in blocks if b.label == "Code-Block"]
    return {
        "truth_list_items": len(items),
        "list_items_found": sum(any(normalize(t) == g[2] for g in got) for _, _, t in items),
        "list_items_with_marker_and_level": sum(
            (kind, level, normalize(t)) in got for kind, level, t in items),
        "folio_list_items": len(got),
        "truth_code": len(code),
        "code_exact": sum(c in code_found for c in code),
        "heading_order_errors": heading_order_errors(doc),
    }


def _total(rows: list[dict[str, Any]]) -> dict[str, Any]:
    keys = [k for k in rows[0] if isinstance(rows[0][k], int)] if rows else []
    out: dict[str, Any] = {k: sum(r[k] for r in rows) for k in keys}
    out["heading_order_errors"] = {k: sum(r["heading_order_errors"][k] for r in rows)
                                   for k in ("title_below_sections", "top_not_level_1",
                                             "jumps")}
    return out


def _share(num: int, den: int) -> float | None:
    return round(num / den, 4) if den else None


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", default=str(corpus_dir()))
    parser.add_argument("--out", default=str(REPO / "bench" / "results" / "structure.json"))
    parser.add_argument("--phase", default="after", help="the key this run is written under")
    parser.add_argument("--code", default=None, help="a checkout whose folio is run")
    args = parser.parse_args(argv)
    corpus = Path(args.corpus).resolve()
    started = time.monotonic()
    docling: list[dict[str, Any]] = []
    made: list[dict[str, Any]] = []
    with docling_services(corpus, "folio-structure-") as (services, config):
        for gt_file, pdf, doc, _, error in docling_runs(corpus, services, config):
            if doc is not None:
                level_document(doc)
            row = score_docling(json.loads(gt_file.read_text()), doc)
            docling.append({"source": f"docling/{pdf.name}", "error": error, **row})
            print(pdf.name, json.dumps(row), flush=True)
        with tempfile.TemporaryDirectory(prefix="folio-structure-made-") as tmp:
            for name, html, items, code in (("lists", _LISTS, _LISTS_TRUTH, []),
                                            ("code", _CODE_HTML, [], _CODE_TRUTH)):
                pdf = _office_pdf().html_to_pdf(f"<html><body>{html}</body></html>", Path(tmp) / name, name)
                doc, _, error = run(pdf, services, config)
                if doc is not None:
                    level_document(doc)
                row = score_made(doc, items, code)
                made.append({"source": f"made/{name}.pdf", "error": error, **row})
                print(name, json.dumps(row), flush=True)
    dt_, mt = _total(docling), _total(made)
    summary = {
        "docling": {
            "list_item_recall": _share(dt_["list_items_found"], dt_["truth_list_items"]),
            "list_items_whole": _share(dt_["list_items_whole"], dt_["truth_list_items"]),
            "list_item_precision": _share(dt_["folio_list_items_true"], dt_["folio_list_items"]),
            "code_recall": _share(dt_["code_found"], dt_["truth_code"]),
            "heading_order_errors": dt_["heading_order_errors"], "counts": dt_},
        "made": {
            "list_item_recall": _share(mt["list_items_found"], mt["truth_list_items"]),
            "list_items_with_marker_and_level": _share(mt["list_items_with_marker_and_level"],
                                                       mt["truth_list_items"]),
            "code_blocks_exact": _share(mt["code_exact"], mt["truth_code"]),
            "heading_order_errors": mt["heading_order_errors"], "counts": mt},
        "wall_seconds": round(time.monotonic() - started, 1),
        "per_document": docling + made,
    }
    print(json.dumps({k: v for k, v in summary.items() if k != "per_document"}, indent=1))
    out = Path(args.out)
    result: dict[str, Any] = json.loads(out.read_text()) if out.is_file() else {}
    code_dir = Path(args.code) if args.code else REPO
    result.update({
        "measure": __doc__.split("\n\n")[1].replace("\n", " "),
        "configuration": "folio's defaults (engine tesseract, route auto, layout model on); "
                         "store none: lists, code and levels are scored on the blocks",
        "settings": {"store.kind": "none: embeddings do not change blocks or levels",
                     "runner": "folio.pipeline.process_document, one document at a time"},
    })
    result[args.phase] = {
        "command": command(argv=None if argv is None else ["bench/structure.py", *argv]),
        "commit": git("rev-parse", "--short", "HEAD") if not args.code else
        f"the tree at {code_dir} (see its phase's note)",
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        **summary,
    }
    out.write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
