"""No import circle among folio's modules.

Every module of ``folio/`` is parsed (nothing imported) and each import statement,
wherever it is (module level, inside a function, under ``TYPE_CHECKING``), becomes an
edge from the importing module to the module it names: ``from folio.pdf import worker``
to ``folio.pdf.worker`` when that is a module, else to the package ``folio.pdf`` (its
``__init__``). A lazy or type-only import still ties two modules together: a circle
means neither can be read, tested or moved without the other, so it is split by concern
instead (as ``validation_gx`` was split out of ``validation``/``validation_child``).
"""

from __future__ import annotations

import ast
from pathlib import Path

FOLIO = Path(__file__).resolve().parent.parent / "folio"

#: circles known and left for now, each as its sorted modules, with why
KNOWN: dict[tuple[str, ...], str] = {}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(FOLIO.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules() -> dict[str, Path]:
    return {module_name(path): path for path in sorted(FOLIO.rglob("*.py"))}


def _resolve(name: str, known: dict[str, Path]) -> str | None:
    """The folio module ``name`` is, or the nearest package above it that is."""
    while name:
        if name in known:
            return name
        name = name.rpartition(".")[0]
    return None


def imports(module: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The folio modules ``module`` imports anywhere in its file."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            names = [f"{base}.{alias.name}" for alias in node.names]
            # a name that is not a submodule is an attribute of ``base`` itself
            names = [n if n in known else base for n in names]
        else:
            continue
        for name in names:
            if name == "folio" or name.startswith("folio."):
                target = _resolve(name, known)
                if target is not None and target != module:
                    found.add(target)
    return found


def graph() -> dict[str, set[str]]:
    known = modules()
    return {module: imports(module, path, known) for module, path in known.items()}


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """One circle per strongly connected component of more than one module (Tarjan),
    each given as a path that closes on its first module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(edges.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                components.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return [_circle(component, edges) for component in components]


def _circle(component: list[str], edges: dict[str, set[str]]) -> list[str]:
    """A shortest path from the component's first module back to itself (breadth first)."""
    start, members = component[0], set(component)
    paths: dict[str, list[str]] = {start: [start]}
    queue = [start]
    while queue:
        node = queue.pop(0)
        for nxt in sorted(edges[node] & members):
            if nxt == start:
                return [*paths[node], start]
            if nxt not in paths:
                paths[nxt] = [*paths[node], nxt]
                queue.append(nxt)
    return component


def test_the_graph_sees_lazy_and_type_only_imports() -> None:
    edges = graph()
    assert "folio.checks.validation_gx" in edges["folio.checks.validation_child"]  # TYPE_CHECKING and lazy
    assert "folio.checks.validation_child" in edges["folio.checks.validation"]  # inside a function


def test_no_import_cycle_among_folio_modules() -> None:
    found = cycles(graph())
    unknown = [c for c in found if tuple(sorted(set(c))) not in KNOWN]
    assert not unknown, "import circles among folio modules:\n" + "\n".join(
        " -> ".join(c) for c in unknown)
    stale = set(KNOWN) - {tuple(sorted(set(c))) for c in found}
    assert not stale, f"circles listed as known that are gone (drop them from KNOWN): {stale}"
