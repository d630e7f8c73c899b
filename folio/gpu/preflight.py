"""Will the model fit? Weights + KV cache for one max-length request + activations and
CUDA graphs, against ``gpu_memory_utilization`` x card memory, from config.json alone.

vLLM finds out after loading the weights and profiling (minutes), and then fails with a
message about KV blocks; this answers in milliseconds, with the numbers and what to use
instead (a shorter max_model_len, an FP8 KV cache, another profile). The estimate is
deliberately a little pessimistic about activations; the weights and KV cache terms are
exact for the architectures covered (Qwen2-VL, Qwen2.5-VL, Qwen3-VL, and plain decoders).

Example:
    >>> shape = ModelShape.from_config(QWEN3_VL_8B_CONFIG)
    >>> round(shape.params / 1e9, 1), shape.kv_bytes_per_token() // 1024
    (8.8, 144)
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from folio.errors import ConfigError
from folio.gpu.profiles import HardwareProfile

GIB = 2**30
_DTYPE_BYTES = {"float32": 4, "float": 4, "bfloat16": 2, "float16": 2, "half": 2, "fp8": 1,
                "float8_e4m3fn": 1, "int8": 1}
#: CUDA context, cuBLAS workspaces, NCCL, the sampler's buffers: outside the torch heap
RUNTIME_OVERHEAD_GIB = 0.75
#: granularity of the max_model_len advice
LEN_STEP = 1024

#: architecture of a Qwen3-VL-8B class model (Chandra's base), as in its config.json
QWEN3_VL_8B_CONFIG: dict[str, Any] = {
    "model_type": "qwen3_vl", "tie_word_embeddings": False, "dtype": "bfloat16",
    "text_config": {"hidden_size": 4096, "num_hidden_layers": 36, "num_attention_heads": 32,
                    "num_key_value_heads": 8, "head_dim": 128, "intermediate_size": 12288,
                    "vocab_size": 151936},
    "vision_config": {"depth": 27, "hidden_size": 1152, "intermediate_size": 4304,
                      "hidden_act": "gelu_pytorch_tanh", "out_hidden_size": 4096,
                      "patch_size": 16, "spatial_merge_size": 2,
                      "deepstack_visual_indexes": [8, 16, 24]},
}


class ModelShape(BaseModel):
    """What memory depends on, read from a Hugging Face config.json."""

    name: str = ""
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    vocab: int
    tied_embeddings: bool = False
    dtype_bytes: int = 2
    quant_bits: int | None = Field(None, description="bits of quantized linear weights")
    vision_depth: int = 0
    vision_hidden: int = 0
    vision_intermediate: int = 0
    vision_gated: bool = False
    vision_out: int = 0
    vision_mergers: int = 1
    patch_size: int = 14
    merge_size: int = 2
    weight_bytes_known: int | None = Field(None, description="from the safetensors index")
    max_positions: int | None = Field(None, description="max_position_embeddings: caps any advice")

    @classmethod
    def from_config(
        cls, config: dict[str, Any], *, name: str = "", safetensors_bytes: int | None = None
    ) -> ModelShape:
        text = config.get("text_config") or config
        vision = config.get("vision_config") or {}
        heads = int(text["num_attention_heads"])
        hidden = int(text["hidden_size"])
        dtype = str(text.get("dtype") or text.get("torch_dtype") or config.get("dtype")
                    or config.get("torch_dtype") or "bfloat16")
        quant = config.get("quantization_config") or text.get("quantization_config")
        v_hidden = int(vision.get("hidden_size") or vision.get("embed_dim") or 0)
        v_inter = int(vision.get("intermediate_size") or v_hidden * int(vision.get("mlp_ratio", 4)))
        return cls(
            name=name,
            layers=int(text["num_hidden_layers"]),
            hidden=hidden,
            heads=heads,
            kv_heads=int(text.get("num_key_value_heads") or heads),
            head_dim=int(text.get("head_dim") or hidden // heads),
            intermediate=int(text["intermediate_size"]),
            vocab=int(text.get("vocab_size") or config.get("vocab_size") or 0),
            tied_embeddings=bool(config.get("tie_word_embeddings", text.get("tie_word_embeddings", False))),
            dtype_bytes=_DTYPE_BYTES.get(dtype.replace("torch.", ""), 2),
            quant_bits=_quant_bits(quant),
            vision_depth=int(vision.get("depth") or vision.get("num_hidden_layers") or 0),
            vision_hidden=v_hidden,
            vision_intermediate=v_inter if v_hidden else 0,
            vision_gated=str(vision.get("hidden_act", "")) == "silu",
            vision_out=int(vision.get("out_hidden_size") or hidden),
            vision_mergers=1 + len(vision.get("deepstack_visual_indexes") or []),
            patch_size=int(vision.get("patch_size") or 14),
            merge_size=int(vision.get("spatial_merge_size") or 2),
            weight_bytes_known=safetensors_bytes,
            max_positions=text.get("max_position_embeddings") or config.get("max_position_embeddings"),
        )

    # --- parameters --------------------------------------------------------------------
    @property
    def embedding_params(self) -> int:
        return self.vocab * self.hidden * (1 if self.tied_embeddings else 2)

    @property
    def decoder_params(self) -> int:
        q_o = 2 * self.hidden * self.heads * self.head_dim
        k_v = 2 * self.hidden * self.kv_heads * self.head_dim
        mlp = 3 * self.hidden * self.intermediate
        return self.layers * (q_o + k_v + mlp)

    @property
    def vision_params(self) -> int:
        if not self.vision_depth:
            return 0
        h = self.vision_hidden
        mlp = (3 if self.vision_gated else 2) * h * self.vision_intermediate
        merged = h * self.merge_size**2
        merger = merged * merged + merged * self.vision_out
        return self.vision_depth * (4 * h * h + mlp) + self.vision_mergers * merger

    @property
    def params(self) -> int:
        return self.embedding_params + self.decoder_params + self.vision_params

    @property
    def weight_bytes(self) -> int:
        """Exact when the safetensors index says; else decoder linears at the quantized
        width, embeddings and the vision tower at the model dtype (as FP8 checkpoints
        of these models are made)."""
        if self.weight_bytes_known:
            return self.weight_bytes_known
        linear = self.decoder_params * (self.quant_bits / 8 if self.quant_bits else self.dtype_bytes)
        rest = (self.embedding_params + self.vision_params) * self.dtype_bytes
        return int(linear + rest)

    def kv_bytes_per_token(self, kv_cache_dtype: str = "auto") -> int:
        per = 1 if kv_cache_dtype.startswith("fp8") else self.dtype_bytes
        return 2 * self.layers * self.kv_heads * self.head_dim * per

    def image_tokens(self, pixels: int) -> int:
        return math.ceil(pixels / (self.patch_size * self.merge_size) ** 2)


def _quant_bits(quant: dict[str, Any] | None) -> int | None:
    if not quant:
        return None
    method = str(quant.get("quant_method", "")).lower()
    if method in ("fp8", "fbgemm_fp8", "modelopt"):
        return 8
    if "bits" in quant:
        return int(quant["bits"])
    for group in (quant.get("config_groups") or {}).values():  # compressed-tensors
        bits = (group.get("weights") or {}).get("num_bits")
        if bits:
            return int(bits)
    return 8 if "8" in method else None


def load_model_shape(model: str | Path) -> ModelShape:
    """Shape of a local model folder or a Hugging Face id already in the local cache.

    Reads config.json and, when present, model.safetensors.index.json (total_size is the
    exact weight size) or the size of a single model.safetensors. Never downloads.
    """
    folder = _model_folder(str(model))
    config = json.loads((folder / "config.json").read_text())
    known: int | None = None
    index = folder / "model.safetensors.index.json"
    if index.is_file():
        known = int(json.loads(index.read_text()).get("metadata", {}).get("total_size") or 0) or None
    elif (folder / "model.safetensors").is_file():
        known = (folder / "model.safetensors").stat().st_size
    return ModelShape.from_config(config, name=str(model), safetensors_bytes=known)


def _model_folder(model: str) -> Path:
    path = Path(model).expanduser()
    if (path / "config.json").is_file():
        return path
    hub = Path(os.environ.get("HF_HUB_CACHE") or Path(
        os.environ.get("HF_HOME", Path.home() / ".cache" / "huggingface")) / "hub")
    snapshots = hub / f"models--{model.replace('/', '--')}" / "snapshots"
    for snap in sorted(snapshots.glob("*"), key=lambda p: p.stat().st_mtime, reverse=True):
        if (snap / "config.json").is_file():
            return snap
    raise ConfigError(
        f"preflight: no config.json for {model!r} (not a folder, not in the Hugging Face "
        "cache); download the model first or pass its local path"
    )


class PreflightResult(BaseModel):
    """The answer, with every number that went into it (GiB unless named otherwise)."""

    fits: bool
    model: str
    profile: str
    card_gib: float
    gpus: int
    gpu_memory_utilization: float
    budget_gib: float
    params_billion: float
    weights_gib: float
    weights_source: str
    kv_cache_dtype: str
    kv_per_token_kib: float
    max_model_len: int
    kv_gib: float
    activations_gib: float
    cuda_graphs_gib: float
    runtime_gib: float
    total_gib: float
    headroom_gib: float
    max_model_len_that_fits: int
    page_tokens: int = Field(description="image + prompt + output tokens of one page")
    kv_fp8_max_model_len: int | None = None
    alternatives: list[str] = Field(default_factory=list)
    advice: str


def _round(x: float) -> float:
    return round(x, 2)


def preflight(
    shape: ModelShape,
    profile: HardwareProfile,
    *,
    max_model_len: int | None = None,
    page_tokens: int | None = None,
    max_tokens: int = 4096,
    others: dict[str, HardwareProfile] | None = None,
) -> PreflightResult:
    """Check ``shape`` against ``profile``; never raises (see :func:`require_fit`).

    ``page_tokens`` is what one page needs (default: image tokens at the profile's pixel
    budget + 500 prompt tokens + ``max_tokens``); the advice never suggests a context
    shorter than that. ``others`` are profiles to suggest instead when it does not fit.
    """
    v = profile.vllm
    max_len = max_model_len or v.max_model_len
    shards = max(1, v.tensor_parallel_size)  # weights and KV heads split over TP ranks
    card = profile.memory_gib
    budget = v.gpu_memory_utilization * card
    weights = shape.weight_bytes / shards / GIB
    kv_tok = shape.kv_bytes_per_token(v.kv_cache_dtype) / shards
    kv = max_len * kv_tok / GIB
    acts = _activations(shape, profile) / GIB
    graphs = 0.0 if v.enforce_eager else min(1.5, 0.4 + 0.004 * v.max_num_seqs)
    runtime = RUNTIME_OVERHEAD_GIB
    fixed = weights + acts + graphs + runtime
    total = fixed + kv
    need = page_tokens or (shape.image_tokens(profile.render.max_pixels) + 500 + max_tokens)
    cap = shape.max_positions or 10**9
    fits_len = min(cap, _fitting_len(budget - fixed, kv_tok))
    fp8_len = None
    if not v.kv_cache_dtype.startswith("fp8"):
        fp8_len = min(cap, _fitting_len(budget - fixed, shape.kv_bytes_per_token("fp8") / shards))
    fits = total <= budget and max_len >= need
    result = PreflightResult(
        fits=fits, model=shape.name, profile=profile.name, card_gib=_round(card),
        gpus=shards, gpu_memory_utilization=v.gpu_memory_utilization, budget_gib=_round(budget),
        params_billion=round(shape.params / 1e9, 2), weights_gib=_round(weights),
        weights_source="safetensors" if shape.weight_bytes_known else "estimated from config.json",
        kv_cache_dtype=v.kv_cache_dtype, kv_per_token_kib=round(kv_tok / 1024, 1),
        max_model_len=max_len, kv_gib=_round(kv), activations_gib=_round(acts),
        cuda_graphs_gib=_round(graphs), runtime_gib=runtime, total_gib=_round(total),
        headroom_gib=_round(budget - total), max_model_len_that_fits=fits_len, page_tokens=need,
        kv_fp8_max_model_len=fp8_len, advice="",
    )
    result.alternatives = _alternatives(shape, profile, result, others or {}, max_tokens)
    result.advice = _advice(result)
    return result


def _fitting_len(free_bytes_gib: float, kv_per_token: float) -> int:
    if free_bytes_gib <= 0 or kv_per_token <= 0:
        return 0
    return int(free_bytes_gib * GIB / kv_per_token) // LEN_STEP * LEN_STEP


def _activations(shape: ModelShape, profile: HardwareProfile) -> float:
    """Peak forward-pass memory at vLLM's profiling run (bytes): the MLP of one
    max_num_batched_tokens chunk, fp32 logits for every sequence, the vision tower on
    the largest image, and the encoder cache of that image's embeddings."""
    v = profile.vllm
    tokens = v.max_num_batched_tokens or max(8192, v.max_model_len)
    lm = tokens * (2 * shape.intermediate + 4 * shape.hidden) * 2 // max(1, v.tensor_parallel_size)
    logits = v.max_num_seqs * shape.vocab * 4
    patches = profile.render.max_pixels // max(1, shape.patch_size**2)
    vision = patches * ((3 if shape.vision_gated else 2) * shape.vision_intermediate
                        + 4 * shape.vision_hidden) * 2 if shape.vision_depth else 0
    encoder_cache = max(tokens, shape.image_tokens(profile.render.max_pixels)) * shape.vision_out * 2
    return float(lm + logits + vision + encoder_cache)


def _alternatives(
    shape: ModelShape,
    profile: HardwareProfile,
    result: PreflightResult,
    others: dict[str, HardwareProfile],
    max_tokens: int,
) -> list[str]:
    alts: list[str] = []
    need = result.page_tokens
    if result.max_model_len_that_fits >= need and result.max_model_len_that_fits < result.max_model_len:
        alts.append(f"--max-model-len {result.max_model_len_that_fits} on {profile.name}")
    if result.kv_fp8_max_model_len and result.kv_fp8_max_model_len >= max(need, result.max_model_len):
        alts.append(f"kv_cache_dtype fp8 on {profile.name} (fits up to {result.kv_fp8_max_model_len})")
    bigger = 0
    for name, other in sorted(others.items(), key=lambda kv: kv[1].memory_gib):
        if name == profile.name or other.device != "cuda" or bigger >= 2:
            continue
        if preflight(shape, other, max_tokens=max_tokens).fits:  # the two smallest that fit
            bigger += 1
            alts.append(f"profile {name} ({other.memory_gib:g} GiB, max_model_len {other.vllm.max_model_len})")
    if not alts and shape.quant_bits is None:
        alts.append("an FP8 checkpoint of the model (about half the weight memory)")
    return alts


def _advice(r: PreflightResult) -> str:
    numbers = (
        f"weights {r.weights_gib} GiB + KV {r.kv_gib} GiB ({r.max_model_len} tokens x "
        f"{r.kv_per_token_kib} KiB) + activations {r.activations_gib} + CUDA graphs "
        f"{r.cuda_graphs_gib} + runtime {r.runtime_gib} = {r.total_gib} GiB vs "
        f"{r.gpu_memory_utilization:g} x {r.card_gib} GiB = {r.budget_gib} GiB"
    )
    if r.fits:
        return f"fits on {r.profile}: {numbers} (headroom {r.headroom_gib} GiB)"
    if r.max_model_len < r.page_tokens and r.total_gib <= r.budget_gib:
        why = f"max_model_len {r.max_model_len} is shorter than one page needs ({r.page_tokens})"
    else:
        why = f"does not fit on {r.profile}: {numbers}"
    instead = "; ".join(r.alternatives) if r.alternatives else "nothing smaller fits"
    return f"{r.model or 'model'} {why}. Use instead: {instead}."


def require_fit(result: PreflightResult) -> PreflightResult:
    """``result`` if it fits; otherwise ConfigError with the advice (fail in seconds)."""
    if not result.fits:
        raise ConfigError(f"preflight: {result.advice}", code="preflight")
    return result
