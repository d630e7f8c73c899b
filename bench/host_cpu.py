"""CPU time per kind of process on the GPU host, once a second, from /proc (no dependencies).

Why: a GPU run's pipeline phase shares the host's cores between folio (its flow process,
its page workers, Ghostscript, the local Prefect server) and the vLLM server it feeds (the
API front end that decodes and preprocesses images, the engine core). Whether folio's CPU
work starves the front end shows as cores per kind over time, which NVML and vLLM's
/metrics do not give.

    python bench/host_cpu.py --out host-cpu.json --seconds 400
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import time
from pathlib import Path

TICK = os.sysconf("SC_CLK_TCK")


def kind(cmdline: str, comm: str) -> str:
    """A label for a process from its command line and name (vLLM names its engine core)."""
    # folio's own processes first: the CLI's command line names vLLM too (--engine vllm)
    if "EngineCore" in comm or "EngineCore" in cmdline:
        return "vllm-engine-core"
    # a warm server's children keep its command line; their name says what they run
    # (folio.warm.server._name_process)
    if comm in ("folio:engine", "folio:cli"):
        return "folio-flow"
    if comm == "folio:zygote":
        return "folio-page-workers"
    if comm.startswith("folio:validat"):
        return "folio-validation"
    if "folio.warm.server" in cmdline:  # the server itself: forks, idles
        return "folio-warm-server"
    if "folio.pdf" in cmdline:  # the zygote and the page workers it forks
        return "folio-page-workers"
    if "folio.checks.validation_child" in cmdline:  # Great Expectations, one child or more
        return "folio-validation"
    if "folio.gpu.server_supervisor" in cmdline:
        return "folio-server-supervisor"
    if "folio.cli" in cmdline or "folio_prefect.flows.cli" in cmdline or "prefect.engine" in cmdline:
        return "folio-flow"
    if comm in ("gs", "gsc") or "/gs " in cmdline:
        return "ghostscript"
    if "py-spy" in cmdline or "host_cpu" in cmdline:
        return "measurement"
    # vLLM names its processes (setproctitle): with --api-server-count N the API servers
    # are multiprocessing children whose command line does not say vllm, but their name does
    if "vllm" in cmdline or "VLLM::" in comm or "APIServer" in comm or "APIServer" in cmdline:
        return "vllm-front-end"
    if "prefect" in cmdline:
        return "prefect-server-and-worker"
    return "other"


def snapshot() -> dict[int, tuple[str, float]]:
    """pid -> (kind, CPU seconds so far)."""
    out: dict[int, tuple[str, float]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode(
                errors="replace")
        except OSError:
            continue
        comm = stat[stat.index("(") + 1: stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2:].split()
        cpu = (int(fields[11]) + int(fields[12])) / TICK  # utime + stime
        out[int(entry)] = (kind(cmdline, comm), cpu)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--seconds", type=float, default=600)
    ap.add_argument("--every", type=float, default=1.0)
    args = ap.parse_args()
    stop = False

    def end(*_: object) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, end)
    samples = []
    t0 = time.monotonic()
    before, at = snapshot(), time.monotonic()
    while not stop and time.monotonic() - t0 < args.seconds:
        time.sleep(args.every)
        now, t = snapshot(), time.monotonic()
        cores: dict[str, float] = {}
        for pid, (label, cpu) in now.items():
            prev = before.get(pid)
            used = cpu - prev[1] if prev else 0.0
            if used > 0:
                cores[label] = cores.get(label, 0.0) + used / (t - at)
        samples.append({"t": round(t - t0, 1), "unix": round(time.time(), 2),
                        "cores": {k: round(v, 2) for k, v in sorted(cores.items())}})
        before, at = now, t
    Path(args.out).write_text(json.dumps({"cpus": os.cpu_count(), "samples": samples}))


if __name__ == "__main__":
    main()
