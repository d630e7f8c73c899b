"""GIL a GPU request's body costs folio to encode: ``json.dumps`` of the whole body against
folio's encoder, which splices the page's base64 image in (folio/engines/openai_engine.py
``encode_body``), side by side on the same pages.

    .venv/bin/python bench/request_body.py --pdfs ../shared/corpus --pages 100

The pages are rendered as folio renders them for the olmocr2 preset (its longest side and
pixel cap, PNG) and sent as folio sends them (``encode_image``, the engine's own request
body). ``json.dumps`` holds the GIL for all of its work, and a GPU run encodes a body for
every page while hundreds of page threads wait on the GIL, so its milliseconds are GIL
milliseconds. Results: ``bench/results/request_body.json``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from _measure import readable_pdfs, save


def page_images(pdfs: Path, pages: int, into: Path) -> list[Path]:
    """The first ``pages`` pages of the PDFs (sorted), rendered for olmocr2 as PNG."""
    from folio.pdf.pdfium_doc import render
    from folio.settings.presets import get_preset

    preset = get_preset("olmocr2")
    out: list[Path] = []
    for _, doc in readable_pdfs(pdfs):
        for page in doc:
            width, height = page.get_size()
            scale = min(preset.longest_side_px / max(width, height),
                        (preset.max_pixels / (width * height)) ** 0.5)
            path = into / f"{len(out):04d}.png"
            render(page, max(1, int(width * scale)), max(1, int(height * scale))).save(path)
            out.append(path)
            if len(out) >= pages:
                return out
    return out


def main() -> None:
    from folio.engines.openai_engine import OpenAIEngine
    from folio.engines.openai_wire import encode_body, encode_image
    from folio.gpu.vllm_server import RemoteEndpoint
    from folio.settings.config import PipelineConfig

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pdfs", default=str(ROOT.parent / "shared" / "corpus"))
    ap.add_argument("--pages", type=int, default=100)
    ap.add_argument("--repeats", type=int, default=20)
    args = ap.parse_args()
    config = PipelineConfig.model_validate({"ocr": {"engine": "vllm", "preset": "olmocr2",
                                                    "model": "m"}})
    engine = OpenAIEngine.from_config(config, endpoint=RemoteEndpoint("http://127.0.0.1:9/v1"))
    with tempfile.TemporaryDirectory() as tmp:
        images = page_images(Path(args.pdfs), args.pages, Path(tmp))
        bodies = [engine._body(encode_image(p, engine.preset.max_pixels)[0], engine.sampling_for(0))
                  for p in images]
    engine.close()

    def dumps(body: dict[str, Any]) -> bytes:  # what httpx's json= did before
        return json.dumps(body, ensure_ascii=False, separators=(",", ":"),
                          allow_nan=False).encode()

    timings: dict[str, list[float]] = {"json_dumps": [], "folio_encode": []}
    for _ in range(args.repeats):  # alternating, so both meet the same moments of the host
        for name, encode in (("json_dumps", dumps), ("folio_encode", encode_body)):
            started = time.perf_counter()
            for body in bodies:
                encode(body)
            timings[name].append((time.perf_counter() - started) * 1000 / len(bodies))
    assert all(encode_body(b) == dumps(b) for b in bodies), "the bytes differ"
    ms = {name: round(statistics.median(values), 3) for name, values in timings.items()}
    mib = statistics.median(len(dumps(b)) for b in bodies) / 2**20
    save("request_body", {
        "pages": len(bodies), "body_mib_median": round(mib, 2),
        "ms_per_body_median": ms,
        "ratio": round(ms["json_dumps"] / ms["folio_encode"], 1),
        "same_bytes": True,
        "settings": {"preset": {"value": "olmocr2", "why": "the GPU benchmark's preset"},
                     "temperature": {"value": 0.0, "why": "the first attempt's"}},
    })


if __name__ == "__main__":
    main()
