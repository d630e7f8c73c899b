"""The preflight answer for every hardware profile and the reference OCR models.

    python bench/preflight_report.py [--out bench/results/preflight.json]

Models: Chandra (Qwen3-VL-8B class, ~8.8 B parameters with the vision tower), olmOCR 2
(Qwen2.5-VL-7B, ~8.3 B) in bf16 and its FP8 release. Configs are in bench/models/. Each
entry is the full PreflightResult (numbers, fit, the advice); the JSON records the
command that made it.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from folio.gpu.preflight import ModelShape, preflight
from folio.gpu.profiles import load_profiles
from folio.settings.presets import get_preset

MODELS = {
    "chandra (qwen3-vl-8b, bf16)": ("chandra-qwen3-vl-8b.json", "chandra"),
    "chandra2 (qwen3-vl-8b, bf16)": ("chandra-qwen3-vl-8b.json", "chandra2"),
    "olmocr2 (qwen2.5-vl-7b, bf16)": ("olmocr2-qwen2.5-vl-7b.json", "olmocr2"),
    "olmocr2-fp8 (qwen2.5-vl-7b, fp8)": ("olmocr2-qwen2.5-vl-7b-fp8.json", "olmocr2"),
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "preflight.json"))
    ap.add_argument("--max-tokens", type=int, default=None,
                    help="output budget of one page (default: each preset's own)")
    args = ap.parse_args()
    profiles = load_profiles()
    results = []
    for label, (file, preset_name) in MODELS.items():
        config = json.loads((ROOT / "bench" / "models" / file).read_text())
        shape = ModelShape.from_config(config, name=label)
        preset = get_preset(preset_name)
        max_tokens = args.max_tokens or preset.max_tokens
        for profile in profiles.values():
            pixels = min(preset.max_pixels, profile.render.max_pixels)
            page_tokens = shape.image_tokens(pixels) + 500 + max_tokens
            r = preflight(shape, profile, page_tokens=page_tokens, max_tokens=max_tokens,
                          others=profiles)
            results.append({"model": label, "preset": preset_name, **r.model_dump()})
    report = {
        "command": "python bench/preflight_report.py " + " ".join(sys.argv[1:]),
        "generated": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "note": "estimates from config.json; weights and KV cache exact, activations and "
                "CUDA graphs a conservative estimate; page_tokens = image tokens at the "
                "smaller of the preset's and the profile's pixel budget + 500 + max_tokens "
                "(the preset's own: its reference pipeline's)",
        "results": results,
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=1) + "\n")
    for row in results:
        sys.stdout.write(
            f"{row['model']:34} {row['profile']:14} {'fits' if row['fits'] else 'NO':4} "
            f"total {row['total_gib']:6.2f} / {row['budget_gib']:6.2f} GiB, "
            f"max_model_len {row['max_model_len']} (fits up to {row['max_model_len_that_fits']})\n")


if __name__ == "__main__":
    main()
