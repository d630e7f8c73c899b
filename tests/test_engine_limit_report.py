"""bench/engine_limit's phase files and report: a phase run twice in one session counts
twice (a run's place on its server moves its figure, so one run alone misleads), an
earlier session's seeded copy gives way to this session's run, and the report's pages/s
is the median over the runs, in the order they ran."""

from __future__ import annotations

import json
from pathlib import Path

from bench.engine_limit_report import report, save_phase


def _pipeline(pages_per_s: float, run_on_server: int, **extra: object) -> dict[str, object]:
    return {"phase": "pipeline", "preset": "olmocr2", "variant": "default", "pages": 100,
            "pages_per_s": pages_per_s, "run_on_server": run_on_server,
            "queue": {"gpu_utilization_mean": 80.0 + run_on_server, "running_mean": 150.0},
            "scheduler_queue": [], **extra}


def test_repeats_are_kept_and_seeded_copies_replaced(tmp_path: Path) -> None:
    phases = tmp_path / "phases"
    seeded = _pipeline(5.0, 1, measured_at="abc1234")
    save_phase(phases, "pipeline-olmocr2-default", seeded)
    save_phase(phases, "pipeline-olmocr2-default-run2", seeded)  # as seed() names repeats
    for n, rate in enumerate((8.2, 8.6, 8.7), start=1):
        save_phase(phases, "pipeline-olmocr2-default", _pipeline(rate, n))
    kept = sorted(p.name for p in phases.glob("*.json"))
    assert kept == ["pipeline-olmocr2-default-run2.json", "pipeline-olmocr2-default-run3.json",
                    "pipeline-olmocr2-default.json"]
    assert not any("measured_at" in json.loads(p.read_text()) for p in phases.glob("*.json"))


def test_the_report_takes_the_median_of_every_run_in_running_order(tmp_path: Path) -> None:
    phases = tmp_path / "phases"
    for n, rate in enumerate((8.2, 8.7, 8.6), start=1):
        save_phase(phases, "pipeline-olmocr2-default", _pipeline(rate, n))
    save_phase(phases, "offline-olmocr2", {"phase": "offline", "preset": "olmocr2",
                                           "pages": 100, "pages_per_s": 10.0})
    result = report(tmp_path, tmp_path / "out", "test")
    (row,) = result["results"]
    assert row["pipeline_pages_per_s"] == 8.6
    assert row["pipeline_over_offline"] == 0.86
    assert [r["run_on_server"] for r in row["pipeline_runs"]] == [1, 2, 3]
    assert [r["pages_per_s"] for r in row["pipeline_runs"]] == [8.2, 8.7, 8.6]
    assert row["pipeline_gpu_utilization"] == 82.0  # the median run's, not the last one's
    assert json.loads((tmp_path / "out" / "engine_limit.json").read_text())["results"] == [row]


def test_a_phase_marked_invalid_counts_in_no_row(tmp_path: Path) -> None:
    phases = tmp_path / "phases"
    save_phase(phases, "pipeline-olmocr2-default", _pipeline(7.8, 1))
    save_phase(phases, "pipeline-olmocr2-default", _pipeline(9.9, 2, invalid="gs missing"))
    result = report(tmp_path, tmp_path / "out", "test", gpu_name="NVIDIA H200")
    (row,) = result["results"]
    assert row["pipeline_pages_per_s"] == 7.8 and len(row["pipeline_runs"]) == 1
    assert result["not_counted"][0]["invalid"] == "gs missing"
    assert len(result["phases"]) == 2 and result["gpu"] == "NVIDIA H200"


def test_every_variant_is_listed_with_what_it_changed_where_and_why(tmp_path: Path) -> None:
    """A figure measured in a configuration users do not run by default says so in the
    result itself: the changed settings, the commit its own phases ran at (not the seeded
    offline yardstick's) and the reason."""
    phases = tmp_path / "phases"
    save_phase(phases, "pipeline-olmocr2-default", _pipeline(8.4, 1))
    save_phase(phases, "pipeline-olmocr2-nocompress", _pipeline(
        8.2, 2, variant="nocompress", folio_settings=["compress=false"]))
    save_phase(phases, "pipeline-olmocr2-odd", _pipeline(
        8.0, 3, variant="odd", folio_settings=["limits.x=1"], measured_at="abc1234"))
    save_phase(phases, "offline-olmocr2", {"phase": "offline", "preset": "olmocr2", "pages": 100,
                                           "pages_per_s": 10.0, "measured_at": "0ff1ine"})
    variants = report(tmp_path, tmp_path / "out", "test", gpu_name="H200")["variants"]
    assert set(variants) == {"default", "nocompress", "odd"}
    assert variants["nocompress"].startswith("compress=false (measured at None)")
    assert "Ghostscript" in variants["nocompress"]
    assert variants["odd"] == "limits.x=1 (measured at abc1234): a variant, not the user default"
    assert "0ff1ine" not in "".join(variants.values())
