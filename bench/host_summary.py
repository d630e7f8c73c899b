"""Summarise what bench/engine_limit_device.sh's pipeline steps record beside each run:
the host's cores by kind of process (bench/host_cpu.py) and py-spy's ``--gil`` samples of
folio's flow process (raw format: one line per stack, its count last).

    python bench/host_summary.py DIR --out bench/results/engine_limit_host/summary.json

DIR holds ``host-cpu-PRESET-TAG.json`` and ``gil-PRESET-TAG.txt`` (or ``.txt.gz``) files. The run's window is
the seconds in which the flow process used more than half a core (its start-up and its
server's start are outside it). GIL: the share of py-spy's 20 samples a second in which a
thread of the flow held the GIL, and the frames they were in, counted at folio's deepest
frame of each stack (where folio's own code spent the GIL) and by the library of each
stack's innermost frame. ``core_seconds``: each kind's cores over the whole recording, for
core-seconds a page.
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
import statistics
from collections import Counter
from pathlib import Path
from typing import Any

RATE = 20  # py-spy samples a second (engine_limit_device.sh: --rate 20)
OURS = ("folio/", "folio_prefect/", "flows/", "tasks/")


def cores(path: Path) -> dict[str, Any]:
    samples = json.loads(path.read_text())["samples"]
    busy = [s["cores"] for s in samples if s["cores"].get("folio-flow", 0) > 0.5]
    kinds: Counter[str] = Counter()
    for s in busy:
        kinds.update(s)
    flow = sorted(s.get("folio-flow", 0.0) for s in busy)
    n = max(len(busy), 1)
    # the whole recording too, each sample weighted by the seconds since the one before:
    # core-seconds per kind, which divided by a phase's pages give cores a page costs
    spent: Counter[str] = Counter()
    previous = 0.0
    for s in samples:
        for kind, used in s["cores"].items():
            spent[kind] += used * (s["t"] - previous)
        previous = s["t"]
    return {"seconds": len(busy),
            "mean_cores": {k: round(v / n, 2) for k, v in kinds.most_common()},
            "recorded_seconds": round(previous, 1),
            "core_seconds": {k: round(v) for k, v in spent.most_common()},
            "flow_cores_p10_p50_p90": [flow[len(flow) // 10], flow[len(flow) // 2],
                                       flow[9 * len(flow) // 10]] if flow else None}


def gil(path: Path, seconds: int, top: int = 15) -> dict[str, Any]:
    total = 0
    where: Counter[str] = Counter()
    package: Counter[str] = Counter()  # the library of the innermost frame
    text = (gzip.decompress(path.read_bytes()).decode() if path.suffix == ".gz"
            else path.read_text())
    for line in text.splitlines():
        stack, _, count = line.rpartition(" ")
        if not count.isdigit():
            continue
        total += int(count)
        frames = stack.split(";")
        # py-spy names a frame's file from its package down: "httpcore/_utils.py:37"
        leaf = re.search(r"\(([^()]+?)(?:/[^()]*)?(?::\d+)?\)$", frames[-1])
        package[leaf[1] if leaf else frames[-1]] += int(count)
        ours = [f for f in frames if any(o in f for o in OURS)]
        frame = re.sub(r":\d+\)", ")", ours[-1]) if ours else "(outside folio's code)"
        where[frame] += int(count)
    return {"samples_holding_gil": total,
            "share_of_samples": round(total / (RATE * seconds), 2) if seconds else None,
            "deepest_folio_frame": [{"frame": f, "share": round(c / total, 3)}
                                    for f, c in where.most_common(top)],
            "innermost_library": [{"package": k, "share": round(c / total, 3)}
                                  for k, c in package.most_common(top)]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dir")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    runs = {}
    for host in sorted(Path(args.dir).glob("host-cpu-*.json")):
        name = host.name.removeprefix("host-cpu-").removesuffix(".json")
        run = cores(host)
        spy = host.with_name(f"gil-{name}.txt")
        spy = spy if spy.is_file() else spy.with_name(spy.name + ".gz")  # as committed
        if spy.is_file():
            run["gil"] = gil(spy, run["seconds"])
        runs[name] = run
    flows = [r["mean_cores"].get("folio-flow", 0.0) for r in runs.values()]
    out = {"how": __doc__.split("\n\n", 2)[2].strip(), "runs": runs,
           "flow_mean_cores_median": statistics.median(flows) if flows else None,
           "command": f"python bench/host_summary.py {args.dir} --out {args.out}"}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=1) + "\n")
    print(json.dumps({k: {"mean_cores": v["mean_cores"],
                          "gil": v.get("gil", {}).get("share_of_samples")}
                      for k, v in runs.items()}, indent=1))


if __name__ == "__main__":
    main()
