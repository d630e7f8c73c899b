"""An onnxruntime CPU session as folio's models use it (the embedder, the layout model)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from folio.errors import ConfigError


def cpu_session(path: Path, *, threads: int, what: str) -> Any:
    """A session on the CPU provider with ``threads`` intra-op threads and no idle
    spinning (spinning threads burn shared cores between calls).

    Raises:
        ConfigError: the file is not a model onnxruntime can load (``what`` names it).
    """
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    try:
        return ort.InferenceSession(str(path), sess_options=options,
                                    providers=["CPUExecutionProvider"])
    except Exception as exc:  # onnxruntime raises its own untyped errors
        raise ConfigError(f"cannot load {what} {path}: {exc}") from exc
