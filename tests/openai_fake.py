"""A test double of an OpenAI-compatible server (vLLM's surface), over real HTTP.

It speaks the protocol the engine uses: ``POST /v1/chat/completions`` (JSON, or
server-sent events with ``stream: true`` ending in ``data: [DONE]``), ``GET /v1/models``,
``GET /health``, ``GET /metrics`` (Prometheus text with vLLM's request gauges), plus
``GET /stats`` (JSON: requests, peak concurrency, temperatures seen; with ``by_image``, a
``log`` of each request's answer and sampling) for assertions.
Answers are recorded model outputs (tests/data/model_outputs), so the parsers run end to
end; or, with ``by_image``, each request gets the answer whose reference image looks most
like the request's page (a replay of a real model's answers, page by page).
Failures on demand: an HTTP error on chosen request numbers, a stream cut mid-way,
``finish_reason: length``, looping garbage (below a temperature), slow answers, a slow
start, and dying mid-run (once, remembered through a marker file) to test restarts.

In-process (threads)::

    with FakeServer(output="generic_page.md") as fake:
        fake.url  # http://127.0.0.1:PORT/v1

As a process (what the task runner launches as its "server command")::

    python -m tests.openai_fake --port 8123 --output chandra1_page.html --delay 0.2
"""

from __future__ import annotations

import argparse
import base64
import io
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Self

OUTPUTS = Path(__file__).resolve().parent / "data" / "model_outputs"
GARBAGE = "the table the table the table " * 60
THUMB_PX = 32  # side of the grayscale thumbnails that match a request's image to an answer


def thumbnail(image: Any) -> bytes:
    """A PIL image as THUMB_PX x THUMB_PX gray levels (aspect ignored): the same page
    rendered at another size or DPI, or re-encoded, gives nearly the same bytes."""
    from PIL import Image

    small = image.convert("L").resize((THUMB_PX, THUMB_PX), Image.Resampling.BOX)
    return bytes(small.tobytes())


def data_url_thumbnail(url: str) -> bytes | None:
    """The thumbnail of a ``data:image/...;base64,`` URL (PNG, JPEG...); None if it is
    not one or does not decode."""
    from PIL import Image

    head, _, data = url.partition(",")
    if not head.startswith("data:image/") or not head.endswith(";base64"):
        return None
    try:
        with Image.open(io.BytesIO(base64.b64decode(data))) as image:
            return thumbnail(image)
    except (OSError, ValueError):
        return None


def thumbnail_distance(a: bytes, b: bytes) -> float:
    """Mean absolute difference of two thumbnails' gray levels (0-255)."""
    return sum(abs(x - y) for x, y in zip(a, b, strict=True)) / len(a)


@dataclass(frozen=True)
class ImageAnswer:
    """One replayed answer: served to requests whose image is nearest ``thumb``."""

    name: str
    thumb: bytes  # thumbnail() of the reference image
    text: str

    @classmethod
    def of(cls, name: str, image: Any, text: str) -> ImageAnswer:
        return cls(name, thumbnail(image), text)


def nearest_answer(answers: Sequence[ImageAnswer], thumb: bytes) -> tuple[ImageAnswer, float, float | None]:
    """The answer whose reference thumbnail is nearest ``thumb``, its distance, and the
    runner-up's (None with one answer): the margin says how sure the match is."""
    ranked = sorted(((thumbnail_distance(a.thumb, thumb), i) for i, a in enumerate(answers)))
    runner_up = ranked[1][0] if len(ranked) > 1 else None
    return answers[ranked[0][1]], ranked[0][0], runner_up


def request_image_urls(body: dict[str, Any]) -> list[str]:
    """The image URLs of a chat-completions request, in message order."""
    return [str(c["image_url"]["url"]) for m in body.get("messages", [])
            for c in (m.get("content") or [])
            if isinstance(c, dict) and c.get("type") == "image_url"]


@dataclass
class Behaviour:
    output: str = "generic_page.md"  # file in OUTPUTS, or literal text if not a file
    model: str = "fake-ocr"
    delay_s: float = 0.0
    # requests that run at once (None: all); the rest wait their turn in arrival order,
    # as in a batch engine at its sequence limit, so a client that keeps more in flight
    # sees a GPU's queueing: latency grows with the queue, throughput stays capacity/delay
    capacity: int | None = None
    # answers leave together on a beat of this many seconds (after their delay), as a
    # batch engine ends requests of one output length in the same step: the end of a GPU
    # run, when dozens of documents finish at once
    lockstep_s: float | None = None
    fail_on: set[int] = field(default_factory=set)  # 1-based request numbers
    fail_status: int = 503
    fail_always: bool = False
    length_on: set[int] = field(default_factory=set)
    always_length: bool = False
    garbage_below_temperature: float | None = None
    midstream_error_on: set[int] = field(default_factory=set)
    die_on: int | None = None  # os._exit at this request number (process mode)
    die_marker: str | None = None  # ... unless this file exists (then it is created)
    prompt_tokens: int = 1330
    # answer by image: each request gets the text of the nearest reference (its image's
    # thumbnail); a request without a decodable image gets ``output`` as usual
    by_image: Sequence[ImageAnswer] = ()
    # in-process only: every request waits for this event (at most a minute) before its
    # delay, so a test decides when the engine lets go of the pages it holds
    hold: threading.Event | None = None
    # as ``vllm serve`` with VLLM_API_KEY (or --api-key): every /v1 request needs it as a
    # bearer token, /health and /metrics do not
    api_key: str | None = None

    def text(self) -> str:
        path = OUTPUTS / self.output
        return path.read_text() if path.is_file() else self.output


class _State:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.requests = 0
        self.in_flight = 0
        self.max_in_flight = 0
        # requests in flight integrated over time (request-seconds), from the first request
        # to the last answer: busy_s / span_s is the mean number the server held
        self.busy_s = 0.0
        self.first_at: float | None = None
        self.changed_at = 0.0
        self.temperatures: list[float] = []
        # by_image only (a long run's /stats stays small): per request, its number, the
        # answer chosen, its distance and the runner-up's, the sampling asked for
        self.log: list[dict[str, Any]] = []
        self.images = 0
        self.ready_at = 0.0

    def count(self, delta: int) -> None:
        """One request more (1) or fewer (-1) in flight (lock held)."""
        now = time.monotonic()
        if self.first_at is None:
            self.first_at = self.changed_at = now
        self.busy_s += self.in_flight * (now - self.changed_at)
        self.changed_at = now
        self.in_flight += delta
        self.max_in_flight = max(self.max_in_flight, self.in_flight)

    @property
    def span_s(self) -> float:
        return 0.0 if self.first_at is None else self.changed_at - self.first_at


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server
    _counted = False  # the current request counts as in flight

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def _send(self, code: int, body: bytes, ctype: str = "application/json") -> None:
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _json(self, code: int, payload: Any) -> None:
        self._leave()
        self._send(code, json.dumps(payload).encode())

    def _leave(self) -> None:
        """The request stops counting as in flight just before its last bytes go out: the
        client may send its next request the moment it has them."""
        if self._counted:
            self._counted = False
            with self.server.state.lock:
                self.server.state.count(-1)

    def _refused(self) -> bool:
        """vLLM's check: a /v1 request without the server's key gets 401."""
        key = self.server.behaviour.api_key
        if not key or not self.path.startswith("/v1"):
            return False
        if self.headers.get("Authorization") == f"Bearer {key}":
            return False
        self.rfile.read(int(self.headers.get("Content-Length", 0) or 0))  # keep-alive
        self._json(401, {"error": "Unauthorized"})
        return True

    def do_GET(self) -> None:
        state, b = self.server.state, self.server.behaviour
        if self._refused():
            return
        if self.path == "/health":
            self._send(200 if time.monotonic() >= state.ready_at else 503, b"")
        elif self.path == "/v1/models":
            self._json(200, {"object": "list", "data": [
                {"id": b.model, "object": "model", "owned_by": "fake", "max_model_len": 16384}]})
        elif self.path == "/metrics":
            with state.lock:
                running = state.in_flight
            text = (
                "# HELP vllm:num_requests_running Number of requests in model execution batches.\n"
                "# TYPE vllm:num_requests_running gauge\n"
                f'vllm:num_requests_running{{model_name="{b.model}"}} {float(running)}\n'
                "# TYPE vllm:num_requests_waiting gauge\n"
                f'vllm:num_requests_waiting{{model_name="{b.model}"}} 0.0\n'
                f'vllm:kv_cache_usage_perc{{model_name="{b.model}"}} {min(1.0, running / 64):.3f}\n'
            )
            self._send(200, text.encode(), "text/plain; version=0.0.4")
        elif self.path == "/stats":
            with state.lock:
                self._json(200, {"requests": state.requests, "in_flight": state.in_flight,
                                 "max_in_flight": state.max_in_flight, "images": state.images,
                                 "busy_s": state.busy_s, "span_s": state.span_s,
                                 "temperatures": state.temperatures, "log": state.log,
                                 "pid": os.getpid()})
        else:
            self._json(404, {"error": {"message": f"no route {self.path}"}})

    def do_POST(self) -> None:
        if self._refused():
            return
        if self.path != "/v1/chat/completions":
            self._json(404, {"error": {"message": f"no route {self.path}"}})
            return
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
        state, b = self.server.state, self.server.behaviour
        with state.lock:
            state.requests += 1
            number = state.requests
            state.count(1)
            self._counted = True
            state.temperatures.append(float(body.get("temperature", 1.0)))
            state.images += sum(
                1 for url in request_image_urls(body) if url.startswith("data:image/"))
        text: str | None = None  # None: the usual output
        if b.by_image:  # decoded outside the lock: the other requests go on meanwhile
            entry: dict[str, Any] = {
                "request": number, "answer": None, "distance": None, "runner_up_distance": None,
                **{k: body.get(k) for k in ("max_tokens", "temperature", "top_p")}}
            thumbs = [t for t in map(data_url_thumbnail, request_image_urls(body)) if t]
            if thumbs:
                answer, distance, runner_up = nearest_answer(b.by_image, thumbs[0])
                text, entry["answer"], entry["distance"] = answer.text, answer.name, round(distance, 2)
                entry["runner_up_distance"] = None if runner_up is None else round(runner_up, 2)
            with state.lock:
                state.log.append(entry)
        try:
            self._complete(body, number, b, text)
        finally:
            self._leave()

    def _complete(self, body: dict[str, Any], number: int, b: Behaviour,
                  text: str | None = None) -> None:
        if b.die_on is not None and number >= b.die_on and not (
            b.die_marker and Path(b.die_marker).exists()
        ):
            if b.die_marker:
                Path(b.die_marker).write_text(str(os.getpid()))
            time.sleep(0.05)  # let other requests arrive and be in flight
            os._exit(17)
        if b.hold is not None:
            b.hold.wait(timeout=60.0)
        if b.delay_s:
            slots = self.server.slots  # type: ignore[attr-defined]
            if slots is None:
                time.sleep(b.delay_s)
            else:
                with slots:
                    time.sleep(b.delay_s)
        if b.lockstep_s:
            time.sleep(b.lockstep_s - time.monotonic() % b.lockstep_s)
        if b.fail_always or number in b.fail_on:
            self._json(b.fail_status, {"error": {"message": "injected failure", "code": b.fail_status}})
            return
        if body.get("model") != b.model:
            self._json(404, {"error": {"message": f"model {body.get('model')!r} not served"}})
            return
        text = b.text() if text is None else text
        finish = "stop"
        temperature = float(body.get("temperature", 1.0))
        if b.garbage_below_temperature is not None and temperature < b.garbage_below_temperature:
            text = GARBAGE
        max_tokens = int(body.get("max_tokens") or 4096)
        completion_tokens = max(1, len(text) // 4)
        if b.always_length or number in b.length_on:
            text, finish, completion_tokens = text[: len(text) // 2], "length", max_tokens
        if body.get("ignore_eos"):
            finish, completion_tokens = "length", max_tokens
        usage = {"prompt_tokens": b.prompt_tokens, "completion_tokens": completion_tokens,
                 "total_tokens": b.prompt_tokens + completion_tokens}
        if body.get("stream"):
            self._stream(text, finish, usage, cut=number in b.midstream_error_on)
            return
        self._json(200, {
            "id": f"chatcmpl-{number}", "object": "chat.completion", "created": int(time.time()),
            "model": b.model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                         "finish_reason": finish}],
            "usage": usage,
        })

    def _stream(self, text: str, finish: str, usage: dict[str, int], *, cut: bool) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        step = max(1, len(text) // 5)
        pieces = [text[i : i + step] for i in range(0, len(text), step)] or [""]

        def event(payload: dict[str, Any]) -> None:
            self.wfile.write(f"data: {json.dumps(payload)}\n\n".encode())
            self.wfile.flush()

        base = {"id": "chatcmpl-s", "object": "chat.completion.chunk", "model": self.server.behaviour.model}
        for i, piece in enumerate(pieces):
            if cut and i == 2:
                return  # connection closes without [DONE]
            event({**base, "choices": [{"index": 0, "delta": {"content": piece}, "finish_reason": None}]})
        event({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})
        self._leave()
        event({**base, "choices": [], "usage": usage})
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], behaviour: Behaviour) -> None:
        super().__init__(address, _Handler)
        self.behaviour = behaviour
        self.state = _State()
        # waiters wake in about the order they came (threading.Condition is FIFO)
        self.slots = threading.Semaphore(behaviour.capacity) if behaviour.capacity else None


class FakeServer:
    """The fake in a background thread of this process."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0, **behaviour: Any) -> None:
        self.behaviour = Behaviour(**behaviour)
        self._server = _Server((host, port), self.behaviour)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def state(self) -> _State:
        return self._server.state

    def start(self) -> Self:
        self._thread.start()
        return self

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()


def _numbers(text: str) -> set[int]:
    return {int(x) for x in text.split(",") if x.strip()}


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--output", default="generic_page.md")
    ap.add_argument("--model", default="fake-ocr")
    ap.add_argument("--delay", type=float, default=0.0)
    ap.add_argument("--capacity", type=int, help="requests run at once; the rest queue")
    ap.add_argument("--lockstep", type=float, help="answers leave together every N seconds")
    ap.add_argument("--startup-delay", type=float, default=0.0, help="seconds before listening")
    ap.add_argument("--unhealthy-for", type=float, default=0.0, help="/health 503 for this long")
    ap.add_argument("--fail-on", default="", help="request numbers answered with --fail-status")
    ap.add_argument("--fail-status", type=int, default=503)
    ap.add_argument("--length-on", default="")
    ap.add_argument("--midstream-error-on", default="")
    ap.add_argument("--die-on", type=int, help="exit hard at this request number")
    ap.add_argument("--die-marker", help="die only if this file is absent (then create it)")
    ap.add_argument("--child-pid-file", help="spawn a child process (like vLLM's engine core)")
    ap.add_argument("--ignore-sigterm", action="store_true")
    a = ap.parse_args(argv)
    if a.ignore_sigterm:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if a.child_pid_file:
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"])
        Path(a.child_pid_file).write_text(str(child.pid))
    time.sleep(a.startup_delay)
    behaviour = Behaviour(
        output=a.output, model=a.model, delay_s=a.delay, capacity=a.capacity, lockstep_s=a.lockstep, fail_on=_numbers(a.fail_on),
        fail_status=a.fail_status, length_on=_numbers(a.length_on),
        midstream_error_on=_numbers(a.midstream_error_on), die_on=a.die_on, die_marker=a.die_marker,
        api_key=os.environ.get("VLLM_API_KEY") or None,
    )
    server = _Server((a.host, a.port), behaviour)
    server.state.ready_at = time.monotonic() + a.unhealthy_for
    server.serve_forever()


if __name__ == "__main__":
    main()
