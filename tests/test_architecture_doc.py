"""docs/ARCHITECTURE.md's layer figure is the one the code gives (scripts/architecture.py),
and in it the core imports nothing of the Prefect edge (the import-level check of the
whole core, Prefect included, is tests/test_core_is_prefect_free.py's)."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

from tests.script_module import load_script


def _script() -> ModuleType:
    return load_script("architecture")


def test_the_committed_figure_is_the_one_the_code_gives() -> None:
    arch = _script()
    committed = arch.committed(arch.DOC.read_text())
    assert committed == arch.render(), (
        "docs/ARCHITECTURE.md's figure is stale: run python scripts/architecture.py")


def test_every_unit_has_a_layer() -> None:
    arch = _script()
    units = arch._units()
    assert sorted(u for u in arch.graph() if u not in units) == [], (
        "list the new unit's layer in LAYERS (scripts/architecture.py)")


def test_the_core_imports_nothing_of_the_prefect_edge() -> None:
    arch = _script()
    edge = {u for layer, _, members in arch.LAYERS if layer == "edge" for u in members}
    graph = arch.graph()
    core = [u for u in graph if u not in edge]
    assert core and {u: sorted(graph[u] & edge) for u in core if graph[u] & edge} == {}


def test_relative_imports_and_splits_map_to_their_unit(tmp_path: Path) -> None:
    arch = _script()
    units = arch._units()
    assert arch.unit_of("folio.checks.validation_child", units) == "checks"
    assert arch.unit_of("folio.tables.table_grid", units) == "tables"
    assert arch.unit_of("folio.process_files_locks", units) == "process_files"
    assert arch.unit_of("folio_prefect.flows.cli", units) == "flows/cli.py"
    assert arch.unit_of("folio_prefect.flows.ingest", units) == "flows"
    assert arch.unit_of("prefect.flows", units) is None
    module = tmp_path / "stage.py"
    module.write_text("from ..io import sinks\nfrom . import load\n")
    assert arch.imports("folio.pipeline.stage", module) >= {"folio.io.sinks",
                                                             "folio.pipeline.load"}
