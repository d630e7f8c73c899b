"""The pure half of bench/one_document.py: a run split into stages, the cells' p50 and p95,
issue 57's goals evaluated, and a before/after comparison of two labels. No servers, no
processes: the runner measures, this module computes (tests/test_bench_one_document.py).

Percentiles: p50 is the median (the mean of the two middle runs for an even count); p95 is
the nearest rank, the smallest run at or above which 95% of the runs lie: the
``ceil(0.95 * n)``-th fastest. For 20 runs that is the 19th, the second slowest; for 3 or
4 runs it is the slowest. No interpolation: every figure is a run that happened.

"Pages' own time" (the 10-page goal's yardstick): from the moment the document was ready
for its pages (the end of its last preparing span in the report's ``timing.finishing``:
fetch, the Office read, the probe) to the last page's end (``timing.last_page_s``), per
run. It is wall time inside the same run, so it carries the same load as the trigger's
wall beside it and the ratio reads the machinery, not the machine. The alternatives
are less honest: ``last_page_s - first_page_s`` leaves out the first page (a tenth of a
10-page document and the page workers' start), and the report gives no CPU time per page
(CPU would also drop the waits any process reading those pages has).
"""

from __future__ import annotations

import math
import statistics
from typing import Any

#: the stages a trigger or event run is cut into, in order; they tile the command's wall
#: (each starts where the one before ended), so their sum is the wall and ``unaccounted``
#: (the wall minus their sum) shows whatever a missing timestamp left out
TOP_STAGES = ("trigger_start", "poll", "flow_start", "to_first_page", "pages", "finishing",
              "run_end", "after_end")
#: ``folio ingest``'s stages, split by the report it writes (``--report``)
CLI_STAGES = ("cli_start", "to_first_page", "pages", "finishing", "cli_end")
STAGE_ORDER = ("trigger_start", "poll", "flow_start", "cli_start", "to_first_page", "pages",
               "finishing", "run_end", "after_end", "cli_end")
UNACCOUNTED = "unaccounted"
#: the report's spans that come before a document's pages (folio.pipeline.prepare)
PREPARING = ("fetch", "convert", "probe")
#: a span that holds the other finishing spans (the whole finish task): never the answer
#: to "which stage holds it"
ENCLOSING = {"stage.finish"}

#: issue 57 point 2, per cell (document/path)
GOALS: dict[str, dict[str, Any]] = {
    "pdf/trigger": {"p50_s": 3.0, "p95_s": 5.0},
    "docx/trigger": {"p50_s": 3.0, "p95_s": 5.0},
    "pdf10/trigger": {"pages_own_ratio_p50": 1.5},
    "pdf/cli": {"p50_s": 3.0},
}


def p50(values: list[float]) -> float:
    return float(statistics.median(values))


def p95(values: list[float]) -> float:
    """Nearest rank (the module's docstring): the ceil(0.95 n)-th smallest value."""
    ordered = sorted(values)
    return float(ordered[max(0, math.ceil(0.95 * len(ordered)) - 1)])


def pages_own_s(timing: dict[str, Any]) -> float | None:
    """The pages' own wall time of one run (the module's docstring), or None when the
    report does not say when the pages ended or when the document was ready for them."""
    last, ready = timing.get("last_page_s"), ready_s(timing)
    if last is None or ready is None:
        return None
    return round(float(last) - ready, 3)


def ready_s(timing: dict[str, Any]) -> float | None:
    """When the document was ready for its pages (seconds from the body's start): the end
    of its last preparing span; None when the report has none."""
    spans = timing.get("finishing") or {}
    ends = [float(spans[s]["last_end_s"]) for s in PREPARING
            if s in spans and "last_end_s" in spans[s]]
    return max(ends) if ends else None


def stages(started: float, ended: float, facts: dict[str, Any]) -> dict[str, float]:
    """A trigger's or event's run split into :data:`TOP_STAGES` (seconds), the report's
    spans' medians as ``stage.NAME``, and ``unaccounted``. ``facts``: the server's first
    time (unix) of each state type (``states``, with ``created``) and the report's
    ``timing``; ``started`` and ``ended``: the command's own start and return (unix)."""
    st, timing = facts["states"], facts["timing"]
    final = next((st[k] for k in ("COMPLETED", "FAILED", "CRASHED") if k in st), ended)
    body = timing.get("started_unix") or st.get("RUNNING", final)
    out = {"trigger_start": st["created"] - started,
           "poll": st.get("PENDING", st["created"]) - st["created"],
           "flow_start": body - st.get("PENDING", st["created"])}
    inside = _body(timing)
    if inside:
        out |= inside | {"run_end": final - (body + timing["seconds"])}
    out["after_end"] = ended - final
    return _with_unaccounted(out, started, ended, TOP_STAGES)


def cli_stages(started: float, ended: float, timing: dict[str, Any]) -> dict[str, float]:
    """``folio ingest``'s wall split by its report's ``timing`` into :data:`CLI_STAGES`:
    ``cli_start`` the command's start until the flow's body began (the process, its
    imports, the local server's answer, the flow run's start), the body's stages as a
    trigger's, ``cli_end`` the body's end until the command returned; empty when the
    report has no timing."""
    body = timing.get("started_unix")
    inside = _body(timing)
    if body is None or not inside:
        return {}
    out = {"cli_start": body - started, **inside,
           "cli_end": ended - (body + timing["seconds"])}
    return _with_unaccounted(out, started, ended, CLI_STAGES)


def _body(timing: dict[str, Any]) -> dict[str, float]:
    """The flow's body from its report: until the first page ended, the pages, the
    finishing after the last page, and the report's spans (``stage.NAME``). A document
    whose pages no page worker read (DOCX, XLSX, PPTX read natively: their reader makes
    the pages) has its pages at the end of its read, so its validation and loading count
    as finishing, not as the wait for a first page."""
    first, last, total = (timing.get(k) for k in ("first_page_s", "last_page_s", "seconds"))
    if total is None:
        return {}
    if first is None:
        first = ready_s(timing)
        first = total if first is None else min(first, total)
    last = first if last is None else last
    out = {"to_first_page": first, "pages": last - first, "finishing": total - last}
    for stage, span in (timing.get("finishing") or {}).items():
        out[f"stage.{stage}"] = float(span["median_s"])
    return out


def _with_unaccounted(out: dict[str, float], started: float, ended: float,
                      tiling: tuple[str, ...]) -> dict[str, float]:
    out[UNACCOUNTED] = (ended - started) - sum(out[k] for k in tiling if k in out)
    return {k: round(v, 3) + 0.0 for k, v in out.items()}  # + 0.0: no -0.0


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """One cell's figures over its runs: p50 and p95 of the wall, the load's median, each
    stage's median and p95, the pages' own time and the wall's ratio to it where the runs
    give it, and the failures (their exit codes)."""
    ok = [r for r in rows if r["exit"] == 0]
    out: dict[str, Any] = {"runs": len(rows), "failed": len(rows) - len(ok)}
    if len(ok) < len(rows):
        out["failures"] = [{"exit": r["exit"], "stderr_tail": r.get("stderr", "")[-200:]}
                           for r in rows if r["exit"] != 0]
    walls = [r["wall_s"] for r in ok]
    if not walls:
        return out
    out |= {"p50_s": round(p50(walls), 2), "p95_s": round(p95(walls), 2),
            "load_1min_median": round(p50([r["load_1min"] for r in ok]), 2)}
    keys = sorted({k for r in ok for k in r.get("stages", {})})
    if keys:
        by_key = {k: [r["stages"][k] for r in ok if k in r.get("stages", {})] for k in keys}
        out["stages_median_s"] = {k: round(p50(v), 3) for k, v in by_key.items()}
        out["stages_p95_s"] = {k: round(p95(v), 3) for k, v in by_key.items()}
    own = [(r["wall_s"], r["pages_own_s"]) for r in ok if r.get("pages_own_s")]
    if own:
        ratios = [wall / pages for wall, pages in own]
        out |= {"pages_own_p50_s": round(p50([p for _, p in own]), 3),
                "pages_own_ratio_p50": round(p50(ratios), 2),
                "pages_own_ratio_p95": round(p95(ratios), 2)}
    return out


def holding_stage(cell: dict[str, Any], *, besides_pages: bool = False) -> dict[str, Any]:
    """Which stage holds a cell's wall: the top-level stage with the largest median (a
    large ``unaccounted`` is named too: a split that went missing) and
    the largest span inside the run (``stage.*``, the enclosing finish task left out);
    None where the runs were not split. ``besides_pages``: for a goal set against the
    pages' own time, the pages are not what holds it (the largest other stage is)."""
    medians = cell.get("stages_median_s") or {}
    top = {k: v for k, v in medians.items() if (k in STAGE_ORDER or k == UNACCOUNTED)
           and not (besides_pages and k == "pages")}
    inner = {k: v for k, v in medians.items() if k.startswith("stage.") and k not in ENCLOSING}
    return {"stage": max(top, key=lambda k: top[k]) if top else None,
            "stage_median_s": max(top.values()) if top else None,
            "inner": max(inner, key=lambda k: inner[k]) if inner else None,
            "inner_median_s": max(inner.values()) if inner else None}


def evaluate_goals(results: dict[str, Any]) -> dict[str, Any]:
    """Each goal of issue 57 point 2 against a label's cells: the figure, the limit and
    whether it is met (None when the label did not measure it); a missed goal names the
    stage that holds it."""
    out: dict[str, Any] = {}
    for cell, limits in GOALS.items():
        figures = results.get(cell) or {}
        goal: dict[str, Any] = {}
        for key, limit in limits.items():
            value = figures.get(key)
            goal[key] = {"value": value, "limit": limit,
                         "met": None if value is None else value <= limit}
        verdicts = [g["met"] for g in goal.values()]
        goal["met"] = None if None in verdicts else all(verdicts)
        if goal["met"] is False:
            goal["held_by"] = holding_stage(figures,
                                            besides_pages="pages_own_ratio_p50" in limits)
        out[cell] = goal
    return out


def compare(before_label: str, before: dict[str, Any], after_label: str,
            after: dict[str, Any]) -> dict[str, Any]:
    """Two labels' entries side by side, for every cell either has: p50, p95 and each
    stage's median (None where a label lacks it: older entries have fewer stages, no
    commit, no settings)."""
    cells: dict[str, Any] = {}
    b_res, a_res = before.get("results") or {}, after.get("results") or {}
    for cell in sorted(set(b_res) | set(a_res)):
        b, a = b_res.get(cell) or {}, a_res.get(cell) or {}
        row: dict[str, Any] = {k: [b.get(k), a.get(k)] for k in ("runs", "p50_s", "p95_s",
                                                               "load_1min_median")}
        b_st, a_st = b.get("stages_median_s") or {}, a.get("stages_median_s") or {}
        row["stages_median_s"] = {k: [b_st.get(k), a_st.get(k)]
                                  for k in _stage_order(set(b_st) | set(a_st))}
        cells[cell] = row
    return {"labels": [before_label, after_label],
            "commits": [before.get("commit") or None, after.get("commit") or None],
            "settings": [before.get("settings"), after.get("settings")],
            "cells": cells}


def _stage_order(keys: set[str]) -> list[str]:
    """The top-level stages in their order, then the spans inside the run (``stage.*``)
    by name, then the rest (``unaccounted``)."""
    top = [k for k in STAGE_ORDER if k in keys]
    inner = sorted(k for k in keys if k.startswith("stage."))
    rest = sorted(k for k in keys if k not in STAGE_ORDER and not k.startswith("stage."))
    return top + inner + rest


def comparison_table(comparison: dict[str, Any]) -> str:
    """The comparison as markdown: a table per cell, its rows the runs, the load, p50,
    p95 and each stage's median, its columns before, after and the change."""
    b_label, a_label = (str(x) for x in comparison["labels"])

    def fmt(value: Any) -> str:
        return "-" if value is None else f"{value:g}" if isinstance(value, float) else str(value)

    def change(b: Any, a: Any) -> str:
        return "-" if b is None or a is None else f"{a - b:+.3g}"

    lines: list[str] = []
    for cell, row in comparison["cells"].items():
        lines += ["", f"{cell}:", "", f"| figure (s) | {b_label} | {a_label} | change |",
                  "|---|---|---|---|"]
        figures = [(key, row[key]) for key in ("runs", "load_1min_median", "p50_s", "p95_s")]
        figures += [(f"{stage} (median)", pair) for stage, pair in row["stages_median_s"].items()]
        for name, (b, a) in figures:
            lines.append(f"| {name} | {fmt(b)} | {fmt(a)} | {change(b, a)} |")
    return "\n".join(lines[1:])
