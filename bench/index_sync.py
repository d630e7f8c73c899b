"""What keeping the index a mirror of its sources costs (issue 48, docs/index-sync.md).

    .venv/bin/python bench/index_sync.py                     # 100k sources, 1% changed, 1% gone
    .venv/bin/python bench/index_sync.py --sources 10000     # a quicker look

1. ``--sync`` against a run without it, over a prefix of N indexed sources of which 1%
   were rewritten and 1% deleted since they were indexed: the steps of a run that differ
   (discovery's listing, which every run pays, then the count of gone sources that every
   run now reports, or ``--sync``'s removal of them), in requests (counted at botocore's
   endpoint: every HTTP request the process sends) and seconds.
2. Replacing a source's version against writing a new source: the vector write (LanceDB
   in a local folder holding the N sources' rows, 10 chunks of 384 dims a document) and
   the record steps around it on S3 (:mod:`folio.index.publish`), requests and seconds.

The index is built synthetically, at the record and store level: running the pipeline
100k times is impossible on this host. Objects, live records, folder markers and one
document.json per folder are put by moto's server itself (``bench/s3_like.py``'s
``/_bench/fill``), not measured; the store's rows come from one LanceDB write. The
measured code is folio's own: :func:`folio.io.sources.discover` and
:func:`folio.index.sync.sync_roots`, :meth:`LanceDBStore.replace_documents` and
:mod:`folio.index.publish`. The server is moto (bench/s3_like.py: moto with S3's
listing and ranged-read costs): its per-request seconds are moto's Python, not S3's;
requests are what would be paid on S3.
Results: ``bench/results/index_sync.json``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench._measure import git, save

SOURCES_BUCKET, OUT_BUCKET = "sources", "outputs"
PREFIX = "in"
DIM, CHUNKS = 384, 10
FILL_BATCH = 20_000
REPLACEMENTS = 30


def key(i: int) -> str:
    return f"{PREFIX}/{i // 1000:04d}/{i:07d}.pdf"


def uri(i: int) -> str:
    return f"s3://{SOURCES_BUCKET}/{key(i)}"


def gone(i: int) -> bool:
    return i % 100 == 7


def changed(i: int) -> bool:
    return i % 100 == 3


def folder(i: int) -> str:
    return f"{i:07d}-{i:012x}"


def fill(endpoint: str, bucket: str, objects: list[list[str]]) -> None:
    import urllib.request

    data = json.dumps({"bucket": bucket, "objects": objects}).encode()
    request = urllib.request.Request(f"{endpoint}/_bench/fill", data=data, method="POST")
    with urllib.request.urlopen(request, timeout=900) as answer:
        assert int(answer.read()) == len(objects)


def records(first: int, last: int) -> list[list[str]]:
    """Each indexed source's live record, folder marker and document.json (out/...)."""
    from folio.index.live import LiveRecord, live_path
    from folio.index.retire import _marker

    out = []
    for i in range(first, last):
        record = LiveRecord(source=uri(i), sha256=f"{i:064x}", config_hash="cfg",
                            doc_id=f"{i:032x}", folder=folder(i), chunks=CHUNKS,
                            vector_table="chunks", updated_at="2026-01-01T00:00:00+00:00")
        out += [[f"out/{live_path(uri(i))}", record.model_dump_json()],
                [f"out/{_marker(folder(i), uri(i))}", uri(i)],
                [f"out/{folder(i)}/document.json", "{}"]]
    return out


def create(endpoint: str, size: int) -> float:
    started = time.perf_counter()

    def piece(first: int) -> None:
        last = min(first + FILL_BATCH, size)
        fill(endpoint, SOURCES_BUCKET, [[key(i), f"%PDF-{i}" + ("v2" if changed(i) else "")]
                                        for i in range(first, last) if not gone(i)])
        fill(endpoint, OUT_BUCKET, records(first, last))

    with ThreadPoolExecutor(2) as pool:
        list(pool.map(piece, range(0, size, FILL_BATCH)))
    return time.perf_counter() - started


def build_store(path: str, size: int) -> Any:
    """A LanceDB table holding every source's rows (Arrow columns, not Chunk objects: 1M
    pydantic objects would take longer than what is measured)."""
    import lancedb
    import numpy as np
    import pyarrow as pa

    from folio.stores.lance_schema import chunk_schema
    from folio.stores.lancedb_store import LanceDBStore

    schema = chunk_schema(DIM)
    table = lancedb.connect(path).create_table("chunks", schema=schema)
    rng = np.random.default_rng(48)
    step = 20_000
    for first in range(0, size, step):
        ids = range(first, min(first + step, size))
        n = len(ids) * CHUNKS
        flat = rng.normal(size=n * DIM).astype(np.float32)
        columns: dict[str, Any] = {
            "id": [f"{i}:{c}" for i in ids for c in range(CHUNKS)],
            "doc_id": [f"{i:032x}" for i in ids for _ in range(CHUNKS)],
            "source": [uri(i) for i in ids for _ in range(CHUNKS)],
            "chunk_index": [c for _ in ids for c in range(CHUNKS)],
            "kind": ["text"] * n, "text": ["x"] * n, "page_start": [1] * n,
            "page_end": [1] * n, "headings": [[] for _ in range(n)],
            "boxes": [[] for _ in range(n)],
            "sha256": [f"{i:064x}" for i in ids for _ in range(CHUNKS)],
            "config_hash": ["cfg"] * n,
        }
        arrays = [pa.FixedSizeListArray.from_arrays(pa.array(flat), DIM) if f.name == "vector"
                  else pa.array(columns[f.name], type=f.type) for f in schema]
        table.add(pa.Table.from_arrays(arrays, schema=schema))
    store = LanceDBStore(path, dim=DIM)
    store.maintain()  # indexes (id, doc_id, source) cover the rows, as upkeep keeps them
    return store


class Counter:
    """Every HTTP request botocore sends, counted."""

    def __init__(self) -> None:
        import botocore.endpoint

        self.n = 0
        send = botocore.endpoint.Endpoint._send

        def counted(endpoint: Any, request: Any) -> Any:
            self.n += 1
            return send(endpoint, request)

        botocore.endpoint.Endpoint._send = counted  # type: ignore[method-assign]

    def take(self) -> int:
        n, self.n = self.n, 0
        return n


def measure(endpoint: str, size: int, store: Any) -> dict[str, Any]:
    from pydantic import SecretStr

    from folio.index import sync as index_sync
    from folio.io.sinks import open_sink
    from folio.io.sources import discover
    from folio.settings.config import S3Settings

    s3 = S3Settings(endpoint_url=endpoint, region="us-east-1", access_key_id="test",
                    secret_access_key=SecretStr("test"))
    sink = open_sink(f"s3://{OUT_BUCKET}/out", s3)
    root = f"s3://{SOURCES_BUCKET}/{PREFIX}"
    count = Counter()
    result: dict[str, Any] = {}

    def step(name: str, fn: Any) -> Any:
        count.take()
        started = time.perf_counter()
        value = fn()
        result[name] = {"requests": count.take(), "seconds": round(time.perf_counter() - started, 2)}
        print(name, result[name], flush=True)
        return value

    refs = step("discovery", lambda: discover([root], s3))
    present = [r.uri for r in refs]
    started = index_sync.now()
    counted = step("count_gone", lambda: index_sync.sync_roots(
        sink, lambda: store, [root], present, apply=False, dry_run=False, started=started,
        s3=s3))
    rows_before = store.count()
    synced = step("sync", lambda: index_sync.sync_roots(
        sink, lambda: store, [root], present, apply=True, dry_run=False, started=started,
        s3=s3))
    expected = sum(1 for i in range(size) if gone(i))
    assert counted.gone_count == expected and len(synced.removed) == expected, synced
    assert rows_before - store.count() == expected * CHUNKS
    result["gone"], result["rows_removed"] = expected, synced.rows_removed
    result["listed_sources"] = len(present)
    return result


def replacements(endpoint: str, size: int, store: Any) -> dict[str, Any]:
    """A source's new version (its rows replaced, the old folder released) against a new
    source (rows added), REPLACEMENTS of each, alternating."""
    import numpy as np
    from pydantic import SecretStr

    from folio.index import publish
    from folio.io.sinks import open_sink
    from folio.models import Chunk, DocumentOutcome, DocumentResult
    from folio.settings.config import S3Settings
    from folio.stores.base import DocumentVectors

    s3 = S3Settings(endpoint_url=endpoint, region="us-east-1", access_key_id="test",
                    secret_access_key=SecretStr("test"))
    sink = open_sink(f"s3://{OUT_BUCKET}/out", s3)
    rng = np.random.default_rng(7)
    count = Counter()
    times: dict[str, list[float]] = {"replace": [], "new": []}
    requests: dict[str, list[int]] = {"replace": [], "new": []}
    for n in range(REPLACEMENTS):
        for kind in ("replace", "new"):
            i = (n * 97 + 1) % size if kind == "replace" else size + n
            if gone(i):
                i += 1
            sha = f"{i + 10**9:032x}{n:032x}"
            doc = DocumentResult(source=uri(i), sha256=sha, doc_id=sha[:32], config_hash="cfg",
                                 outcome=DocumentOutcome.OK, chunks=CHUNKS)
            chunks = [Chunk(id=f"{i}:v2:{c}", doc_id=doc.doc_id, source=doc.source, index=c,
                            text="y", page_start=1, page_end=1, sha256=sha, config_hash="cfg")
                      for c in range(CHUNKS)]
            vectors = rng.normal(size=(CHUNKS, DIM)).astype(np.float32)
            count.take()
            started = time.perf_counter()
            previous = publish.begin(sink, doc)
            store.replace_documents([DocumentVectors(doc.doc_id, chunks, vectors,
                                                     source=doc.source)])
            publish.publish(sink, doc, previous)
            times[kind].append(time.perf_counter() - started)
            requests[kind].append(count.take())
            assert store.count(doc.doc_id) == CHUNKS
    return {kind: {"median_seconds": round(statistics.median(times[kind]), 4),
                   "median_requests": statistics.median(requests[kind])}
            for kind in times}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sources", type=int, default=100_000)
    args = parser.parse_args()
    from bench.s3_like import start_s3_like_server

    server = start_s3_like_server()
    try:
        for bucket in (SOURCES_BUCKET, OUT_BUCKET):
            server.create_bucket(bucket)
        print(f"creating {args.sources} sources and their records", flush=True)
        created = create(server.endpoint_url, args.sources)
        with tempfile.TemporaryDirectory(prefix="folio-bench-sync-") as tmp:
            started = time.perf_counter()
            store = build_store(str(Path(tmp) / "v"), args.sources)
            built = time.perf_counter() - started
            sync = measure(server.endpoint_url, args.sources, store)
            replace = replacements(server.endpoint_url, args.sources, store)
            store.close()
    finally:
        server.stop()
    without = sync["discovery"]["requests"] + sync["count_gone"]["requests"]
    with_sync = sync["discovery"]["requests"] + sync["sync"]["requests"]
    save("index_sync", {
        "commit": git("rev-parse", "--short", "HEAD"),
        "sources": args.sources,
        "changed": sum(1 for i in range(args.sources) if changed(i)),
        "gone": sync["gone"],
        "steps": sync,
        "run_without_sync": {
            "requests": without,
            "seconds": round(sync["discovery"]["seconds"] + sync["count_gone"]["seconds"], 2),
            "what": "discovery's listing + the listing of _live/ that counts gone sources"},
        "run_with_sync": {
            "requests": with_sync,
            "seconds": round(sync["discovery"]["seconds"] + sync["sync"]["seconds"], 2),
            "what": "discovery's listing + the listing of _live/, then per gone source: "
                    "a GET of its record, a HEAD of the source, its folder (marker delete, "
                    "marker listing, prefix listing and delete), its version record and "
                    "live record deleted; one store delete for all"},
        "sync_requests_per_gone_source": round(
            (sync["sync"]["requests"] - sync["count_gone"]["requests"]) / max(sync["gone"], 1), 2),
        "replace_vs_new": replace,
        "settings": {
            "index": {"value": "synthetic: records put by moto's server, rows by one LanceDB "
                               "write", "why": "100k pipeline runs are impossible here; "
                      "the measured steps are folio's own"},
            "store": {"value": f"LanceDB, local folder, {CHUNKS} chunks x {DIM} dims a source",
                      "why": "the default store and embedder's size"},
            "server": {"value": "moto via bench/s3_like.py",
                       "why": "requests are S3's; seconds are moto's Python (~3.5 ms a "
                              "request, one at a time)"},
        },
        "setup_seconds": {"objects_and_records": round(created, 1), "store": round(built, 1)},
    })


if __name__ == "__main__":
    main()
