"""Figures as images (folio.figures): how many of docling's ground-truth pictures folio
finds, what the crops cost, and the GPU path's crops against a Chandra answer's boxes.

CPU path: every docling PDF with ground truth (``docling/groundtruth/*.json``: its
``pictures`` with their page and box, pages without any count for precision) through
the pipeline as a user runs it, once with figures on (the default, ``figures.mode =
crops``) and once off (``none``), each run in a process of its own, alternating, the
CPU seconds of the whole process tree measured (page workers, crop child, layout model).

* recall / precision: a ground-truth picture is found when a Picture block of its page
  overlaps it with IoU >= 0.5 (one block per picture, best first);
* extra CPU seconds a page: median CPU seconds of the ``crops`` runs minus the ``none``
  runs', over the pages;
* bytes per figure: the crops' bytes over their number.

GPU path: picture_classification.pdf read by ``--preset chandra2`` through the OpenAI
test double (tests/openai_fake.py) answering every page with a Chandra 2 answer that
holds an Image and a Figure div; each Picture's box against the answer's box (IoU), each
crop's pixels against the box at the crop resolution, links to Chandra's own names left
in document.md, links that do not resolve.

With ``--main-tree DIR`` (main exported there: ``git archive main | tar -x -C DIR``) the
same documents also go through main's pipeline, each round: the whole feature's CPU cost
(finding the pictures, the image objects, the crops) is the ``crops`` runs' over those.

Usage: ``.venv/bin/python bench/figures.py [--rounds 2] [--main-tree DIR]`` (writes
bench/results/figures.json).
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._measure import corpus_dir, git, median, save, tree_cpu_seconds

#: settings changed from the defaults, with why (everything else is as a user runs it)
CHANGED = {
    "store.kind": ("none", "no embedding and vector writes: the same in both modes, and "
                   "minutes of CPU on this 2-core machine that would only add noise"),
    "validation.enabled": (False, "Great Expectations' load and suite: the same in both "
                           "modes (noise); the figure step runs before it"),
}
_LINK = re.compile(r"!\[[^\n]*?\]\(([^)]*)\)")
#: folio's default smallest figure (figures.min_side_pt)
MIN_SIDE_PT = 48.0


def _iou(a: tuple[float, ...], b: tuple[float, ...]) -> float:
    w = min(a[2], b[2]) - max(a[0], b[0])
    h = min(a[3], b[3]) - max(a[1], b[1])
    inter = max(0.0, w) * max(0.0, h)
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union if union > 0 else 0.0


def truth(path: Path) -> tuple[dict[int, list[tuple[float, ...]]], int]:
    """docling's pictures by page (from 1) as top-left boxes in points, and its pages."""
    data = json.loads(path.read_text())
    pages = {int(k): v["size"]["height"] for k, v in data.get("pages", {}).items()}
    found: dict[int, list[tuple[float, ...]]] = {}
    for picture in data.get("pictures", []):
        for prov in picture.get("prov", []):
            box, page = prov["bbox"], int(prov["page_no"])
            if box.get("coord_origin") == "BOTTOMLEFT":
                height = pages[page]
                found.setdefault(page, []).append(
                    (box["l"], height - box["t"], box["r"], height - box["b"]))
            else:
                found.setdefault(page, []).append((box["l"], box["t"], box["r"], box["b"]))
    return found, len(pages)


def score(expected: dict[int, list[tuple[float, ...]]],
          got: dict[int, list[tuple[float, ...]]]) -> tuple[int, int, int]:
    """(matched, ground-truth pictures, found pictures): greedy, best IoU first."""
    matched = 0
    for page in set(expected) | set(got):
        pairs = sorted(((_iou(e, g), i, j) for i, e in enumerate(expected.get(page, []))
                        for j, g in enumerate(got.get(page, []))), reverse=True)
        used_e: set[int] = set()
        used_g: set[int] = set()
        for value, i, j in pairs:
            if value < 0.5:
                break
            if i in used_e or j in used_g:
                continue
            used_e.add(i)
            used_g.add(j)
            matched += 1
    return (matched, sum(len(v) for v in expected.values()),
            sum(len(v) for v in got.values()))


def one_run(mode: str, out: str, sources: list[str], extra: dict[str, Any]) -> dict[str, Any]:
    """One pipeline run in this process: its CPU seconds and each document's pictures."""
    from folio.io.sources import discover
    from folio.pipeline import Services, process_documents
    from folio.settings.config import PipelineConfig

    config = PipelineConfig.model_validate({
        "store": {"kind": "none"}, "validation": {"enabled": False},
        "work_dir": str(Path(out) / "work"), "figures": {"mode": mode}, **extra})
    started_cpu, started = tree_cpu_seconds(), time.monotonic()
    services = Services(config, str(Path(out) / "out"))
    try:
        docs = process_documents(discover(sources, config.s3), services)
    finally:
        services.close()
    cpu, wall = tree_cpu_seconds() - started_cpu, time.monotonic() - started
    result: dict[str, Any] = {"cpu_s": cpu, "wall_s": wall, "documents": {}}
    for doc in docs:
        markdown = Path(doc.outputs["markdown"]) if doc.outputs.get("markdown") else None
        links = _LINK.findall(markdown.read_text()) if markdown else []
        result["documents"][Path(doc.source).name] = {
            "outcome": doc.outcome.value, "pages": doc.page_count,
            # getattr: the same function runs main's pipeline (--main-tree), without them
            "figures": getattr(doc, "figures", 0),
            "figure_bytes": getattr(doc, "figure_bytes", 0),
            "links": len(links),
            "dangling": sum(1 for t in links if markdown and not (markdown.parent / t).is_file()),
            "pictures": [{"page": p.index + 1, "bbox": [b.bbox.x0, b.bbox.y0, b.bbox.x1, b.bbox.y1],
                          "image": b.image, "width_pt": p.width_pt, "height_pt": p.height_pt}
                         for p in doc.pages for b in p.blocks
                         if b.label == "Picture" and b.bbox is not None]}
    return result


def _child(mode: str, sources: list[str], extra: dict[str, Any],
           script: str = __file__) -> dict[str, Any]:
    out = tempfile.mkdtemp(prefix=f"figures-{mode}-")
    try:
        proc = subprocess.run([sys.executable, script, "--one", mode, "--out", out,
                               "--extra", json.dumps(extra), *sources],
                              capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            raise RuntimeError(proc.stderr[-2000:])
        return dict(json.loads(proc.stdout.strip().splitlines()[-1]))
    finally:
        shutil.rmtree(out, ignore_errors=True)


CHANDRA2_ANSWER = (
    '<div data-bbox="80 40 920 80" data-label="Section-Header"><h2>Figures Example</h2></div>'
    '<div data-bbox="80 90 920 300" data-label="Text"><p>Lorem ipsum dolor sit amet.</p></div>'
    '<div data-bbox="200 380 800 650" data-label="Image"><img alt="An example picture"/></div>'
    '<div data-bbox="370 665 630 680" data-label="Caption"><p>Figure 1: This is an example '
    'image.</p></div>'
    '<div data-bbox="100 700 500 950" data-label="Figure"><img alt="Bar chart"/></div>'
)
_ANSWER_BOXES = [(200, 380, 800, 650), (100, 700, 500, 950)]


def gpu_path(pdf: Path) -> dict[str, Any]:
    """Chandra 2 through the OpenAI test double (see the module's docstring)."""
    from PIL import Image

    from tests.openai_fake import FakeServer

    with FakeServer(output=CHANDRA2_ANSWER) as fake:
        extra = {"ocr": {"engine": "openai", "endpoint": fake.url, "model": "fake-ocr",
                         "preset": "chandra2"}, "route": {"mode": "ocr"}}
        out = tempfile.mkdtemp(prefix="figures-gpu-")
        try:
            run = one_run("crops", out, [str(pdf)], extra)
            (doc,) = run["documents"].values()
            folder = next(Path(out, "out").glob("*/document.md")).parent
            markdown = (folder / "document.md").read_text()
            ious, pixel_error = [], []
            for n, picture in enumerate(doc["pictures"]):
                w, h = picture["width_pt"], picture["height_pt"]
                a = _ANSWER_BOXES[n % 2]
                answer = (a[0] * w / 1000, a[1] * h / 1000, a[2] * w / 1000, a[3] * h / 1000)
                ious.append(_iou(tuple(picture["bbox"]), answer))
                with Image.open(folder / picture["image"]) as image:
                    box = picture["bbox"]
                    want = ((box[2] - box[0]) * 150 / 72, (box[3] - box[1]) * 150 / 72)
                    pixel_error.append(max(abs(image.width - want[0]), abs(image.height - want[1])))
        finally:
            shutil.rmtree(out, ignore_errors=True)
    return {"document": pdf.name, "answer_figures": 2 * doc["pages"],
            "pictures": len(doc["pictures"]), "crops": doc["figures"],
            "min_iou_with_answer_box": round(min(ious), 4) if ious else None,
            "max_crop_pixel_error": round(max(pixel_error), 2) if pixel_error else None,
            "links": doc["links"], "dangling_links": doc["dangling"],
            "chandra_names_left": markdown.count("_img.webp")}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--one")
    parser.add_argument("--out")
    parser.add_argument("--extra", default="{}")
    parser.add_argument("--main-tree", help="a checkout of main (git archive main | tar -x "
                        "-C DIR): its pipeline is run too, for the whole feature's cost")
    parser.add_argument("sources", nargs="*")
    args = parser.parse_args()
    if args.one:  # a child: one run, its result as the last line
        print(json.dumps(one_run(args.one, args.out, args.sources, json.loads(args.extra))))
        return

    docling = corpus_dir() / "docling"
    truths = {p.stem: truth(p) for p in sorted((docling / "groundtruth").glob("*.json"))
              if (docling / f"{p.stem}.pdf").is_file()}
    sources = [str(docling / f"{stem}.pdf") for stem in truths]
    pages = sum(n for _, n in truths.values())
    runs: dict[str, list[dict[str, Any]]] = {"none": [], "crops": []}
    probe = None
    if args.main_tree:  # this script in main's tree imports main's folio
        probe = Path(args.main_tree) / "bench" / "figures_probe.py"
        shutil.copy(__file__, probe)
        runs["main"] = []
    for _ in range(args.rounds):
        for mode in ("none", "crops"):
            runs[mode].append(_child(mode, sources, {}))
        if probe is not None:
            runs["main"].append(_child("none", sources, {}, str(probe)))
    last = runs["crops"][-1]["documents"]
    per_doc: dict[str, Any] = {}
    totals = [0, 0, 0]
    big = [0, 0]  # ground-truth pictures at least figures.min_side_pt on their shorter side
    for stem, (expected, _) in truths.items():
        doc = last[f"{stem}.pdf"]
        got: dict[int, list[tuple[float, ...]]] = {}
        for picture in doc["pictures"]:
            got.setdefault(picture["page"], []).append(tuple(picture["bbox"]))
        matched, want, found = score(expected, got)
        sized = {page: [b for b in boxes if min(b[2] - b[0], b[3] - b[1]) >= MIN_SIDE_PT]
                 for page, boxes in expected.items()}
        sized_matched, sized_want, _ = score(sized, got)
        big = [big[0] + sized_matched, big[1] + sized_want]
        totals = [totals[0] + matched, totals[1] + want, totals[2] + found]
        per_doc[stem] = {"pages": doc["pages"], "truth": want, "found": found,
                         "matched": matched, "crops": doc["figures"],
                         "bytes": doc["figure_bytes"], "links": doc["links"],
                         "dangling_links": doc["dangling"]}
    crops = sum(d["crops"] for d in per_doc.values())
    crop_bytes = sum(d["bytes"] for d in per_doc.values())
    cpu = {mode: [round(r["cpu_s"], 2) for r in rs] for mode, rs in runs.items()}
    extra = median(cpu["crops"]) - median(cpu["none"])
    save("figures", {
        "commit": git("rev-parse", "--short", "HEAD"),
        "tree_changed": bool(git("status", "--porcelain", "--", "folio")),
        "changed_settings": {k: {"value": v, "why": why} for k, (v, why) in CHANGED.items()},
        "documents": len(truths), "pages": pages,
        "cpu_path": {
            "recall": round(totals[0] / totals[1], 3) if totals[1] else None,
            "precision": round(totals[0] / totals[2], 3) if totals[2] else None,
            "truth_pictures": totals[1], "found_pictures": totals[2], "matched": totals[0],
            "recall_of_pictures_not_tiny": round(big[0] / big[1], 3) if big[1] else None,
            "not_tiny_note": f"ground-truth pictures whose shorter side is at least "
                             f"{MIN_SIDE_PT:g} pt (figures.min_side_pt): docling counts logos "
                             "and icons as pictures, folio leaves them out by design",
            "truth_pictures_not_tiny": big[1],
            "iou_threshold": 0.5,
            "cpu_s_runs": cpu,
            "extra_cpu_s_per_page": round(extra / pages, 4),
            "extra_cpu_note": "crops over figures.mode none: rendering, encoding and "
                              "writing the crops; finding the pictures runs in both",
            "extra_cpu_s_per_page_vs_main": (
                round((median(cpu["crops"]) - median(cpu["main"])) / pages, 4)
                if "main" in cpu else None),
            "crops": crops, "crop_bytes": crop_bytes,
            "bytes_per_figure": round(crop_bytes / crops) if crops else None,
            "dangling_links": sum(d["dangling_links"] for d in per_doc.values()),
            "per_document": per_doc,
        },
        "gpu_path_chandra2_openai_double": gpu_path(docling / "picture_classification.pdf"),
    })


if __name__ == "__main__":
    main()
