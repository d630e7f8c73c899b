"""bench/engine_limit_middle.py: a phase's steady seconds are those near its usual number
of requests running (not the ramp or the tail), and the host's CPU is read at the same
second as the GPU's share, the two series aligned on their last second of work."""

from __future__ import annotations

from typing import Any

from bench.engine_limit_middle import middle


def _phase(gpu: list[float], running: list[float]) -> dict[str, Any]:
    series = [{"t": float(t), "gpu": g, "running": r} for t, (g, r) in enumerate(zip(gpu, running))]
    return {"phase": "pipeline", "preset": "olmocr2", "pages_per_s": 7.0,
            "queue": {"series": series}}


def test_dips_and_busy_seconds_take_the_cpu_of_their_own_second() -> None:
    # ramp (t 0-1), four steady seconds (t 2-5: two dips, two busy), tail (t 6)
    phase = _phase([10, 50, 70, 99, 75, 98, 30], [5, 60, 120, 125, 125, 120, 10])
    # the host's file began 3 s earlier (its clock: t + 3); folio works hard in the dips
    folio = {2: 3.0, 3: 1.0, 4: 3.0, 5: 1.0}
    host = [{"t": float(t + 3), "cores": {"folio-flow": folio.get(t, 0.2),
                                          "vllm-engine-core": 1.5 if t <= 6 else 0.0}}
            for t in range(0, 10)]
    row = middle(phase, 0.75, host)
    assert row["seconds"] == 4 and row["gpu_busy_mean"] == round((70 + 99 + 75 + 98) / 4, 1)
    assert row["share_of_seconds_below_80"] == 0.5
    assert row["cores_besides_vllm_in_dips"] == 3.0
    assert row["cores_besides_vllm_when_busy"] == 1.0
    assert row["correlation_gpu_cores_besides_vllm"] < -0.9
    assert "engine_core_cores_mean" not in middle(phase, 0.75)  # no host file: GPU only
