"""folio/ reads as a map (issue 46): a handful of top-level modules, everything else in
packages that say in their ``__init__`` docstring what belongs there, and no code that
names a module by the place it had before scripts/restructure.py moved it."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.script_module import load_script

FOLIO = Path(__file__).resolve().parent.parent / "folio"
MAX_TOP_LEVEL = 12


def test_folio_keeps_at_most_a_dozen_top_level_modules() -> None:
    modules = sorted(p.name for p in FOLIO.glob("*.py") if p.name != "__init__.py")
    assert len(modules) <= MAX_TOP_LEVEL, (
        f"{len(modules)} modules directly in folio/: put new code in a package ({modules})")


def test_every_package_says_what_belongs_there() -> None:
    silent = [str(init.relative_to(FOLIO.parent)) for init in sorted(FOLIO.rglob("__init__.py"))
              if init.parent != FOLIO
              and not ast.get_docstring(ast.parse(init.read_text(encoding="utf-8")))]
    assert silent == [], "give these packages a docstring saying what belongs there"


def test_nothing_names_a_module_where_it_was_before_the_move() -> None:
    restructure = load_script("restructure")
    stale = restructure.rewrite_tree(dry_run=True)
    assert stale == [], f"old module paths in {stale}: run python scripts/restructure.py"


def test_the_rewrite_moves_names_imports_and_paths_but_nothing_else() -> None:
    restructure = load_script("restructure")
    text = ("from folio import config, errors as e\n"
            "from folio.running_heads import x\n"
            "import folio.io.layout\n"
            "patch('folio.chunking.embed'); run('-m', 'folio.validation_child')\n"
            "# see folio/layout.py and folio/io/layout.py; folio.layout_labels.Y\n")
    assert restructure.rewrite_text(text, python=True) == (
        "from folio.settings import config\n"
        "from folio import errors as e\n"
        "from folio.page.running_heads import x\n"
        "import folio.io.layout\n"
        "patch('folio.output.chunking.embed'); run('-m', 'folio.checks.validation_child')\n"
        "# see folio/page/layout.py and folio/io/layout.py; folio.page.layout_labels.Y\n")
    once = restructure.rewrite_text(text, python=True)
    assert restructure.rewrite_text(once, python=True) == once
