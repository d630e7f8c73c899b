"""The steady middle of a device session's phases, second by second: how busy the GPU was
while the server held its requests, and how much CPU the processes beside vLLM used (folio
under a pipeline phase, the raw client under a served one) in the seconds the GPU dipped
against those it was busy.

Why: olmocr2's pipeline phases keep as many requests running as the raw client does, yet
the GPU is less busy under them (issue 60); whether its dips come with folio's bursts of
CPU work is what the ``pin`` variant (bench/engine_limit_device.sh) is to test.

    python bench/engine_limit_middle.py RUN_DIR \
        --host-cpu PHASE@SERVER=host-cpu-FILE.json ... [--steady 0.75] [--out FILE]

``RUN_DIR`` holds a session's ``engine_limit.json`` (its phases' ``queue.series``: the GPU's
busy share and the requests running, a sample a second) and bench/host_cpu.py's files;
``--host-cpu`` names the file sampled beside a phase (``pipeline@olmocr2-default-2``: the
phase and its ``server``). The two series are aligned on their last second of work
(requests running; vLLM's engine core above 0.3 cores: a served phase's file begins with
its server's start-up), so to about a second.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

#: GPU busy shares (%) that count as a dip and as busy
DIP, BUSY = 80.0, 95.0


def cores_besides_vllm(cores: dict[str, float]) -> float:
    """The cores of everything but vLLM and the measurement: folio's flow, page workers,
    validation, Ghostscript and its local Prefect server, or the raw client."""
    return sum(v for k, v in cores.items() if not k.startswith("vllm") and k != "measurement")


def middle(phase: dict[str, Any], steady_share: float,
           host: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """The phase's steady seconds (requests running at least ``steady_share`` of its
    median running, so neither the ramp nor the tail): the GPU's mean
    busy share and share of dips; with ``host``, vLLM's engine core and the other
    processes' cores in dips and in busy seconds, and their correlation with the GPU's
    share."""
    series = phase["queue"]["series"]
    typical = statistics.median(s["running"] for s in series if s["running"] > 0)
    steady = [s for s in series if s["running"] >= steady_share * typical]
    gpu = [s["gpu"] for s in steady]
    out: dict[str, Any] = {"phase": phase["phase"], "preset": phase["preset"],
                           "variant": phase.get("variant"), "server": phase.get("server"),
                           "pages_per_s": phase["pages_per_s"], "median_running": typical,
                           "seconds": len(steady),
                           "gpu_busy_mean": round(statistics.mean(gpu), 1),
                           "share_of_seconds_below_80": round(sum(g < DIP for g in gpu)
                                                              / len(gpu), 2)}
    if host:
        last_host = max(s["t"] for s in host if s["cores"].get("vllm-engine-core", 0) > 0.3)
        last_run = max(s["t"] for s in series if s["running"] > 0)
        pairs = []
        for s in steady:
            at = s["t"] - last_run + last_host
            sample = min(host, key=lambda h: abs(h["t"] - at))
            pairs.append((s["gpu"], cores_besides_vllm(sample["cores"]),
                          sample["cores"].get("vllm-engine-core", 0.0)))
        dips = [f for g, f, _ in pairs if g < DIP]
        busy = [f for g, f, _ in pairs if g >= BUSY]
        out.update({
            "cores_besides_vllm_mean": round(statistics.mean(f for _, f, _ in pairs), 2),
            "engine_core_cores_mean": round(statistics.mean(e for _, _, e in pairs), 2),
            "cores_besides_vllm_in_dips": round(statistics.mean(dips), 2) if dips else None,
            "cores_besides_vllm_when_busy": round(statistics.mean(busy), 2) if busy else None,
            "correlation_gpu_cores_besides_vllm": round(statistics.correlation(
                [g for g, _, _ in pairs], [f for _, f, _ in pairs]), 2),
        })
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run_dir", type=Path)
    ap.add_argument("--host-cpu", action="append", default=[], metavar="PHASE@SERVER=FILE")
    ap.add_argument("--steady", type=float, default=0.75,
                    help="a second is steady with this share of the phase's median running")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    result = json.loads((args.run_dir / "engine_limit.json").read_text())
    files = dict(pair.split("=", 1) for pair in args.host_cpu)
    rows = []
    for phase in result["phases"]:
        if phase.get("invalid") or phase["phase"] not in ("served", "pipeline"):
            continue
        file = files.get(f"{phase['phase']}@{phase.get('server')}")
        host = json.loads((args.run_dir / file).read_text())["samples"] if file else None
        rows.append(middle(phase, args.steady, host))
    out = {"command": "python bench/engine_limit_middle.py " + " ".join(sys.argv[1:]),
           "steady_share_of_median_running": args.steady, "dip_below": DIP, "busy_from": BUSY,
           "how": __doc__.split("\n\n")[1].replace("\n", " "), "phases": rows}
    text = json.dumps(out, indent=1) + "\n"
    (args.out.write_text(text) if args.out else print(text, end=""))


if __name__ == "__main__":
    main()
