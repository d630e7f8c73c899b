"""Move folio's flat modules into packages named for what they hold, and rewrite every
reference to them, idempotently.

    python scripts/restructure.py            # move what is still at its old place, rewrite
    python scripts/restructure.py --check    # exit 1 when a move or a rewrite is pending

Why a script rather than a one-off commit: other branches keep adding code that names the
old places (``from folio.config import ...``, ``monkeypatch.setattr("folio.chunking.X")``,
``python -m folio.validation_child``, ``folio/layout.py`` in a doc). Running this again
after they are merged fixes their references as well: step (b) reads the whole tree every
time, whatever is already moved.

(a) each module of :data:`MOVES` still at its old place is ``git mv``-ed to its new one;
    a package it lands in gets an ``__init__.py`` with the docstring of :data:`PACKAGES`.
    A module found at both places (a merge recreated the old file) is reported and left for
    a hand fix: the two versions must be merged by a person.
(b) every text file under :data:`ROOTS` (and the files of :data:`FILES`) is rewritten:
    ``folio.OLD`` -> ``folio.PKG.OLD`` (imports, dotted strings, ``-m`` arguments, mypy
    overrides), ``folio/OLD.py`` -> ``folio/PKG/OLD.py`` (paths in docs, Makefile), and
    ``from folio import OLD`` -> ``from folio.PKG import OLD`` (split per package when one
    statement names several). Module names stay as they were, so the names a module binds
    do not change and no call site needs more than its import.
"""

from __future__ import annotations

import argparse
import ast
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

#: package -> what belongs there (the docstring of its ``__init__.py``)
PACKAGES: dict[str, str] = {
    "page": (
        "What is on a page, and how folio reads it: the layout model and its labels, the\n"
        "route (text layer or OCR) and the answer gate, the quality of a page's text and\n"
        "the agreement between two readings of it, headings, running heads and the order of\n"
        "captions.\n\n"
        "Pure logic over a page's text, boxes and pixels; the process that renders and OCRs\n"
        "pages is :mod:`folio.pdf`, the engines that read them :mod:`folio.engines`."
    ),
    "tables": (
        "Tables on a page: the grid of ruled lines, the rows and the columns of text, and\n"
        "the markdown a table becomes."
    ),
    "settings": (
        "What a run is told: :mod:`.config` (``PipelineConfig`` and its sections, each\n"
        "setting reachable as ``--set section.key=value`` and ``FOLIO_SECTION__KEY``; the\n"
        "operational sections that bound a run's use of its host in :mod:`.resources`),\n"
        ":mod:`.run_config` (how the CLI, the environment and a preset resolve into one),\n"
        ":mod:`.presets` (named hardware/engine profiles) and :mod:`.vocabulary` (the names\n"
        "the settings and the outputs share)."
    ),
    "checks": (
        "Checks of what a run produced: validation of each document's text with Great\n"
        "Expectations (:mod:`.validation`, run in a child process by\n"
        ":mod:`.validation_child`, the suite in :mod:`.validation_gx`) and the checks a\n"
        "finished run's outputs are read back with (:mod:`.run_checks`)."
    ),
    "output": (
        "What a run writes: a document's markdown and JSON (:mod:`.outputs`), its chunks\n"
        "(:mod:`.chunking`) and their embeddings (:mod:`.embeddings`), and the run's\n"
        "report (:mod:`.report`). Where chunks are stored is :mod:`folio.stores`; where\n"
        "files go is :mod:`folio.io`."
    ),
}

#: old module (under folio/) -> package it moves to; the module keeps its name
MOVES: dict[str, str] = {
    "answer_gate": "page",
    "caption_order": "page",
    "headings": "page",
    "layer_or_ocr": "page",
    "layout": "page",
    "layout_labels": "page",
    "quality": "page",
    "route": "page",
    "running_heads": "page",
    "text_agreement": "page",
    "table_grid": "tables",
    "table_rows": "tables",
    "table_columns": "tables",
    "config": "settings",
    "run_config": "settings",
    "presets": "settings",
    "vocabulary": "settings",
    "validation": "checks",
    "validation_child": "checks",
    "validation_gx": "checks",
    "run_checks": "checks",
    "outputs": "output",
    "chunking": "output",
    "embeddings": "output",
    "report": "output",
}

#: folders whose text files are rewritten (bench/results: records of past runs, kept as run)
ROOTS = ("folio", "flows", "tasks", "deployments", "bench", "tests", "scripts", "docs",
         "infra")
SKIP_DIRS = {"__pycache__", ".git", ".venv", "node_modules", "results"}
FILES = ("pyproject.toml", "Makefile", "prefect.yaml", "README.md", "requirements-device.txt")
#: files that name the old places on purpose: this script and the test of its rewrite
KEEP_AS_IS = {"scripts/restructure.py", "tests/test_core_map.py"}
TEXT_SUFFIXES = {".py", ".md", ".toml", ".yaml", ".yml", ".sh", ".txt", ".cfg", ".ini",
                 ".json", ".rst", ""}

_NAMES = "|".join(sorted(MOVES, key=len, reverse=True))
#: ``folio.OLD`` not preceded by a name or a dot and not followed by more of a name
DOTTED = re.compile(rf"(?<![\w.]){re.escape('folio')}\.({_NAMES})(?!\w)")
#: ``folio/OLD.py``, also inside a longer path (``./folio/OLD.py``), not ``.folio/`` (the
#: state folder) nor ``xfolio/``
PATH = re.compile(rf"(?<![\w.])folio/({_NAMES})(?=\.py\b)")


def _git(*args: str) -> None:
    subprocess.run(["git", *args], cwd=REPO, check=True)


def move_modules(dry_run: bool) -> tuple[list[str], list[str]]:
    """(a): the moves made (or pending, on a dry run) and the modules found at both places."""
    moved: list[str] = []
    conflicts: list[str] = []
    for old, package in MOVES.items():
        src = REPO / "folio" / f"{old}.py"
        dst = REPO / "folio" / package / f"{old}.py"
        if not src.exists():
            continue
        if dst.exists():
            conflicts.append(f"folio/{old}.py and folio/{package}/{old}.py both exist")
            continue
        moved.append(f"folio/{old}.py -> folio/{package}/{old}.py")
        if dry_run:
            continue
        init = dst.parent / "__init__.py"
        if not init.exists():
            dst.parent.mkdir(parents=True, exist_ok=True)
            init.write_text(f'"""{PACKAGES[package]}\n"""\n', encoding="utf-8")
            _git("add", str(init.relative_to(REPO)))
        _git("mv", str(src.relative_to(REPO)), str(dst.relative_to(REPO)))
    return moved, conflicts


def _from_folio_imports(source: str) -> list[tuple[int, int, str]]:
    """(first line, last line, replacement) of each ``from folio import ...`` naming a
    moved module, lines counted from 1."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    lines = source.splitlines()
    edits: list[tuple[int, int, str]] = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.ImportFrom) and node.module == "folio"
                and node.level == 0 and any(a.name in MOVES for a in node.names)):
            continue
        first = lines[node.lineno - 1]
        indent = first[: len(first) - len(first.lstrip())]
        groups: dict[str, list[str]] = {}
        for alias in node.names:
            target = f"folio.{MOVES[alias.name]}" if alias.name in MOVES else "folio"
            spelled = alias.name + (f" as {alias.asname}" if alias.asname else "")
            groups.setdefault(target, []).append(spelled)
        statements = [f"{indent}from {target} import {', '.join(names)}"
                      for target, names in groups.items()]
        end = node.end_lineno or node.lineno
        if lines[end - 1][node.end_col_offset or 0:].strip():
            continue  # something after the import on its line (``; x = 1``): leave it
        edits.append((node.lineno, end, "\n".join(statements)))
    return edits


def rewrite_text(text: str, python: bool) -> str:
    """(b) for one file's text."""
    if python:
        lines = text.split("\n")
        for first, last, replacement in sorted(_from_folio_imports(text), reverse=True):
            lines[first - 1: last] = replacement.split("\n")
        text = "\n".join(lines)
    text = DOTTED.sub(lambda m: f"folio.{MOVES[m.group(1)]}.{m.group(1)}", text)
    return PATH.sub(lambda m: f"folio/{MOVES[m.group(1)]}/{m.group(1)}", text)


def _files() -> list[Path]:
    found: list[Path] = [REPO / name for name in FILES if (REPO / name).is_file()]
    for root in ROOTS:
        for path in sorted((REPO / root).rglob("*")):
            if (path.is_file() and path.suffix in TEXT_SUFFIXES
                    and str(path.relative_to(REPO)) not in KEEP_AS_IS
                    and not SKIP_DIRS.intersection(path.relative_to(REPO).parts)):
                found.append(path)
    return found


def rewrite_tree(dry_run: bool) -> list[str]:
    changed: list[str] = []
    for path in _files():
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        new = rewrite_text(text, python=path.suffix == ".py")
        if new != text:
            changed.append(str(path.relative_to(REPO)))
            if not dry_run:
                path.write_text(new, encoding="utf-8")
    return changed


def sort_imports(paths: list[str]) -> None:
    """Re-sort the imports of rewritten Python files (ruff's isort rule): a module's new
    dotted name can sort elsewhere among its neighbours."""
    ruff = REPO / ".venv" / "bin" / "ruff"
    python_files = [p for p in paths if p.endswith(".py")]
    if not python_files:
        return
    if not ruff.exists():
        print("note: .venv/bin/ruff not found; run `ruff check --select I --fix` yourself",
              file=sys.stderr)
        return
    subprocess.run([str(ruff), "check", "--select", "I", "--fix", "--quiet", *python_files],
                   cwd=REPO, check=False)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true",
                        help="change nothing; exit 1 when a move or a rewrite is pending")
    args = parser.parse_args(argv)
    moved, conflicts = move_modules(dry_run=args.check)
    changed = rewrite_tree(dry_run=args.check)
    if not args.check:
        sort_imports(changed)
    for line in moved:
        print(("pending: " if args.check else "moved: ") + line)
    for name in changed:
        print(("stale: " if args.check else "rewrote: ") + name)
    for line in conflicts:
        print("HAND FIX: " + line + " (merge the old file's changes into the new one, "
              "delete the old, run again)", file=sys.stderr)
    if conflicts or (args.check and (moved or changed)):
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
