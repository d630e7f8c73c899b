"""Hardware profiles: vLLM engine arguments, environment, pixel budget and request
concurrency for one kind of GPU, read from ``infra/profiles/*.yaml``.

A profile holds only knobs that exist (vLLM engine arguments and environment variables
passed verbatim); see infra/profiles/README.md for why there is no allocator folklore.
``auto`` asks NVML which GPU this is and picks the profile by name and memory; without
NVML or a GPU it gives the ``cpu`` profile.

Example:
    >>> p = load_profile("h100-80gb")
    >>> vllm_args(p)[:2]
    ['--gpu-memory-utilization', '0.9']
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from folio.errors import ConfigError
from folio.settings.config import RenderSettings

log = logging.getLogger(__name__)

#: where the profiles live; FOLIO_PROFILES_DIR overrides (an installed wheel has no infra/)
DEFAULT_PROFILES_DIR = Path(__file__).resolve().parents[2] / "infra" / "profiles"


class GpuMatch(BaseModel):
    """How ``auto`` recognises the card: a name pattern and a memory range (GiB)."""

    model_config = ConfigDict(extra="forbid")

    name_regex: str = Field(description="matched against NVML's device name, case-insensitive")
    min_memory_gib: float = 0.0
    max_memory_gib: float = 1e9


class VLLMArgs(BaseModel):
    """vLLM engine arguments (the real memory and throughput knobs)."""

    model_config = ConfigDict(extra="forbid")

    gpu_memory_utilization: float = Field(0.9, gt=0, le=1)
    max_model_len: int = Field(16384, ge=1024)
    max_num_seqs: int = Field(64, ge=1)
    max_num_batched_tokens: int | None = Field(None, ge=1024)
    block_size: int | None = Field(None, description="KV cache block size in tokens")
    kv_cache_dtype: str = Field("auto", description="auto (model dtype), fp8, fp8_e4m3, fp8_e5m2")
    enforce_eager: bool = Field(False, description="no CUDA graphs: less memory, slower decode")
    tensor_parallel_size: int = Field(1, ge=1)
    data_parallel_size: int = Field(1, ge=1)
    dtype: str = "auto"
    limit_mm_per_prompt: dict[str, int] = Field(default_factory=lambda: {"image": 1, "video": 0})
    mm_processor_kwargs: dict[str, Any] | None = Field(
        None, description="None: the preset's pixel cap in its processor's spelling"
    )
    extra_args: list[str] = Field(default_factory=list, description="passed to vllm verbatim")


class KubernetesHints(BaseModel):
    model_config = ConfigDict(extra="forbid")

    node_selector: dict[str, str] = Field(default_factory=dict)
    tolerations: list[dict[str, str]] = Field(default_factory=list)
    cpu_request: str | None = None
    memory_request: str | None = None
    shm_size: str = Field("8Gi", description="/dev/shm for vLLM's worker processes")


class RenderBudget(BaseModel):
    model_config = ConfigDict(extra="forbid")

    longest_side_px: int = Field(1600, ge=256)
    max_pixels: int = Field(1600 * 1280, ge=65536)


class HardwareProfile(BaseModel):
    """One GPU kind (or the CPU): how to run vLLM on it and how hard to drive it."""

    model_config = ConfigDict(extra="forbid")

    name: str
    description: str = ""
    device: str = Field("cuda", pattern="^(cuda|cpu)$")
    memory_gib: float = Field(gt=0, description="memory of one card as NVML reports it")
    gpu_count: int = Field(1, ge=0, description="GPUs one server uses (tp * dp)")
    match: GpuMatch | None = None
    vllm: VLLMArgs = Field(default_factory=VLLMArgs)
    env: dict[str, str] = Field(default_factory=dict, description="set verbatim for the server")
    render: RenderBudget = Field(default_factory=RenderBudget)
    in_flight: int = Field(16, ge=1, description="requests in flight to one server")
    kubernetes: KubernetesHints = Field(default_factory=KubernetesHints)

    def render_settings(self, base: RenderSettings | None = None) -> RenderSettings:
        """``base`` limited to this profile's pixel budget."""
        base = base or RenderSettings()
        return base.model_copy(
            update={
                "longest_side_px": min(base.longest_side_px, self.render.longest_side_px),
                "max_pixels": min(base.max_pixels, self.render.max_pixels),
            }
        )


def profiles_dir() -> Path:
    return Path(os.environ.get("FOLIO_PROFILES_DIR", DEFAULT_PROFILES_DIR))


@lru_cache(maxsize=8)
def _load_dir(directory: str) -> dict[str, HardwareProfile]:
    found: dict[str, HardwareProfile] = {}
    for path in sorted(Path(directory).glob("*.yaml")):
        try:
            data = yaml.safe_load(path.read_text())
            profile = HardwareProfile.model_validate(data)
        except (yaml.YAMLError, ValidationError) as exc:
            raise ConfigError(f"hardware profile {path}: {exc}") from exc
        if profile.name != path.stem:
            raise ConfigError(f"hardware profile {path}: name {profile.name!r} != file name")
        found[profile.name] = profile
    return found


def load_profiles(directory: Path | None = None) -> dict[str, HardwareProfile]:
    """Every profile in ``directory`` (default: infra/profiles), by name."""
    directory = directory or profiles_dir()
    profiles = _load_dir(str(directory))
    if not profiles:
        raise ConfigError(f"no hardware profiles in {directory}")
    return dict(profiles)


def load_profile(name: str, directory: Path | None = None) -> HardwareProfile:
    """The profile called ``name``; ``auto`` detects the GPU (see :func:`detect_profile`)."""
    if name == "auto":
        return detect_profile(directory=directory)
    profiles = load_profiles(directory)
    if name not in profiles:
        raise ConfigError(f"unknown hardware profile {name!r}; known: {', '.join(profiles)}")
    return profiles[name]


class GpuInfo(BaseModel):
    name: str
    memory_gib: float
    count: int


def detect_gpu() -> GpuInfo | None:
    """The first GPU as NVML sees it, or None (no nvidia-ml-py, no driver, no GPU)."""
    try:
        import pynvml  # nvidia-ml-py; optional
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError:  # library not found, driver not loaded, ...
        return None
    try:
        count = int(pynvml.nvmlDeviceGetCount())
        if count == 0:
            return None
        handle = pynvml.nvmlDeviceGetHandleByIndex(0)
        name = pynvml.nvmlDeviceGetName(handle)
        if isinstance(name, bytes):
            name = name.decode()
        total = int(pynvml.nvmlDeviceGetMemoryInfo(handle).total)
        return GpuInfo(name=str(name), memory_gib=total / 2**30, count=count)
    except pynvml.NVMLError as exc:
        log.warning("NVML could not describe the GPU: %s", exc)
        return None
    finally:
        with contextlib.suppress(pynvml.NVMLError):
            pynvml.nvmlShutdown()


def visible_gpus() -> list[str]:
    """The GPUs this process may use, named as CUDA_VISIBLE_DEVICES names them: that
    variable's entries when it is set, else every GPU NVML counts (NVML ignores it)."""
    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    if env is not None and env.strip():
        return [d.strip() for d in env.split(",") if d.strip()]
    gpu = detect_gpu()
    return [str(i) for i in range(gpu.count)] if gpu else []


def engine_gpu_groups(profile: HardwareProfile, engines: int, gpus: Sequence[str]
                      ) -> list[str | None]:
    """CUDA_VISIBLE_DEVICES for each server of a host: ``engines`` servers of the
    profile's ``gpu_count`` GPUs each; 0 means as many as the visible GPUs hold. ``None``
    leaves the variable as it is: one server on a host with no more GPUs than it needs
    runs exactly as before, and CPU profiles (tests, CPU serving) pin nothing.

    Raises:
        ConfigError: more servers asked for than the visible GPUs can hold.
    """
    per = max(1, profile.gpu_count)
    if profile.device != "cuda":
        return [None] * max(1, engines)
    fit = len(gpus) // per
    count = fit if engines == 0 else engines
    if count <= 1:
        return [None]
    if count > fit:
        raise ConfigError(f"{count} servers of {per} GPU(s) need {count * per} GPUs; this host "
                          f"shows {len(gpus)} ({', '.join(gpus) or 'none'})")
    return [",".join(gpus[i * per:(i + 1) * per]) for i in range(count)]


def match_profile(gpu: GpuInfo | None, profiles: dict[str, HardwareProfile]) -> HardwareProfile:
    """The profile for ``gpu``: name and memory match first; an unknown card gets the
    largest profile that does not ask for more memory than it has; no GPU gets cpu."""
    if gpu is None:
        return _cpu(profiles)
    for profile in profiles.values():
        m = profile.match
        if m and re.search(m.name_regex, gpu.name, re.IGNORECASE) and (
            m.min_memory_gib <= gpu.memory_gib <= m.max_memory_gib
        ):
            return profile
    fitting = [
        p for p in profiles.values() if p.device == "cuda" and p.memory_gib <= gpu.memory_gib * 1.01
    ]
    if fitting:
        best = max(fitting, key=lambda p: p.memory_gib)
        log.warning("no profile names GPU %r; using %s (by memory)", gpu.name, best.name)
        return best
    log.warning("GPU %r (%.1f GiB) is smaller than every profile; using cpu", gpu.name, gpu.memory_gib)
    return _cpu(profiles)


def _cpu(profiles: dict[str, HardwareProfile]) -> HardwareProfile:
    if "cpu" not in profiles:
        raise ConfigError("no GPU found and no 'cpu' hardware profile")
    return profiles["cpu"]


def detect_profile(directory: Path | None = None) -> HardwareProfile:
    """``auto``: the profile for this machine's first GPU (cpu without one)."""
    return match_profile(detect_gpu(), load_profiles(directory))


def vllm_args(
    profile: HardwareProfile,
    *,
    mm_processor_kwargs: dict[str, Any] | None = None,
    max_model_len: int | None = None,
) -> list[str]:
    """``vllm serve`` options for ``profile`` (everything after the model argument).

    ``mm_processor_kwargs`` (usually the preset's pixel cap) is used when the profile
    does not set its own; it also keeps vLLM's start-up memory profiling from reserving
    encoder memory for 16-megapixel images the pipeline never sends.
    """
    v = profile.vllm
    args = [
        "--gpu-memory-utilization", f"{v.gpu_memory_utilization:g}",
        "--max-model-len", str(max_model_len or v.max_model_len),
        "--max-num-seqs", str(v.max_num_seqs),
    ]
    if v.max_num_batched_tokens:
        args += ["--max-num-batched-tokens", str(v.max_num_batched_tokens)]
    if v.block_size:
        args += ["--block-size", str(v.block_size)]
    if v.kv_cache_dtype != "auto":
        args += ["--kv-cache-dtype", v.kv_cache_dtype]
    if v.dtype != "auto":
        args += ["--dtype", v.dtype]
    if v.tensor_parallel_size > 1:
        args += ["--tensor-parallel-size", str(v.tensor_parallel_size)]
    if v.data_parallel_size > 1:
        args += ["--data-parallel-size", str(v.data_parallel_size)]
    if v.enforce_eager:
        args.append("--enforce-eager")
    args += ["--limit-mm-per-prompt", json.dumps(v.limit_mm_per_prompt, separators=(",", ":"))]
    kwargs = v.mm_processor_kwargs if v.mm_processor_kwargs is not None else mm_processor_kwargs
    if kwargs:
        args += ["--mm-processor-kwargs", json.dumps(kwargs, separators=(",", ":"), sort_keys=True)]
    return args + list(v.extra_args)


def vllm_command(
    profile: HardwareProfile,
    model: str,
    *,
    host: str = "127.0.0.1",
    port: int | str = 8000,
    served_model_name: str | None = None,
    load_format: str | None = None,
    mm_processor_kwargs: dict[str, Any] | None = None,
    max_model_len: int | None = None,
    executable: tuple[str, ...] = ("vllm",),
    extra: tuple[str, ...] = (),
) -> list[str]:
    """The full argument list: ``vllm serve MODEL --host ... --port ... <profile args>``
    (``port`` may be the ``"{port}"`` placeholder a supervisor fills in)."""
    if profile.device == "cpu":
        log.info("profile %s runs vLLM's CPU backend: slow, for checks only", profile.name)
    cmd = [*executable, "serve", model, "--host", host, "--port", str(port)]
    if served_model_name:
        cmd += ["--served-model-name", served_model_name]
    if load_format:
        cmd += ["--load-format", load_format]
    cmd += vllm_args(profile, mm_processor_kwargs=mm_processor_kwargs, max_model_len=max_model_len)
    return cmd + list(extra)
