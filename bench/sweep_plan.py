"""Sweep planning against bucket size: requests, seconds and peak RSS per 1000 objects.

    .venv/bin/python bench/sweep_plan.py                         # 100k and 1M objects
    .venv/bin/python bench/sweep_plan.py --sizes 10000 100000 --repeats 1
    .venv/bin/python bench/sweep_plan.py --server moto           # moto (s3_like) instead

What is measured: :func:`folio.claims.plan.plan_sweep`, the listing pass of every sweep
(``flows/sweep.py``), over a prefix of N tiny ``.pdf`` objects that are all done (each has
its done record in the ledger under the output location): the case whose cost should
not grow per object, since there is nothing to do. It runs in a fresh process per pass,
so that its peak RSS is its own (``VmHWM``: ``ru_maxrss`` of a spawned child starts at
its parent's RSS, see ``rss_note`` in the results); requests are counted at botocore's
endpoint (every HTTP request the process sends); its CPU seconds are the planner's own
(folio and botocore), its wall seconds include the server's.

Each size has its own pair of buckets (sources and outputs), so that passes of every size
alternate, ``--repeats`` rounds of them, and the host's load (shared, 2 cores) falls on
every size alike; a size's figures are the median of its passes.

The S3 server is ``bench/s3_index.py`` (a sorted key index, a few hundred bytes a key) by
default: moto, through ``bench/s3_like.py``, holds ~4 KB a key (7.9 GB at 1M objects)
and spends most of a listing page in its response serializer (``where_time_goes`` in the
results). Objects and done records are created by the server's bulk-fill endpoint, not
a PUT request each; creation is not measured, its seconds are recorded.
Results: ``bench/results/sweep_plan.json`` (``sweep_plan_moto.json`` with ``--server moto``).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench._measure import git, save

SIZES = [100_000, 1_000_000]
PREFIX = "in/"
CONFIG = "cfg0"
FILL_BATCH = 20_000
TARGET_RATIO = 1.5


def buckets(size: int) -> tuple[str, str]:
    """The sources and outputs buckets of one size."""
    return f"sources-{size}", f"outputs-{size}"


def source_key(i: int) -> str:
    return f"{PREFIX}{i // 1000:04d}/{i:07d}.pdf"


def body(i: int) -> str:
    return f"%PDF-{i}"


def fill(endpoint: str, bucket: str, objects: list[list[str]]) -> None:
    data = json.dumps({"bucket": bucket, "objects": objects}).encode()
    request = urllib.request.Request(f"{endpoint}/_bench/fill", data=data, method="POST")
    with urllib.request.urlopen(request, timeout=600) as answer:
        assert int(answer.read()) == len(objects)


def done_records(sources: str, first: int, last: int) -> list[list[str]]:
    """Sources ``first..last-1`` and their done records, as the sweep writes them."""
    from folio.claims.ledger import ClaimLedger
    from folio.claims.records import DoneRecord, dump
    from folio.io.s3 import ObjectRef
    from folio.io.sinks import LocalSink

    ledger = ClaimLedger(LocalSink(Path("/nonexistent")), CONFIG)  # paths only
    out = []
    for i in range(first, last):
        text = body(i)
        etag = '"' + hashlib.md5(text.encode(), usedforsecurity=False).hexdigest() + '"'
        obj = ObjectRef(bucket=sources, key=source_key(i), size=len(text), etag=etag)
        record = DoneRecord(source=obj.uri, source_etag=etag, source_size=obj.size,
                            config_hash=CONFIG, sha256="0" * 64, doc_id=f"d{i}", outcome="ok",
                            cached=False, owner="bench", batch="b", completed_at=0.0)  # fmt: skip
        out.append([ledger.done_path(obj), dump(record).decode()])
    return out


def create(endpoint: str, size: int) -> float:
    """Create one size's sources and done records; returns the seconds it took."""
    sources, outputs = buckets(size)
    started = time.perf_counter()

    def piece(first: int) -> None:
        last = min(first + FILL_BATCH, size)
        fill(endpoint, sources, [[source_key(i), body(i)] for i in range(first, last)])
        fill(endpoint, outputs, done_records(sources, first, last))

    with ThreadPoolExecutor(2) as pool:
        list(pool.map(piece, range(0, size, FILL_BATCH)))
    return time.perf_counter() - started


def child(endpoint: str, size: int) -> None:
    """The measured planning pass; prints one JSON line."""
    import botocore.endpoint
    from pydantic import SecretStr

    from folio.claims.ledger import ClaimLedger
    from folio.claims.plan import plan_sweep
    from folio.settings.config import S3Settings

    requests = [0]
    send = botocore.endpoint.Endpoint._send

    def counted(self: Any, request: Any) -> Any:
        requests[0] += 1
        return send(self, request)

    botocore.endpoint.Endpoint._send = counted  # type: ignore[method-assign]
    sources, outputs = buckets(size)
    s3 = S3Settings(endpoint_url=endpoint, region="us-east-1", access_key_id="test",
                    secret_access_key=SecretStr("test"))  # fmt: skip
    ledger = ClaimLedger.for_output(f"s3://{outputs}/", s3, CONFIG)
    rss_before = _status_kib("VmRSS")
    started, cpu = time.perf_counter(), time.process_time()
    verdicts: dict[str, int] = {}
    for _, verdict in plan_sweep(f"s3://{sources}/{PREFIX}", ledger, s3, max_attempts=3):
        verdicts[verdict] = verdicts.get(verdict, 0) + 1
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    print(json.dumps({"seconds": seconds, "cpu_s": cpu, "requests": requests[0],
                      "verdicts": verdicts, "rss_before_mib": rss_before / 1024,
                      "peak_rss_mib": _status_kib("VmHWM") / 1024}))  # fmt: skip


def _status_kib(field: str) -> int:
    """``VmRSS`` (now) or ``VmHWM`` (peak) of this process, from /proc."""
    with open("/proc/self/status") as fh:
        return next(int(line.split()[1]) for line in fh if line.startswith(f"{field}:"))


def one_pass(endpoint: str, size: int) -> dict[str, Any]:
    load = os.getloadavg()[0]
    done = subprocess.run([sys.executable, __file__, "--child", endpoint, str(size)],
                          capture_output=True, text=True, cwd=REPO)  # fmt: skip
    if done.returncode:
        raise SystemExit(f"planning {size} objects failed:\n{done.stderr[-3000:]}")
    got: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    if got["verdicts"] != {"skipped": size}:
        raise SystemExit(f"{size}: expected every object done, got {got['verdicts']}")
    got["load_average_1m"] = round((load + os.getloadavg()[0]) / 2, 2)  # start and end
    print(json.dumps({"objects": size} | got), flush=True)
    return got


def row(size: int, passes: list[dict[str, Any]], created: float) -> dict[str, Any]:
    """One size's figures: medians of its passes (every pass is kept under ``passes``)."""

    def med(name: str) -> float:
        return float(statistics.median(p[name] for p in passes))

    per = 1000 / size
    peak, before = med("peak_rss_mib"), med("rss_before_mib")
    return {
        "create_s": round(created, 1),
        "objects": size,
        "requests": int(med("requests")),
        "requests_per_1000": round(med("requests") * per, 2),
        "seconds": round(med("seconds"), 2),
        "seconds_per_1000": round(med("seconds") * per, 4),
        "cpu_s_per_1000": round(med("cpu_s") * per, 4),
        "peak_rss_mib": round(peak, 1),
        "rss_before_planning_mib": round(before, 1),  # after imports
        "peak_rss_mib_per_1000": round(peak * per, 3),
        "rss_growth_mib_per_1000": round((peak - before) * per, 4),
        "load_average_1m": round(med("load_average_1m"), 2),
        "passes": [_rounded(p) for p in passes],
    }


def _rounded(one: dict[str, Any]) -> dict[str, Any]:
    return {
        k: round(v, 3) if isinstance(v, float) else v for k, v in one.items() if k != "verdicts"
    }


def ratio(by: dict[int, dict[str, Any]], big: int, small: int, field: str) -> float | None:
    if big not in by or small not in by:
        return None
    return round(float(by[big][field]) / float(by[small][field]), 2)


def commit() -> str:
    """HEAD, and whether tracked files differed from it when the bench ran."""
    dirty = git("status", "--porcelain", "--untracked-files=no")
    return git("rev-parse", "HEAD") + (" (with uncommitted changes)" if dirty else "")


SERVERS = {
    "index": {"value": "bench/s3_index.py: a sorted key index; a listing page is a binary "
                       "search and one step per key; a few hundred bytes a key",
              "why": "moto (bench/s3_like.py) holds ~4 KB a key (7.9 GB for the 2.2M keys of "
                     "1M objects: the earlier 1M run died) and spends ~60% of a 100k pass in "
                     "its response serializer (where_time_goes); S3's listing is an index "
                     "seek. The client side (folio, boto3, its XML) is the same"},
    "moto": {"value": "moto through bench/s3_like.py (listing by binary search)",
             "why": "moto sorts the whole bucket for every listing page; S3 does not"},
}  # fmt: skip


def main() -> None:
    if len(sys.argv) == 4 and sys.argv[1] == "--child":
        child(sys.argv[2], int(sys.argv[3]))
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", nargs="+", type=int, default=SIZES)
    parser.add_argument("--repeats", type=int, default=3, help="rounds of passes (median)")
    parser.add_argument("--server", choices=sorted(SERVERS), default="index")
    args = parser.parse_args()
    if args.server == "moto":
        from bench.s3_like import start_s3_like_server as start
    else:
        from bench.s3_index import start_s3_index_server as start
    server = start()
    sizes = sorted(args.sizes)
    created: dict[int, float] = {}
    passes: dict[int, list[dict[str, Any]]] = {size: [] for size in sizes}
    try:
        for size in sizes:
            for bucket in buckets(size):
                server.create_bucket(bucket)
            print(f"creating {size} objects and done records", flush=True)
            created[size] = create(server.endpoint_url, size)
        for _ in range(args.repeats):
            for size in sizes:
                passes[size].append(one_pass(server.endpoint_url, size))
        server_rss = _rss_of(server.process.pid)
    finally:
        server.stop()
    rows = [row(size, passes[size], created[size]) for size in sizes]
    by = {r["objects"]: r for r in rows}
    big = ratio(by, 1_000_000, 100_000, "seconds_per_1000")
    save("sweep_plan" if args.server == "index" else f"sweep_plan_{args.server}", {
        "commit": commit(),
        "sizes": rows,
        "ratio_1m_over_100k": big,
        "ratio_1m_over_100k_cpu": ratio(by, 1_000_000, 100_000, "cpu_s_per_1000"),
        "ratio_100k_over_10k": ratio(by, 100_000, 10_000, "seconds_per_1000"),
        "target_ratio": TARGET_RATIO,
        "target_met": big is not None and big <= TARGET_RATIO,
        "server_rss_mib_at_end": round(server_rss / 1024, 1),
        "settings": {
            "objects": {"value": "tiny .pdf keys (6-12 bytes), 1000 per 'folder'",
                        "why": "planning reads keys and ETags, never bodies"},
            "all done": {"value": "every object has its done record",
                         "why": "the case the issue names: no request per object already done"},
            "S3 server": SERVERS[args.server],
            "creation": {"value": "the server's /_bench/fill (a put in the server per object)",
                         "why": "2M PUT requests take hours on 2 cores; not measured"},
            "buckets": {"value": "a sources and an outputs bucket per size, passes alternating "
                                 f"between sizes, {args.repeats} rounds, medians",
                        "why": "the shared host's load drifts; alternating gives every size "
                               "the same load. A listing's cost does not depend on other "
                               "buckets (S3, and both servers here)"},
        },
    })  # fmt: skip


def _rss_of(pid: int) -> int:
    with open(f"/proc/{pid}/status") as fh:
        return next(int(line.split()[1]) for line in fh if line.startswith("VmRSS:"))


if __name__ == "__main__":
    main()
