"""Draw docs/ARCHITECTURE.md's layer figure from the code.

    python scripts/architecture.py          # rewrite the figure in docs/ARCHITECTURE.md
    python scripts/architecture.py --check  # exit 1 when the committed figure is stale

Every module of ``folio/`` and of the Prefect layer (``flows/``, ``tasks/``,
``deployments/``, imported as ``folio_prefect.*``) is parsed, nothing imported, and each
import statement, wherever it is (inside functions too), becomes an edge between two
*units*: a core package (``folio/pdf/``), a core module (``folio/cli.py``) or a folder of
the Prefect layer. A unit is drawn in the layer :data:`LAYERS` puts it in; a module that
is not listed joins the listed unit its name starts with (``process_files_locks`` ->
``process_files``, so splitting a module into ``NAME_part.py`` siblings or a ``NAME/``
package leaves the figure as it was), else it lands in "unsorted" until listed here. The
figure draws edges between layers (imports of the shared data contract left out: every
layer has them); the table under it lists each unit's imports. Cheap: about 150 files
parsed, well under a second.
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DOC = REPO / "docs" / "ARCHITECTURE.md"
BEGIN = "<!-- architecture:begin (made by scripts/architecture.py from the code; do not edit) -->"
END = "<!-- architecture:end -->"

#: (id, title, units) top to bottom; a core unit is a name under folio/ (a package or a
#: module), a Prefect-layer unit a folder ("flows") or one of its modules ("flows/cli.py")
LAYERS: list[tuple[str, str, list[str]]] = [
    ("edge", "Prefect edge: folio_prefect", ["flows/cli.py", "flows", "tasks", "deployments"]),
    ("command", "command line, Python retrieval API, frameworks; no Prefect",
     ["cli", "trigger", "samples", "retrieval", "integrations"]),
    ("settings", "settings", ["settings"]),
    ("pipeline", "pipeline stages; index: one live version a source", ["pipeline", "index",
                                                                          "progress",
                                                                          "stop_hooks"]),
    ("checks", "checks: validation, run checks", ["checks"]),
    ("pdf", "pdf: page worker; other input formats", ["pdf", "formats"]),
    ("engines", "engines", ["engines", "parsers"]),
    ("page", "what is on a page", ["page", "tables", "figures", "hierarchy", "onnx_session"]),
    ("output", "what is written: outputs, chunks, embeddings, report", ["output"]),
    ("stores", "vector stores", ["stores"]),
    ("io", "io: sources, sinks, claims", ["io", "claims"]),
    ("gpu", "gpu: servers, profiles", ["gpu"]),
    ("shared", "shared data contract, process plumbing",
     ["models", "errors", "cpu_priority", "child_processes", "process_files", "security",
      "warm"]),
]
EDGE_FOLDERS = ("flows", "tasks", "deployments")
#: imports into this layer are left out of the figure (the table keeps them)
NOT_DRAWN = "shared"


def _units() -> dict[str, str]:
    return {unit: layer for layer, _, units in LAYERS for unit in units}


def core_unit(name: str, units: dict[str, str]) -> str:
    """The unit of ``folio.NAME...`` (NAME: the first part after ``folio``)."""
    if name in units:
        return name
    for unit in sorted(units, key=len, reverse=True):
        if name.startswith(unit + "_"):
            return unit
    return name


def edge_unit(parts: list[str]) -> str:
    """The unit of ``folio_prefect.FOLDER.MODULE...`` or ``FOLDER.MODULE``."""
    folder = parts[0]
    if len(parts) > 1 and f"{folder}/{parts[1]}.py" in _units():
        return f"{folder}/{parts[1]}.py"
    return folder


def unit_of(module: str, units: dict[str, str]) -> str | None:
    """The unit a dotted module name belongs to; None outside folio."""
    parts = module.split(".")
    if parts[0] == "folio":
        return core_unit(parts[1], units) if len(parts) > 1 else None
    if parts[0] == "folio_prefect" and len(parts) > 1 and parts[1] in EDGE_FOLDERS:
        return edge_unit(parts[1:])
    return None


def modules() -> list[tuple[str, Path]]:
    """(dotted name, file) of every module of the core and of the Prefect layer."""
    found = []
    for root, package in [(REPO / "folio", "folio"),
                          *[(REPO / d, f"folio_prefect.{d}") for d in EDGE_FOLDERS]]:
        for path in sorted(root.rglob("*.py")):
            rel = path.relative_to(root).with_suffix("").parts
            if rel[-1] == "__init__":
                rel = rel[:-1]
            found.append((".".join([package, *rel]), path))
    return found


def imports(name: str, path: Path) -> set[str]:
    """Dotted names a module imports, relative imports resolved."""
    is_package = path.name == "__init__.py"
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".")
                base = base[: len(base) - node.level + (1 if is_package else 0)]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            out.add(target)
            # `from folio import pipeline`: the names may be modules
            out.update(f"{target}.{alias.name}" for alias in node.names)
    return out


def graph() -> dict[str, set[str]]:
    """unit -> the units it imports (itself left out)."""
    units = _units()
    edges: dict[str, set[str]] = defaultdict(set)
    for name, path in modules():
        src = unit_of(name, units)
        if src is None:
            continue
        edges[src]
        for target in imports(name, path):
            dst = unit_of(target, units)
            if dst is not None and dst != src and (dst in units or _exists(dst)):
                edges[src].add(dst)
    return dict(edges)


def _exists(unit: str) -> bool:
    return (REPO / "folio" / f"{unit}.py").is_file() or (REPO / "folio" / unit).is_dir()


def _label(unit: str) -> str:
    if unit in EDGE_FOLDERS:
        return f"{unit}/"
    if "/" in unit:
        return unit
    return f"folio/{unit}/" if (REPO / "folio" / unit).is_dir() else f"folio/{unit}.py"


def _id(unit: str) -> str:
    return "u_" + unit.replace("/", "_").replace(".", "_")


def render() -> str:
    """The figure and its table, markers included."""
    units = _units()
    edges = graph()
    layer_of = {u: units.get(u, "unsorted") for u in edges}
    layers = list(LAYERS)
    if unsorted := sorted(u for u, layer in layer_of.items() if layer == "unsorted"):
        layers.append(("unsorted", "unsorted: list in scripts/architecture.py", unsorted))
    lines = [BEGIN, "", "```mermaid", "flowchart TD"]
    for layer, title, members in layers:
        lines.append(f'  subgraph {layer}["{title}"]')
        lines += [f'    {_id(u)}["{_label(u)}"]' for u in members if u in edges]
        lines.append("  end")
    pairs = sorted({(layer_of[s], layer_of[d]) for s, ds in edges.items() for d in ds
                    if layer_of[s] != layer_of[d] and layer_of[d] != NOT_DRAWN})
    order = {layer: i for i, (layer, _, _) in enumerate(layers)}
    pairs.sort(key=lambda p: (order[p[0]], order[p[1]]))
    lines += [f"  {a} --> {b}" for a, b in pairs]
    lines += ["```", "", f"Arrows: a layer imports from another (imports of `{NOT_DRAWN}` "
              "left out: every layer has them).", "",
              "| unit | layer | imports |", "|---|---|---|"]
    for layer, _, members in layers:
        for u in members:
            if u in edges:
                deps = ", ".join(f"`{_label(d)}`" for d in sorted(edges[u], key=_label))
                lines.append(f"| `{_label(u)}` | {layer} | {deps or '-'} |")
    lines += ["", "What belongs in each core package (the first sentence of its `__init__` "
              "docstring):", "", "| package | what belongs there |", "|---|---|"]
    lines += [f"| `{name}` | {summary} |" for name, summary in package_summaries()]
    lines += ["", END]
    return "\n".join(lines)


def package_summaries() -> list[tuple[str, str]]:
    """(``folio/NAME/``, the first sentence of its ``__init__`` docstring) of every core
    package, in name order."""
    found = []
    for init in sorted((REPO / "folio").glob("*/__init__.py")):
        doc = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8"))) or ""
        paragraph = " ".join(doc.split("\n\n")[0].split())
        first = paragraph.split(". ")[0].rstrip(".").replace(":mod:", "").replace("``", "`")
        found.append((f"folio/{init.parent.name}/", first.replace("|", "\\|")))
    return found


def committed(text: str) -> str:
    """The figure section as ``docs/ARCHITECTURE.md`` holds it (markers included)."""
    start, end = text.find(BEGIN), text.find(END)
    if start < 0 or end < start:
        raise SystemExit(f"{DOC}: markers {BEGIN!r} ... {END!r} not found")
    return text[start:end + len(END)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="exit 1 when the figure is stale")
    args = ap.parse_args()
    text = DOC.read_text()
    old, new = committed(text), render()
    if args.check:
        if old != new:
            print(f"{DOC} is stale: run python scripts/architecture.py", file=sys.stderr)
            sys.exit(1)
        return
    DOC.write_text(text.replace(old, new))


if __name__ == "__main__":
    main()
