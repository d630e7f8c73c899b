"""OCR through any OpenAI-compatible chat endpoint: a vLLM server the task runner owns,
or one someone else runs (``--engine openai --endpoint URL``).

One request per page, as the preset's reference pipeline makes it
(:meth:`OpenAIEngine.request_body`; the wire format is :mod:`folio.engines.openai_wire`).
Requests in flight are bounded per endpoint by a semaphore every engine for that endpoint
shares. 5xx, 429 and connection failures are retried with exponential backoff; a request
to a supervised server that crashed waits for the restart and is sent again without
using up its retries.

Answers are judged as the reference judges them (:meth:`OpenAIEngine.output_problem`),
and an unusable one raises :class:`EngineBadOutputError` carrying the :class:`Attempt`,
so the pipeline records it and asks again on the next step of the ladder:

- cut at ``max_tokens``: asked again (olmOCR), or kept (Chandra keeps a cut answer);
- olmOCR: prompt + output over the model's context, a front matter olmOCR would refuse;
  a page the model says is not upright is asked again with the image turned by the
  corrections so far, and the answer is kept as a last resort (``usable`` on the error);
- Chandra: a repeating tail (chandra's detect_repeat_token).
"""

from __future__ import annotations

import itertools
import logging
import random
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

import httpx

from folio.engines.base import EngineOutput
from folio.engines.dispatch import Dispatcher, NoEngineError
from folio.engines.endpoint_bounds import client_count, endpoint_semaphore
from folio.engines.openai_wire import (
    JSON_HEADERS,
    Reply,
    Retryable,
    encode_body,
    encode_image,
    fixed_length,
    read_json,
    read_stream,
)
from folio.errors import (
    BadOutputError,
    ConfigError,
    EngineUnavailableError,
    TimeoutExpired,
)
from folio.gpu.vllm_server import Endpoint, configured_endpoints, endpoint_members
from folio.io.tls import ssl_context
from folio.models import Attempt, PagePrep
from folio.page.answer_gate import answer_work
from folio.page.quality import repeats_at_end
from folio.parsers import olmocr
from folio.settings.config import PipelineConfig
from folio.settings.presets import ModelPreset, Sampling, get_preset

log = logging.getLogger(__name__)


class EngineBadOutputError(BadOutputError):
    """The model answered, but the answer is unusable; ``attempt`` says how. ``usable``:
    an answer to keep if no later attempt does better (olmOCR keeps a readable answer
    whose page the model says is turned when every attempt says so)."""

    def __init__(self, message: str, *, attempt: Attempt,
                 usable: EngineOutput | None = None) -> None:
        super().__init__(message)
        self.attempt = attempt
        self.usable = usable


class EngineDownError(EngineUnavailableError):
    """The endpoint could not be reached (after retries); ``attempt`` says how long."""

    def __init__(self, message: str, *, attempt: Attempt) -> None:
        super().__init__(message)
        self.attempt = attempt


class EngineTimeoutError(TimeoutExpired):
    def __init__(self, message: str, *, attempt: Attempt) -> None:
        super().__init__(message)
        self.attempt = attempt


class OpenAIEngine:
    """OCR engine over the OpenAI chat-completions protocol.

    Example:
        >>> from folio.settings.presets import get_preset
        >>> engine = OpenAIEngine(endpoint=RemoteEndpoint("http://127.0.0.1:9/v1"),
        ...                       model="m", preset=get_preset("olmocr2"))
        >>> engine.temperature(0), engine.temperature(7), engine.max_tokens
        (0.1, 1.0, 8000)
    """

    deterministic = False  # a higher temperature can fix a bad answer

    def __init__(
        self,
        *,
        endpoint: Endpoint | None = None,
        endpoints: Sequence[Endpoint] = (),
        preset: ModelPreset,
        model: str | None = None,
        name: str = "openai",
        temperatures: Sequence[float] | None = None,
        max_tokens: int | None = None,
        api_key: str | None = None,
        timeout_s: float = 120.0,
        connect_timeout_s: float = 10.0,
        max_retries: int = 3,
        backoff_s: float = 1.0,
        stream: bool = False,
        ignore_eos: bool = False,
        ignore_eos_lengths: Sequence[int] = (),
        restart_wait_s: float = 900.0,
        extra_body: dict[str, Any] | None = None,
        clients: int | None = None,
    ) -> None:
        members = list(endpoints) or ([endpoint] if endpoint is not None else [])
        if not members or (endpoint is not None and endpoints):
            raise ValueError("give endpoint= (one server) or endpoints= (several)")
        self.name = name
        self.endpoint = members[0]  # one server: every request goes here
        # several servers of one model: each page goes to the least busy (folio.engines.dispatch)
        self._dispatch = Dispatcher(members) if len(members) > 1 else None
        self.preset = preset
        self._model = model
        # the preset's sampling, unless temperatures say otherwise (top_p then as the preset's)
        self.sampling = list(preset.sampling)
        if temperatures:
            self.sampling = [
                Sampling(temperature=t, top_p=preset.sampling_for(n).top_p)
                for n, t in enumerate(temperatures)]
        self.max_tokens = max_tokens or preset.max_tokens
        self.max_retries = max_retries
        self.backoff_s = backoff_s
        self.stream = stream
        self.ignore_eos = ignore_eos
        self.ignore_eos_lengths = list(ignore_eos_lengths)
        self.restart_wait_s = restart_wait_s
        self.extra_body = dict(extra_body or {})
        # one server: a server shared by the runs on this host bounds requests across
        # processes, else this process's bound for its URL (several: each slot has its own)
        shared = getattr(self.endpoint, "semaphore", None)
        self._semaphore: Any = (
            None if self._dispatch is not None
            else shared() if callable(shared)
            else endpoint_semaphore(self.endpoint.base_url, self.endpoint.in_flight))
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        connections = sum(e.in_flight for e in members) + 4
        # requests take the clients in turn; each may open every connection (the semaphore,
        # not the pool, bounds what is in flight), so none queues while another has room
        self._clients = [
            httpx.Client(
                headers=headers,
                verify=ssl_context(),
                timeout=httpx.Timeout(timeout_s, connect=connect_timeout_s),
                limits=httpx.Limits(max_connections=connections,
                                    max_keepalive_connections=connections),
            )
            for _ in range(clients or client_count(connections))
        ]
        self._turn = itertools.count()  # next() on a count is atomic under the GIL
        self._model_lock = threading.Lock()
        self._open_lock = threading.Lock()
        self._open = 0  # requests sent and not yet answered (see requests_open)

    @classmethod
    def from_config(cls, config: PipelineConfig, *, endpoint: Endpoint | None = None) -> OpenAIEngine:
        """The engine ``config`` asks for, on ``endpoint``, else ``ocr.endpoint``, else the
        server the flow's :class:`VLLMTaskRunner` runs (see ``flows/vllm_runner.py``)."""
        ocr = config.ocr
        members = endpoint_members(endpoint) if endpoint is not None else configured_endpoints(ocr)
        if not members:
            raise ConfigError(
                f"engine {ocr.engine!r} has no endpoint: run the flow with VLLMTaskRunner "
                "(--engine vllm) or give --endpoint URL (--engine openai)"
            )
        return cls(
            endpoints=members,  # several: each page to the least busy (a runner's GPUs)
            preset=get_preset(ocr.preset),
            model=members[0].served_model_name or ocr.model,
            name=ocr.engine if ocr.engine in ("vllm", "openai") else "openai",
            temperatures=ocr.temperatures,
            max_tokens=ocr.max_tokens,
            api_key=ocr.api_key.get_secret_value() if ocr.api_key else None,
            timeout_s=config.limits.page_timeout_s,
            max_retries=ocr.request_retries,
            stream=ocr.stream,
            ignore_eos=ocr.ignore_eos,
            ignore_eos_lengths=ocr.ignore_eos_lengths,
        )

    # --- OcrEngine -----------------------------------------------------------------------
    @property
    def model(self) -> str:
        if self._model is None:
            with self._model_lock:
                if self._model is None:
                    self._model = self._discover_model()
        return self._model

    def sampling_for(self, attempt: int) -> Sampling:
        return self.sampling[min(max(attempt, 0), len(self.sampling) - 1)]

    def temperature(self, attempt: int) -> float:
        return self.sampling_for(attempt).temperature

    @property
    def attempts(self) -> int:
        """Attempts a page gets on this engine: one per step of its sampling ladder."""
        return len(self.sampling)

    def request_body(self, page: PagePrep, attempt: int = 0) -> dict[str, Any]:
        """The JSON body sent for ``page`` on ``attempt`` (its image turned by
        ``page.turn``). tests/test_conformance.py compares it with the reference's."""
        return self._request(page, attempt)[0]

    def _request(self, page: PagePrep, attempt: int) -> tuple[dict[str, Any], tuple[int, int]]:
        if not page.image_path:
            raise BadOutputError("no rendered image for the page")
        data_url, image_px = encode_image(Path(page.image_path), self.preset.max_pixels,
                                          turn=page.turn)
        body = self._body(data_url, self.sampling_for(attempt))
        if self.ignore_eos and self.ignore_eos_lengths:
            body["max_tokens"] = fixed_length(data_url, self.ignore_eos_lengths, self.max_tokens)
        return body, image_px

    def recognize(self, page: PagePrep, attempt: int = 0) -> EngineOutput:
        sampling = self.sampling_for(attempt)
        record = Attempt(engine=self.name, model=self.model, temperature=sampling.temperature,
                         top_p=sampling.top_p, max_tokens=self.max_tokens,
                         rotated=(360 - page.turn) % 360)
        try:
            body, image_px = self._request(page, attempt)
        except BadOutputError as exc:
            record.error = str(exc)
            raise EngineBadOutputError(record.error, attempt=record) from exc
        started = time.perf_counter()
        try:
            reply = self._complete(body, record, started)
        except BadOutputError as exc:
            if isinstance(exc, EngineBadOutputError):
                raise
            record.error = str(exc)
            record.seconds = round(time.perf_counter() - started, 3)
            raise EngineBadOutputError(record.error, attempt=record) from exc
        record.seconds = round(time.perf_counter() - started, 3)
        record.finish_reason = reply.finish_reason
        record.prompt_tokens, record.completion_tokens = reply.prompt_tokens, reply.completion_tokens
        with answer_work():  # a wave of answers must not crowd out the next requests
            problem = self.output_problem(reply)
            if problem:
                record.error = problem
                raise EngineBadOutputError(problem, attempt=record)
            response = None
            if self.preset.parser == "olmocr" and not self.ignore_eos:
                try:
                    response = olmocr.read_answer(reply.text)
                except olmocr.AnswerError as exc:
                    record.error = str(exc)
                    raise EngineBadOutputError(record.error, attempt=record) from None
            try:
                blocks, markdown = self.preset.parse(
                    reply.text, width_pt=page.width_pt or image_px[0] * 0.75,
                    height_pt=page.height_pt or image_px[1] * 0.75, image_px=image_px,
                )
            except Exception as exc:  # parsers are total; a bug here is one page's problem
                record.error = f"parse: {type(exc).__name__}: {exc}"
                raise EngineBadOutputError(record.error, attempt=record) from exc
        # a valid answer that the page holds no text: olmOCR's empty body, Chandra's
        # Blank-Page (or nothing but running heads), both kept by their pipelines
        no_text = (response.natural_text is None if response is not None
                   else self.preset.parser == "chandra" and reply.finish_reason == "stop")
        output = EngineOutput(blocks=blocks, markdown=markdown, attempt=record,
                              prompt_format=self.preset.prompt_format, no_text=no_text)
        if (response is not None and self.preset.rotation_feedback
                and not response.is_rotation_valid):
            record.rotation_correction = response.rotation_correction
            record.error = (f"rotation: the model reads the page turned, correction "
                            f"{response.rotation_correction} degrees")
            raise EngineBadOutputError(record.error, attempt=record, usable=output)
        return output

    def output_problem(self, reply: Reply) -> str | None:
        """Why the answer is unusable as the preset's reference pipeline judges it, or
        None. With ``ignore_eos`` (benchmarks) every answer is length-limited by design
        and accepted."""
        if self.ignore_eos:
            return None
        if reply.finish_reason == "length" and not self.preset.keep_cut_answers:
            return f"token limit: stopped at max_tokens={self.max_tokens} ({reply.completion_tokens} tokens)"
        if reply.finish_reason not in ("stop", "length", None):
            return f"finish_reason {reply.finish_reason!r}"
        total = (reply.prompt_tokens or 0) + (reply.completion_tokens or 0)
        if self.preset.max_context is not None and total > self.preset.max_context:
            return f"context: {total} tokens, over the model's {self.preset.max_context}"
        if self.preset.parser == "chandra" and repeats_at_end(reply.text):
            return "repetition: the answer ends in a repeating sequence"
        # folio's own repetition check runs on every parsed page (pipeline.pages.page_problem)
        return None

    def close(self) -> None:
        if self._dispatch is not None:
            self._dispatch.close()
        for client in self._clients:
            client.close()
        # let go of this process's bound for the URL: once no engine holds it, a later
        # server there (same port) starts with its own limit
        self._semaphore = None

    # --- protocol ------------------------------------------------------------------------
    def _body(self, data_url: str, sampling: Sampling) -> dict[str, Any]:
        image = {"type": "image_url", "image_url": {"url": data_url}}
        text = {"type": "text", "text": self.preset.prompt}
        content = [image, text] if self.preset.image_first else [text, image]
        body: dict[str, Any] = {
            "model": self.model,
            "messages": [{"role": "user", "content": content}],
            "max_tokens": self.max_tokens,
            "temperature": sampling.temperature,
        }
        if sampling.top_p is not None:
            body["top_p"] = sampling.top_p
        if self.stream:
            body["stream"] = True
            body["stream_options"] = {"include_usage": True}
        if self.ignore_eos:
            body["ignore_eos"] = True  # vLLM's sampling extension
        body.update(self.extra_body)
        return body

    def _give_up(self, record: Attempt, started: float, error: Retryable, failures: int) -> NoReturn:
        record.error = f"after {failures} tries: {error}"
        record.seconds = round(time.perf_counter() - started, 3)
        if error.timeout:
            raise EngineTimeoutError(record.error, attempt=record)
        raise EngineDownError(record.error, attempt=record)

    def _backoff(self, failures: int, error: Retryable, where: str) -> None:
        delay = self.backoff_s * 2 ** (failures - 1) * (0.5 + random.random())
        log.info("%s: %s; retry %d in %.1f s", where, error, failures, delay)
        time.sleep(delay)

    def _complete_spread(self, dispatch: Dispatcher, body: dict[str, Any], record: Attempt,
                         started: float) -> Reply:
        """Several servers: send to the least busy; a server whose connection fails is set
        aside and the request goes to another without spending a retry (bounded: every
        server, each through its restarts); 5xx and timeouts retry with backoff."""
        failures = moves = 0
        content = encode_body(body)
        while True:
            try:
                with dispatch.lease(self.restart_wait_s) as slot:
                    try:
                        return self._post(body, content, slot.endpoint)
                    except Retryable as exc:
                        error, failed = exc, slot
            except NoEngineError as exc:
                record.error = f"server gone: {exc}"
                record.seconds = round(time.perf_counter() - started, 3)
                raise EngineDownError(record.error, attempt=record) from None
            if error.connection and moves < len(dispatch.slots) * self._max_resubmits():
                moves += 1
                dispatch.set_aside(failed, str(error))
                continue
            failures += 1
            if failures > self.max_retries:
                self._give_up(record, started, error, failures)
            self._backoff(failures, error, failed.endpoint.base_url)

    def _complete(self, body: dict[str, Any], record: Attempt, started: float) -> Reply:
        """Send with retries: backoff on 5xx/transport errors; through a server restart
        the request is re-sent without spending a retry (bounded by the restarts)."""
        if self._dispatch is not None:
            return self._complete_spread(self._dispatch, body, record, started)
        failures = 0
        resubmits = 0
        content = encode_body(body)
        while True:
            generation = getattr(self.endpoint, "generation", None)
            semaphore = self._semaphore
            if semaphore is None:  # closed (a run shutting down): say so, not a TypeError
                raise EngineUnavailableError(f"the engine for {self.endpoint.base_url} is closed")
            try:
                with semaphore:
                    return self._post(body, content)
            except Retryable as exc:
                error = exc
            if error.connection and generation is not None and resubmits <= self._max_resubmits():
                if not self.endpoint.wait_ready(self.restart_wait_s):
                    record.error = f"server gone: {error}"
                    record.seconds = round(time.perf_counter() - started, 3)
                    raise EngineDownError(record.error, attempt=record)
                if getattr(self.endpoint, "generation", None) != generation:
                    resubmits += 1
                    log.info("server restarted; re-sending the request (%s)", error)
                    continue
            failures += 1
            if failures > self.max_retries:
                self._give_up(record, started, error, failures)
            self._backoff(failures, error, self.endpoint.base_url)

    def _max_resubmits(self) -> int:
        return int(getattr(self.endpoint, "max_restarts", 0)) + 1

    def _post(self, body: dict[str, Any], content: bytes,
              endpoint: Endpoint | None = None) -> Reply:
        """``content`` is ``body`` encoded, once per page before a slot is taken: a page's
        JSON (its image in base64) costs milliseconds of GIL that a slot would wait on."""
        url = f"{(endpoint or self.endpoint).base_url}/chat/completions"
        client = self._clients[next(self._turn) % len(self._clients)]
        with self._open_lock:
            self._open += 1
        try:
            if body.get("stream"):
                with client.stream("POST", url, content=content,
                                   headers=JSON_HEADERS) as response:
                    self._check_status(response, streamed=True)
                    return read_stream(response.iter_lines())
            response = client.post(url, content=content, headers=JSON_HEADERS)
            self._check_status(response, streamed=False)
            return read_json(response.json())
        except httpx.TimeoutException as exc:
            raise Retryable(f"timeout: {type(exc).__name__}", timeout=True) from exc
        except (httpx.ConnectError, httpx.RemoteProtocolError, httpx.ReadError,
                httpx.WriteError, httpx.CloseError) as exc:
            raise Retryable(f"connection: {type(exc).__name__}: {exc}", connection=True) from exc
        except httpx.TransportError as exc:
            raise Retryable(f"transport: {type(exc).__name__}: {exc}") from exc
        except (ValueError, KeyError, IndexError, TypeError) as exc:
            raise Retryable(f"malformed response: {type(exc).__name__}: {exc}") from exc
        finally:
            with self._open_lock:
                self._open -= 1

    @property
    def requests_open(self) -> int:
        """Requests of this engine at a server now: sent and not yet answered. Against the
        server's own count of requests running, the difference is what sits in between
        (the HTTP path, the server's front end), not in the engine's batch."""
        return self._open

    def _check_status(self, response: httpx.Response, *, streamed: bool) -> None:
        code = response.status_code
        if code == 200:
            return
        if streamed:
            response.read()
        detail = response.text[:300]
        if code == 429 or code >= 500:
            raise Retryable(f"HTTP {code}: {detail}")
        if code in (401, 403, 404):
            raise ConfigError(f"{self.endpoint.base_url}: HTTP {code}: {detail}")
        # 400/413/422: the server refused this page's request (too many tokens, bad image)
        raise BadOutputError(f"request refused: HTTP {code}: {detail}")

    def _discover_model(self) -> str:
        if not self.endpoint.wait_ready(30.0):
            raise EngineUnavailableError(f"{self.endpoint.base_url} is not answering")
        name = self.endpoint.served_model_name
        if name:
            return name
        response = self._clients[0].get(f"{self.endpoint.base_url}/models")
        data = response.json().get("data") or []
        if not data:
            raise ConfigError(f"{self.endpoint.base_url} serves no model")
        return str(data[0]["id"])
