"""bench/engine_limit.engine_kwargs: the offline engine is built from the very options
folio gives ``vllm serve``, so the offline/served comparison holds only if every option
comes back as the keyword argument ``LLM(...)`` takes, with its type."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from bench.engine_limit import (
    DEFAULT_MODEL,
    choose_documents,
    config_for,
    engine_kwargs,
    user_options,
)
from folio.errors import ConfigError
from folio.gpu.profiles import load_profile, vllm_args
from folio.settings.presets import get_preset


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


def _variant(tmp_path: Path, folio_set: str, server_args: str = "") -> argparse.Namespace:
    return argparse.Namespace(step="pipeline", preset="olmocr2", tag="x0", model=DEFAULT_MODEL,
                              server_args=server_args, folio_set=folio_set, work=str(tmp_path),
                              fake=True)


def test_a_pipeline_variant_sets_folio_settings_as_a_user_does(tmp_path: Path) -> None:
    """``--folio-set`` reaches the run as the user's ``--set`` would: the resolved
    configuration carries it, and a misspelt key is refused (not measured as the default)."""
    args = _variant(tmp_path, '["limits.ocr_extra_pages=0"]')
    assert user_options(args, "olmocr2")[-2:] == ["--set", "limits.ocr_extra_pages=0"]
    assert config_for(args, "olmocr2").limits.ocr_extra_pages == 0
    assert config_for(_variant(tmp_path, ""), "olmocr2").limits.ocr_extra_pages is None
    with pytest.raises(ConfigError, match="ocr_extra_page"):
        config_for(_variant(tmp_path, '["limits.ocr_extra_page=0"]'), "olmocr2")
    with pytest.raises(SystemExit, match="key=value"):
        user_options(_variant(tmp_path, '["limits"]'), "olmocr2")


def test_the_phases_take_the_engines_default_route_and_a_variant_another(
        tmp_path: Path) -> None:
    """No ``--route`` on the benchmark's command line: its pages go where a user's go with
    ``--engine vllm`` (every page to the model); ``route.mode=auto`` is the variant that keeps
    trusted text layers, for the default route's GPU pages/s side by side."""
    assert "--route" not in user_options(_variant(tmp_path, ""), "olmocr2")
    assert config_for(_variant(tmp_path, ""), "olmocr2").route.mode == "ocr"
    assert config_for(_variant(tmp_path, '["route.mode=auto"]'), "olmocr2").route.mode == "auto"


def test_a_served_variant_sets_the_clients_requests_in_flight_and_the_servers_sequences(
        tmp_path: Path) -> None:
    """The GPU-busy variant changes both ends as a user would: ``--set ocr.in_flight=384``
    for the requests kept in flight (the served client reads the same configuration) and
    ``--max-num-seqs 384`` after folio's own server options, where vLLM's last value wins."""
    config = config_for(_variant(tmp_path, '["ocr.in_flight=384"]', '["--max-num-seqs", "384"]'),
                        "olmocr2")
    assert config.ocr.in_flight == 384
    assert config.server.extra_args[-2:] == ["--max-num-seqs", "384"]
    default = config_for(_variant(tmp_path, ""), "olmocr2")
    assert default.ocr.in_flight != 384 and "384" not in default.server.extra_args


def test_the_pages_step_takes_documents_until_both_minimums_hold() -> None:
    """Few long documents would reach 500 pages with a handful: the issue's runs need
    >= 100 documents too, and no more than reach both."""
    docs = [{"path": f"c{i // 10:02d}-{i % 10}.pdf", "pages": 117 if i % 10 == 0 else 2}
            for i in range(300)]
    chosen = choose_documents(docs, 500, 100)
    assert len(chosen) == 100 and sum(d["pages"] for d in chosen) >= 500
    by_pages = choose_documents(docs, 2000, 10)
    assert sum(d["pages"] for d in by_pages) >= 2000
    assert sum(d["pages"] for d in by_pages[:-1]) < 2000  # no more than reach it


def test_a_server_variant_that_the_profile_already_gives_is_refused(tmp_path: Path) -> None:
    """On an H100 the profile sets 16384 tokens a step, so ``mnbt16k`` there is the
    default under another name (a device session measured it so once): refused before
    its server starts; a value the profile does not set is a variant."""
    from bench.engine_limit import server_command
    from bench.engine_limit_variants import refuse_a_variant_that_changes_nothing, server_options

    assert server_options(["vllm", "serve", "m", "--a", "1", "--flag", "--a", "2"]) == {
        "--a": "2", "--flag": ""}
    on_h100 = '["ocr.profile=h100-80gb"]'
    assert load_profile("h100-80gb").vllm.max_num_batched_tokens == 16384
    same = argparse.Namespace(**{**vars(_variant(tmp_path, on_h100,
                                                 '["--max-num-batched-tokens","16384"]')),
                                 "fake": False, "tag": "mnbt16k"})
    with pytest.raises(SystemExit, match="would measure the default"):
        refuse_a_variant_that_changes_nothing(same, server_command)
    other = argparse.Namespace(**{**vars(same),
                                  "server_args": '["--max-num-batched-tokens","32768"]'})
    refuse_a_variant_that_changes_nothing(other, server_command)  # a real variant: no refusal


def test_a_cpu_set_is_written_as_taskset_reads_it() -> None:
    from bench.engine_limit_variants import cpu_list

    assert cpu_list({0, 1, 2, 3, 4, 5, 8}) == "0-5,8"
    assert cpu_list({0, 2, 3}) == "0,2-3"
    assert cpu_list({7}) == "7"
