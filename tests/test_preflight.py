"""Preflight arithmetic on known configs: fits, does not fit, and the advice."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from folio.errors import ConfigError
from folio.gpu.preflight import (
    GIB,
    QWEN3_VL_8B_CONFIG,
    ModelShape,
    load_model_shape,
    preflight,
    require_fit,
)
from folio.gpu.profiles import HardwareProfile, load_profiles

LLAMA3_8B = {"model_type": "llama", "hidden_size": 4096, "num_hidden_layers": 32,
             "num_attention_heads": 32, "num_key_value_heads": 8, "intermediate_size": 14336,
             "vocab_size": 128256, "tie_word_embeddings": False, "torch_dtype": "bfloat16"}
QWEN25_VL_7B = {"model_type": "qwen2_5_vl", "hidden_size": 3584, "num_hidden_layers": 28,
                "num_attention_heads": 28, "num_key_value_heads": 4, "intermediate_size": 18944,
                "vocab_size": 152064, "tie_word_embeddings": False, "torch_dtype": "bfloat16",
                "vision_config": {"depth": 32, "hidden_size": 1280, "intermediate_size": 3420,
                                  "hidden_act": "silu", "out_hidden_size": 3584, "patch_size": 14,
                                  "spatial_merge_size": 2}}


def card24(max_model_len: int, gmu: float = 0.9) -> HardwareProfile:
    base = load_profiles()["rtx-4090-24gb"]
    return base.model_copy(update={"vllm": base.vllm.model_copy(
        update={"max_model_len": max_model_len, "gpu_memory_utilization": gmu})})


def test_parameter_counts_match_published_sizes() -> None:
    assert ModelShape.from_config(LLAMA3_8B).params / 1e9 == pytest.approx(8.03, abs=0.02)
    assert ModelShape.from_config(QWEN25_VL_7B).params / 1e9 == pytest.approx(8.29, abs=0.05)
    assert ModelShape.from_config(QWEN3_VL_8B_CONFIG).params / 1e9 == pytest.approx(8.77, abs=0.05)
    # KV per token: 2 (K,V) x layers x kv heads x head dim x 2 bytes
    assert ModelShape.from_config(LLAMA3_8B).kv_bytes_per_token() == 2 * 32 * 8 * 128 * 2
    assert ModelShape.from_config(LLAMA3_8B).kv_bytes_per_token("fp8") == 2 * 32 * 8 * 128


def test_8b_bf16_does_not_fit_24gb_at_32k_but_fits_shorter() -> None:
    shape = ModelShape.from_config(QWEN3_VL_8B_CONFIG, name="qwen3-vl-8b")
    big = preflight(shape, card24(32768), others=load_profiles())
    assert not big.fits
    assert big.weights_gib == pytest.approx(shape.params * 2 / GIB, rel=0.01)
    assert big.kv_gib == pytest.approx(32768 * 144 / 1024 / 1024, rel=0.01)  # 4.5 GiB
    assert big.total_gib > big.budget_gib == pytest.approx(0.9 * 24, rel=0.01)
    assert 8192 <= big.max_model_len_that_fits < 32768
    # the answer has the numbers and what to use instead
    assert "16.3" in big.advice and "21.6" in big.advice and "--max-model-len" in big.advice
    assert any("h100" in a or "a100" in a or "l40s" in a for a in big.alternatives)
    with pytest.raises(ConfigError, match="preflight"):
        require_fit(big)
    small = preflight(shape, card24(big.max_model_len_that_fits))
    assert small.fits and small.headroom_gib >= 0
    assert require_fit(small) is small


def test_llama_8b_text_only_and_fp8_kv_alternative() -> None:
    shape = ModelShape.from_config(LLAMA3_8B, name="llama-3-8b")
    r = preflight(shape, card24(65536))
    assert not r.fits and r.kv_fp8_max_model_len and r.kv_fp8_max_model_len > r.max_model_len_that_fits


def test_fp8_checkpoint_halves_decoder_weights() -> None:
    fp8 = dict(QWEN25_VL_7B, quantization_config={"quant_method": "compressed-tensors", "config_groups": {
        "group_0": {"weights": {"num_bits": 8, "type": "float"}}}})
    bf16, q = ModelShape.from_config(QWEN25_VL_7B), ModelShape.from_config(fp8)
    assert q.quant_bits == 8 and 0.55 * bf16.weight_bytes < q.weight_bytes < 0.65 * bf16.weight_bytes
    assert q.params == bf16.params


def test_max_model_len_shorter_than_a_page_is_refused() -> None:
    shape = ModelShape.from_config(QWEN3_VL_8B_CONFIG)
    r = preflight(shape, load_profiles()["h100-80gb"], max_model_len=2048, max_tokens=4096)
    assert not r.fits and "shorter than one page needs" in r.advice


def test_load_model_shape_reads_config_and_safetensors_index(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps(QWEN3_VL_8B_CONFIG))
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps({"metadata": {"total_size": 17_000_000_000}}))
    shape = load_model_shape(tmp_path)
    assert shape.weight_bytes == 17_000_000_000
    r = preflight(shape, load_profiles()["h100-80gb"])
    assert r.fits and r.weights_source == "safetensors"
    with pytest.raises(ConfigError, match="no config.json"):
        load_model_shape(tmp_path / "missing")


def test_every_profile_fits_the_reference_models() -> None:
    for name, profile in load_profiles().items():
        for config in (QWEN3_VL_8B_CONFIG, QWEN25_VL_7B):
            assert preflight(ModelShape.from_config(config), profile).fits, name
