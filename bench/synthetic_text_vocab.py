"""Give a synthetic model's tokenizer word-like tokens, so its random output reads like text.

Why: ../shared/device/make_synthetic_vlm.py names the 151,387 ordinary tokens of its
Qwen2-sized vocabulary ``<|filler_N|>``. A model with random weights emits them at random,
so every page of a GPU benchmark came back as about 12,500 characters of ``<|filler_N|>``
marks for its 768 tokens: four times the text an OCR model's 768 tokens give (Qwen's
tokenizer averages about four characters a token on prose). folio parses, checks, chunks
and embeds every character of it, so the benchmark's pipeline phase spent 1.75x the host
CPU a page of prose-like text (bench/output_text_cost.py measures both) on the same cores
as vLLM's front end.

Here each of those tokens gets the text of a token of prose instead: a space and a word
(common English words, pronounceable pseudo-words), a word's ending, a comma or a full
stop, a paragraph's end; where that text is taken already (a vocabulary holds each text
once), a short run of letters, so the tokens average about 4.5 characters. The token ids,
the special tokens and the byte tokens are untouched, and with no merges the tokenizer
still encodes a prompt one byte a token: prompt lengths, and so the GPU's work, stay what
they were.

Why every text is unique, with no mark to tell twins apart: an earlier version named twins
``the~123~`` and had the tokenizer's decoder remove the mark (a ``Replace`` step). vLLM
does not use that decoder (transformers builds a Qwen2 tokenizer's decoder itself, from the
class), so on the H200 at 1dabbb9 every answer kept its marks: 8,448 characters for 768
tokens, 11 a token.

What the model answers is another matter: random weights decoded greedily fall into a loop
of a few tokens (`` as Brer as Brer ...``, repeat ratio 0.997), which folio's loop check
refuses; the benchmarks set ``validation.max_repeat_ratio`` to 1.0 and say why
(bench/gpu_bench_settings.py SETTINGS).

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
    """Prose-like text of ``tokens`` tokens drawn as :func:`piece` draws them: what an OCR
    model's answer of that length is like, for a test server to answer with."""
    rng = random.Random(seed)
    return "".join(piece(rng) for _ in range(tokens)).lstrip()


_LETTERS = "abcdefghijklmnopqrstuvwxyz"


def unique_piece(rng: random.Random, taken: set[str]) -> str:
    """A token's text whose byte-level form ``taken`` does not hold yet (the vocabulary so
    far, byte tokens included): a :func:`piece` draw if it is free and short, else a run of
    3-4 letters after a space, capitalized or not, or 3 letters that continue a word;
    about 4.5 characters on average, as prose's tokens are."""
    text = piece(rng)
    if byte_level(text) not in taken and len(text) <= 5:  # long pseudo-words lift the average
        return text
    while True:
        roll = rng.random()
        letters = "".join(rng.choice(_LETTERS) for _ in range(3 if roll < 0.45 else 4))
        text = (letters if roll < 0.15 else " " + letters.capitalize() if roll < 0.3
                else " " + letters)
        if byte_level(text) not in taken:
            return text


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
    taken = {token for token in vocab if not FILLER.fullmatch(token)}  # bytes, specials
    for token, i in vocab.items():
        if FILLER.fullmatch(token):
            token = byte_level(unique_piece(rng, taken))
            taken.add(token)
            renamed += 1
        out[token] = i
    data["model"]["vocab"] = out
    path.write_text(json.dumps(data, ensure_ascii=False))
    return renamed


if __name__ == "__main__":
    for arg in sys.argv[1:] or ["/tmp/synthetic-vlm"]:
        print(f"{arg}: {rewrite(Path(arg))} filler tokens now decode to word-like text")
