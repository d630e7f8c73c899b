"""Give a synthetic model's tokenizer word-like tokens, so its random output reads like text.

Why: ../shared/device/make_synthetic_vlm.py names the 151,387 ordinary tokens of its
Qwen2-sized vocabulary ``<|filler_N|>``. A model with random weights emits them at random,
so every page of a GPU benchmark came back as about 12,500 characters of ``<|filler_N|>``
marks for its 768 tokens: four times the text an OCR model's 768 tokens give (Qwen's
tokenizer averages about four characters a token on prose). folio parses, checks, chunks
and embeds every character of it, so the benchmark's pipeline phase spent 1.75x the host
CPU a page of prose-like text (bench/output_text_cost.py measures both) on the same cores
as vLLM's front end.

Here each of those tokens gets the text of a token of prose instead: mostly a space and a
word (common English words by their frequency, else pronounceable pseudo-words), some a
word's ending, a comma or a full stop, about one in sixty a paragraph's end. A mark made
of the token's id keeps the texts distinct in the vocabulary, and the decoder removes it.
Drawn uniformly, as random weights draw them, the tokens average about 4.5 characters.
The token ids, the special tokens and the byte tokens are untouched, and with no merges
the tokenizer still encodes a prompt one byte a token: prompt lengths, and so the GPU's
work, stay what they were.

    python3 .device-carry/make_synthetic_vlm.py /tmp/synthetic-vlm
    python3 bench/synthetic_text_vocab.py /tmp/synthetic-vlm
"""

from __future__ import annotations

import json
import random
import re
import sys
from pathlib import Path

FILLER = re.compile(r"<\|filler_(\d+)\|>")

#: common English words, most frequent first: about half of prose's tokens are words like
#: these (weighted 1/rank below, as word frequencies fall)
_COMMON = (
    "the of and to a in is that for it as with was on be by are this at from or an have "
    "which not but has were their its can all one more also been other these they than "
    "into some only between such each when may used two first new data time over most "
    "both where after system number results based table use model figure three same under "
    "we our per total value case shown high using during work while about section"
).split()
_ONSETS = ["", "b", "c", "d", "f", "g", "h", "l", "m", "n", "p", "r", "s", "t", "v", "w",
           "st", "tr", "pl", "ch", "th", "pr", "br", "cl"]
_VOWELS = ["a", "e", "i", "o", "u", "a", "e", "i", "o", "ea", "ou", "ai", "io"]
_CODAS = ["", "", "n", "r", "s", "t", "l", "nd", "st", "ng", "m", "ct"]
_ENDINGS = ["s", "ed", "ing", "er", "ly", "tion", "al", "ment", "es", "ity", "ive", "ous"]
#: a mark that keeps each token's text distinct in the vocabulary (many tokens share a
#: word, as real prose repeats them); the tokenizer's decoder removes it
MARK = r"~[0-9]+~"


def _syllable(rng: random.Random) -> str:
    return rng.choice(_ONSETS) + rng.choice(_VOWELS) + rng.choice(_CODAS)


def _word(rng: random.Random) -> str:
    if rng.random() < 0.55:  # a common word, by a 1/rank law
        return rng.choices(_COMMON, weights=[1 / (r + 1) for r in range(len(_COMMON))])[0]
    word = _syllable(rng) + (_syllable(rng) if rng.random() < 0.4 else "")
    return word.capitalize() if rng.random() < 0.12 else word


def piece(rng: random.Random) -> str:
    """One token's text, drawn as prose spreads them: mostly a space and a word, some a
    word's ending, some punctuation, about one in sixty a paragraph's end."""
    roll = rng.random()
    if roll < 0.015:
        return ".\n\n"
    if roll < 0.05:
        return "."
    if roll < 0.09:
        return ","
    if roll < 0.17:
        return rng.choice(_ENDINGS)
    return " " + _word(rng)


def sample_text(tokens: int, seed: int = 0) -> str:
    """What a random-weight model answers in ``tokens`` tokens of a rewritten vocabulary:
    its tokens are drawn about uniformly, so their texts are :func:`piece` draws."""
    rng = random.Random(seed)
    return "".join(piece(rng) for _ in range(tokens)).lstrip()


def byte_level(text: str) -> str:
    """GPT-2's byte-level form of ``text`` for the characters pieces use: printable ASCII
    is itself, a space "\u0120", a newline "\u010a"."""
    return text.replace(" ", "\u0120").replace("\n", "\u010a")


def rewrite(folder: Path, seed: int = 0) -> int:
    """Give ``folder``'s tokenizer.json word-like filler tokens; the number rewritten."""
    path = folder / "tokenizer.json"
    data = json.loads(path.read_text())
    vocab: dict[str, int] = data["model"]["vocab"]
    if not any(FILLER.fullmatch(token) for token in vocab):
        return 0  # already rewritten
    rng = random.Random(seed)
    renamed = 0
    out: dict[str, int] = {}
    for token, i in vocab.items():
        if FILLER.fullmatch(token):
            token = f"{byte_level(piece(rng))}~{i}~"
            renamed += 1
        out[token] = i
    data["model"]["vocab"] = out
    data["decoder"] = {"type": "Sequence", "decoders": [
        data["decoder"], {"type": "Replace", "pattern": {"Regex": MARK}, "content": ""}]}
    path.write_text(json.dumps(data, ensure_ascii=False))
    return renamed


if __name__ == "__main__":
    for arg in sys.argv[1:] or ["/tmp/synthetic-vlm"]:
        print(f"{arg}: {rewrite(Path(arg))} filler tokens now decode to word-like text")
