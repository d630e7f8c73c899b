"""The core package is Prefect-free (docs/ARCHITECTURE.md): ``folio`` imports neither
Prefect nor the Prefect layer (``folio_prefect``: the ``flows``, ``tasks`` and
``deployments`` folders), so the pipeline runs, and is tested, without an orchestrator,
and the layer stays a thin edge over it.

Two checks, because each misses what the other sees: importing every module shows what
really gets loaded (a dependency pulling Prefect in included) but not an import inside a
function that did not run; reading every source file's syntax tree finds every import
statement, wherever it is, but not what a third-party package imports in turn."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import folio

FORBIDDEN = ("prefect", "folio_prefect", "flows", "tasks", "deployments")
CORE = Path(folio.__file__).parent
REPO = CORE.parent

_IMPORT_EVERYTHING = """
import importlib, json, pkgutil, sys
import folio

names = [m.name for m in pkgutil.walk_packages(folio.__path__, "folio.")]
for name in names:
    importlib.import_module(name)
loaded = sorted(m for m in sys.modules if m.split(".")[0] in {forbidden})
print(json.dumps({{"modules": names, "loaded": loaded}}))
"""


def test_importing_every_core_module_loads_no_prefect_and_no_prefect_layer() -> None:
    script = _IMPORT_EVERYTHING.format(forbidden=set(FORBIDDEN))
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=300, cwd=REPO)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.splitlines()[-1])
    assert "folio.cli" in result["modules"] and "folio.pipeline.scheduler" in result["modules"]
    assert result["loaded"] == [], "the core imported " + ", ".join(result["loaded"])


def _imported_modules(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, module) of every import in a file: statements at any depth (functions,
    ``if TYPE_CHECKING:`` blocks) and ``importlib.import_module`` / ``__import__`` of a
    literal name."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.lineno, node.module))
        elif isinstance(node, ast.Call) and node.args:
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            first = node.args[0]
            if name in ("import_module", "__import__") and isinstance(first, ast.Constant) \
                    and isinstance(first.value, str):
                found.append((node.lineno, first.value))
    return found


def test_no_core_source_file_imports_prefect_or_the_prefect_layer() -> None:
    sources = sorted(CORE.rglob("*.py"))
    assert len(sources) > 50  # the whole package, not an empty glob
    offending = [
        f"{path.relative_to(REPO)}:{line}: {module}"
        for path in sources
        for line, module in _imported_modules(ast.parse(path.read_text(), str(path)))
        if module.split(".")[0] in FORBIDDEN
    ]
    assert offending == [], "\n".join(offending)


def test_the_import_check_sees_imports_inside_functions() -> None:
    tree = ast.parse("def f():\n    from prefect.settings import X\n"
                     "    import folio_prefect.deployments.local_server\n"
                     "    importlib.import_module('folio_prefect.flows.ingest')\n")
    assert [m for _, m in _imported_modules(tree)] == [
        "prefect.settings", "folio_prefect.deployments.local_server", "folio_prefect.flows.ingest"]
