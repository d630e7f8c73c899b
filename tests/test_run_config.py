"""One configuration path: the CLI, a GPU pool's flow runs and the benchmarks resolve
their settings with folio.settings.run_config.resolve_config, in the same layers."""

from __future__ import annotations

import argparse
import hashlib
import json
import re
from typing import Any

import pytest

from folio import cli
from folio.errors import ConfigError
from folio.gpu.profiles import load_profile
from folio.settings.presets import get_preset
from folio.settings.run_config import resolve_config
from folio_prefect.deployments.work_pools import profile_env


def cli_config(*options: str) -> dict[str, object]:
    args = cli._parser().parse_args(["ingest", "x.pdf", "--out", "o", *options])
    return resolve_config(engine=args.engine, route=args.route, reprocess=args.reprocess,
                          settings=cli._settings(args)).public_dump()


def test_gpu_pool_environment_equals_the_cli_options(monkeypatch: pytest.MonkeyPatch) -> None:
    """A flow run on folio-h200 (the pool's environment plus the deployment's model) gets
    exactly what `folio ingest --engine vllm --profile h200 --model M --preset chandra` gets."""
    expected = cli_config("--engine", "vllm", "--profile", "h200", "--model", "/m",
                          "--preset", "chandra")
    env = {**profile_env(load_profile("h200")), "FOLIO_OCR__MODEL": "/m",
           "FOLIO_OCR__PRESET": "chandra"}
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    from_pool = resolve_config(engine="vllm", route="default").public_dump()  # the flow's
    assert from_pool == expected
    assert from_pool["ocr"]["in_flight"] == 256 and from_pool["ocr"]["profile"] == "h200"


def test_served_engine_takes_the_profile_and_preset_budgets() -> None:
    config = resolve_config(engine="vllm", route="auto",
                            settings={"ocr.profile": "rtx-4090-24gb", "ocr.preset": "olmocr2"})
    profile, preset = load_profile("rtx-4090-24gb"), get_preset("olmocr2")
    assert config.ocr.in_flight == profile.in_flight
    assert config.render.longest_side_px == min(preset.longest_side_px,
                                                profile.render.longest_side_px)
    assert config.render.max_pixels <= min(preset.max_pixels, profile.render.max_pixels)
    assert config.limits.render_workers >= 2


def test_layers_environment_then_request_then_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FOLIO_OCR__IN_FLIGHT", "40")  # over the profile's budget
    monkeypatch.setenv("FOLIO_RENDER__MAX_DPI", "150")
    monkeypatch.setenv("FOLIO_OCR__ENGINE", "tesseract")  # the request's engine wins
    config = resolve_config(engine="vllm", route="ocr", settings={"ocr.profile": "h200",
                                                                  "render.max_dpi": 120})
    assert config.ocr.engine == "vllm" and config.route.mode == "ocr"
    assert config.ocr.in_flight == 40 and config.render.max_dpi == 120


def test_cpu_engines_keep_the_plain_defaults() -> None:
    config = resolve_config(engine="tesseract", route="auto")
    assert config.ocr.in_flight == 16 and config.limits.render_workers == 2
    assert config.render.longest_side_px == 1600


def test_nested_settings_merge_into_defaults() -> None:
    config = resolve_config(engine="tesseract", route="auto",
                            settings={"render": {"max_dpi": 200}, "limits.page_concurrency": 3})
    assert config.render.max_dpi == 200 and config.render.min_dpi == 72
    assert config.limits.page_concurrency == 3


def test_one_vocabulary() -> None:
    from typing import get_args

    from folio.engines.registry import KNOWN_ENGINES
    from folio.settings.config import OcrSettings, RouteSettings
    from folio.settings.vocabulary import ENGINES, ROUTE_MODES

    commands = next(a for a in cli._parser()._actions if isinstance(a, argparse._SubParsersAction))
    ingest = next(a for a in commands.choices["ingest"]._actions if a.dest == "engine")
    assert ingest.choices is not None
    assert tuple(ingest.choices) == ENGINES == KNOWN_ENGINES
    assert get_args(OcrSettings.model_fields["engine"].annotation) == ENGINES
    assert get_args(RouteSettings.model_fields["mode"].annotation) == ROUTE_MODES


def test_one_request_model_for_flows_cli_and_triggers() -> None:
    """The request a trigger sends is the flows' request: IngestRequest(source=...) is
    one source, its parameters are exactly the document flow's, and a request needs a
    source."""
    import inspect

    from folio import trigger
    from folio.settings.run_config import IngestRequest
    from folio_prefect.flows.ingest import ingest_document

    assert trigger.IngestRequest is IngestRequest, "one model, not a second copy"
    one = IngestRequest(source="a.pdf", out="s3://b/out", engine="vllm", revision="v2")
    assert one.sources == [one.source] == ["a.pdf"]
    params = one.parameters()
    assert set(params) == set(inspect.signature(ingest_document.fn).parameters)
    assert params["source"].endswith("/a.pdf") and "revision" not in params
    assert one.key != one.model_copy(update={"revision": "v3"}).key, "a new revision is new"
    with pytest.raises(ValueError, match="needs a source"):
        IngestRequest()
    with pytest.raises(ValueError, match="not both"):
        IngestRequest.model_validate({"source": "a.pdf", "sources": ["b.pdf"]})
    with pytest.raises(ValueError, match="one source"):
        _ = IngestRequest(sources=["a.pdf", "b.pdf"]).source


@pytest.mark.parametrize("settings, says", [
    ({"ocr.in_flght": 4}, "unknown setting 'ocr.in_flght': ocr has no 'in_flght'"),
    ({"ocr": {"presett": "olmocr2"}}, "unknown setting 'ocr.presett'"),
    ({"no_group.x": 1}, "the configuration has no 'no_group'"),
])
def test_a_misspelt_setting_is_an_error_not_a_default(settings: dict[str, Any], says: str) -> None:
    """pydantic drops unknown keys: without the check, a typo ran with the default."""
    with pytest.raises(ConfigError, match=re.escape(says)):
        resolve_config(engine="tesseract", route="auto", settings=settings)
    # real ones pass, values of dict- and list-typed settings included
    config = resolve_config(engine="tesseract", route="auto", settings={
        "ocr": {"in_flight": 3}, "server.extra_args": ["--x"], "s3.endpoint_url": "http://s3"})
    assert config.ocr.in_flight == 3 and config.server.extra_args == ["--x"]


@pytest.mark.parametrize(("settings", "says"), [
    ({"render.max_dpi": "abc"}, "render.max_dpi"),
    ({"limits.page_concurrency": 0}, "limits.page_concurrency"),
    ({"s3.endpoint_url": "127.0.0.1:9000"}, "s3.endpoint_url"),
    ({"s3.endpoint_url": "not a url"}, "s3.endpoint_url"),
])
def test_a_bad_setting_value_is_a_one_line_config_error(settings: dict[str, Any],
                                                        says: str) -> None:
    """Bad input (exit 2 and one line), not an internal error with pydantic's dump."""
    with pytest.raises(ConfigError, match=re.escape(says)) as caught:
        resolve_config(engine="tesseract", route="auto", settings=settings)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize(("env", "says"), [
    ({"FOLIO_RENDER__MAX_DPI": "abc"}, "FOLIO_RENDER__MAX_DPI"),
    ({"FOLIO_RENDER__MAX_DPIX": "200"}, "FOLIO_RENDER__MAX_DPIX"),  # a typo: not ignored
    ({"FOLIO_RENDR__MAX_DPI": "200"}, "FOLIO_RENDR__MAX_DPI"),
])
def test_a_bad_setting_in_the_environment_is_a_config_error(
    monkeypatch: pytest.MonkeyPatch, env: dict[str, str], says: str
) -> None:
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    with pytest.raises(ConfigError, match=says) as caught:
        resolve_config(engine="tesseract", route="auto")
    assert "\n" not in str(caught.value)


def test_set_without_a_value_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="KEY=VALUE"):
        cli.parse_set(["render.max_dpi"])


def test_an_s3_endpoint_with_a_scheme_and_host_is_accepted() -> None:
    config = resolve_config(engine="tesseract", route="auto",
                            settings={"s3.endpoint_url": "http://127.0.0.1:9000"})
    assert config.s3.endpoint_url == "http://127.0.0.1:9000"


def test_a_vision_model_reads_every_page_unless_told(monkeypatch: pytest.MonkeyPatch) -> None:
    """route "default" (the CLI's, the flows' and the UI form's): ocr for vllm/openai,
    auto for a CPU engine; FOLIO_ROUTE__MODE or an explicit route wins."""
    assert resolve_config(engine="openai", route="default").route.mode == "ocr"
    assert resolve_config(engine="tesseract", route="default").route.mode == "auto"
    assert resolve_config(engine="openai", route="auto").route.mode == "auto"
    monkeypatch.setenv("FOLIO_ROUTE__MODE", "text-layer")
    assert resolve_config(engine="openai").route.mode == "text-layer"


def test_trigger_passes_the_s3_endpoint_to_the_worker_as_a_setting() -> None:
    """``folio trigger --s3-endpoint-url`` reaches the worker's run as ``s3.endpoint_url``
    (a worker without AWS_ENDPOINT_URL would otherwise try AWS); ``--set`` still wins."""
    args = cli._parser().parse_args([
        "trigger", "s3://docs/in/a.pdf", "--out", "s3://docs/out",
        "--s3-endpoint-url", "http://127.0.0.1:9000", "--s3-region", "eu-west-1",
        "--set", "s3.region=us-east-1"])
    settings = cli.trigger_settings(args)
    assert settings == {"s3.endpoint_url": "http://127.0.0.1:9000", "s3.region": "us-east-1"}
    config = resolve_config(engine="tesseract", route="auto", settings=settings)
    assert config.s3.endpoint_url == "http://127.0.0.1:9000"
    assert cli.trigger_settings(cli._parser().parse_args(["trigger", "a.pdf"])) == {}
def test_globs_travel_with_a_request_and_leave_old_keys_alone() -> None:
    from folio.settings.run_config import IngestRequest

    plain = IngestRequest(source="s3://b/in/", out="s3://b/out")
    scoped = plain.model_copy(update={"include": ["scans/*"], "exclude": ["*.tmp"]})
    assert plain.parameters()["include"] is None
    assert scoped.parameters()["include"] == ["scans/*"]
    assert scoped.parameters()["exclude"] == ["*.tmp"]
    assert scoped.key != plain.key
    legacy = json.dumps(plain.normalized().model_dump(exclude={"include", "exclude", "sync", "version"}),
                        sort_keys=True, default=str)
    assert plain.key == "folio-" + hashlib.sha256(legacy.encode()).hexdigest()[:40]
