"""bench/engine_limit.engine_kwargs: the offline engine is built from the very options
folio gives ``vllm serve``, so the offline/served comparison holds only if every option
comes back as the keyword argument ``LLM(...)`` takes, with its type."""

from __future__ import annotations

import pytest

from bench.engine_limit import engine_kwargs
from folio.gpu.profiles import load_profile, vllm_args
from folio.presets import get_preset


@pytest.mark.parametrize("name", ["h200", "h100-80gb"])
def test_server_options_become_engine_arguments(name: str) -> None:
    profile = load_profile(name)
    argv = vllm_args(profile, mm_processor_kwargs=get_preset("chandra").mm_processor_kwargs())
    argv += ["--load-format", "dummy", "--no-enable-prefix-caching", "--mm-processor-cache-gb", "0",
             "--enforce-eager"]
    kwargs = engine_kwargs(argv)
    assert kwargs["max_num_seqs"] == profile.vllm.max_num_seqs
    assert kwargs["gpu_memory_utilization"] == pytest.approx(profile.vllm.gpu_memory_utilization)
    assert kwargs["max_model_len"] == profile.vllm.max_model_len
    assert kwargs["limit_mm_per_prompt"] == profile.vllm.limit_mm_per_prompt
    assert kwargs["mm_processor_kwargs"] == get_preset("chandra").mm_processor_kwargs()
    assert kwargs["load_format"] == "dummy"
    assert kwargs["enable_prefix_caching"] is False
    assert kwargs["mm_processor_cache_gb"] == 0
    assert kwargs["enforce_eager"] is True
    assert not any(k.startswith("no_") or "-" in k for k in kwargs)


def test_a_stray_value_is_refused() -> None:
    with pytest.raises(ValueError, match="not an option"):
        engine_kwargs(["serve", "--max-num-seqs", "8"])
