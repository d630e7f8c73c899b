"""``VLLMTaskRunner``: a Prefect task runner that gives a flow run a vLLM server.

By default the server is the host's *shared* server (:mod:`folio.gpu.shared_server`):
the first run on a worker starts ``vllm serve`` on its GPU(s), configured from a hardware
profile (after a preflight memory check that fails in seconds), and later runs, in this
process or in other flow-run processes of the same worker, attach to it, so a one-page UI
run or a trigger does not pay minutes of start-up. A supervisor process restarts it when
it dies and stops it after ``server.idle_timeout_s`` without runs or when the worker
(the process that started the flow run) is gone; requests in flight are bounded across
all runs of the host by the profile's budget. With ``server.shared = false`` the run owns
its server, as before; with ``ocr.endpoint`` it attaches to a fleet endpoint.

Tasks run in threads (it is a ThreadPoolTaskRunner), so rendering and parsing overlap the
GPU's work; OCR requests are bounded per endpoint by the engine's semaphore. The endpoint
is published through :data:`CURRENT_ENDPOINT` (subflows reuse it instead of starting a
second server on the same GPU) and through ``folio.gpu.vllm_server.register_endpoint``
(engines built in plain thread pools, which do not inherit context variables, find it
there). A crashed server is restarted a bounded number of times and the requests that
were in flight are sent again by the engine. A server the run owns stops when the flow
run ends, fails or is cancelled (Prefect turns the cancellation SIGTERM into an exception
that unwinds ``__exit__``); its process group and parent-death signal cover a hard kill.

Example::

    runner = VLLMTaskRunner(profile="auto", model="/models/chandra", preset="chandra")
    ingest.with_options(task_runner=runner)(sources=[...], engine="vllm", ...)

``__init__`` keeps configuration only and :meth:`duplicate` rebuilds from it: Prefect
duplicates the flow's runner for every run, and may pickle it to another process.
"""

from __future__ import annotations

import logging
import os
import secrets
import shutil
import sys
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from contextvars import ContextVar, Token
from pathlib import Path
from types import TracebackType
from typing import Any, Self

from prefect.task_runners import ThreadPoolTaskRunner

from folio.errors import ConfigError, EngineUnavailableError, FolioError
from folio.gpu.preflight import PreflightResult, load_model_shape, preflight, require_fit
from folio.gpu.profiles import (
    HardwareProfile,
    engine_gpu_groups,
    load_profile,
    load_profiles,
    visible_gpus,
    vllm_command,
)
from folio.gpu.shared_server import (
    ServerFiles,
    SharedEndpoint,
    SharedServerSpec,
    acquire,
    default_state_dir,
    read_state,
)
from folio.gpu.vllm_server import (
    Endpoint,
    EndpointGroup,
    RemoteEndpoint,
    VLLMServer,
    active_endpoint,
    free_port,
    register_endpoint,
    unregister_endpoint,
)
from folio.settings.config import PipelineConfig
from folio.settings.presets import get_preset
from folio.warm import client as warm

log = logging.getLogger(__name__)

#: the endpoint of the innermost flow run that has a VLLMTaskRunner
CURRENT_ENDPOINT: ContextVar[Endpoint | None] = ContextVar("folio_vllm_endpoint", default=None)


#: the error a runner with ``defer_failure`` met while starting its server
STARTUP_FAILURE: ContextVar[FolioError | None] = ContextVar("folio_vllm_startup_failure",
                                                           default=None)


def raise_startup_failure() -> None:
    """Raise the error this flow run's task runner met while starting its vLLM server,
    if it deferred one (flows call this first, so the run fails with that error)."""
    failure = STARTUP_FAILURE.get()
    if failure is not None:
        raise failure


def current_endpoint() -> Endpoint | None:
    """The endpoint this flow run uses (context variable, else the process registry)."""
    return CURRENT_ENDPOINT.get() or active_endpoint()


def flow_run_owner() -> int:
    """The process whose end should stop a shared server: the worker that started this
    flow run (its parent; workers put PREFECT__FLOW_RUN_ID in the run's environment), else
    this process (``folio ingest`` runs the flow in-process)."""
    override = os.environ.get("FOLIO_SERVER_OWNER_PID")
    if override and override.isdigit():
        return int(override)
    # a run forked by the warm server: its launcher's parent, the worker, not the server
    return warm.parent_pid() if os.environ.get("PREFECT__FLOW_RUN_ID") else os.getpid()


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
        max_tokens: int | None = None,
        run_preflight: bool = True,
        startup_timeout_s: float = 900.0,
        max_restarts: int = 2,
        health_interval_s: float = 1.0,
        log_dir: str | None = None,
        concurrency_limit: str | None = None,
        gpu_slots: int | None = None,
        shared: bool = True,
        idle_timeout_s: float = 600.0,
        state_dir: str | None = None,
        defer_failure: bool = False,
        engines: int = 1,
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
                slots, default the profile's GPU count) while a server of this run's own
                lives (``shared=False``), so one GPU never gets two servers; a shared
                server is one per host by construction (a lock in ``state_dir``).
            shared: use the host's shared server (see the module doc).
            idle_timeout_s: a shared server stops after this long without runs.
            state_dir: the shared servers' state folder (default: see shared_server).
            engines: servers on this host (shared mode), one per group of the profile's
                ``gpu_count`` GPUs, each pinned with CUDA_VISIBLE_DEVICES; 0: as many as
                the visible GPUs hold. Pages go to the least busy (folio.engines.dispatch);
                one that dies is restarted by its own supervisor while the others serve.
            defer_failure: a server that cannot start (or a bad server setting) does not
                raise from ``__enter__`` but from :func:`raise_startup_failure`, which the
                flow body calls first: Prefect treats an error raised while it enters the
                task runner as a crash of the run ("process exited with status code 1"),
                one raised in the flow body as a failure whose message is the error's.
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
            "shared": shared, "idle_timeout_s": idle_timeout_s, "state_dir": state_dir,
            "defer_failure": defer_failure, "engines": engines,
        }
        self._failure_token: Token[FolioError | None] | None = None
        self._reset_runtime()

    def _reset_runtime(self) -> None:
        self._endpoint: Endpoint | None = None
        self._server: VLLMServer | None = None
        self._shared: SharedEndpoint | None = None
        self._group: list[SharedEndpoint] = []
        self._token: Token[Endpoint | None] | None = None
        self._stack: ExitStack | None = None
        self.preflight_result: PreflightResult | None = None

    @classmethod
    def from_config(cls, config: PipelineConfig, **overrides: Any) -> VLLMTaskRunner:
        """A runner for a resolved config (:func:`folio.settings.run_config.resolve_config`):
        attach when ``ocr.endpoint`` is set, else start or share ``vllm serve ocr.model``
        with ``ocr.profile`` and the ``server`` settings."""
        ocr, server = config.ocr, config.server
        options: dict[str, Any] = {
            "profile": ocr.profile, "model": ocr.model, "preset": ocr.preset,
            # several endpoints: the engine spreads pages over them itself; the runner
            # starts nothing and checks the first one is up
            "endpoint": next(iter(ocr.server_urls()), None),
            "max_tokens": ocr.max_tokens, "in_flight": ocr.in_flight,
            "server_command": server.command, "load_format": server.load_format,
            "max_model_len": server.max_model_len, "extra_args": server.extra_args,
            "startup_timeout_s": server.startup_timeout_s, "max_restarts": server.max_restarts,
            "log_dir": server.log_dir, "shared": server.shared,
            "idle_timeout_s": server.idle_timeout_s, "state_dir": server.state_dir,
            "engines": server.engines,
        }
        if server.executable:
            options["executable"] = server.executable
        elif not shutil.which("vllm"):  # a venv whose scripts are not on PATH
            options["executable"] = [sys.executable, "-m", "vllm.entrypoints.cli.main"]
        options.update(overrides)
        return cls(**options)

    @classmethod
    def from_environment(cls, **overrides: Any) -> VLLMTaskRunner:
        """The runner a GPU pool's flow run uses: the settings its environment resolves
        to (``FOLIO_OCR__PROFILE``, ``FOLIO_OCR__MODEL``, ``FOLIO_SERVER__*``...), the same
        as ``folio ingest --engine vllm`` with those options. A server that cannot start
        fails the flow run with its error (``defer_failure``), not as a crash."""
        from folio.settings.run_config import resolve_config

        overrides.setdefault("defer_failure", True)
        return cls.from_config(resolve_config(engine="vllm", route="auto"), **overrides)

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
        for key in ("_endpoint", "_server", "_shared", "_token", "_stack", "preflight_result",
                    "_failure_token"):
            state[key] = None
        state["_group"] = []
        return state

    # --- lifecycle -----------------------------------------------------------------------
    def __enter__(self) -> Self:
        super().__enter__()
        try:
            self._endpoint = self._acquire()
            self._token = CURRENT_ENDPOINT.set(self._endpoint)
            register_endpoint(self._endpoint)
        except (EngineUnavailableError, ConfigError) as exc:
            self._release()
            if not self._options["defer_failure"]:
                super().__exit__(None, None, None)
                raise
            log.error("the vLLM server did not start: %s", exc)
            self._failure_token = STARTUP_FAILURE.set(exc)
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
            if self._failure_token is not None:
                try:
                    STARTUP_FAILURE.reset(self._failure_token)
                except ValueError:  # exited in another context: clear what we set
                    STARTUP_FAILURE.set(None)
                self._failure_token = None

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

    def _command(self, profile: HardwareProfile, port: int | str) -> list[str]:
        opts = self._options
        if opts["server_command"]:
            return list(opts["server_command"])
        if not opts["model"]:
            raise ConfigError("VLLMTaskRunner needs a model (--model PATH_OR_ID) to start vLLM")
        preset = get_preset(opts["preset"])
        return vllm_command(
            profile, opts["model"], host=opts["host"], port=port,
            served_model_name=opts["served_model_name"], load_format=opts["load_format"],
            mm_processor_kwargs=preset.mm_processor_kwargs(
                min(preset.max_pixels, profile.render.max_pixels)) if opts["pixel_cap"] else None,
            max_model_len=opts["max_model_len"], extra=tuple(opts["extra_args"]),
            executable=tuple(opts["executable"]),
        )

    def spec(self, gpus: str | None = None, index: int | None = None) -> SharedServerSpec:
        """The shared server this runner asks for (its key names it on the host); with
        ``gpus``/``index``, the member of a group of servers pinned to those GPUs."""
        opts = self._options
        profile = load_profile(opts["profile"])
        env = {**profile.env, **opts["env"]}
        if index is not None:  # the members of a group are distinct servers
            env["FOLIO_ENGINE_INDEX"] = str(index)
        if gpus is not None:
            env["CUDA_VISIBLE_DEVICES"] = gpus
        return SharedServerSpec(
            command=self._command(profile, opts["port"] or "{port}"),
            env=env, host=opts["host"],
            served_model_name=opts["served_model_name"],
            in_flight=opts["in_flight"] or profile.in_flight,
            startup_timeout_s=opts["startup_timeout_s"], max_restarts=opts["max_restarts"],
            health_interval_s=opts["health_interval_s"], idle_timeout_s=opts["idle_timeout_s"],
            log_dir=opts["log_dir"])

    def _start_server(self) -> Endpoint:
        opts = self._options
        profile = load_profile(opts["profile"])
        if opts["shared"]:
            return self._share_server(profile)
        port = opts["port"] or free_port(opts["host"])
        command = self._command(profile, port)
        if opts["run_preflight"] and not opts["server_command"]:
            self._preflight(profile)
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
            api_key=secrets.token_urlsafe(32),  # only this run can use its server
        )
        log.info("starting %s (profile %s)", " ".join(command), profile.name)
        self._server = server.start()
        return server

    def _share_server(self, profile: HardwareProfile) -> Endpoint:
        """Attach to this host's server for this configuration, starting it (after the
        preflight) when none runs; the lease is dropped when the run ends, the server
        stays for the next run. Several GPUs (``engines``): one such server per GPU group,
        started together, seen as one :class:`EndpointGroup`."""
        groups = engine_gpu_groups(profile, self._options["engines"], visible_gpus())
        if len(groups) == 1:
            return self._share_one(profile, self.spec())
        specs = [self.spec(gpus, index) for index, gpus in enumerate(groups)]
        log.info("%d servers, GPUs %s", len(specs), " | ".join(g or "-" for g in groups))
        with ThreadPoolExecutor(len(specs)) as pool:  # start-up costs minutes: at once
            futures = [pool.submit(self._share_one, profile, spec, member=True) for spec in specs]
            errors: list[BaseException] = []
            for future in futures:
                try:
                    self._group.append(future.result())
                except BaseException as exc:
                    errors.append(exc)
        if errors:
            raise errors[0]
        return EndpointGroup(self._group)

    def _share_one(self, profile: HardwareProfile, spec: SharedServerSpec, *,
                   member: bool = False) -> SharedEndpoint:
        opts = self._options
        state_dir = Path(opts["state_dir"]) if opts["state_dir"] else default_state_dir()
        running = read_state(ServerFiles(state_dir, spec.key()).state)
        if opts["run_preflight"] and not opts["server_command"] and running is None:
            self._preflight(profile)
        log.info("sharing %s (profile %s, state in %s)", " ".join(spec.command), profile.name,
                 state_dir)
        shared = acquire(spec, state_dir=state_dir, owner_pid=flow_run_owner())
        if not member:
            self._shared = shared
        return shared

    def _preflight(self, profile: HardwareProfile) -> None:
        opts = self._options
        try:
            shape = load_model_shape(opts["model"])
        except ConfigError as exc:
            log.warning("%s; starting without the memory check", exc)
            return
        # a page's prompt and answer must fit the context: the preset's output budget
        # (its reference pipeline's) unless ocr.max_tokens says otherwise
        max_tokens = opts["max_tokens"] or get_preset(opts["preset"]).max_tokens
        result = preflight(shape, profile, max_model_len=opts["max_model_len"],
                           max_tokens=max_tokens, others=load_profiles())
        self.preflight_result = result
        log.info("preflight: %s", result.advice)
        require_fit(result)

    def _release(self) -> None:
        endpoint, server, token, stack = self._endpoint, self._server, self._token, self._stack
        shared = [self._shared] if self._shared is not None else []
        shared += self._group
        self._reset_runtime()
        for lease in shared:
            lease.release()  # the lease only: the server serves the next run
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
