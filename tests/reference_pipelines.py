"""What the OCR models' own code sends and parses, computed by that code: the yardstick of
tests/test_conformance.py.

folio drives olmOCR 2 and Chandra 1/2 through an OpenAI-compatible server, so its requests
must be the ones the models were trained and evaluated with. This module asks the
reference implementations themselves, installed from PyPI without their heavy
dependencies by ``scripts/setup.sh --test``:

- olmOCR 2: ``olmocr`` 0.4.27. ``olmocr/pipeline.py`` imports boto3, vLLM helpers, torch
  tooling, so it is not imported: its ``build_page_query`` is compiled from the installed
  source (``ast``) and run with the names it uses bound as the pipeline module binds them
  (``render_pdf_to_base64png``, which runs poppler's ``pdftoppm``, the v4 YAML prompt); the
  sampling ladder comes from ``TEMPERATURE_BY_ATTEMPT`` and the ``--max_page_retries``
  default read from the same source, indexed the way ``try_single_page`` indexes it.
- Chandra 2: ``chandra-ocr`` 0.2.0 (in the venv). Chandra 1: ``chandra-ocr`` 0.1.8, the
  same package name, so it lives in ``.venv/reference/chandra1`` and runs in a child
  process with that directory first on ``PYTHONPATH``. Both run in a child (one per
  version, kept for the session; tests/reference_chandra_child.py):
  ``InferenceManager(method="vllm").generate`` runs as
  the chandra CLI runs it, with page images from ``chandra.input.load_pdf_images``, against
  a stand-in for the ``openai`` client that records every request and answers with a
  looping text, so the reference's own retry loop walks its whole sampling ladder.
  ``chandra.model.hf`` (torch, transformers) is replaced by an empty module, and 0.1.8's
  ``chandra.settings`` imports torch for one computed field, so the child gives it a
  stand-in ``torch`` module; nothing else of the packages is touched.

Pages are numbered from 0 here, as in folio (olmOCR numbers them from 1: converted).
"""

from __future__ import annotations

import ast
import asyncio
import atexit
import base64
import io
import json
import os
import select
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable
from dataclasses import fields
from functools import lru_cache
from importlib import metadata
from pathlib import Path
from typing import Any, Literal

from tests import reference_chandra_child as chandra_child
from tests.reference_chandra_child import WORKER_FLAG
from tests.reference_records import (
    FrontMatter,
    Order,
    ReferenceBlock,
    ReferenceMissingError,
    ReferenceRequest,
)

OLMOCR_VERSION = "0.4.27"
CHANDRA_VERSIONS = {1: "0.1.8", 2: "0.2.0"}
#: folio's preset name -> the reference it follows
PRESET_REFERENCE: dict[str, tuple[str, int]] = {
    "olmocr2": ("olmocr", 2),
    "chandra": ("chandra", 1),
    "chandra2": ("chandra", 2),
}
#: what setup.sh installs Chandra 1's wheel into (``--target``)
CHANDRA1_DIR = Path(sys.prefix) / "reference" / "chandra1"
_WORKER_TIMEOUT_S = 300.0

#: the corpus pages (paths under the corpus directory, page from 0) the tests compare on:
#: a born-digital US Letter page, a scanned book page (OCRmyPDF's), an olmOCR-bench page
#: of an odd size, an A4 scan whose olmOCR render pdftoppm rounds up to 1289 px, a page
#: whose CropBox (301x180 pt) is a corner of its MediaBox (612x792 pt), and a page with
#: AcroForm fields (drawn by both references: Chandra flattens them, pdftoppm draws them)
CORPUS_PAGES: dict[str, tuple[str, int]] = {
    "letter": ("docling/2305.03393v1-pg9.pdf", 0),
    "scan": ("ocrmypdf/c02-22.pdf", 0),
    "olmocr-bench": ("olmocr/bench/small_page_size.pdf", 0),
    "a4-scan": ("docling/ocr/ocr_test.pdf", 0),
    "cropbox": ("ocrmypdf/type3_font_nomapping.pdf", 0),
    "forms": ("pypdf_sample_files/pdflatex-forms.pdf", 0),
}

# --- olmOCR ------------------------------------------------------------------------------


def _olmocr_module_file(module: str) -> Path:
    try:
        version = metadata.version("olmocr")
    except metadata.PackageNotFoundError:
        raise ReferenceMissingError(
            "olmocr is not installed: run scripts/setup.sh --test") from None
    if version != OLMOCR_VERSION:
        raise ReferenceMissingError(f"olmocr {version} installed, the tests follow "
                                    f"{OLMOCR_VERSION}: run scripts/setup.sh --test")
    import olmocr

    return Path(olmocr.__file__).parent.joinpath(*module.split(".")).with_suffix(".py")


@lru_cache(maxsize=1)
def _olmocr_pipeline() -> tuple[str, ast.Module]:
    path = _olmocr_module_file("pipeline")
    source = path.read_text()
    return source, ast.parse(source, str(path))


def _top_level(tree: ast.Module, name: str) -> ast.stmt:
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            if node.name == name:
                return node
        elif isinstance(node, ast.Assign):
            if any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
                return node
        elif isinstance(node, ast.Import | ast.ImportFrom):
            if any((a.asname or a.name.split(".")[0]) == name for a in node.names):
                return node
    raise LookupError(f"olmocr/pipeline.py no longer defines {name} at top level")


def _free_names(func: ast.AST) -> set[str]:
    bound = {a.arg for a in ast.walk(func) if isinstance(a, ast.arg)}
    bound |= {n.id for n in ast.walk(func) if isinstance(n, ast.Name)
              and isinstance(n.ctx, ast.Store)}
    used = {n.id for n in ast.walk(func) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    return used - bound


@lru_cache(maxsize=1)
def _olmocr_build_page_query() -> tuple[Callable[..., Any], dict[str, Any]]:
    """``olmocr.pipeline.build_page_query``, compiled from the installed source, its free
    names bound by running the pipeline module's own import statements for them; and its
    globals (the render semaphore is set in the event loop of each call)."""
    import builtins

    _, tree = _olmocr_pipeline()
    func = _top_level(tree, "build_page_query")
    namespace: dict[str, Any] = {"__name__": "olmocr_pipeline_reference"}
    for name in sorted(_free_names(func) - set(dir(builtins))):
        node = _top_level(tree, name)
        if name == "pdf_render_max_workers_limit":
            # a module-level BoundedSemaphore(cpu count) bounding concurrent renders: one
            # per call here (olmocr_request), each call has an event loop of its own
            continue
        if isinstance(node, ast.Import | ast.ImportFrom):
            alias = next(a for a in node.names if (a.asname or a.name.split(".")[0]) == name)
            only = (ast.ImportFrom(module=node.module, names=[alias], level=node.level)
                    if isinstance(node, ast.ImportFrom) else ast.Import(names=[alias]))
            exec(compile(ast.fix_missing_locations(ast.Module([only], [])),
                         "olmocr/pipeline.py", "exec"), namespace)
        else:
            raise LookupError(f"build_page_query uses {name}, which the harness cannot bind "
                              f"({type(node).__name__}): update tests/reference_pipelines.py")
    exec(compile(ast.Module([func], []), "olmocr/pipeline.py", "exec"), namespace)
    fn: Callable[..., Any] = namespace["build_page_query"]
    return fn, namespace


def _argparse_default(tree: ast.Module, option: str) -> Any:
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr == "add_argument" and node.args
                and isinstance(node.args[0], ast.Constant) and node.args[0].value == option):
            for kw in node.keywords:
                if kw.arg == "default":
                    return ast.literal_eval(kw.value)
    raise LookupError(f"olmocr/pipeline.py: no default for {option}")


@lru_cache(maxsize=1)
def olmocr_settings() -> dict[str, Any]:
    """The pipeline's defaults: the image's longest side, the attempts per page, the
    temperature of each attempt (its ladder, indexed as ``try_single_page`` indexes it)."""
    _, tree = _olmocr_pipeline()
    ladder_node = _top_level(tree, "TEMPERATURE_BY_ATTEMPT")
    assert isinstance(ladder_node, ast.Assign)
    ladder = [float(t) for t in ast.literal_eval(ladder_node.value)]
    # the indexing this module reproduces, as the reference writes it
    single = ast.unparse(_top_level(tree, "try_single_page"))
    for fragment in ("temp_idx = min(attempt, len(TEMPERATURE_BY_ATTEMPT) - 1)",
                     "temperature = TEMPERATURE_BY_ATTEMPT[temp_idx]",
                     "query['temperature'] = temperature"):
        if fragment not in single:
            raise LookupError(f"olmocr try_single_page changed ({fragment!r} is gone): "
                              "update tests/reference_pipelines.py")
    process = ast.unparse(_top_level(tree, "process_page"))
    for fragment in ("MAX_RETRIES = args.max_page_retries",
                     "retry_attempts = list(range(1, MAX_RETRIES))", "attempt=0"):
        if fragment not in process:
            raise LookupError(f"olmocr process_page changed ({fragment!r} is gone): "
                              "update tests/reference_pipelines.py")
    retries = int(_argparse_default(tree, "--max_page_retries"))
    return {
        "target_longest_image_dim": int(_argparse_default(tree, "--target_longest_image_dim")),
        "max_page_retries": retries,
        "temperature_by_attempt": ladder,
        # attempt 0, then retry_attempts 1..MAX_RETRIES-1 (sequential, or in parallel
        # when vLLM's queue is empty: the same attempt numbers either way)
        "temperatures": [ladder[min(a, len(ladder) - 1)] for a in range(retries)],
        "guided_decoding": _argparse_default_flag(tree, "--guided_decoding"),
    }


def _argparse_default_flag(tree: ast.Module, option: str) -> bool:
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr == "add_argument" and node.args
                and isinstance(node.args[0], ast.Constant) and node.args[0].value == option):
            kws = {kw.arg: kw.value for kw in node.keywords}
            if "default" in kws:
                return bool(ast.literal_eval(kws["default"]))
            action = kws.get("action")
            return isinstance(action, ast.Constant) and action.value == "store_false"
    raise LookupError(f"olmocr/pipeline.py: no option {option}")


def content_parts(content: list[dict[str, Any]]) -> tuple[str, Order, bytes]:
    """(prompt, order of the parts, image bytes) of a user message's content list: one
    text part and one ``image_url`` part with a base64 data URL."""
    kinds: list[Literal["text", "image"]] = []
    prompt, image = "", b""
    for part in content:
        if part["type"] == "text":
            kinds.append("text")
            prompt = part["text"]
        elif part["type"] == "image_url":
            kinds.append("image")
            url = part["image_url"]["url"]
            head, _, data = url.partition(",")
            if not head.endswith(";base64"):
                raise ValueError(f"image URL is not base64: {head[:40]}")
            image = base64.b64decode(data)
        else:
            raise ValueError(f"unexpected content part {part['type']!r}")
    if len(kinds) != 2:
        raise ValueError(f"expected one text and one image part, got {kinds}")
    return prompt, (kinds[0], kinds[1]), image


def _image_size_format(data: bytes) -> tuple[tuple[int, int], str]:
    from PIL import Image

    with Image.open(io.BytesIO(data)) as img:
        return (img.width, img.height), str(img.format)


@lru_cache(maxsize=64)
def olmocr_request(pdf: Path, page: int, rotation: int = 0) -> ReferenceRequest:
    """olmOCR 2's request for ``page`` (from 0) of ``pdf``, the image turned by
    ``rotation`` degrees as the pipeline turns it after the model asks for a correction."""
    settings = olmocr_settings()
    build_page_query, namespace = _olmocr_build_page_query()

    async def build() -> dict[str, Any]:
        namespace["pdf_render_max_workers_limit"] = asyncio.BoundedSemaphore(1)
        query: dict[str, Any] = await build_page_query(
            str(pdf), page + 1, settings["target_longest_image_dim"], image_rotation=rotation,
            model_name="olmocr")
        return query

    query = asyncio.run(build())
    [message] = query["messages"]
    if message["role"] != "user":
        raise ValueError(f"unexpected role {message['role']!r}")
    prompt, order, image = content_parts(message["content"])
    size, fmt = _image_size_format(image)
    # "temperature" there is a placeholder try_single_page overwrites
    extra = {k: v for k, v in query.items()
             if k not in ("model", "messages", "max_tokens", "temperature")}
    return ReferenceRequest(
        prompt=prompt, order=order, image_size=size, image_format=fmt,
        max_tokens=int(query["max_tokens"]),
        # try_single_page sets only the temperature; top_p is never sent
        sampling=[(t, query.get("top_p")) for t in settings["temperatures"]],
        image=image, extra=extra, rendered_size=size if not rotation else None,
    )


def olmocr_exact_size(pdf: Path, page: int) -> tuple[float, float]:
    """The unrounded (width, height) in pixels of olmOCR's render, as the image comes out
    (/Rotate applied): ``render_pdf_to_base64png`` passes pdftoppm the DPI (as text) that
    makes the longest side of the MediaBox *as pdfinfo prints it* (two decimals) 1288 px;
    pdftoppm applies it to the MediaBox itself and rounds each side up. A side a hair over
    1288 (float error, or a MediaBox of 841.9217 pt printed 841.92) comes out 1289 px.

    The MediaBox comes from pdfium here, in single precision (a few 1e-5 pt off the
    file's numbers): good to about 0.01 px."""
    _olmocr_module_file("data.renderpdf")
    import pypdfium2
    from olmocr.data.renderpdf import get_pdf_media_box_width_height

    longest = olmocr_settings()["target_longest_image_dim"]
    dpi = float(str(longest * 72 / max(get_pdf_media_box_width_height(str(pdf), page + 1))))
    doc = pypdfium2.PdfDocument(str(pdf))
    try:
        x0, y0, x1, y1 = doc[page].get_mediabox()
        turned = doc[page].get_rotation() in (90, 270)
    finally:
        doc.close()
    width, height = abs(x1 - x0) * dpi / 72, abs(y1 - y0) * dpi / 72
    return (height, width) if turned else (width, height)


def reference_olmocr_front_matter(text: str) -> FrontMatter:
    """What olmOCR's pipeline makes of a model answer (``try_single_page``): its
    ``FrontMatterParser(front_matter_class=PageResponse)`` extracts and parses the front
    matter; an exception there fails the attempt."""
    _olmocr_module_file("train.front_matter")  # installed, right version
    from olmocr.prompts import PageResponse
    from olmocr.train.front_matter import FrontMatterParser

    parser = FrontMatterParser(front_matter_class=PageResponse)
    try:
        front_matter, body = parser._extract_front_matter_and_text(text)
        response = parser._parse_front_matter(front_matter, body)
    except Exception as exc:  # the pipeline's own catch-all: the attempt is discarded
        return FrontMatter(None, f"{type(exc).__name__}: {exc}")
    return FrontMatter({f.name: getattr(response, f.name) for f in fields(response)})


# --- Chandra (parent side) ----------------------------------------------------------------


class _ChandraWorker:
    """A child process running one chandra-ocr version; one JSON line each way per call."""

    def __init__(self, version: int) -> None:
        self.version = version
        env = dict(os.environ)
        if version == 1:
            if not (CHANDRA1_DIR / f"chandra_ocr-{CHANDRA_VERSIONS[1]}.dist-info").is_dir():
                raise ReferenceMissingError(
                    f"chandra-ocr {CHANDRA_VERSIONS[1]} is not in {CHANDRA1_DIR}: "
                    "run scripts/setup.sh --test")
            env["PYTHONPATH"] = os.pathsep.join(
                [str(CHANDRA1_DIR), *filter(None, [env.get("PYTHONPATH")])])
        self._stderr = tempfile.TemporaryFile()
        self._lock = threading.Lock()
        self._proc = subprocess.Popen(
            [sys.executable, str(Path(chandra_child.__file__).resolve()), WORKER_FLAG,
             str(version), CHANDRA_VERSIONS[version]],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr,
            env=env, cwd=tempfile.gettempdir(),
        )
        self.info: dict[str, Any] = self.call("info")

    def stderr_tail(self) -> str:
        self._stderr.seek(0)
        return self._stderr.read().decode(errors="replace")[-3000:]

    def call(self, op: str, **args: Any) -> Any:
        assert self._proc.stdin is not None and self._proc.stdout is not None
        with self._lock:
            try:
                self._proc.stdin.write((json.dumps({"op": op, "args": args}) + "\n").encode())
                self._proc.stdin.flush()
                ready, _, _ = select.select([self._proc.stdout], [], [], _WORKER_TIMEOUT_S)
                line = self._proc.stdout.readline() if ready else b""
            except BrokenPipeError:
                line = b""
            if not line:
                self.close()
                raise RuntimeError(f"chandra {self.version} reference worker died or hung on "
                                   f"{op!r}:\n{self.stderr_tail()}")
        reply = json.loads(line)
        if "error" in reply:
            raise RuntimeError(f"chandra {self.version} reference, {op}: {reply['error']}")
        return reply["ok"]

    def close(self) -> None:
        if self._proc.poll() is None:
            try:
                assert self._proc.stdin is not None
                self._proc.stdin.close()
                self._proc.wait(timeout=10)
            except (OSError, subprocess.TimeoutExpired):
                self._proc.kill()
                self._proc.wait()
        self._stderr.close()


_WORKERS: dict[int, _ChandraWorker] = {}
_WORKERS_LOCK = threading.Lock()


def _chandra(version: int) -> _ChandraWorker:
    if version not in CHANDRA_VERSIONS:
        raise ValueError(f"chandra version is 1 or 2, not {version!r}")
    with _WORKERS_LOCK:
        worker = _WORKERS.get(version)
        if worker is None or worker._proc.poll() is not None:
            worker = _WORKERS[version] = _ChandraWorker(version)
        return worker


@atexit.register
def _close_workers() -> None:
    for worker in _WORKERS.values():
        worker.close()


def chandra_info(version: int) -> dict[str, Any]:
    """The child's chandra: version, where it was imported from, its settings."""
    return dict(_chandra(version).info)


@lru_cache(maxsize=64)
def chandra_request(pdf: Path, page: int, version: int) -> ReferenceRequest:
    """Chandra ``version``'s request for ``page`` (from 0) of ``pdf``, every attempt."""
    got = _chandra(version).call("request", pdf=str(pdf), page=page)
    calls = got["calls"]
    first = calls[0]
    [message] = first["messages"]
    prompt, order, image = content_parts(message["content"])
    for call in calls[1:]:  # retries resend the same page and prompt
        if content_parts(call["messages"][0]["content"]) != (prompt, order, image) \
                or call["max_tokens"] != first["max_tokens"]:
            raise ValueError("chandra's retry changed the request beyond its sampling")
    size, fmt = _image_size_format(image)
    extra = {k: v for k, v in first.items()
             if k not in ("model", "messages", "max_tokens", "temperature", "top_p")}
    return ReferenceRequest(
        prompt=prompt, order=order, image_size=size, image_format=fmt,
        max_tokens=int(first["max_tokens"]),
        sampling=[(float(c["temperature"]),
                   None if c.get("top_p") is None else float(c["top_p"])) for c in calls],
        image=image, extra=extra,
        rendered_size=(int(got["rendered"][0]), int(got["rendered"][1])),
    )


def reference_request(pdf: Path, page: int, preset: str, *, rotation: int = 0) -> ReferenceRequest:
    """The reference's request for folio preset ``preset`` ("olmocr2", "chandra",
    "chandra2"), page ``page`` from 0."""
    family, version = PRESET_REFERENCE[preset]
    pdf = Path(pdf).resolve()
    if family == "olmocr":
        return olmocr_request(pdf, page, rotation)
    if rotation:
        raise ValueError("chandra never rotates a page image")
    return chandra_request(pdf, page, version)


def chandra_version(version_or_preset: int | str) -> int:
    """1 or 2, from a version number or a folio preset name ("chandra", "chandra2")."""
    if isinstance(version_or_preset, str):
        family, version = PRESET_REFERENCE[version_or_preset]
        if family != "chandra":
            raise ValueError(f"{version_or_preset} is not a chandra preset")
        return version
    return version_or_preset


def reference_chandra_markdown(
    html: str, version: int | str, *, include_headers_footers: bool = False,
    include_images: bool = True,
) -> str:
    """``chandra.output.parse_markdown(html)`` of that version, with the CLI's defaults
    (headers and footers left out, images in)."""
    return str(_chandra(chandra_version(version)).call(
        "markdown", html=html, include_headers_footers=include_headers_footers,
        include_images=include_images))


def reference_chandra_layout(
    html: str, image_size: tuple[int, int], version: int | str,
) -> list[ReferenceBlock]:
    """``chandra.output.parse_layout(html, image)`` of that version for an image of
    ``image_size``: label, box in that image's pixels, inner HTML, per top-level div."""
    got = _chandra(chandra_version(version)).call(
        "layout", html=html, width=image_size[0], height=image_size[1])
    return [ReferenceBlock(label=b["label"], bbox=(b["bbox"][0], b["bbox"][1], b["bbox"][2],
                                                   b["bbox"][3]), content=b["content"])
            for b in got]
