"""Work pools from hardware profiles: committed templates are current; --apply works."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from folio_prefect.deployments import work_pools as wp
from tests.prefect_stack import SWEEP_DEPLOYMENT, PrefectStack


def test_committed_templates_match_the_profiles() -> None:
    for path, template in wp.generate().items():
        assert path.is_file(), f"{path} missing: run python -m folio_prefect.deployments.work_pools --write"
        assert path.read_text() == wp.dumps(template), f"{path} stale: regenerate it"


def test_kubernetes_templates_request_gpus_and_carry_the_env() -> None:
    gpu = wp.build_template(wp.load_profiles()["h100-80gb"], "kubernetes")
    pod = gpu["job_configuration"]["job_manifest"]["spec"]["template"]["spec"]
    assert pod["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "{{ gpu_count }}"
    assert (
        pod["nodeSelector"] == "{{ node_selector }}" and pod["tolerations"] == "{{ tolerations }}"
    )
    props = gpu["variables"]["properties"]
    assert props["gpu_count"]["default"] == 1
    assert props["env"]["default"]["PYTORCH_CUDA_ALLOC_CONF"] == "expandable_segments:True"
    assert props["env"]["default"]["FOLIO_OCR__PROFILE"] == "h100-80gb"
    cpu = wp.build_template(wp.load_profiles()["cpu"], "kubernetes")
    assert "nvidia.com/gpu" not in str(cpu["job_configuration"])
    proc = wp.build_template(wp.load_profiles()["l4-24gb"], "process")
    assert proc["variables"]["properties"]["env"]["default"]["FOLIO_OCR__ENGINE"] == "vllm"


def test_apply_creates_then_updates_pools_and_gpu_limits(prefect_api: None) -> None:
    from prefect.client.orchestration import get_client

    first = asyncio.run(wp.apply("process", gpus=2))
    assert "created work pool folio-h100-80gb (process)" in first
    assert "created work pool folio-control (process)" in first
    assert "created concurrency limit gpu-folio-h100-80gb = 2" in first
    again = asyncio.run(wp.apply("process", gpus=4))
    assert "updated concurrency limit gpu-folio-h100-80gb = 4" in again
    assert "kept work pool folio-control (process)" in again

    async def read() -> tuple[dict[str, str], int]:
        async with get_client() as client:
            pool = await client.read_work_pool("folio-l4-24gb")
            limit = await client.read_global_concurrency_limit_by_name("gpu-folio-l4-24gb")
            return pool.base_job_template["variables"]["properties"]["env"]["default"], limit.limit

    env, limit = asyncio.run(read())
    assert env["FOLIO_OCR__PROFILE"] == "l4-24gb" and limit == 4
    with pytest.raises(SystemExit, match="exists with type process"):
        asyncio.run(wp.apply("kubernetes", gpus=1))


def test_the_sweep_never_shares_a_pool_with_the_batches_it_waits_for(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import yaml
    from prefect.flows import load_flow_from_entrypoint

    root = Path(__file__).resolve().parent.parent
    monkeypatch.chdir(root)  # entrypoints are relative to the project root
    spec = yaml.safe_load((root / "prefect.yaml").read_text())
    pools = {f"{load_flow_from_entrypoint(d['entrypoint']).name}/{d['name']}": d["work_pool"]["name"]
             for d in spec["deployments"]}
    sweeps = [d for d in spec["deployments"] if d["entrypoint"] == "flows/sweep.py:sweep"]
    assert sweeps
    for sweep in sweeps:
        target = sweep["parameters"]["document_deployment"]
        assert target in pools, f"{target} is not deployed by prefect.yaml"
        assert sweep["work_pool"]["name"] == wp.CONTROL_POOL != pools[target]


def test_prefect_deploy_puts_the_sweep_on_the_control_pool(prefect_stack: PrefectStack) -> None:
    import httpx

    resp = httpx.get(f"{prefect_stack.api_url}/deployments/name/{SWEEP_DEPLOYMENT}", timeout=30)
    assert resp.status_code == 200, resp.text
    assert resp.json()["work_pool_name"] == wp.CONTROL_POOL


def test_pool_runs_keep_task_logs_quiet_and_flow_logs() -> None:
    """A run on a folio pool sends task runs' warnings and errors to the API, not a line
    per task state; the flow's own INFO lines stay (Prefect reads the level from the env)."""
    import logging
    import os
    import subprocess
    import sys

    env = wp.build_template(wp.load_profiles()["h200"], "process")["variables"]["properties"][
        "env"]["default"]
    probe = ("import logging; from prefect.logging.configuration import setup_logging; "
             "setup_logging(); print(logging.getLogger('prefect.task_runs').getEffectiveLevel(),"
             " logging.getLogger('prefect.flow_runs').getEffectiveLevel())")
    worker = {**os.environ, "PREFECT_LOGGING_LEVEL": "INFO"}  # Prefect's default on a worker
    levels = subprocess.run([sys.executable, "-c", probe], env={**worker, **env},
                            capture_output=True, text=True, check=True).stdout.split()
    assert [int(v) for v in levels] == [logging.WARNING, logging.INFO]
