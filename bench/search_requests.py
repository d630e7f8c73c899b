"""What a LanceDB search asks of S3, and what the benchmarks' S3 server does with it: the
same table and searches on bench/s3_like.py with its ranged reads answered by its fast
path and by moto itself, side by side in one run.

    .venv/bin/python bench/search_requests.py              # 1M rows
    .venv/bin/python bench/search_requests.py --rows 100000

Why: bench/store_scale.py's LanceDB search at 1M rows took 77 ms p50 on moto and 33 ms
once s3_like answered plain ranged GETs itself. This says where the difference is, from
the server's request log (``BENCH_S3_LOG``): how many reads a search sends, over how long
it sends them (all at once, or one after another), and how long each takes at the
server. A search's reads that leave together but end one after another are the double's
doing, not LanceDB's or folio's: S3 serves them side by side.

The table is set up as bench/store_scale.py sets each of its sizes up (its code: a bulk
load, a write of the store's own, ``maintain()``), with folio's LanceDB defaults;
``--queries`` top-10 searches of stored chunks plus a little noise, after one that loads
the index. Results: ``bench/results/search_requests.json``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np
import store_scale as ss
from _measure import save

MODES = {"fast_path": "0", "moto": "1"}  # BENCH_S3_MOTO_RANGES


def requests_of(log: Path, windows: list[tuple[float, float]]) -> list[list[tuple[float, float]]]:
    """(start, end) of the server's requests within each search's window."""
    rows = [line.split() for line in log.read_text().splitlines()]
    spans = sorted((float(r[0]), float(r[1])) for r in rows if r[2] == "GET")
    return [[s for s in spans if lo <= s[0] <= hi] for lo, hi in windows]


def figures(ms: list[float], per_search: list[list[tuple[float, float]]]) -> dict[str, Any]:
    def med(values: list[float]) -> float:
        return round(statistics.median(values), 2) if values else 0.0

    busy = [s for s in per_search if s]
    return {
        "search_p50_ms": med(ms),
        "search_p95_ms": round(statistics.quantiles(ms, n=20)[18], 2),
        "gets_per_search": med([len(s) for s in per_search]),
        # from the first read sent to the last one sent, and to the last one answered
        "sending_ms": med([(max(a for a, _ in s) - s[0][0]) * 1000 for s in busy]),
        "reads_ms": med([(max(b for _, b in s) - s[0][0]) * 1000 for s in busy]),
        "server_ms_per_get": med([(b - a) * 1000 for s in busy for a, b in s]),
        # how many reads were at the server at once, on average over the reads' span
        "gets_in_flight_mean": med([sum(b - a for a, b in s) / max(max(b for _, b in s) - s[0][0],
                                                                    1e-9) for s in busy]),
    }


def run_mode(mode: str, rows: int, queries: int, work: Path) -> dict[str, Any]:
    log = work / f"requests-{mode}.log"
    log.write_text("")
    os.environ.update({"BENCH_S3_LOG": str(log), "BENCH_S3_MOTO_RANGES": MODES[mode]})
    with ss.lancedb_store(argparse.Namespace()) as bench:
        table = bench.build(rows)
        ss.timed_write(table, np.random.default_rng(rows), -1)  # chunks to search for
        table.store.wait_maintained()
        table.store.maintain()
        asked = ss.queries_for(table.targets, queries)
        ss.prewarm(table.store, asked[0][1])
        ms, windows, first = [], [], 0
        for target, query in asked:
            started = time.monotonic()
            found = table.store.search(query, k=10)
            ms.append((time.monotonic() - started) * 1000)
            windows.append((started, time.monotonic()))
            first += bool(found) and found[0]["id"] == target
    return {"mode": mode, "rows": rows, "setup": table.setup, "recall_at_1": first / len(asked),
            **figures(ms, requests_of(log, windows))}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--queries", type=int, default=30)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        results = [run_mode(mode, args.rows, args.queries, Path(tmp)) for mode in MODES]
    fast, moto = results
    save("search_requests", {
        "results": results,
        "moto_over_fast_path_p50": round(moto["search_p50_ms"] / fast["search_p50_ms"], 2),
        "settings": {
            "store": {"value": "folio's LanceDB defaults (LanceTuning()), the table set up by "
                               "bench/store_scale.py's code",
                      "why": "the searches bench/store_scale.py measures at this size"},
            "BENCH_S3_MOTO_RANGES": {"value": MODES,
                                     "why": "the one difference between the two runs: "
                                            "ranged GETs answered by s3_like's fast path "
                                            "or by moto's own request handling"},
            "BENCH_S3_LOG": {"value": "on in both runs",
                             "why": "the request log the figures come from; a line a "
                                    "request, written after its answer"},
        },
    })


if __name__ == "__main__":
    main()
