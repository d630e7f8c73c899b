"""The GPU as the GPU benchmarks see it: its utilization (NVML) and vLLM's queue
(/metrics) sampled every half second while a phase runs (:class:`Sampler`), and its name
for a result (:func:`gpu_name`).
"""

from __future__ import annotations

import statistics
import time
from typing import Any

# imported here, not in the sampler's thread: importing beside Prefect's own imports in
# another thread can deadlock on a module lock
import httpx

from bench._measure import Sampling
from folio.gpu.server_probe import read_metrics


class Sampler(Sampling):
    """NVML utilization of one GPU and vLLM's queue (/metrics), every half second."""

    def __init__(self, gpu: int | list[int], base_url: str | None | Any) -> None:
        """``base_url``: the server's URL, or a function that finds it (or a list of
        servers' URLs, whose queues are summed) once it runs; several GPUs: their mean."""
        super().__init__()
        self.gpu, self.base_url = gpu, base_url
        self.samples: list[tuple[float, float | None, float, float]] = []

    def _run(self) -> None:
        gpus = self.gpu if isinstance(self.gpu, list) else [self.gpu]
        utils = [u for u in (nvml_utilization(g) for g in gpus) if u is not None]
        with httpx.Client() as client:  # one client: the sampler must not cost the run CPU
            while not self._stop.wait(0.5):
                found = self.base_url() if callable(self.base_url) else self.base_url
                urls = [found] if isinstance(found, str) else list(found or [])
                ms = [read_metrics(u, client=client) for u in urls]
                util = statistics.mean(u() for u in utils) if utils else None
                self.samples.append((time.monotonic(), util,
                                     sum(m.get("running", 0.0) for m in ms),
                                     sum(m.get("waiting", 0.0) for m in ms)))

    def summary(self, start: float, end: float) -> dict[str, Any]:
        window = [s for s in self.samples if start <= s[0] <= end]
        gpu = [s[1] for s in window if s[1] is not None]
        return {"samples": len(window),
                "gpu_utilization_mean": round(statistics.mean(gpu), 1) if gpu else None,
                "running_mean": round(statistics.mean(s[2] for s in window), 1) if window else None,
                "waiting_mean": round(statistics.mean(s[3] for s in window), 1) if window else None,
                "series": self.series(window, start)}

    @staticmethod
    def series(window: list[tuple[float, float | None, float, float]], start: float
               ) -> list[dict[str, float | None]]:
        """One entry a second (the means of its samples): when the GPU went short, to set
        beside the scheduler's timing.queue and the host's CPU (bench/host_cpu.py)."""
        seconds: dict[int, list[tuple[float, float | None, float, float]]] = {}
        for sample in window:
            seconds.setdefault(int(sample[0] - start), []).append(sample)
        out: list[dict[str, float | None]] = []
        for second, group in sorted(seconds.items()):
            gpu = [g[1] for g in group if g[1] is not None]
            out.append({"t": float(second),
                        "gpu": round(statistics.mean(gpu), 1) if gpu else None,
                        "running": round(statistics.mean(g[2] for g in group), 1),
                        "waiting": round(statistics.mean(g[3] for g in group), 1)})
        return out


def nvml_utilization(index: int) -> Any:
    try:
        import pynvml

        pynvml.nvmlInit()
        handle = pynvml.nvmlDeviceGetHandleByIndex(index)
        return lambda: float(pynvml.nvmlDeviceGetUtilizationRates(handle).gpu)
    except Exception:
        return None


def gpu_name() -> str:
    from folio.gpu.profiles import detect_gpu

    info = detect_gpu()
    return info.name if info else "none (fake server)"
