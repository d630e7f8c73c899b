"""Looking at an OpenAI-protocol server from outside: is it healthy, what does it serve,
how deep is its queue; and a free port to start one on.

Why: the server supervisor (:mod:`folio.gpu.vllm_server`), attached servers
(:class:`~folio.gpu.vllm_server.RemoteEndpoint`), shared servers
(:mod:`folio.gpu.shared_server`) and the benchmarks all probe servers the same way;
these are plain HTTP reads, apart from starting and supervising the process.
"""

from __future__ import annotations

import re
import socket

import httpx

from folio.io.tls import ssl_context

__all__ = ["auth_headers", "free_port", "parse_prometheus", "probe_server", "read_metrics"]

_PROM_LINE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+([-+0-9.eEnaNIf]+)")


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def parse_prometheus(text: str) -> dict[str, float]:
    """Prometheus text -> {metric name: value summed over label sets}.

    Example:
        >>> parse_prometheus('vllm:num_requests_running{model_name="m"} 3.0\\n# HELP x\\n')
        {'vllm:num_requests_running': 3.0}
    """
    out: dict[str, float] = {}
    for line in text.splitlines():
        match = _PROM_LINE.match(line)
        if match:
            try:
                out[match.group(1)] = out.get(match.group(1), 0.0) + float(match.group(3))
            except ValueError:
                continue
    return out


def _root(base_url: str) -> str:
    return base_url[: -len("/v1")] if base_url.endswith("/v1") else base_url.rstrip("/")


def auth_headers(api_key: str | None) -> dict[str, str]:
    """The bearer header a server started with an API key requires."""
    return {"Authorization": f"Bearer {api_key}"} if api_key else {}


def probe_server(base_url: str, timeout_s: float = 2.0,
                 api_key: str | None = None) -> tuple[bool, str | None]:
    """(healthy, first served model id): ``/health`` 200 and ``/v1/models`` answers (with
    ``api_key``, as a server folio started requires)."""
    root = _root(base_url)
    try:
        with httpx.Client(timeout=timeout_s, verify=ssl_context(),
                          headers=auth_headers(api_key)) as client:
            health = client.get(f"{root}/health")
            if health.status_code != 200:
                return False, None
            models = client.get(f"{root}/v1/models")
            if models.status_code != 200:
                return False, None
            data = models.json().get("data") or []
            return True, (str(data[0]["id"]) if data else None)
    except (httpx.HTTPError, ValueError, KeyError):
        return False, None


def read_metrics(base_url: str, timeout_s: float = 2.0,
                 client: httpx.Client | None = None,
                 api_key: str | None = None) -> dict[str, float]:
    """vLLM's gauges from ``/metrics``; ``running``/``waiting``/``kv_cache_usage`` added
    as short names. Empty when the endpoint has no metrics. Callers that poll pass a
    ``client``: a new one per call builds an SSL context each time (about 20 ms of CPU)."""
    try:
        url = f"{_root(base_url)}/metrics"
        response = (client.get(url, timeout=timeout_s) if client is not None
                    else httpx.get(url, timeout=timeout_s, verify=ssl_context(),
                                   headers=auth_headers(api_key)))
    except httpx.HTTPError:
        return {}
    if response.status_code != 200:
        return {}
    values = parse_prometheus(response.text)
    short = {
        "running": "vllm:num_requests_running",
        "waiting": "vllm:num_requests_waiting",
        "kv_cache_usage": "vllm:kv_cache_usage_perc",
    }
    for name, metric in short.items():
        if metric in values:
            values[name] = values[metric]
    if "kv_cache_usage" not in values and "vllm:gpu_cache_usage_perc" in values:
        values["kv_cache_usage"] = values["vllm:gpu_cache_usage_perc"]
    return values
