"""Running a suite of :class:`ExpectationSpec` over small pandas frames with Great
Expectations (GX 1.x): the specs as plain data, the GX context, suites and validation
definitions built from them and reused, and the failed expectations by (item, page).

What is checked and how a document becomes frames is :mod:`folio.checks.validation`'s; this
module only runs GX, in whichever process calls it: the flow's, or the validation child's
(:mod:`folio.checks.validation_child`), so both import this and neither imports the other's
runner. GX is imported lazily (about 2.6 s). Each context is *ephemeral* unless Data Docs
are asked for (a file-backed context keeps every validation result and grows without bound).
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from folio.errors import FolioError

if TYPE_CHECKING:
    import pandas as pd

Table = Literal["pages", "blocks"]

RESULT_FORMAT: dict[str, Any] = {
    "result_format": "COMPLETE",
    # "item": the document's position in the validated batch (folio.checks.validation)
    "unexpected_index_column_names": ["item", "page"],
}
#: the first run of a table: pass or fail per expectation, without the failing rows. Most
#: documents pass, and GX computes the rows' index lists for COMPLETE even then: about 40%
#: of a run (issue 57). A table with a failure is run again with RESULT_FORMAT.
VERDICT_FORMAT: dict[str, Any] = {"result_format": "BOOLEAN_ONLY"}

_DATASOURCE = "folio"
_GX_LOCK = threading.Lock()  # GX contexts and metric caches are not meant for threads


@dataclass(frozen=True)
class ExpectationSpec:
    """One expectation as plain data: what GX class, on which table, with which arguments.

    ``only_where_false`` names boolean columns; the expectation applies only to rows
    where all of them are False (a GX row condition).
    """

    name: str  # what the pipeline reports for a failing page
    table: Table
    expectation: str  # class name in great_expectations.expectations
    kwargs: dict[str, Any]
    why: str
    only_where_false: tuple[str, ...] = ()


def failures_here(frames: dict[Table, pd.DataFrame], specs: list[ExpectationSpec],
                  run_name: str, data_docs_dir: Path | None = None
                  ) -> tuple[dict[tuple[int, int], list[str]], Path | None]:
    """The GX runs themselves, one per table, in this process (the flow's, or the
    validation child's): failed expectation names by (item, page), and with
    ``data_docs_dir`` the Data Docs site's index.

    Raises:
        FolioError: (code ``validation-error``) when GX itself failed on an expectation.
    """
    failures: dict[tuple[int, int], list[str]] = {}
    with _GX_LOCK:
        runner = _runner(specs, data_docs_dir)
        for table, frame in frames.items():
            table_specs = [s for s in specs if s.table == table]
            # Data Docs show every row that failed: those runs are COMPLETE from the start
            result = runner.run(run_name, table, frame, table_specs,
                                VERDICT_FORMAT if data_docs_dir is None else RESULT_FORMAT)
            if not result.success and data_docs_dir is None:  # which rows: run it again
                result = runner.run(run_name, table, frame, table_specs, RESULT_FORMAT)
            _collect(result, table_specs, failures)
        docs_index = _build_docs(runner.context) if data_docs_dir is not None else None
    return failures, docs_index


#: validations one GX context serves before it is rebuilt: building a context and its
#: definitions costs 1-2 s (it was the pipeline's bottleneck on many small documents), while
#: an ephemeral context's result store grows with every run, so it is renewed now and then
CONTEXT_RUNS = 200


class _Runner:
    """A GX context with its suites and validation definitions built once, reused for
    ``CONTEXT_RUNS`` validations. Callers hold ``_GX_LOCK``."""

    def __init__(self, specs: list[ExpectationSpec], data_docs_dir: Path | None) -> None:
        self.key = _runner_key(specs, data_docs_dir)
        self.context = _context(data_docs_dir)
        self.datasource = self.context.data_sources.add_or_update_pandas(_DATASOURCE)
        self.definitions: dict[str, Any] = {}
        self.runs = 0

    def run(self, doc_id: str, table: Table, frame: pd.DataFrame,
            specs: list[ExpectationSpec], result_format: dict[str, Any]) -> Any:
        from great_expectations.core.run_identifier import RunIdentifier

        self.runs += 1
        if table not in self.definitions:
            self.definitions[table] = _definition(self.context, self.datasource, table, specs)
        return self.definitions[table].run(
            batch_parameters={"dataframe": frame},
            result_format=result_format,
            run_id=RunIdentifier(run_name=doc_id or "document"),
        )


_RUNNER: _Runner | None = None


def _runner_key(specs: list[ExpectationSpec], data_docs_dir: Path | None) -> str:
    return f"{specs!r}|{data_docs_dir}"


def _runner(specs: list[ExpectationSpec], data_docs_dir: Path | None) -> _Runner:
    """The process's runner, rebuilt when the suite or folder changes or after many runs."""
    global _RUNNER
    key = _runner_key(specs, data_docs_dir)
    if _RUNNER is None or _RUNNER.key != key or _RUNNER.runs >= CONTEXT_RUNS:
        _RUNNER = _Runner(specs, data_docs_dir)
    return _RUNNER


def _context(data_docs_dir: Path | None) -> Any:
    import great_expectations as gx

    # GX logs every temporary docs folder at INFO; that is noise on every document.
    for name in ("great_expectations", "great_expectations.data_context.types.base"):
        logging.getLogger(name).setLevel(logging.WARNING)
    from great_expectations.data_context.types.base import ProgressBarsConfig

    context: Any
    if data_docs_dir is None:
        context = gx.get_context(mode="ephemeral")
    else:
        data_docs_dir.mkdir(parents=True, exist_ok=True)
        context = gx.get_context(mode="file", project_root_dir=str(data_docs_dir))
    context.variables.progress_bars = ProgressBarsConfig(globally=False, metric_calculations=False)
    return context


def build_suite(name: str, specs: list[ExpectationSpec]) -> Any:
    """A ``gx.ExpectationSuite`` from specs; each expectation's ``meta.folio`` is its name."""
    import great_expectations as gx
    from great_expectations.expectations.row_conditions import Column, Condition

    suite = gx.ExpectationSuite(name=name)
    for spec in specs:
        kwargs = dict(spec.kwargs)
        if spec.only_where_false:
            conditions: list[Condition] = [Column(c) == False for c in spec.only_where_false]  # noqa: E712 (GX's row-condition API)
            condition = conditions[0]
            for extra in conditions[1:]:
                condition = condition & extra
            kwargs["row_condition"] = condition
        expectation_class = getattr(gx.expectations, spec.expectation)
        suite.add_expectation(expectation_class(**kwargs, meta={"folio": spec.name}))
    return suite


def _definition(context: Any, datasource: Any, table: Table, specs: list[ExpectationSpec]) -> Any:
    """The ValidationDefinition of one table: a whole-dataframe batch and its suite (results
    are stored in the context: in memory when ephemeral, on disk for Data Docs)."""
    import great_expectations as gx

    asset = datasource.add_dataframe_asset(table)
    batch_definition = asset.add_batch_definition_whole_dataframe("whole")
    suite = context.suites.add_or_update(build_suite(f"folio-{table}", specs))
    return context.validation_definitions.add_or_update(
        gx.ValidationDefinition(name=f"folio-{table}", data=batch_definition, suite=suite)
    )


def _collect(suite_result: Any, specs: list[ExpectationSpec],
             out: dict[tuple[int, int], list[str]]) -> None:
    """Failed expectation names by (item, page)."""
    known = {s.name for s in specs}
    for result in suite_result.results:
        name = (result.expectation_config.meta or {}).get("folio", "")
        _raise_on_exception(name, result.exception_info)
        if result.success or name not in known:
            continue
        for row in result.result.get("unexpected_index_list") or []:
            out.setdefault((int(row["item"]), int(row["page"])), []).append(name)


def _raise_on_exception(name: str, info: Any) -> None:
    """GX reports a crashed metric as a failed expectation; a crash is a bug, not a verdict."""
    if not isinstance(info, dict):
        return
    items = [info] if "raised_exception" in info else list(info.values())
    for item in items:
        if isinstance(item, dict) and item.get("raised_exception"):
            message = str(item.get("exception_message", ""))[:300]
            raise FolioError(f"great expectations failed on {name}: {message}",
                             code="validation-error")


def _build_docs(context: Any) -> Path | None:
    """Build the local Data Docs site; its index.html path (None if GX made no local site)."""
    urls: dict[str, str] = context.build_data_docs()
    for url in urls.values():
        if url.startswith("file://"):
            return Path(url.removeprefix("file://"))
    return None
