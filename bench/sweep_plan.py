"""Sweep planning against bucket size: requests, seconds and peak RSS per 1000 objects.

    .venv/bin/python bench/sweep_plan.py                         # 100k and 1M objects
    .venv/bin/python bench/sweep_plan.py --sizes 10000 100000

What is measured: :func:`folio.claims.plan.plan_sweep`, the listing pass of every sweep
(``flows/sweep.py``), over a prefix of N tiny ``.pdf`` objects that are all done (each has
its done record in the ledger under the output location): the case whose cost should
not grow per object, since there is nothing to do. It runs in a fresh process per size,
so that its peak RSS is its own; requests are counted at botocore's endpoint (every
HTTP request the process sends).

The S3 server is moto's, through ``bench/s3_like.py``: moto as the tests use it, except
that a listing page is a binary search instead of a sort of the whole bucket (moto
sorts 1M keys for each page of 1000, which S3 does not), and the objects and done
records are created by its bulk-fill endpoint (``put_object`` inside the server, tens of
thousands a second) rather than a PUT request each; their creation is not measured, its
seconds are recorded. Results: ``bench/results/sweep_plan.json``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import subprocess
import sys
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench._measure import save

SIZES = [100_000, 1_000_000]
SOURCES, OUTPUTS = "sources", "outputs"
PREFIX = "in/"
CONFIG = "cfg0"
FILL_BATCH = 20_000
TARGET_RATIO = 1.5


def source_key(i: int) -> str:
    return f"{PREFIX}{i // 1000:04d}/{i:07d}.pdf"


def body(i: int) -> str:
    return f"%PDF-{i}"


def fill(endpoint: str, bucket: str, objects: list[list[str]]) -> None:
    data = json.dumps({"bucket": bucket, "objects": objects}).encode()
    request = urllib.request.Request(f"{endpoint}/_bench/fill", data=data, method="POST")
    with urllib.request.urlopen(request, timeout=600) as answer:
        assert int(answer.read()) == len(objects)


def done_records(first: int, last: int) -> list[list[str]]:
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
        obj = ObjectRef(bucket=SOURCES, key=source_key(i), size=len(text), etag=etag)
        record = DoneRecord(source=obj.uri, source_etag=etag, source_size=obj.size,
                            config_hash=CONFIG, sha256="0" * 64, doc_id=f"d{i}", outcome="ok",
                            cached=False, owner="bench", batch="b", completed_at=0.0)  # fmt: skip
        out.append([ledger.done_path(obj), dump(record).decode()])
    return out


def grow(endpoint: str, have: int, target: int) -> float:
    """Create sources and done records ``have..target-1``; returns the seconds it took."""
    started = time.perf_counter()

    def piece(first: int) -> None:
        last = min(first + FILL_BATCH, target)
        fill(endpoint, SOURCES, [[source_key(i), body(i)] for i in range(first, last)])
        fill(endpoint, OUTPUTS, done_records(first, last))

    with ThreadPoolExecutor(2) as pool:
        list(pool.map(piece, range(have, target, FILL_BATCH)))
    return time.perf_counter() - started


def child(endpoint: str) -> None:
    """The measured planning pass; prints one JSON line."""
    import botocore.endpoint
    from pydantic import SecretStr

    from folio.claims.ledger import ClaimLedger
    from folio.claims.plan import plan_sweep
    from folio.config import S3Settings

    requests = [0]
    send = botocore.endpoint.Endpoint._send

    def counted(self: Any, request: Any) -> Any:
        requests[0] += 1
        return send(self, request)

    botocore.endpoint.Endpoint._send = counted  # type: ignore[method-assign]
    s3 = S3Settings(endpoint_url=endpoint, region="us-east-1", access_key_id="test",
                    secret_access_key=SecretStr("test"))  # fmt: skip
    ledger = ClaimLedger.for_output(f"s3://{OUTPUTS}/", s3, CONFIG)
    rss_before = _current_rss_kib()
    started = time.perf_counter()
    verdicts: dict[str, int] = {}
    for _, verdict in plan_sweep(f"s3://{SOURCES}/{PREFIX}", ledger, s3, max_attempts=3):
        verdicts[verdict] = verdicts.get(verdict, 0) + 1
    seconds = time.perf_counter() - started
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"seconds": seconds, "requests": requests[0], "verdicts": verdicts,
                      "rss_before_mib": rss_before / 1024, "peak_rss_mib": peak / 1024}))  # fmt: skip


def _current_rss_kib() -> int:
    with open("/proc/self/status") as fh:
        return next(int(line.split()[1]) for line in fh if line.startswith("VmRSS:"))


def measure(endpoint: str, size: int) -> dict[str, Any]:
    done = subprocess.run([sys.executable, __file__, "--child", endpoint],
                          capture_output=True, text=True, cwd=REPO)  # fmt: skip
    if done.returncode:
        raise SystemExit(f"planning {size} objects failed:\n{done.stderr[-3000:]}")
    got = json.loads(done.stdout.strip().splitlines()[-1])
    if got["verdicts"] != {"skipped": size}:
        raise SystemExit(f"{size}: expected every object done, got {got['verdicts']}")
    per = 1000 / size
    return {
        "objects": size,
        "requests": got["requests"],
        "requests_per_1000": round(got["requests"] * per, 2),
        "seconds": round(got["seconds"], 2),
        "seconds_per_1000": round(got["seconds"] * per, 4),
        "peak_rss_mib": round(got["peak_rss_mib"], 1),
        "rss_before_planning_mib": round(got["rss_before_mib"], 1),  # after imports
        "peak_rss_mib_per_1000": round(got["peak_rss_mib"] * per, 3),
        "rss_growth_mib_per_1000": round((got["peak_rss_mib"] - got["rss_before_mib"]) * per, 4),
        "load_average_1m": round(os.getloadavg()[0], 2),
    }


def main() -> None:
    if len(sys.argv) == 3 and sys.argv[1] == "--child":
        child(sys.argv[2])
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", nargs="+", type=int, default=SIZES)
    args = parser.parse_args()
    from bench.s3_like import start_s3_like_server

    server = start_s3_like_server()
    rows: list[dict[str, Any]] = []
    try:
        server.create_bucket(SOURCES)
        server.create_bucket(OUTPUTS)
        have = 0
        for size in sorted(args.sizes):
            print(f"creating objects up to {size}", flush=True)
            created = grow(server.endpoint_url, have, size)
            have = size
            row = {"create_s": round(created, 1)} | measure(server.endpoint_url, size)
            print(json.dumps(row), flush=True)
            rows.append(row)
    finally:
        server.stop()
    by = {r["objects"]: r for r in rows}
    ratio = (by[1_000_000]["seconds_per_1000"] / by[100_000]["seconds_per_1000"]
             if 100_000 in by and 1_000_000 in by else None)  # fmt: skip
    small = (by[100_000]["seconds_per_1000"] / by[10_000]["seconds_per_1000"]
             if 10_000 in by and 100_000 in by else None)  # fmt: skip
    save("sweep_plan", {
        "sizes": rows,
        "ratio_1m_over_100k": round(ratio, 2) if ratio is not None else None,
        "ratio_100k_over_10k": round(small, 2) if small is not None else None,
        "target_ratio": TARGET_RATIO,
        "target_met": ratio is not None and ratio <= TARGET_RATIO,
        "settings": {
            "objects": {"value": "tiny .pdf keys (6-12 bytes), 1000 per 'folder'",
                        "why": "planning reads keys and ETags, never bodies"},
            "all done": {"value": "every object has its done record",
                         "why": "the case the issue names: no request per object already done"},
            "S3 server": {"value": "moto through bench/s3_like.py (listing by binary search)",
                          "why": "moto sorts the whole bucket for every listing page; S3 does not"},
            "creation": {"value": "bench/s3_like.py's /_bench/fill (put_object in the server)",
                         "why": "2M PUT requests to moto take hours on 2 cores; not measured"},
        },
    })


if __name__ == "__main__":
    main()
