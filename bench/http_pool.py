"""CPU a GPU request costs folio's HTTP client with hundreds of requests in flight: one
``httpx.Client`` for all of them against the engine's default, a client for every
:data:`~folio.engines.endpoint_bounds.CONNECTIONS_PER_CLIENT` connections, side by side.

    .venv/bin/python bench/http_pool.py --pdfs ../shared/corpus --requests 3072

Why: on the H200, httpcore's pool manager was the innermost library in 8.7% of the
flow's GIL samples (``is_socket_readable``, ``is_idle``,
``_assign_requests_to_connections``; bench/results/engine_limit_runs/1dabbb9-olmocr2-default/
summary.json). On every request's start and end the pool walks all its connections and
polls the idle ones' sockets, so a request's cost grows with the connections one client
holds: 260 at the H200's 256 in flight.

The engine is folio's own (``OpenAIEngine.recognize``: encoding, the request, parsing the
answer) on a corpus page rendered for the olmocr2 preset, from as many page threads as a
GPU run's ladder (in flight plus a quarter), against tests/openai_fake.py in its own
process answering after ``--delay`` seconds, so the client holds its whole budget open
the way it does at a GPU. This process's CPU time over the requests it made is the
figure; the fake's CPU is its own. Results: ``bench/results/http_pool.json``.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from _measure import save
from request_body import page_images


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run_once(url: str, image: Path, *, clients: int | None, in_flight: int,
             requests: int, delay: float) -> dict[str, Any]:
    """``requests`` pages through one engine from the ladder's threads; CPU and wall."""
    from folio.engines.endpoint_bounds import client_count
    from folio.engines.openai_engine import OpenAIEngine
    from folio.gpu.vllm_server import RemoteEndpoint
    from folio.models import PagePrep
    from folio.settings.presets import get_preset

    engine = OpenAIEngine(endpoint=RemoteEndpoint(url, in_flight=in_flight), model="fake-ocr",
                          preset=get_preset("olmocr2"), max_tokens=768, max_retries=0,
                          clients=clients)
    page = PagePrep(index=0, width_pt=612, height_pt=792, image_path=str(image))
    left = [requests]
    lock = threading.Lock()
    errors: list[str] = []
    latencies: list[float] = []
    ended: list[float] = []  # when each request ended, from the start

    def work() -> None:
        while True:
            with lock:
                if left[0] <= 0:
                    return
                left[0] -= 1
            started = time.perf_counter()
            try:
                engine.recognize(page, 0)
            except Exception as exc:  # counted: a figure over failed requests means nothing
                errors.append(f"{type(exc).__name__}: {exc}")
            now = time.perf_counter()
            latencies.append(now - started)
            ended.append(now - wall0)

    threads = [threading.Thread(target=work) for _ in range(in_flight + in_flight // 4)]
    cpu0, wall0 = time.process_time(), time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    engine.close()
    latencies.sort()
    ended.sort()
    return {"clients": clients or client_count(in_flight + 4), "requests": requests,
            "errors": len(errors), "first_error": errors[0] if errors else None,
            "seconds": round(wall, 2), "requests_per_s": round(requests / wall, 1),
            # the run's length can be a few requests' stall: when 99% had ended, and the
            # requests that took ten times the server's delay
            "seconds_to_99pct": round(ended[int(0.99 * (len(ended) - 1))], 2),
            "latency_p50_s": round(latencies[len(latencies) // 2], 2),
            "latency_max_s": round(latencies[-1], 2),
            "over_10x_delay": sum(1 for x in latencies if x > 10 * delay),
            "cpu_ms_per_request": round(1000 * cpu / requests, 3)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pdfs", default=str(ROOT.parent / "shared" / "corpus"))
    ap.add_argument("--in-flight", type=int, default=256, help="the h200 profile's budget")
    ap.add_argument("--requests", type=int, default=3072)
    ap.add_argument("--delay", type=float, default=1.0)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--also", default="", help="more client counts to compare, e.g. 5,17")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="folio-http-pool-"))
    image = page_images(Path(args.pdfs), 1, work)[0]
    port = free_port()
    fake = subprocess.Popen(
        [sys.executable, str(ROOT / "tests" / "openai_fake.py"), "--port", str(port),
         "--delay", str(args.delay), "--output", "olmocr2_page.md"],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}/v1"
    try:
        from folio.gpu.vllm_server import RemoteEndpoint

        if not RemoteEndpoint(url).wait_ready(30.0):
            raise SystemExit("the fake server did not start")
        variants: dict[str, int | None] = {"one_client": 1, "default": None}
        variants.update({f"{n}_clients": int(n) for n in args.also.split(",") if n.strip()})
        runs: dict[str, list[dict[str, Any]]] = {name: [] for name in variants}
        for repeat in range(args.repeats):  # interleaved, so the host's load spreads over both
            for name, clients in variants.items():
                row = run_once(url, image, clients=clients, in_flight=args.in_flight,
                               requests=args.requests, delay=args.delay)
                runs[name].append(row)
                print(repeat, name, row, flush=True)
    finally:
        fake.terminate()
        fake.wait()
    rows = {name: {"clients": rs[0]["clients"],
                   "cpu_ms_per_request": statistics.median(r["cpu_ms_per_request"] for r in rs),
                   "requests_per_s": statistics.median(r["requests_per_s"] for r in rs),
                   "errors": sum(r["errors"] for r in rs),
                   "runs": rs} for name, rs in runs.items()}
    result = {
        "what": "folio's OpenAI engine, this process's CPU ms a request (median of the "
                "repeats) with the in-flight budget held open, by how many HTTP clients "
                "share the connections",
        "in_flight": args.in_flight, "page_threads": args.in_flight + args.in_flight // 4,
        "image_bytes": image.stat().st_size, "server_delay_s": args.delay,
        "cpus": os.cpu_count(), "results": rows,
        "one_client_over_default": round(rows["one_client"]["cpu_ms_per_request"]
                                         / rows["default"]["cpu_ms_per_request"], 2),
        "settings": {"server": "tests/openai_fake.py, its own process, answering a recorded "
                               "olmOCR 2 page after the delay",
                     "why": "no GPU here; the delay keeps the budget in flight as a GPU does"},
    }
    print("wrote", save("http_pool", result))


if __name__ == "__main__":
    main()
