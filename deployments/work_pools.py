"""One Prefect work pool per hardware profile, with base job templates made from the
profiles, plus a global concurrency limit per pool that keeps one vLLM server per GPU, and
``folio-control`` for the sweep, which only orchestrates (see :data:`CONTROL_POOL`).

    python -m folio_prefect.deployments.work_pools                  # print what would be created
    python -m folio_prefect.deployments.work_pools --write          # regenerate infra/work-pools/*.json
    python -m folio_prefect.deployments.work_pools --apply --type kubernetes --gpus 8
    python -m folio_prefect.deployments.work_pools --apply --result-storage s3://bucket/prefect-results

Templates start from the worker type's own default (the process worker class; the
kubernetes default from Prefect's bundled collection metadata, so no network and no
prefect-kubernetes install is needed here) and add the profile's environment, the
engine settings, and for kubernetes the GPU request, node selector, tolerations and a
memory-backed /dev/shm. ``--apply`` creates or updates the pool (``prefect work-pool
create --base-job-template --overwrite`` semantics) and the limit ``gpu-<pool>``, which
:class:`folio_prefect.flows.vllm_runner.VLLMTaskRunner` holds while its server runs
(``concurrency_limit=...``). With ``--result-storage`` (or ``FOLIO_RESULT_STORAGE``) it
also saves an S3 result-storage block (:mod:`folio_prefect.deployments.result_storage`, connection
from ``FOLIO_S3__*``) and makes it the server's default, which several hosts need.
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import json
import os
import sys
from importlib import resources
from pathlib import Path
from typing import Any

from folio.gpu.profiles import HardwareProfile, load_profiles

TYPES = ("process", "kubernetes")
#: the pool of flows that only orchestrate others (the sweep): a sweep waits for its batches,
#: so on the batches' own pool it would hold the very slot they need (a deadlock at limit 1)
CONTROL_POOL = "folio-control"
OUT_DIR = Path(__file__).resolve().parent.parent / "infra" / "work-pools"


def pool_name(profile: HardwareProfile) -> str:
    return f"folio-{profile.name}"


def limit_name(profile: HardwareProfile) -> str:
    """The global concurrency limit the runner holds (``gpu_slots``) per server."""
    return f"gpu-{pool_name(profile)}"


def default_template(pool_type: str) -> dict[str, Any]:
    """The worker type's default base job template, without network access."""
    if pool_type == "process":
        from prefect.workers.process import ProcessWorker

        return copy.deepcopy(ProcessWorker.get_default_base_job_template())
    path = resources.files("prefect.server.api.collections_data") / "views" / "aggregate-worker-metadata.json"
    metadata = json.loads(path.read_text())
    for collection in metadata.values():
        for worker in collection.values():
            if worker.get("type") == pool_type:
                return copy.deepcopy(worker["default_base_job_configuration"])
    raise SystemExit(f"no default base job template for work pool type {pool_type!r}")


#: a folio run has two task runs a document (prepare, finish): at Prefect's default INFO
#: level each sends "Finished in state Completed()" and the like to the API, thousands of
#: lines a sweep that a person never reads, under a lock every task's thread takes.
#: Warnings and errors still reach the UI, and so do the flow's own INFO lines.
QUIET_TASK_LOGS = {"PREFECT_LOGGING_LOGGERS_PREFECT_TASK_RUNS_LEVEL": "WARNING"}


def profile_env(profile: HardwareProfile) -> dict[str, str]:
    """What a flow run on this pool needs: the profile's env verbatim + folio's engine."""
    engine = "vllm" if profile.device == "cuda" else "tesseract"
    return {**QUIET_TASK_LOGS, **profile.env, "FOLIO_OCR__ENGINE": engine,
            "FOLIO_OCR__PROFILE": profile.name, "FOLIO_OCR__IN_FLIGHT": str(profile.in_flight)}


def build_template(profile: HardwareProfile, pool_type: str) -> dict[str, Any]:
    template = default_template(pool_type)
    props = template["variables"]["properties"]
    props["env"]["default"] = profile_env(profile)
    if pool_type != "kubernetes":
        return template
    k8s = profile.kubernetes
    gpus = max(0, profile.gpu_count)
    props["gpu_count"] = {"title": "GPUs", "type": "integer", "default": gpus,
                          "description": "nvidia.com/gpu per flow run (one vLLM server)"}
    props["node_selector"] = {"title": "Node selector", "type": "object", "default": k8s.node_selector,
                              "additionalProperties": {"type": "string"}}
    props["tolerations"] = {"title": "Tolerations", "type": "array", "default": k8s.tolerations,
                            "items": {"type": "object"}}
    props["shm_size"] = {"title": "/dev/shm size", "type": "string", "default": k8s.shm_size}
    if k8s.cpu_request:
        props["cpu_request"]["default"] = k8s.cpu_request
    if k8s.memory_request:
        props["memory_request"]["default"] = k8s.memory_request
    pod = template["job_configuration"]["job_manifest"]["spec"]["template"]["spec"]
    container = pod["containers"][0]
    if gpus:
        container["resources"]["limits"]["nvidia.com/gpu"] = "{{ gpu_count }}"
        pod["nodeSelector"] = "{{ node_selector }}"
        pod["tolerations"] = "{{ tolerations }}"
    pod["volumes"] = [{"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "{{ shm_size }}"}}]
    container["volumeMounts"] = [{"name": "dshm", "mountPath": "/dev/shm"}]
    return template


def generate(pool_types: tuple[str, ...] = TYPES) -> dict[Path, dict[str, Any]]:
    """Every template, by the file it is committed as."""
    return {
        OUT_DIR / pool_type / f"{pool_name(p)}.json": build_template(p, pool_type)
        for p in load_profiles().values()
        for pool_type in pool_types
    }


def dumps(template: dict[str, Any]) -> str:
    return json.dumps(template, indent=2, sort_keys=True) + "\n"


async def apply(pool_type: str, gpus: int) -> list[str]:
    """Create or update one pool per profile and its GPU concurrency limit."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.actions import (
        GlobalConcurrencyLimitCreate,
        GlobalConcurrencyLimitUpdate,
        WorkPoolCreate,
        WorkPoolUpdate,
    )
    from prefect.exceptions import ObjectNotFound

    done: list[str] = []
    async with get_client() as client:
        try:
            pool = await client.read_work_pool(CONTROL_POOL)
            done.append(f"kept work pool {CONTROL_POOL} ({pool.type})")
        except ObjectNotFound:
            await client.create_work_pool(WorkPoolCreate(
                name=CONTROL_POOL, type=pool_type, base_job_template=default_template(pool_type)))
            done.append(f"created work pool {CONTROL_POOL} ({pool_type})")
        for profile in load_profiles().values():
            name, template = pool_name(profile), build_template(profile, pool_type)
            try:
                pool = await client.read_work_pool(name)
                if pool.type != pool_type:
                    raise SystemExit(f"work pool {name} exists with type {pool.type}, not {pool_type}")
                await client.update_work_pool(name, WorkPoolUpdate(base_job_template=template))
                done.append(f"updated work pool {name} ({pool_type})")
            except ObjectNotFound:
                await client.create_work_pool(WorkPoolCreate(name=name, type=pool_type,
                                                             base_job_template=template))
                done.append(f"created work pool {name} ({pool_type})")
            if profile.device != "cuda":
                continue
            limit = limit_name(profile)
            try:
                await client.read_global_concurrency_limit_by_name(limit)
                await client.update_global_concurrency_limit(limit, GlobalConcurrencyLimitUpdate(limit=gpus))
                done.append(f"updated concurrency limit {limit} = {gpus}")
            except ObjectNotFound:
                await client.create_global_concurrency_limit(
                    GlobalConcurrencyLimitCreate(name=limit, limit=gpus))
                done.append(f"created concurrency limit {limit} = {gpus}")
    return done


async def apply_results(uri: str) -> list[str]:
    """The S3 result-storage block, the server's default (connection: ``FOLIO_S3__*``)."""
    from folio.settings.config import PipelineConfig
    from folio_prefect.deployments.result_storage import apply_result_storage

    return await apply_result_storage(uri, PipelineConfig().s3)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m folio_prefect.deployments.work_pools", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--apply", action="store_true", help="create/update pools and limits via the API")
    ap.add_argument("--write", action="store_true", help="regenerate infra/work-pools/")
    ap.add_argument("--type", choices=TYPES, default="process", help="pool type for --apply")
    ap.add_argument("--gpus", type=int, default=1,
                    help="GPUs available to each pool (its concurrency limit); one server per GPU")
    ap.add_argument("--result-storage", default=os.environ.get("FOLIO_RESULT_STORAGE"),
                    metavar="S3_URI", help="with --apply: s3://bucket/prefix for Prefect "
                    "results, the server's default (env FOLIO_RESULT_STORAGE)")
    args = ap.parse_args(argv)
    templates = generate()
    if args.write:
        for path, template in templates.items():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(dumps(template))
        sys.stdout.write(f"wrote {len(templates)} templates under {OUT_DIR}\n")
    if args.apply:
        for line in asyncio.run(apply(args.type, args.gpus)):
            sys.stdout.write(line + "\n")
        if args.result_storage:
            for line in asyncio.run(apply_results(args.result_storage)):
                sys.stdout.write(line + "\n")
    if not (args.write or args.apply):
        for path, template in templates.items():
            env = template["variables"]["properties"]["env"]["default"]
            sys.stdout.write(f"{path.relative_to(OUT_DIR.parent.parent)}: env {json.dumps(env)}\n")
        sys.stdout.write("(dry run: --write regenerates the files, --apply creates the pools)\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
