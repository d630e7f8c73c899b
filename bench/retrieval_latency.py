"""Per-query time of :mod:`folio.retrieval` after the index is opened, beside a ``folio
search`` process per query, on LanceDB indexes of 10k and 1M chunks.

Why synthesized rows: ingesting 1M chunks (some 50k documents) takes hours on this
machine; what a search costs depends on the table's size, its indexes and the query's
embedding, not on where the rows came from. So the rows are written straight into the
LanceDB table folio's ingest makes (its schema, ``chunks``, under ``OUT/_vectors``)
with random unit vectors of the packaged embedder's dimension, and then maintained as the
store's upkeep maintains a table (BTREE indexes, the IVF_SQ index past 10k rows). The
queries are real sentences embedded by the packaged model, so the embedding's cost is in
every number. All settings are the user's defaults.

Run: ``.venv/bin/python bench/retrieval_latency.py`` (``--sizes 10000`` for a quick look).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

from _measure import REPO, git, save

from folio.io.layout import VECTORS

QUERIES = [
    "What was the revenue growth in the northern region?",
    "Which contract clause covers termination for convenience?",
    "How many employees attended the safety training?",
    "Summarise the findings on groundwater contamination.",
    "What is the warranty period for replacement parts?",
    "Who signed the lease agreement and when?",
    "Describe the method used to calibrate the sensors.",
    "What were the operating expenses in the last quarter?",
    "Which risks does the audit committee list as material?",
    "How is the dosage adjusted for patients with kidney disease?",
]
WORDS = ("revenue quarter region contract clause safety training audit risk lease sensor "
         "calibration warranty parts dosage patient expense report committee finding water "
         "method result table figure section policy customer supplier invoice payment").split()
DOCUMENT_CHUNKS = 20  # chunks per synthetic document: 50k documents at 1M


def build(vectors_dir: Path, size: int) -> dict[str, float]:
    """``size`` rows in folio's table at ``vectors_dir``, then maintained as upkeep does."""
    import lancedb
    import numpy as np
    import pyarrow as pa

    from folio.output.embeddings import Embedder
    from folio.settings.config import EmbeddingSettings
    from folio.stores.lance_schema import chunk_schema
    from folio.stores.lancedb_store import LanceDBStore

    dim = Embedder(EmbeddingSettings()).dim
    schema = chunk_schema(dim)
    started = time.perf_counter()
    table = lancedb.connect(str(vectors_dir)).create_table("chunks", schema=schema)
    rng = np.random.default_rng(56)
    step = 100_000
    for first in range(0, size, step):
        n = min(step, size - first)
        rows = range(first, first + n)
        flat = rng.normal(size=(n, dim)).astype(np.float32)
        flat /= np.linalg.norm(flat, axis=1, keepdims=True)
        picks = rng.integers(0, len(WORDS), size=(n, 12))
        columns: dict[str, Any] = {
            "id": [f"c{i}" for i in rows],
            "doc_id": [f"{i // DOCUMENT_CHUNKS:032x}" for i in rows],
            "source": [f"s3://bucket/dept{(i // DOCUMENT_CHUNKS) % 50}/doc{i // DOCUMENT_CHUNKS}.pdf"
                       for i in rows],
            "chunk_index": [i % DOCUMENT_CHUNKS for i in rows],
            "kind": ["table" if i % 10 == 0 else "text" for i in rows],
            "text": [" ".join(WORDS[w] for w in row) for row in picks],
            "page_start": [i % DOCUMENT_CHUNKS // 2 + 1 for i in rows],
            "page_end": [i % DOCUMENT_CHUNKS // 2 + 1 for i in rows],
            "headings": [["Section"] for _ in rows],
            "boxes": [[{"page": i % DOCUMENT_CHUNKS // 2 + 1, "x0": 72.0, "y0": 90.0,
                        "x1": 540.0, "y1": 200.0}] for i in rows],
            "sha256": [f"{i // DOCUMENT_CHUNKS:064x}" for i in rows],
            "config_hash": ["cfg"] * n,
            "image_uri": [None] * n,
        }
        arrays = [pa.FixedSizeListArray.from_arrays(pa.array(flat.reshape(-1)), dim)
                  if f.name == "vector" else pa.array(columns[f.name], type=f.type)
                  for f in schema]
        table.add(pa.Table.from_arrays(arrays, schema=schema))
    written = time.perf_counter() - started
    store = LanceDBStore(str(vectors_dir), dim=dim)
    store.maintain()  # BTREE indexes and the IVF_SQ index, as the store's upkeep builds them
    store.close()
    return {"write_s": round(written, 1), "maintain_s": round(time.perf_counter() - started
                                                                - written, 1)}


def percentiles(seconds: list[float]) -> dict[str, float]:
    import numpy as np

    ms = np.array(seconds) * 1000
    return {"p50_ms": round(float(np.percentile(ms, 50)), 1),
            "p95_ms": round(float(np.percentile(ms, 95)), 1),
            "queries": len(seconds)}


def in_process(out: Path, rounds: int) -> dict[str, Any]:
    """Open once, one warm-up query, then every query ``rounds`` times, each timed."""
    import folio

    started = time.perf_counter()
    index = folio.open_index(out)
    opened = time.perf_counter() - started
    index.search(QUERIES[0], k=5)
    plain: list[float] = []
    filtered: list[float] = []
    for _ in range(rounds):
        for query in QUERIES:
            t = time.perf_counter()
            hits = index.search(query, k=5)
            plain.append(time.perf_counter() - t)
            assert len(hits) == 5
            t = time.perf_counter()
            index.search(query, k=5, source_prefix="s3://bucket/dept7/", kind="text")
            filtered.append(time.perf_counter() - t)
    index.close()
    return {"open_s": round(opened, 2), "search": percentiles(plain),
            "search_source_prefix_and_kind_filter": percentiles(filtered)}


def cli(out: Path, runs: int) -> dict[str, Any]:
    """``folio search QUERY --out OUT --json`` as a RAG job that spawns it per question."""
    folio_bin = REPO / ".venv" / "bin" / "folio"
    seconds: list[float] = []
    for i in range(runs):
        t = time.perf_counter()
        proc = subprocess.run([str(folio_bin), "search", QUERIES[i % len(QUERIES)], "--out",
                               str(out), "--json"], capture_output=True, text=True, timeout=300)
        seconds.append(time.perf_counter() - t)
        assert proc.returncode == 0, proc.stderr[-1000:]
    return {"command": f"{folio_bin.relative_to(REPO)} search QUERY --out OUT --json",
            **percentiles(seconds)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 1_000_000])
    parser.add_argument("--rounds", type=int, default=5, help="times each query is asked")
    parser.add_argument("--cli-runs", type=int, default=10)
    parser.add_argument("--dir", default="/tmp/folio-retrieval-bench")
    args = parser.parse_args()
    results = []
    for size in args.sizes:
        out = Path(args.dir) / str(size)
        shutil.rmtree(out, ignore_errors=True)
        vectors = out / VECTORS
        vectors.mkdir(parents=True)
        built = build(vectors, size)
        disk = sum(f.stat().st_size for f in vectors.rglob("*") if f.is_file())
        results.append({"chunks": size, "build": built, "disk_mib": round(disk / 2**20),
                        "load_average_1m": round(os.getloadavg()[0], 2),
                        "python_api": in_process(out, args.rounds),
                        "cli_per_query": cli(out, args.cli_runs)})
        shutil.rmtree(out, ignore_errors=True)
    save("retrieval_latency", {
        "commit": git("rev-parse", "--short", "HEAD"),
        "machine": "the 2-core development machine, shared with other developers' work",
        "rows": "synthesized straight into LanceDB (random unit vectors of the packaged "
                "embedder's 384 dimensions, folio's schema), not ingested: 1M chunks would "
                "take hours to ingest here; queries are real sentences embedded per query",
        "settings": "the user's defaults (k=5, ann_nprobes 20, IVF_SQ past 10k rows)",
        "results": results,
    })


if __name__ == "__main__":
    main()
