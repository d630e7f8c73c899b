"""bench/synthetic_text_vocab: a synthetic model's random answers read like text, and
nothing the GPU does changes (same ids, same prompt encoding)."""

from __future__ import annotations

import json
import random
import statistics
from pathlib import Path

from tokenizers import Tokenizer, decoders, models, pre_tokenizers

from bench.synthetic_text_vocab import rewrite, sample_text

SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]


def _synthetic_tokenizer(folder: Path, fillers: int) -> Path:
    """A small tokenizer built as ../shared/device/make_synthetic_vlm.py builds its own:
    byte-level BPE without merges, 256 byte symbols, filler tokens, special tokens."""
    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    vocab = {ch: i for i, ch in enumerate(alphabet)}
    for i in range(len(vocab), len(vocab) + fillers):
        vocab[f"<|filler_{i}|>"] = i
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens(SPECIALS)
    folder.mkdir(parents=True, exist_ok=True)
    tok.save(str(folder / "tokenizer.json"))
    return folder / "tokenizer.json"


def test_random_answers_read_like_text_and_prompts_encode_the_same(tmp_path: Path) -> None:
    path = _synthetic_tokenizer(tmp_path / "model", fillers=20_000)
    before = Tokenizer.from_file(str(path))
    assert rewrite(path.parent) == 20_000
    after = Tokenizer.from_file(str(path))

    assert after.get_vocab_size() == before.get_vocab_size()
    for special in SPECIALS:
        assert after.token_to_id(special) == before.token_to_id(special)
    prompt = "Return the page's text as markdown.\nTables as HTML: <table> ... café 42"
    assert after.encode(prompt).ids == before.encode(prompt).ids  # one byte a token, as before

    rng = random.Random(7)
    ids = list(range(256, 256 + 20_000))
    answers = [after.decode([rng.choice(ids) for _ in range(768)]) for _ in range(10)]
    filler = before.decode([rng.choice(ids) for _ in range(768)])
    chars = statistics.median(len(a) for a in answers) / 768
    assert 3.5 < chars < 5.5, chars  # prose's characters a token, not 16 for a filler mark
    assert len(filler) / 768 > 12
    for answer in answers:
        assert "~" not in answer and "filler" not in answer
        words = answer.split()
        assert len(words) > 768 / 2 and all(w.strip(".,").isalpha() for w in words if w.strip(".,"))
    # what the server shows: no step of the file's decoder is needed to read the answers
    # (vLLM does not run it): each token's own text, byte-level, is already the answer's
    pieces = [str(after.id_to_token(i)) for i in ids[:2000]]
    assert len(set(pieces)) == len(pieces)
    raw = "".join(pieces).replace("\u0120", " ").replace("\u010a", "\n")
    assert raw == after.decode(ids[:2000])


def test_rewrite_is_idempotent_and_keeps_the_other_settings(tmp_path: Path) -> None:
    path = _synthetic_tokenizer(tmp_path / "model", fillers=500)
    assert rewrite(path.parent) == 500
    first = path.read_text()
    assert rewrite(path.parent) == 0
    assert path.read_text() == first
    data = json.loads(first)
    assert data["pre_tokenizer"]["type"] == "ByteLevel"
    assert data["decoder"]["type"] == "ByteLevel"  # untouched


def test_sample_text_has_the_tokenizer_s_distribution() -> None:
    text = sample_text(768, seed=1)
    assert text == sample_text(768, seed=1)
    assert 3.5 * 768 < len(text) < 5.5 * 768
