"""Does folio lose anything of olmOCR 2's answers? A replay of olmOCR's own outputs.

``olmocr/bench_answers/`` in the corpus holds what the olmOCR pipeline itself (olmOCR 2's
weights, its prompt) wrote for page 1 of each PDF in ``olmocr/bench/``. This bench serves
those answers, with their YAML front matter put back as the model writes it, through the
OpenAI test double (``tests/openai_fake.py``: each request gets the answer of the page
whose image it carries) to ``folio ingest --engine openai --preset olmocr2``, once on the
default route, once on the OCR route and once on route auto (trusted text layers kept),
and scores folio's page markdown and the answers
themselves with the pages' olmOCR unit tests (olmOCR's own test code when the ``olmocr``
package is installed, else ``bench/fidelity_scoring.py``; math tests excluded
everywhere: they need a KaTeX renderer in a browser). Where the model's answer reaches
folio intact, folio's score equals the answers' own.

    .venv/bin/python bench/replay_fidelity.py [--corpus DIR] [--out PATH] [--keep DIR]

``--keep DIR`` leaves folio's outputs there (``out-default/``, ``out-ocr/``, ``out-auto/``)
to read.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import types
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))
sys.path.insert(0, str(REPO))
from fidelity_scoring import pass_rates, run_olmocr_test

from folio.settings.presets import get_preset
from tests.openai_fake import FakeServer, ImageAnswer, thumbnail_distance

PRESET = "olmocr2"
#: what olmOCR strips from the model's answer before writing it (bench_answers/README.md)
FRONT_MATTER = ("---\nprimary_language: en\nis_rotation_valid: True\nrotation_correction: 0\n"
                "is_table: False\nis_diagram: False\n---\n")
#: route row -> the CLI arguments that pick it (none: the route a user gets by default)
ROUTES: dict[str, list[str]] = {"default": [], "ocr": ["--route", "ocr"],
                                "auto": ["--route", "auto"]}
EXCLUDED_TYPES = frozenset({"math"})
#: every way a run here differs from `folio ingest` as a user with olmOCR 2 runs it
SETTINGS: dict[str, dict[str, str]] = {
    "ocr.endpoint": {"value": "the OpenAI test double (tests/openai_fake.py) on 127.0.0.1",
                     "why": "it replays olmOCR's own answers page by page (the nearest "
                            "reference image) in place of a GPU server running the model; it "
                            "serves the preset's model id, so folio discovers it as it would"},
    "route.mode": {"value": "ocr in the ocr row, auto in the auto row; the default row leaves "
                            "the route alone",
                   "why": "ocr: every page goes to the model, as olmOCR sends every page; auto: "
                          "the option that keeps trusted text layers, measured beside it"},
    "store.kind": {"value": "none", "why": "scored on the markdown, which embeddings and the "
                   "vector store do not change"},
    "prefect": {"value": "FOLIO_PREFECT_SERVER=ephemeral, PREFECT_HOME in a temporary folder",
                "why": "no background server outlives the bench"},
    "out": {"value": "a fresh temporary folder per route", "why": "nothing is reused between rows"},
}

Scorer = Callable[[dict[str, Any], str | None], tuple[bool, str]]


@dataclass
class Page:
    """One bench page with olmOCR's answer for it."""

    stem: str
    pdf: Path
    answer: str  # as olmOCR wrote it: front matter stripped
    tests: list[dict[str, Any]]  # math excluded
    math_excluded: int


def corpus_dir(arg: str | None = None) -> Path:
    return Path(arg or os.environ.get("FOLIO_CORPUS_DIR", str(REPO.parent / "shared" / "corpus")))


def load_pages(corpus: Path) -> tuple[list[Page], list[str]]:
    """Bench pages that have an answer, and the stems skipped (no answer file)."""
    bench, answers = corpus / "olmocr" / "bench", corpus / "olmocr" / "bench_answers"
    pages, skipped = [], []
    for pdf in sorted(bench.glob("*.pdf")):
        answer = answers / f"{pdf.stem}_pg1_repeat1.md"
        tests_file = bench / f"{pdf.stem}.tests.jsonl"
        if not answer.is_file() or not tests_file.is_file():
            skipped.append(pdf.stem)
            continue
        tests = [json.loads(line) for line in tests_file.read_text().splitlines() if line.strip()]
        tests = [t for t in tests if int(t.get("page", 1)) == 1]
        kept = [t for t in tests if t["type"] not in EXCLUDED_TYPES]
        pages.append(Page(pdf.stem, pdf, answer.read_text(), kept, len(tests) - len(kept)))
    return pages, skipped


def replayed(page: Page) -> str:
    """The answer as the model sends it: front matter back in front of the text."""
    return FRONT_MATTER + page.answer


def reference_answers(pages: list[Page]) -> list[ImageAnswer]:
    """Each page's answer, keyed by page 1 of its PDF rendered with pypdfium2 (144 DPI:
    near folio's own render size, so thin text blurs alike in both thumbnails)."""
    import pypdfium2 as pdfium

    answers = []
    for page in pages:
        doc = pdfium.PdfDocument(str(page.pdf))
        try:
            image = doc[0].render(scale=2.0).to_pil()
        finally:
            doc.close()
        answers.append(ImageAnswer.of(page.stem, image, replayed(page)))
    return answers


def olmocr_scorer() -> tuple[str, Scorer]:
    """olmOCR's own tests (``olmocr.bench.tests``) when installed, else folio's rewrite.
    Without playwright, olmOCR's KaTeX renderer is stubbed: only math tests use it."""
    try:
        import playwright  # noqa: F401
    except ImportError:
        render = types.ModuleType("olmocr.bench.katex.render")

        def unavailable(*_: Any, **__: Any) -> Any:
            raise RuntimeError("math tests need playwright and KaTeX; excluded here")

        render.render_equation = render.compare_rendered_equations = unavailable  # type: ignore[attr-defined]
        katex = types.ModuleType("olmocr.bench.katex")
        katex.render = render  # type: ignore[attr-defined]
        sys.modules.setdefault("olmocr.bench.katex", katex)
        sys.modules.setdefault("olmocr.bench.katex.render", render)
    try:
        tests = importlib.import_module("olmocr.bench.tests")
        name = f"olmocr {version('olmocr')} olmocr.bench.tests"
    except (ImportError, PackageNotFoundError):
        return "folio bench/fidelity_scoring.py (olmocr not installed)", run_olmocr_test

    def score(test: dict[str, Any], text: str | None) -> tuple[bool, str]:
        if text is None:
            return False, "folio produced no page (document or page failed)"
        passed, why = tests.load_single_test(test).run(text)
        return bool(passed), str(why)

    return name, score


def score_text(page: Page, text: str | None, scorer: Scorer) -> list[dict[str, Any]]:
    results = []
    for test in page.tests:
        passed, why = scorer(test, text)
        results.append({"id": test["id"], "type": test["type"], "passed": passed, "why": why})
    return results


def ingest(src: Path, out: Path, url: str, route_args: list[str], work: Path,
           tree: Path | None = None) -> tuple[list[str], int]:
    """Run ``folio ingest`` on the folder: (command, exit code). A failing run is scored
    all the same: its quarantined or missing pages fail their tests. ``tree``: the folio
    of another checkout (an earlier commit, for a before/after), run as a module."""
    folio = ([sys.executable, "-m", "folio_prefect.flows.cli"] if tree
             else [str(Path(sys.executable).with_name("folio"))])
    cmd = [*folio, "ingest", str(src), "--out", str(out), "--engine", "openai",
           "--endpoint", url, "--preset", PRESET, "--store", "none", "--quiet",
           "--report", str(out / "run.json"), *route_args]
    env = {**os.environ, "FOLIO_PREFECT_SERVER": "ephemeral",
           "PREFECT_HOME": str(work / "prefect"), "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
           "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "120",
           **({"PYTHONPATH": str(tree)} if tree else {})}
    # ``python -m`` puts the working folder first on the path: the other tree's, then
    return cmd, subprocess.run(cmd, env=env, timeout=900, cwd=tree).returncode


def folio_pages(out: Path) -> dict[str, dict[str, Any]]:
    """PDF stem -> folio's record of its page 1 (pages.jsonl)."""
    found = {}
    for path in out.glob("*/pages.jsonl"):
        for line in path.read_text().splitlines():
            record = json.loads(line)
            if record.get("page_number", record["page"]) == 1:  # both from 1
                found[Path(record["source"]).stem] = record
    return found


def failures(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: r[k] for k in ("id", "type", "why")} for r in results if not r["passed"]]


def request_evidence(log: list[dict[str, Any]]) -> dict[str, Any]:
    return {"requests": len(log), "answers": dict(Counter(str(e["answer"]) for e in log)),
            "max_distance": max((e["distance"] or 0.0 for e in log), default=None),
            "min_runner_up_distance": min((e["runner_up_distance"] for e in log
                                           if e["runner_up_distance"] is not None), default=None),
            **{f"{k}_seen": sorted({e[k] for e in log if e[k] is not None})
               for k in ("max_tokens", "temperature", "top_p")},
            "log": log}


def run(corpus: Path, keep: Path | None = None, tree: Path | None = None) -> dict[str, Any]:
    pages, skipped = load_pages(corpus)
    if not pages:
        raise SystemExit(f"no bench pages with answers under {corpus}/olmocr")
    scorer_name, scorer = olmocr_scorer()
    refs = reference_answers(pages)
    separation = min(thumbnail_distance(a.thumb, b.thumb) for a in refs for b in refs if a is not b)
    all_answers: list[dict[str, Any]] = []
    rows: dict[str, dict[str, Any]] = {
        p.stem: {"stem": p.stem, "tests": len(p.tests), "math_excluded": p.math_excluded}
        for p in pages}
    for page in pages:
        results = score_text(page, page.answer, scorer)
        all_answers += results
        rows[page.stem]["answer"] = {"pass_rate": pass_rates(results)["pass_rate"],
                                     "failed": failures(results)}
    summary: dict[str, Any] = {"answers": pass_rates(all_answers)}
    requests: dict[str, Any] = {"min_distance_between_references": round(separation, 2)}
    commands = []
    with tempfile.TemporaryDirectory(prefix="replay-fidelity-") as tmp, \
            FakeServer(model=get_preset(PRESET).default_model, by_image=refs) as fake:
        work = keep or Path(tmp)
        if keep:
            shutil.rmtree(keep, ignore_errors=True)
        src = work / "pdfs"
        src.mkdir(parents=True)
        for page in pages:
            shutil.copy(page.pdf, src / page.pdf.name)
        for route, route_args in ROUTES.items():
            logged = len(fake.state.log)
            out = work / f"out-{route}"
            cmd, code = ingest(src, out, fake.url, route_args, work, tree)
            commands.append(shlex.join(["folio", *cmd[1:]]).replace(str(work), "$WORK"))
            got = folio_pages(out)
            every: list[dict[str, Any]] = []
            routes: Counter[str] = Counter()
            for page in pages:
                record = got.get(page.stem)
                text = None if record is None or record["outcome"] == "quarantined" else record["markdown"]
                results = score_text(page, text, scorer)
                every += results
                routes[str(record and record["route"])] += 1
                rows[page.stem][f"folio_{route}_route"] = {
                    "route": record and record["route"], "engine": record and record["engine"],
                    "outcome": record and record["outcome"], "reason": record and record["reason"],
                    "same_text_as_answer": text is not None and text.strip() == page.answer.strip(),
                    "pass_rate": pass_rates(results)["pass_rate"], "failed": failures(results)}
            answer_passed = {r["id"] for r in all_answers if r["passed"]}
            folio_passed = {r["id"] for r in every if r["passed"]}
            summary[f"folio_{route}_route"] = {
                "folio_exit_code": code, "pages_by_route_taken": dict(routes),
                # tests the answers pass and folio fails, and the other way round
                "tests_lost": sorted(answer_passed - folio_passed),
                "tests_gained": sorted(folio_passed - answer_passed), **pass_rates(every)}
            requests[route] = request_evidence(fake.state.log[logged:])
    return {"scorer": scorer_name, "excluded_test_types": sorted(EXCLUDED_TYPES),
            "folio_commands": commands, "skipped_no_answer": skipped,
            "pages": list(rows.values()), "summary": summary, "requests": requests}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", help="default: FOLIO_CORPUS_DIR or ../shared/corpus")
    parser.add_argument("--out", default=str(REPO / "bench" / "results" / "replay_fidelity.json"))
    parser.add_argument("--keep", type=Path, help="keep folio's outputs in this folder")
    parser.add_argument("--folio-tree", type=Path, help="score the folio of this checkout "
                        "(e.g. a git worktree at an earlier commit) instead of this one")
    args = parser.parse_args()
    tree = args.folio_tree.resolve() if args.folio_tree else None
    corpus = corpus_dir(args.corpus).resolve()
    if not (corpus / "olmocr" / "bench_answers").is_dir():
        raise SystemExit(f"no olmocr/bench_answers under {corpus}: pass --corpus or set FOLIO_CORPUS_DIR")
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=tree or REPO, capture_output=True,
                            text=True).stdout.strip()
    changed = subprocess.run(["git", "status", "--porcelain", "--", "folio"], cwd=tree or REPO,
                             capture_output=True, text=True).stdout.split("\n")
    result = {"command": shlex.join([".venv/bin/python", "bench/replay_fidelity.py", *sys.argv[1:]]),
              "commit": commit, "uncommitted_folio_changes": [c[3:] for c in changed if c],
              "settings": SETTINGS, **run(corpus, args.keep and args.keep.resolve(), tree)}
    Path(args.out).write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n")
    print(json.dumps(result["summary"], indent=1))


if __name__ == "__main__":
    main()
