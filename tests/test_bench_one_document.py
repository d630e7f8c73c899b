"""bench/one_document.py's pure half (bench/one_document_stats.py): percentiles, a run cut
into stages with nothing unaccounted, pages' own time, issue 57's goals, the before/after
comparison, and the runner's settings list. No servers: the runner's end-to-end check is
the bench itself (docs/latency.md)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from bench import one_document
from bench import one_document_stats as stats


def test_p95_is_the_nearest_rank_and_p50_the_median() -> None:
    twenty = [float(n) for n in range(20, 0, -1)]  # 1..20, unsorted
    assert stats.p95(twenty) == 19.0  # the 19th of 20: the second slowest
    assert stats.p50(twenty) == 10.5
    assert stats.p95([3.0, 1.0, 2.0]) == 3.0  # few runs: the slowest
    assert stats.p95([5.0]) == 5.0
    assert stats.p95([float(n) for n in range(1, 101)]) == 95.0


def _facts(*, with_timing: bool = True) -> dict[str, Any]:
    t0 = 1000.0
    timing = {"started_unix": t0 + 3.0, "first_page_s": 1.0, "last_page_s": 2.5,
              "seconds": 4.0,
              "finishing": {"fetch": {"median_s": 0.1, "last_end_s": 0.1},
                            "probe": {"median_s": 0.3, "last_end_s": 0.5},
                            "validate": {"median_s": 1.2, "last_end_s": 3.8}}}
    return {"states": {"created": t0 + 0.5, "PENDING": t0 + 1.5, "RUNNING": t0 + 2.9,
                       "COMPLETED": t0 + 7.2},
            "timing": timing if with_timing else {}}


def test_stages_tile_the_wall() -> None:
    out = stats.stages(1000.0, 1008.0, _facts())
    assert out["trigger_start"] == 0.5 and out["poll"] == 1.0 and out["flow_start"] == 1.5
    assert out["to_first_page"] == 1.0 and out["pages"] == 1.5 and out["finishing"] == 1.5
    assert out["run_end"] == pytest.approx(0.2) and out["after_end"] == pytest.approx(0.8)
    assert out["stage.validate"] == 1.2
    assert sum(out[k] for k in stats.TOP_STAGES) == pytest.approx(8.0)
    assert out["unaccounted"] == pytest.approx(0.0, abs=1e-3)


def test_a_run_without_its_report_shows_the_gap_as_unaccounted() -> None:
    out = stats.stages(1000.0, 1008.0, _facts(with_timing=False))
    assert "to_first_page" not in out and "finishing" not in out
    # the body began at RUNNING (1002.9) and the run ended at 1007.2: 4.3 s not split
    assert out["unaccounted"] == pytest.approx(4.3)


def test_cli_stages_tile_the_wall_from_the_report_alone() -> None:
    out = stats.cli_stages(1000.0, 1008.0, _facts()["timing"])  # body 1003.0 + 4.0 s
    assert out["cli_start"] == 3.0 and out["to_first_page"] == 1.0
    assert out["cli_end"] == 1.0 and out["stage.probe"] == 0.3
    assert sum(out[k] for k in stats.CLI_STAGES) == pytest.approx(8.0)
    assert out["unaccounted"] == pytest.approx(0.0, abs=1e-3)
    assert stats.cli_stages(1000.0, 1008.0, {}) == {}


def test_a_natively_read_office_document_finishes_after_its_read() -> None:
    timing = {"started_unix": 1003.0, "first_page_s": None, "last_page_s": None,
              "seconds": 8.0, "finishing": {"convert": {"median_s": 0.3, "last_end_s": 0.4},
                                            "validate": {"median_s": 5.8, "last_end_s": 6.5}}}
    out = stats.cli_stages(1000.0, 1011.5, timing)
    assert out["to_first_page"] == 0.4 and out["pages"] == 0.0 and out["finishing"] == 7.6
    assert out["unaccounted"] == 0.0
    assert stats.pages_own_s(timing) is None


def test_pages_own_time_runs_from_the_document_ready_to_the_last_page() -> None:
    assert stats.pages_own_s(_facts()["timing"]) == 2.0  # 2.5 - the probe's end 0.5
    office = {"last_page_s": 3.0, "finishing": {"convert": {"last_end_s": 2.2}}}
    assert stats.pages_own_s(office) == 0.8
    assert stats.pages_own_s({"last_page_s": 3.0, "finishing": {}}) is None
    assert stats.pages_own_s({"finishing": {"probe": {"last_end_s": 1.0}}}) is None


def _row(wall: float, **stages: float) -> dict[str, Any]:
    return {"exit": 0, "wall_s": wall, "load_1min": 1.0, "stages": stages}


def test_summary_gives_p50_p95_stage_medians_and_p95s_and_failures() -> None:
    rows = [_row(float(w), poll=w / 10) for w in range(1, 21)]
    rows.append({"exit": 3, "wall_s": 9.0, "load_1min": 2.0, "stderr": "quarantined"})
    cell = stats.summary(rows)
    assert cell["runs"] == 21 and cell["failed"] == 1
    assert cell["failures"] == [{"exit": 3, "stderr_tail": "quarantined"}]
    assert cell["p50_s"] == 10.5 and cell["p95_s"] == 19.0  # the failed run not counted
    assert cell["stages_median_s"]["poll"] == 1.05
    assert cell["stages_p95_s"]["poll"] == 1.9
    assert "pages_own_ratio_p50" not in cell


def test_summary_of_pages_own_time_gives_the_walls_ratio() -> None:
    rows = [_row(6.0) | {"pages_own_s": 4.0}, _row(9.0) | {"pages_own_s": 3.0},
            _row(5.0) | {"pages_own_s": None}]
    cell = stats.summary(rows)
    assert cell["pages_own_ratio_p50"] == 2.25  # 1.5 and 3.0
    assert cell["pages_own_ratio_p95"] == 3.0


def test_goals_met_missed_and_unmeasured() -> None:
    results = {
        "pdf/trigger": {"p50_s": 2.5, "p95_s": 4.0},
        "docx/trigger": {"p50_s": 2.8, "p95_s": 6.5,
                         "stages_median_s": {"flow_start": 0.4, "finishing": 1.6,
                                             "stage.finish": 1.5, "stage.validate": 1.1,
                                             "stage.vectors": 0.3, "unaccounted": 0.0}},
        "pdf/cli": {"p50_s": 3.5, "stages_median_s": {"cli_start": 2.1, "finishing": 0.9}},
        "docx/cli": {"p50_s": 9.0},  # not a goal's cell
    }
    goals = stats.evaluate_goals(results)
    assert goals["pdf/trigger"]["met"] is True
    docx = goals["docx/trigger"]
    assert docx["p50_s"]["met"] is True and docx["p95_s"] == {"value": 6.5, "limit": 5.0,
                                                               "met": False}
    assert docx["met"] is False
    assert docx["held_by"]["stage"] == "finishing"
    assert docx["held_by"]["inner"] == "stage.validate"  # not the enclosing finish span
    assert goals["pdf/cli"]["met"] is False and goals["pdf/cli"]["held_by"]["stage"] == "cli_start"
    assert goals["pdf/cli"]["held_by"]["inner"] is None
    assert "docx/cli" not in goals
    assert stats.holding_stage({"p50_s": 4.0})["stage"] is None  # runs not split
    gap = {"stages_median_s": {"flow_start": 1.0, "unaccounted": 4.0}}  # a split went missing
    assert stats.holding_stage(gap)["stage"] == "unaccounted"
    assert goals["pdf10/trigger"]["met"] is None  # not measured in this label


def test_goal_of_the_ten_page_pdf_reads_the_pages_ratio() -> None:
    goals = stats.evaluate_goals({"pdf10/trigger": {"pages_own_ratio_p50": 1.4}})
    assert goals["pdf10/trigger"]["met"] is True
    goals = stats.evaluate_goals({"pdf10/trigger": {"pages_own_ratio_p50": 2.0}})
    assert goals["pdf10/trigger"]["met"] is False


def test_comparison_reads_old_entries_without_commit_or_settings() -> None:
    old = {"machine": "2 cores", "results": {"pdf/trigger": {
        "runs": 3, "p50_s": 49.07, "p95_s": 55.59,
        "stages_median_s": {"after_end": 8.2, "poll": 1.0, "stage.validate": 14.7}}}}
    new = {"commit": "abc1234", "settings": {}, "results": {
        "pdf/trigger": {"runs": 20, "p50_s": 2.9, "p95_s": 4.1,
                        "stages_median_s": {"after_end": 0.4, "poll": 0.5, "unaccounted": 0.0}},
        "pdf/cli": {"runs": 20, "p50_s": 2.7, "p95_s": 3.0}}}
    comparison = stats.compare("before", old, "after", new)
    assert comparison["commits"] == [None, "abc1234"]
    assert comparison["settings"] == [None, {}]
    cell = comparison["cells"]["pdf/trigger"]
    assert cell["p50_s"] == [49.07, 2.9] and cell["runs"] == [3, 20]
    assert list(cell["stages_median_s"]) == ["poll", "after_end", "stage.validate",
                                             "unaccounted"]
    assert cell["stages_median_s"]["unaccounted"] == [None, 0.0]
    assert comparison["cells"]["pdf/cli"]["p50_s"] == [None, 2.7]
    table = stats.comparison_table(comparison)
    assert table.startswith("pdf/cli:\n\n| figure (s) | before | after | change |")
    trigger = table[table.index("pdf/trigger:"):]
    assert "| p50_s | 49.07 | 2.9 | -46.2 |" in trigger
    assert "| stage.validate (median) | 14.7 | - | - |" in trigger


def test_compare_flag_writes_the_comparison_beside_the_labels(tmp_path: Any,
                                                              capsys: Any) -> None:
    out = tmp_path / "one_document.json"
    entry = {"results": {"pdf/trigger": {"runs": 2, "p50_s": 3.0, "p95_s": 4.0}}}
    out.write_text(json.dumps({"before": entry, "after": entry}))
    one_document.compare_labels(out, "before", "after")
    saved = json.loads(out.read_text())
    assert set(saved) == {"before", "after", "comparison"}
    assert saved["comparison"]["labels"] == ["before", "after"]
    assert "| p95_s | 4 | 4 | +0 |" in capsys.readouterr().out
    with pytest.raises(SystemExit, match="no label nope"):
        one_document.compare_labels(out, "before", "nope")


def test_settings_list_what_differs_from_the_users_defaults() -> None:
    assert one_document.settings(None, {"PATH": "/bin", "PREFECT_HOME": "/x"}) == {}
    got = one_document.settings(2.0, {"FOLIO_WARM": "0", "FOLIO_OCR__ENGINE": "rapidocr",
                                      "FOLIO_CORPUS_DIR": "/c"})
    assert set(got) == {"PREFECT_WORKER_QUERY_SECONDS", "FOLIO_WARM", "FOLIO_OCR__ENGINE"}
    assert got["PREFECT_WORKER_QUERY_SECONDS"]["value"] == "2.0"
    assert "warm process" in got["FOLIO_WARM"]["reason"]
    assert set(one_document.settings(None, {}, cli=True)) == {"folio ingest --report"}


def test_a_ratio_to_the_pages_own_time_is_not_held_by_the_pages() -> None:
    """The ten-page goal is the wall against the pages' own time: what holds it is the
    largest stage besides the pages."""
    cell = {"pages_own_ratio_p50": 2.4,
            "stages_median_s": {"pages": 1.5, "finishing": 0.8, "flow_start": 0.7}}
    goal = stats.evaluate_goals({"pdf10/trigger": cell})["pdf10/trigger"]
    assert goal["met"] is False and goal["held_by"]["stage"] == "finishing"
    assert stats.holding_stage(cell)["stage"] == "pages"  # a wall's own goal: the largest
