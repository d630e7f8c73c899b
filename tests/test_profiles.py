"""Hardware profiles: every YAML loads, vLLM arguments are well formed, auto detection."""

from __future__ import annotations

import json
import sys

import pytest

from folio.errors import ConfigError
from folio.gpu import profiles as prof
from folio.gpu.profiles import (
    GpuInfo,
    load_profile,
    load_profiles,
    match_profile,
    vllm_args,
    vllm_command,
)

EXPECTED = {"a100-40gb", "a100-80gb", "h100-80gb", "h200", "l40s-48gb", "rtx-4090-24gb", "l4-24gb", "cpu"}


def test_every_profile_loads() -> None:
    profiles = load_profiles()
    assert set(profiles) == EXPECTED
    for p in profiles.values():
        assert 0 < p.vllm.gpu_memory_utilization <= 0.95
        assert p.in_flight <= p.vllm.max_num_seqs  # more in flight than batched only queues
        if p.device == "cuda":
            assert p.env.get("PYTORCH_CUDA_ALLOC_CONF") == "expandable_segments:True"
            assert p.kubernetes.node_selector and p.match is not None
        assert not {"CUDA_MALLOC_ASYNC", "PYTORCH_NO_CUDA_MEMORY_CACHING"} & set(p.env)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_vllm_args_are_well_formed(name: str) -> None:
    profile = load_profile(name)
    args = vllm_args(profile, mm_processor_kwargs={"size": {"longest_edge": 100, "shortest_edge": 10}})
    flags = [a for a in args if a.startswith("--")]
    assert len(flags) == len(set(flags)), "no flag twice"
    assert args[args.index("--max-model-len") + 1] == str(profile.vllm.max_model_len)
    assert json.loads(args[args.index("--limit-mm-per-prompt") + 1]) == {"image": 1, "video": 0}
    assert json.loads(args[args.index("--mm-processor-kwargs") + 1])["size"]["longest_edge"] == 100
    for i, a in enumerate(args):  # every valued flag has a value that is not a flag
        if a.startswith("--") and a not in ("--enforce-eager",):
            assert not args[i + 1].startswith("--"), a
    cmd = vllm_command(profile, "/m", port=8123, load_format="dummy", served_model_name="ocr")
    assert cmd[:3] == ["vllm", "serve", "/m"] and "--load-format" in cmd and cmd[cmd.index("--port") + 1] == "8123"


def test_auto_detection_matches_by_name_and_memory() -> None:
    ps = load_profiles()
    assert match_profile(GpuInfo(name="NVIDIA H100 80GB HBM3", memory_gib=79.6, count=1), ps).name == "h100-80gb"
    assert match_profile(GpuInfo(name="NVIDIA A100-SXM4-40GB", memory_gib=39.4, count=8), ps).name == "a100-40gb"
    assert match_profile(GpuInfo(name="NVIDIA A100 80GB PCIe", memory_gib=79.2, count=1), ps).name == "a100-80gb"
    assert match_profile(GpuInfo(name="NVIDIA L4", memory_gib=22.5, count=1), ps).name == "l4-24gb"
    assert match_profile(GpuInfo(name="NVIDIA L40S", memory_gib=45.0, count=1), ps).name == "l40s-48gb"
    assert match_profile(GpuInfo(name="NVIDIA H200", memory_gib=140.4, count=1), ps).name == "h200"
    # unknown card: the largest profile it has memory for
    assert match_profile(GpuInfo(name="NVIDIA RTX 6000 Ada", memory_gib=47.5, count=1), ps).name == "l40s-48gb"
    assert match_profile(GpuInfo(name="Tiny", memory_gib=8, count=1), ps).name == "cpu"
    assert match_profile(None, ps).name == "cpu"


def test_auto_falls_back_to_cpu_without_nvml(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import fails
    assert prof.detect_gpu() is None
    assert load_profile("auto").name == "cpu"


def test_bad_profiles_are_config_errors(tmp_path: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    d = tmp_path  # type: ignore[assignment]
    (d / "x.yaml").write_text("name: x\nmemory_gib: 10\nvllm: {gpu_memory_utilizaton: 0.9}\n")  # type: ignore[operator]
    with pytest.raises(ConfigError, match="gpu_memory_utilizaton"):
        load_profiles(d)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="unknown hardware profile"):
        load_profile("b200")


def test_profile_render_budget_caps_settings() -> None:
    from folio.settings.config import RenderSettings

    small = load_profile("rtx-4090-24gb").render_settings(RenderSettings(longest_side_px=3000))
    assert small.longest_side_px == 1600 and small.max_pixels == 2097152
