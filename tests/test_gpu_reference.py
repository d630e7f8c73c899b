"""bench/gpu_reference.py: a device session's engine_limit phases become issue 47's runs
(served and pipeline paired in running order), sessions accumulate and replace
themselves, and the targets are judged on the user's configuration at the issue's size
only."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from bench.gpu_reference import add, session_rows

ROOT = Path(__file__).resolve().parent.parent


def _phase(phase: str, preset: str, rate: float, variant: str = "default",
           pages: int = 600, **extra: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"phase": phase, "preset": preset, "pages": pages,
                           "pages_per_s": rate, **extra}
    if phase != "offline":
        out["variant"] = variant
        out["queue"] = {"gpu_utilization_mean": 85.0}
    if phase == "pipeline":
        out["documents"] = 120
    return out


def _session(*phases: dict[str, Any], commit: str = "abc1234") -> dict[str, Any]:
    return {"commit": commit, "phases": list(phases),
            "settings": {"ocr.ignore_eos": {"value": True, "why": "synthetic weights"}}}


def test_served_and_pipeline_pair_in_running_order_and_seeded_phases_do_not_count() -> None:
    result = _session(_phase("served", "olmocr2", 9.0), _phase("pipeline", "olmocr2", 8.7),
                      _phase("served", "olmocr2", 8.8), _phase("pipeline", "olmocr2", 8.0),
                      _phase("served", "olmocr2", 1.0, measured_at="old"),
                      _phase("offline", "olmocr2", 10.0))
    rows = session_rows(result, "s1")
    assert [(r["served_pages_per_s"], r["pipeline_pages_per_s"]) for r in rows["runs"]] == [
        (9.0, 8.7), (8.8, 8.0)]
    assert rows["offline"] == [{"preset": "olmocr2", "device_session": "s1", "pages": 600,
                                "offline_pages_per_s": 10.0, "pipeline_pages_per_s": 8.7,
                                "commit": "abc1234"}]


def test_sessions_accumulate_replace_themselves_and_judge_the_targets() -> None:
    store: dict[str, Any] = {}
    for name, served, pipeline in (("s1", 9.0, 8.7), ("s2", 9.0, 8.0), ("s3", 9.0, 8.9)):
        store = add(store, _session(_phase("served", "chandra2", served),
                                    _phase("pipeline", "chandra2", pipeline)), name)
    summary = store["summary"]["chandra2"]
    assert summary["runs"] == 3 and summary["complete"]
    assert summary["pipeline_over_served"] == round(8.7 / 9.0, 3)
    assert summary["meets_pipeline_over_served"] is True
    # the same session added again replaces its rows: the median moves, the count does not
    store = add(store, _session(_phase("served", "chandra2", 9.0),
                                _phase("pipeline", "chandra2", 7.0)), "s3")
    assert store["summary"]["chandra2"]["runs"] == 3
    assert store["summary"]["chandra2"]["meets_pipeline_over_served"] is False


def test_variants_and_small_runs_are_kept_but_do_not_count() -> None:
    store = add({}, _session(_phase("served", "olmocr2", 9.0, "mnbt16k"),
                             _phase("pipeline", "olmocr2", 9.0, "mnbt16k"),
                             _phase("served", "olmocr2", 9.0, pages=100),
                             _phase("pipeline", "olmocr2", 4.0, pages=100)), "s1")
    assert [r["variant"] for r in store["variants"]] == ["mnbt16k"]
    assert store["summary"]["olmocr2"]["runs"] == 0
    assert "pipeline_over_served" not in store["summary"]["olmocr2"]
    store = add(store, _session(_phase("served", "olmocr2", 9.0),
                                _phase("pipeline", "olmocr2", 9.0)), "s2")
    assert [r["variant"] for r in store["variants"]] == ["mnbt16k"]  # kept across sessions


def test_the_command_line_writes_the_result(tmp_path: Path) -> None:
    session = tmp_path / "engine_limit.json"
    session.write_text(json.dumps(_session(_phase("served", "olmocr2", 9.0),
                                           _phase("pipeline", "olmocr2", 8.9))))
    out = tmp_path / "gpu_reference_settings.json"
    subprocess.run([sys.executable, str(ROOT / "bench" / "gpu_reference.py"), "add",
                    str(session), "--session", "dry-run", "--out", str(out)], check=True,
                   capture_output=True)
    data = json.loads(out.read_text())
    assert set(data["runs"][0]) == {"preset", "variant", "device_session", "documents", "pages",
                                    "served_pages_per_s", "pipeline_pages_per_s",
                                    "gpu_busy_served", "gpu_busy_pipeline", "commit"}
    assert data["settings"]["ocr.ignore_eos"]["value"] is True


def test_a_session_keeps_its_gpu_command_and_note_and_a_re_add_keeps_the_note() -> None:
    result = {**_session(_phase("served", "olmocr2", 9.0), _phase("pipeline", "olmocr2", 8.0)),
              "gpu": "NVIDIA H100 80GB HBM3", "command": "bash bench/engine_limit_device.sh"}
    store = add({}, result, "s1", "the GPU idles while the flow renders")
    assert store["sessions"]["s1"] == {"gpu": "NVIDIA H100 80GB HBM3", "commit": result.get("commit"),
                                       "command": "bash bench/engine_limit_device.sh",
                                       "note": "the GPU idles while the flow renders"}
    store = add(store, result, "s1")
    assert store["sessions"]["s1"]["note"] == "the GPU idles while the flow renders"
    assert add(store, result, "s1", "")["sessions"]["s1"]["note"] == ""


def test_a_served_phase_pairs_with_the_pipeline_on_its_own_server() -> None:
    # a first server ran a pipeline phase alone, a second one served then a pipeline phase:
    # the run is the second server's two phases, not the served phase with the first pipeline
    result = _session(_phase("pipeline", "olmocr2", 7.36, server="owner-1"),
                      _phase("pipeline", "olmocr2", 7.30, server="owner-2"),
                      _phase("served", "olmocr2", 7.53, server="owner-2"))
    rows = session_rows(result, "s1")["runs"]
    assert [(r["served_pages_per_s"], r["pipeline_pages_per_s"]) for r in rows] == [(7.53, 7.30)]
    # phases that name no server (older sessions) pair in running order as before
    unnamed = _session(_phase("pipeline", "olmocr2", 7.36), _phase("served", "olmocr2", 7.53))
    assert [r["pipeline_pages_per_s"] for r in session_rows(unnamed, "s0")["runs"]] == [7.36]


def test_a_server_variant_is_compared_with_the_default_on_the_pipeline_per_preset() -> None:
    store = add({}, _session(_phase("pipeline", "chandra2", 2.20),
                             _phase("pipeline", "chandra2", 2.19, "mnbt16k"),
                             _phase("pipeline", "olmocr2", 7.30),
                             _phase("pipeline", "olmocr2", 7.40),
                             _phase("pipeline", "olmocr2", 7.60, "mnbt16k")), "s1")
    ratios = {c["preset"]: c["variant_over_default"] for c in store["variant_comparisons"]}
    assert ratios == {"chandra2": round(2.19 / 2.20, 3), "olmocr2": round(7.60 / 7.35, 3)}
    # a win on one preset only does not make it the profile's default
    assert store["variant_summary"]["mnbt16k"]["wins_on_both"] is False
    store = add(store, _session(_phase("pipeline", "chandra2", 2.0),
                                _phase("pipeline", "chandra2", 2.3, "mnbt16k")), "s1")
    # the session's rows replaced: olmocr2 has no comparison now, so no win on both
    assert store["variant_summary"]["mnbt16k"] == {"variant_over_default": {"chandra2": 1.15},
                                                   "wins_on_both": False}
