"""``VLLMTaskRunner``: a Prefect task runner that owns a vLLM server for a flow run.

For the run's duration it starts ``vllm serve`` on this worker's GPU(s), configured from a
hardware profile (after a preflight memory check that fails in seconds), or attaches to
an existing OpenAI-compatible endpoint. Tasks run in threads (it is a
ThreadPoolTaskRunner), so rendering and parsing overlap the GPU's work; OCR requests are
bounded per endpoint by the engine's semaphore. The endpoint is published through
:data:`CURRENT_ENDPOINT` (subflows reuse it instead of starting a second server on the
same GPU) and through ``folio.gpu.vllm_server.register_endpoint`` (engines built in plain
thread pools, which do not inherit context variables, find it there). A crashed server
is restarted a bounded number of times and the requests that were in flight are sent
again by the engine. The server stops when the flow run ends, fails or is cancelled
(Prefect turns the cancellation SIGTERM into an exception that unwinds ``__exit__``); the
server's process group and parent-death signal cover a hard kill.

Example::

    runner = VLLMTaskRunner(profile="auto", model="/models/chandra", preset="chandra")
    ingest.with_options(task_runner=runner)(sources=[...], engine="vllm", ...)

``__init__`` keeps configuration only and :meth:`duplicate` rebuilds from it: Prefect
duplicates the flow's runner for every run, and may pickle it to another process.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from contextlib import ExitStack
from contextvars import ContextVar, Token
from pathlib import Path
from types import TracebackType
from typing import Any, Self

from prefect.task_runners import ThreadPoolTaskRunner

from folio.config import PipelineConfig
from folio.errors import ConfigError, EngineUnavailableError
from folio.gpu.preflight import PreflightResult, load_model_shape, preflight, require_fit
from folio.gpu.profiles import HardwareProfile, load_profile, load_profiles, vllm_command
from folio.gpu.vllm_server import (
    Endpoint,
    RemoteEndpoint,
    VLLMServer,
    active_endpoint,
    free_port,
    register_endpoint,
    unregister_endpoint,
)
from folio.presets import get_preset

log = logging.getLogger(__name__)

#: the endpoint of the innermost flow run that has a VLLMTaskRunner
CURRENT_ENDPOINT: ContextVar[Endpoint | None] = ContextVar("folio_vllm_endpoint", default=None)


def current_endpoint() -> Endpoint | None:
    """The endpoint this flow run uses (context variable, else the process registry)."""
    return CURRENT_ENDPOINT.get() or active_endpoint()


def apply_profile(config: PipelineConfig, profile: HardwareProfile | None = None) -> PipelineConfig:
    """``config`` with the profile's request concurrency and the smaller of the preset's
    and the profile's pixel budgets (what a GPU run should use; the pipeline sizes its
    page threads from ``ocr.in_flight``)."""
    profile = profile or load_profile(config.ocr.profile)
    preset = get_preset(config.ocr.preset)
    render = profile.render_settings(preset.render_settings(config.render))
    ocr = config.ocr.model_copy(update={"in_flight": profile.in_flight})
    return config.model_copy(update={"render": render, "ocr": ocr})


class VLLMTaskRunner(ThreadPoolTaskRunner):  # type: ignore[type-arg]
    """Thread-pool task runner whose lifetime is a vLLM server's (or an attachment)."""

    def __init__(
        self,
        max_workers: int | None = None,
        *,
        profile: str = "auto",
        model: str | None = None,
        preset: str = "generic",
        endpoint: str | None = None,
        served_model_name: str | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        server_command: Sequence[str] | None = None,
        executable: Sequence[str] = ("vllm",),
        load_format: str | None = None,
        pixel_cap: bool = True,
        max_model_len: int | None = None,
        extra_args: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
        in_flight: int | None = None,
        max_tokens: int = 4096,
        run_preflight: bool = True,
        startup_timeout_s: float = 900.0,
        max_restarts: int = 2,
        health_interval_s: float = 1.0,
        log_dir: str | None = None,
        concurrency_limit: str | None = None,
        gpu_slots: int | None = None,
    ) -> None:
        """Configuration only; nothing starts before ``__enter__``.

        Args:
            profile: hardware profile name or ``auto`` (NVML).
            model: model path or id for ``vllm serve`` (not needed to attach).
            preset: model preset (its pixel cap becomes ``--mm-processor-kwargs``).
            endpoint: attach to this OpenAI-compatible URL instead of starting a server.
            server_command: run this instead of ``vllm serve ...`` (tests, wrappers);
                ``{host}`` and ``{port}`` are filled in.
            executable: how to call vLLM's CLI, e.g. ``(sys.executable, "-m",
                "vllm.entrypoints.cli.main")`` where no ``vllm`` script is on PATH.
            load_format: e.g. ``dummy`` (random weights, for benchmarks).
            pixel_cap: pass the preset's pixel cap as ``--mm-processor-kwargs``.
            in_flight: requests in flight to the server (default: the profile's).
            run_preflight: check the memory plan before starting (needs config.json).
            concurrency_limit: a Prefect global concurrency limit held (``gpu_slots``
                slots, default the profile's GPU count) while the server lives, so one
                GPU never gets two servers.
        """
        super().__init__(max_workers=max_workers)
        self._options: dict[str, Any] = {
            "profile": profile, "model": model, "preset": preset, "endpoint": endpoint,
            "served_model_name": served_model_name, "host": host, "port": port,
            "server_command": list(server_command) if server_command else None,
            "executable": list(executable), "pixel_cap": pixel_cap, "load_format": load_format,
            "max_model_len": max_model_len, "extra_args": list(extra_args),
            "env": dict(env or {}), "in_flight": in_flight, "max_tokens": max_tokens,
            "run_preflight": run_preflight, "startup_timeout_s": startup_timeout_s,
            "max_restarts": max_restarts, "health_interval_s": health_interval_s, "log_dir": log_dir,
            "concurrency_limit": concurrency_limit, "gpu_slots": gpu_slots,
        }
        self._reset_runtime()

    def _reset_runtime(self) -> None:
        self._endpoint: Endpoint | None = None
        self._server: VLLMServer | None = None
        self._token: Token[Endpoint | None] | None = None
        self._stack: ExitStack | None = None
        self.preflight_result: PreflightResult | None = None

    @classmethod
    def from_config(cls, config: PipelineConfig, **overrides: Any) -> VLLMTaskRunner:
        """A runner for ``config.ocr``: attach when ``ocr.endpoint`` is set, else start
        ``vllm serve ocr.model`` with ``ocr.profile``."""
        ocr = config.ocr
        options: dict[str, Any] = {
            "profile": ocr.profile, "model": ocr.model, "preset": ocr.preset, "endpoint": ocr.endpoint,
            "max_tokens": ocr.max_tokens,
        }
        options.update(overrides)
        return cls(**options)

    @property
    def options(self) -> dict[str, Any]:
        return dict(self._options)

    @property
    def endpoint(self) -> Endpoint | None:
        return self._endpoint

    @property
    def server(self) -> VLLMServer | None:
        """The server this runner started (None when attached or reusing a parent's)."""
        return self._server

    def duplicate(self) -> VLLMTaskRunner:
        return type(self)(max_workers=self._max_workers, **self._options)

    def __eq__(self, other: object) -> bool:
        return (
            type(other) is type(self)
            and isinstance(other, VLLMTaskRunner)
            and self._max_workers == other._max_workers
            and self._options == other._options
        )

    __hash__ = None  # type: ignore[assignment]

    def __getstate__(self) -> dict[str, Any]:
        state = super().__getstate__()
        for key in ("_endpoint", "_server", "_token", "_stack", "preflight_result"):
            state[key] = None
        return state

    # --- lifecycle -----------------------------------------------------------------------
    def __enter__(self) -> Self:
        super().__enter__()
        try:
            self._endpoint = self._acquire()
            self._token = CURRENT_ENDPOINT.set(self._endpoint)
            register_endpoint(self._endpoint)
        except BaseException:
            self._release()
            super().__exit__(None, None, None)
            raise
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc_value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        try:
            super().__exit__(exc_type, exc_value, traceback)  # waits for running tasks
        finally:
            self._release()

    def _acquire(self) -> Endpoint:
        opts = self._options
        parent = CURRENT_ENDPOINT.get()
        if parent is not None and not opts["endpoint"]:
            log.info("reusing the running server %s", parent.base_url)
            return parent
        if opts["endpoint"]:
            remote = RemoteEndpoint(opts["endpoint"], served_model_name=opts["served_model_name"],
                                    in_flight=opts["in_flight"] or 16)
            if not remote.wait_ready(min(60.0, opts["startup_timeout_s"])):
                raise EngineUnavailableError(f"endpoint {remote.base_url} is not healthy")
            log.info("attached to %s", remote.base_url)
            return remote
        return self._start_server()

    def _start_server(self) -> VLLMServer:
        opts = self._options
        profile = load_profile(opts["profile"])
        preset = get_preset(opts["preset"])
        port = opts["port"] or free_port(opts["host"])
        if opts["server_command"]:
            command = list(opts["server_command"])
        else:
            if not opts["model"]:
                raise ConfigError("VLLMTaskRunner needs a model (--model PATH_OR_ID) to start vLLM")
            if opts["run_preflight"]:
                self._preflight(profile)
            command = vllm_command(
                profile, opts["model"], host=opts["host"], port=port,
                served_model_name=opts["served_model_name"], load_format=opts["load_format"],
                mm_processor_kwargs=preset.mm_processor_kwargs(
                    min(preset.max_pixels, profile.render.max_pixels)) if opts["pixel_cap"] else None,
                max_model_len=opts["max_model_len"], extra=tuple(opts["extra_args"]),
                executable=tuple(opts["executable"]),
            )
        self._stack = ExitStack()
        if opts["concurrency_limit"]:
            from prefect.concurrency.sync import concurrency

            slots = opts["gpu_slots"] or max(1, profile.gpu_count)
            log.info("waiting for %d slot(s) of %s", slots, opts["concurrency_limit"])
            self._stack.enter_context(concurrency(opts["concurrency_limit"], occupy=slots, strict=True))
        log_dir = Path(opts["log_dir"]) if opts["log_dir"] else None
        server = VLLMServer(
            command, host=opts["host"], port=port, env={**profile.env, **opts["env"]},
            log_path=(log_dir / f"vllm-{profile.name}-{port}.log") if log_dir else None,
            served_model_name=opts["served_model_name"],
            in_flight=opts["in_flight"] or profile.in_flight,
            startup_timeout_s=opts["startup_timeout_s"], max_restarts=opts["max_restarts"],
            health_interval_s=opts["health_interval_s"],
        )
        log.info("starting %s (profile %s)", " ".join(command), profile.name)
        self._server = server.start()
        return server

    def _preflight(self, profile: HardwareProfile) -> None:
        opts = self._options
        try:
            shape = load_model_shape(opts["model"])
        except ConfigError as exc:
            log.warning("%s; starting without the memory check", exc)
            return
        result = preflight(shape, profile, max_model_len=opts["max_model_len"],
                           max_tokens=opts["max_tokens"], others=load_profiles())
        self.preflight_result = result
        log.info("preflight: %s", result.advice)
        require_fit(result)

    def _release(self) -> None:
        endpoint, server, token, stack = self._endpoint, self._server, self._token, self._stack
        self._reset_runtime()
        if endpoint is not None:
            unregister_endpoint(endpoint)
        if token is not None:
            try:
                CURRENT_ENDPOINT.reset(token)
            except ValueError:  # exited in another context: clear what we set
                CURRENT_ENDPOINT.set(None)
        try:
            if server is not None:
                server.stop()
        finally:
            if stack is not None:
                stack.close()
