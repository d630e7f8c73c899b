"""RapidOCR in another interpreter, for bench/ocr_engines.py ``--rapidocr-python``.

Run by that interpreter (one that has rapidocr, e.g. a venv made for it, when folio's own
cannot take it: rapidocr pulls opencv-python-headless, whose cv2 clashes with
opencv-python's). Reads one image path a line on stdin and answers one JSON line each:
RapidOCR's boxes, texts, scores and word results, with the CPU seconds of this process
(every thread) and the wall seconds the page took. Imports nothing from folio.

    /path/to/python bench/_rapidocr_child.py THREADS
"""

from __future__ import annotations

import json
import resource
import sys
import time
from typing import Any


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _plain(value: Any) -> Any:
    if hasattr(value, "tolist"):
        return value.tolist()
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def main() -> None:
    from importlib.metadata import version

    from rapidocr import RapidOCR

    threads = int(sys.argv[1]) if len(sys.argv) > 1 else 1
    ocr = RapidOCR(params={
        "Global.log_level": "warning",
        "EngineConfig.onnxruntime.intra_op_num_threads": threads,
        "EngineConfig.onnxruntime.inter_op_num_threads": 1,
    })
    print(json.dumps({"ready": version("rapidocr")}), flush=True)
    for line in sys.stdin:
        path = line.strip()
        if not path:
            continue
        cpu, wall = _cpu(), time.perf_counter()
        try:
            out = ocr(path, return_word_box=True)
            answer = {"boxes": _plain(getattr(out, "boxes", None)),
                      "txts": _plain(getattr(out, "txts", None)),
                      "scores": _plain(getattr(out, "scores", None)),
                      "word_results": _plain(getattr(out, "word_results", None))}
        except Exception as exc:  # reported to the parent, which fails the page
            answer = {"error": f"{type(exc).__name__}: {exc}"}
        answer |= {"cpu_s": _cpu() - cpu, "wall_s": time.perf_counter() - wall}
        print(json.dumps(answer), flush=True)


if __name__ == "__main__":
    main()
