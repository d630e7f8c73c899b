"""One way from what a person asked for to the settings a run uses.

The CLI, every flow (deployments, UI runs, triggers, the sweep's batches) and the
benchmarks call :func:`resolve_config`, so ``folio ingest --engine vllm --profile h200``
and a flow run on the ``folio-h200`` pool (whose environment says the same) run with
exactly the same settings. Layers, later ones win:

1. folio's defaults;
2. for an engine that runs on a served model (``vllm``): the hardware profile's budgets
   (render pixels limited by the model preset and the card, requests in flight) and CPU
   concurrency sized to this machine;
3. ``FOLIO_*`` environment variables (a work pool's environment lands here);
4. the request's engine, route and reprocess;
5. the request's ``settings`` overrides (dotted keys, ``{"render.max_dpi": 200}``).
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any, get_args

from pydantic import BaseModel, Field, ValidationError, model_validator

from folio.errors import ConfigError

# keys that hold secrets: read from the worker's environment, never request settings
# (IngestRequest refuses them; the CLI hands them over as environment variables)
from folio.security.redaction import SECRET_SETTINGS
from folio.settings.config import PipelineConfig
from folio.settings.vocabulary import (
    GENERATIVE_ENGINES,
    SERVED_ENGINES,
    EngineName,
    RouteMode,
    RouteRequest,
)


def normalize_source(uri: str) -> str:
    """The URI as the pipeline reports it: s3 URIs as given, local paths absolute (the
    form ``folio.io.sources`` gives documents, so resource ids match on both sides)."""
    if uri.startswith("s3://"):
        return uri
    return str(Path(uri.removeprefix("file://")).expanduser().absolute())


class IngestRequest(BaseModel):
    """What to ingest and how: what the flows take, what the CLI builds and what
    triggers send. ``IngestRequest(source=...)`` is a request for one file or prefix
    (a UI run, a RAG job's trigger: the document deployment); ``sources`` several."""

    # a default only so that IngestRequest(source=...) type-checks: _has_sources refuses none
    sources: list[str] = Field(default_factory=list)
    out: str = "folio-out"
    engine: EngineName = "tesseract"
    route: RouteRequest = Field(
        "default", description="auto, ocr or text-layer; default: the engine's (default_route)")
    reprocess: bool = False
    settings: dict[str, Any] = Field(default_factory=dict)
    sync: bool = Field(False, description="also remove the rows and outputs of sources gone "
                       "from these roots (docs/index-sync.md)")
    revision: str | None = Field(
        None, description="the caller's version of the source (ETag, object version, job "
        "id): a new revision is a new request; the same one is a retry")
    version: str | None = Field(
        None, description="the source's version as a trigger read it "
        "(folio.io.source_version: sizes and ETags or modification times): changed bytes are "
        "a new request, the same bytes a retry")
    include: list[str] = Field(
        default_factory=list, description="globs scoping a folder or prefix source "
        "(sources.include; docs/inputs.md)")
    exclude: list[str] = Field(
        default_factory=list, description="globs of entries to leave out, counted "
        "(sources.exclude)")

    @model_validator(mode="before")
    @classmethod
    def _one_source(cls, data: Any) -> Any:
        if isinstance(data, dict) and "source" in data:
            data = dict(data)
            if "sources" in data:
                raise ValueError("give source (one) or sources (several), not both")
            data["sources"] = [data.pop("source")]
        return data

    @model_validator(mode="after")
    def _has_sources(self) -> IngestRequest:
        if not self.sources:
            raise ValueError("a request needs a source (source=...) or sources")
        return self

    @model_validator(mode="after")
    def _no_secrets(self) -> IngestRequest:
        """A request's settings become flow-run parameters, stored and shown by Prefect:
        a secret among them is refused (it belongs in the worker's environment)."""
        from folio.security.secret_settings import refuse

        refuse(self.settings)
        return self

    @property
    def source(self) -> str:
        """The one source of a document request.

        Raises:
            ValueError: the request names several sources.
        """
        if len(self.sources) != 1:
            raise ValueError(f"a document request has one source, this one {len(self.sources)}")
        return self.sources[0]

    def normalized(self) -> IngestRequest:
        return self.model_copy(update={"sources": [normalize_source(s) for s in self.sources]})

    @property
    def key(self) -> str:
        """Idempotency key: equal requests (after normalizing the sources) share it."""
        # sync, the globs and the version enter only when given: a request without them
        # keeps the key it had before they existed
        data = self.normalized().model_dump()
        for name in ("sync", "include", "exclude", "version"):
            if not data[name]:
                del data[name]
        blob = json.dumps(data, sort_keys=True, default=str)
        return "folio-" + hashlib.sha256(blob.encode()).hexdigest()[:40]

    def parameters(self) -> dict[str, Any]:
        """Flow parameters of ``folio-ingest-document`` (one source; the revision and the
        version are not parameters, they only tell requests apart)."""
        request = self.normalized()
        return {"source": request.source, "out": request.out, "engine": request.engine,
                "route": request.route, "reprocess": request.reprocess,
                "settings": request.settings or None, "sync": request.sync,
                "include": request.include or None, "exclude": request.exclude or None}


def default_route(engine: str) -> RouteMode:
    """The route a run takes unless told: ``ocr`` for a vision model, ``auto`` for the rest.

    Why: a vision model reads what a born-digital page's text layer gets wrong for RAG:
    running heads and page numbers, tables flattened to lines, two columns interleaved.
    Replaying olmOCR 2's own answers (bench/results/replay_fidelity.json), its pages
    scored as high as the answers themselves with every page sent to the model, and
    far lower when trusted text layers skipped it. ``auto`` (keep trusted layers, cheaper
    on the GPU) stays an option. A CPU engine reads no better than a good layer.
    """
    return "ocr" if engine in GENERATIVE_ENGINES else "auto"


def resolve_config(
    *,
    engine: EngineName,
    route: RouteRequest | None = None,
    reprocess: bool = False,
    settings: dict[str, Any] | None = None,
) -> PipelineConfig:
    """The run's :class:`PipelineConfig` (see the module doc for the layers).

    Raises:
        ConfigError: a ``FOLIO_*`` variable or a setting names no setting or holds a value
            it cannot take (one line: which setting, where it came from, why).
    """
    check_environment()
    try:
        env_set = PipelineConfig().model_dump(exclude_unset=True)  # what FOLIO_* said
    except ValidationError as exc:
        raise setting_error(exc, env=True) from None
    layered: dict[str, Any] = {}
    overrides = dict(settings or {})
    profile_name = _pick(overrides, env_set, "ocr.profile") or "auto"
    preset_name = _pick(overrides, env_set, "ocr.preset") or "generic"
    if engine in GENERATIVE_ENGINES:
        for key, value in model_defaults(preset_name).items():
            _merge(layered, key.split("."), value)
    if engine in SERVED_ENGINES:
        for key, value in served_defaults(profile_name, preset_name).items():
            _merge(layered, key.split("."), value)
    _deep_update(layered, env_set)
    _merge(layered, ["ocr", "engine"], engine)
    if route not in (None, "default"):
        _merge(layered, ["route", "mode"], route)
    elif "mode" not in env_set.get("route", {}):  # FOLIO_ROUTE__MODE, else the engine's
        _merge(layered, ["route", "mode"], default_route(engine))
    layered["reprocess"] = reprocess
    for key, value in overrides.items():
        check_setting(key, value)
        _merge(layered, key.split("."), value)
    try:
        return PipelineConfig.model_validate(layered)
    except ValidationError as exc:
        raise setting_error(exc, env=False) from None


#: what FOLIO_SECTION__KEY variables start with; the others (FOLIO_PG_DSN, ...) are no
#: nested settings
_ENV_PREFIX = "FOLIO_"
_ENV_NESTED = "__"


def check_environment(environ: dict[str, str] | None = None) -> None:
    """Raise :class:`ConfigError` for a ``FOLIO_SECTION__KEY`` variable that names no
    setting: pydantic-settings ignores it, so ``FOLIO_RENDER__MAX_DPIX=200`` would run
    with the default and say nothing (the same typo in ``--set`` is refused)."""
    env = os.environ if environ is None else environ
    for name in sorted(env):
        upper = name.upper()
        if not upper.startswith(_ENV_PREFIX) or _ENV_NESTED not in upper:
            continue
        key = upper[len(_ENV_PREFIX):].lower().replace(_ENV_NESTED, ".")
        try:
            check_setting(key)
        except ConfigError as exc:
            raise ConfigError(f"environment variable {name}: {exc}") from None


def setting_error(exc: ValidationError, *, env: bool) -> ConfigError:
    """pydantic's multi-line report as one line: the first bad setting (dotted), the value
    given, why, and where to change it."""
    errors = exc.errors()
    if not errors:
        return ConfigError(" ".join(str(exc).split()))
    first = errors[0]
    key = ".".join(str(part) for part in first["loc"])
    where = (f"FOLIO_{key.upper().replace('.', _ENV_NESTED)}" if env
             else f"setting {key}")
    shown = first.get("input")
    value = "" if isinstance(shown, dict) else f"={json.dumps(shown, default=str)}"
    if key in SECRET_SETTINGS:  # the error names the setting, never its value
        value = "=***"
    why = str(first["msg"]).removeprefix("Value error, ")
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return ConfigError(f"{where}{value}: {why}{more}".replace("\n", " "))


def check_setting(key: str, value: Any = None, model: type[BaseModel] = PipelineConfig,
                  prefix: str = "") -> None:
    """Raise :class:`ConfigError` unless ``key`` (dotted, ``ocr.in_flight``) names a
    setting: pydantic drops unknown keys, so a misspelt ``--set`` would otherwise run
    with the default and say nothing. A dict given for a group is checked key by key."""
    parts = key.split(".")
    for depth, part in enumerate(parts):
        fields = model.model_fields
        if part not in fields:
            where = prefix + ".".join(parts[:depth]) or "the configuration"
            raise ConfigError(f"unknown setting {prefix + key!r}: {where.rstrip('.')} has no "
                              f"{part!r} (it has: {', '.join(sorted(fields))})")
        group = _model_of(fields[part].annotation)
        if group is None:
            return  # a value (a dict or list value is the field's own business)
        model = group
    if isinstance(value, dict):
        for sub, sub_value in value.items():
            check_setting(str(sub), sub_value, model, f"{prefix}{key}.")


def _model_of(annotation: Any) -> type[BaseModel] | None:
    """The settings group a field holds (``Optional[Group]`` included), else None."""
    for c in (annotation, *get_args(annotation)):
        if isinstance(c, type) and issubclass(c, BaseModel):
            return c
    return None


def model_defaults(preset_name: str) -> dict[str, Any]:
    """What a vision model's run uses unless told otherwise, on any server: the preset's
    image size (its reference pipeline's, for olmOCR 2 and Chandra)."""
    from folio.settings.presets import get_preset

    render = get_preset(preset_name).render_settings()
    return {"render.longest_side_px": render.longest_side_px,
            "render.max_pixels": render.max_pixels,
            "render.model_sizing": render.model_sizing}


def served_defaults(profile_name: str, preset_name: str,
                    cpus: int | None = None) -> dict[str, Any]:
    """What a served-model run uses unless told otherwise: the preset's pixel budget
    limited by the card's, the profile's in-flight budget, and page workers and document
    preparation sized to this machine's cores (the GPU waits on them otherwise)."""
    from folio.gpu.profiles import load_profile
    from folio.settings.presets import get_preset

    profile = load_profile(profile_name)
    render = profile.render_settings(get_preset(preset_name).render_settings())
    cores = cpus or os.cpu_count() or 2
    return {
        "ocr.profile": profile.name,
        "ocr.in_flight": profile.in_flight,
        "render.longest_side_px": render.longest_side_px,
        "render.max_pixels": render.max_pixels,
        "limits.render_workers": max(2, cores // 2),
        # until the engine holds its budget (the first seconds of a run), rendering is
        # what it waits on: all but two cores (the server's front end needs them)
        "limits.render_burst_workers": max(2, cores - 2),
        "limits.document_concurrency": max(2, cores // 4),
    }


def _pick(overrides: dict[str, Any], env_set: dict[str, Any], key: str) -> Any:
    if key in overrides:
        return overrides[key]
    node: Any = env_set
    for part in key.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def _merge(target: dict[str, Any], path: list[str], value: Any) -> None:
    for key in path[:-1]:
        nested = target.get(key)
        if not isinstance(nested, dict):
            nested = target[key] = {}
        target = nested
    leaf = path[-1]
    if isinstance(value, dict) and isinstance(target.get(leaf), dict):
        _deep_update(target[leaf], value)
    else:
        target[leaf] = value


def _deep_update(target: dict[str, Any], source: dict[str, Any]) -> None:
    for key, value in source.items():
        _merge(target, [key], value)
