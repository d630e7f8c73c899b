"""The child side of tests/reference_pipelines.py's Chandra harness: one process per
chandra-ocr version, run as a script (``python reference_chandra_child.py
--chandra-reference-worker VERSION EXPECTED``), answering one JSON line per JSON line
on its stdin (``info``, ``request``, ``markdown``, ``layout``).

Why a file of its own: tests/reference_pipelines.py passed 500 lines (issue 46), and
this half never runs in the test process: it imports the installed chandra-ocr (0.1.8
from ``.venv/reference/chandra1`` first on ``PYTHONPATH``, or 0.2.0 from the venv) with
stand-ins for torch and for the ``openai`` client, which must not leak into pytest's
interpreter. It imports nothing of the repository: the parent passes the version it
expects (``EXPECTED``) on the command line.
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from collections.abc import Callable
from importlib import metadata
from pathlib import Path
from typing import Any

__all__ = ["WORKER_FLAG"]

WORKER_FLAG = "--chandra-reference-worker"
#: a model answer both versions' retry loops take for a repetition loop (0.1.8 looks for
#: it in the markdown of the layout divs, text outside them is invisible to it; 0.2.0 in
#: the raw answer less its last 50 characters)
_LOOPING_ANSWER = '<div data-bbox="0 0 1000 1000" data-label="Text"><p>' + "a" * 1000 + "</p></div>"


def _worker_main(version: int, expected: str) -> None:  # pragma: no cover - runs in the child
    protocol = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # chandra prints progress to stdout: keep the protocol's stream clean
    sys.stdout = sys.stderr
    ops = _worker_setup(version, expected)
    for line in sys.stdin:
        request = json.loads(line)
        try:
            reply: dict[str, Any] = {"ok": ops[request["op"]](**request["args"])}
        except Exception:
            reply = {"error": traceback.format_exc()}
        protocol.write(json.dumps(reply) + "\n")
        protocol.flush()


def _worker_setup(version: int, expected: str) -> dict[str, Callable[..., Any]]:  # pragma: no cover
    import types

    try:
        dist = metadata.distribution("chandra-ocr")
    except metadata.PackageNotFoundError:
        raise SystemExit("chandra-ocr is not installed: run scripts/setup.sh --test") from None
    if dist.version != expected:
        raise SystemExit(f"chandra-ocr {dist.version} found, {expected} expected")
    if version == 1:
        # 0.1.8's settings import torch for one computed field (TORCH_DTYPE) nothing here
        # reads: a stand-in module, with an annotation pydantic accepts
        torch = types.ModuleType("torch")
        torch.dtype = Any  # type: ignore[attr-defined]
        torch.bfloat16 = "bfloat16"  # type: ignore[attr-defined]
        sys.modules["torch"] = torch
    # chandra.model imports its transformers backend (hf.py: torch) beside the vLLM one
    hf = types.ModuleType("chandra.model.hf")

    def _no_hf(*_: Any, **__: Any) -> Any:
        raise RuntimeError("the reference harness runs chandra's vLLM path only")

    hf.load_model = hf.generate_hf = _no_hf  # type: ignore[attr-defined]
    sys.modules["chandra.model.hf"] = hf

    import chandra
    import chandra.input
    import chandra.model
    import chandra.model.vllm
    import chandra.output
    import chandra.prompts
    import chandra.settings
    from chandra.model.schema import BatchInputItem
    from PIL import Image

    package_dir = Path(chandra.__file__).resolve().parent
    if not str(package_dir).startswith(str(Path(str(dist.locate_file(""))).resolve())):
        raise SystemExit(f"chandra imported from {package_dir}, not from {expected}'s files")
    settings = chandra.settings.settings
    defaults = {name: f.get_default(call_default_factory=True)
                for name, f in type(settings).model_fields.items()}
    changed = {k: getattr(settings, k) for k, v in defaults.items() if getattr(settings, k) != v}
    if changed:  # the reference's defaults are the yardstick, not this machine's settings
        raise SystemExit(f"chandra settings overridden by the environment or a local.env: "
                         f"{changed}")

    calls: list[dict[str, Any]] = []

    class _Completions:
        def create(self, **kwargs: Any) -> Any:
            calls.append(kwargs)
            message = types.SimpleNamespace(content=_LOOPING_ANSWER)
            return types.SimpleNamespace(
                choices=[types.SimpleNamespace(message=message, finish_reason="length")],
                usage=types.SimpleNamespace(completion_tokens=len(_LOOPING_ANSWER)))

    class _Client:
        def __init__(self, **_: Any) -> None:
            self.chat = types.SimpleNamespace(completions=_Completions())

    chandra.model.vllm.OpenAI = _Client  # type: ignore[attr-defined]
    manager = chandra.model.InferenceManager(method="vllm")

    def info() -> dict[str, Any]:
        return {"version": dist.version, "package": str(package_dir),
                "settings": {k: getattr(settings, k) for k in defaults}}

    def request(pdf: str, page: int) -> dict[str, Any]:
        calls.clear()
        [image] = chandra.input.load_pdf_images(pdf, [page])
        manager.generate([BatchInputItem(image=image, prompt_type="ocr_layout")])
        return {"calls": list(calls), "rendered": [image.width, image.height]}

    def markdown(html: str, include_headers_footers: bool, include_images: bool) -> str:
        return str(chandra.output.parse_markdown(
            html, include_headers_footers=include_headers_footers,
            include_images=include_images))

    def layout(html: str, width: int, height: int) -> list[dict[str, Any]]:
        blocks = chandra.output.parse_layout(html, Image.new("RGB", (width, height)))
        return [{"label": b.label, "bbox": list(b.bbox), "content": b.content} for b in blocks]

    return {"info": info, "request": request, "markdown": markdown, "layout": layout}


if __name__ == "__main__" and len(sys.argv) == 4 and sys.argv[1] == WORKER_FLAG:
    _worker_main(int(sys.argv[2]), sys.argv[3])
