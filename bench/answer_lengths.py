"""The token counts of real OCR answers, for benchmarks on synthetic weights.

    python bench/answer_lengths.py [--corpus ../shared/corpus]

Synthetic weights answer noise, so a GPU benchmark fixes each page's token count
(``ignore_eos``). Which counts: those of olmOCR 2's own published answers to its bench
pages (../shared/corpus/olmocr/bench_answers, front matter put back as the model writes
it), estimated as UTF-8 bytes / 4 rounded up (no Qwen tokenizer ships offline; English
runs about 4 bytes a token), then 768, the fixed count of earlier runs. Prints the list
that bench/gpu_bench_settings.py's ANSWER_LENGTHS holds.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FRONT = ("---\nprimary_language: en\nis_rotation_valid: True\nrotation_correction: 0\n"
         "is_table: False\nis_diagram: False\n---\n")


def answer_lengths(answers: Path) -> list[int]:
    files = sorted(answers.glob("*_repeat1.md"))
    return [math.ceil(len((FRONT + f.read_text()).encode()) / 4) for f in files] + [768]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", default=str(ROOT.parent / "shared" / "corpus"))
    args = ap.parse_args()
    print(json.dumps(answer_lengths(Path(args.corpus) / "olmocr" / "bench_answers")))


if __name__ == "__main__":
    main()
