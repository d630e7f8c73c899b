"""Pure helpers that judge text an engine produced, and compare text with a reference.

Vision-language models fail in recognisable ways: they loop ("the the the ...", one table
row fifty times) and they stop at the token budget in the middle of a table. The retry
ladder, the validation suite and the accuracy harness all need the same measures, so
they live here, free of I/O and of any engine.

Example:
    >>> repeat_ratio("the " * 200) > 0.9
    True
    >>> repeat_ratio("A short, ordinary sentence about a quarterly report.")
    0.0
"""

from __future__ import annotations

import difflib
import re
import unicodedata
from collections import Counter
from collections.abc import Iterable

from folio.models import Block

_TAG = re.compile(r"<[^>]{0,200}>")
_WORD = re.compile(r"\w+", re.UNICODE)
_HAS_WORD_CHAR = re.compile(r"\w", re.UNICODE)

#: average whitespace-separated token longer than this means a script written without
#: spaces (Chinese, Japanese, Thai) or one unbroken run: measure characters instead.
_MAX_MEAN_WORD_CHARS = 10.0
#: character n-grams per word n-gram when falling back to characters (CJK words are 1-3
#: characters, so 4 words are about 8 characters).
_CHARS_PER_WORD = 2


def _tokens(text: str) -> tuple[list[str], bool]:
    """Word tokens, or characters for scripts without spaces (then the flag is True).

    HTML tags and punctuation-only tokens (table pipes, ``---`` rules) are removed first:
    they repeat in every legitimate table and would otherwise look like a loop.
    """
    plain = _TAG.sub(" ", text)
    words = [w for w in plain.split() if _HAS_WORD_CHAR.search(w)]
    if words and sum(map(len, words)) / len(words) > _MAX_MEAN_WORD_CHARS:
        return [c for c in plain if _HAS_WORD_CHAR.match(c)], True
    return words, False


def repeat_ratio(text: str, n: int = 4) -> float:
    """Share of the text (0..1) made of n-grams that already occurred earlier in it.

    A model stuck in a loop scores close to 1 (``"the the the ..."``, a line repeated 50
    times); ordinary prose scores close to 0, because four-word sequences rarely recur. A
    text repeated twice scores about 0.5. Counting only *re*-occurrences (not the first
    one) keeps one legitimately repeated phrase from costing more than its copies.

    Works on words; for scripts written without spaces it falls back to character
    n-grams of ``2 * n`` characters. Texts shorter than two n-grams score 0.

    Args:
        text: engine output (markdown or HTML; tags and punctuation-only tokens ignored).
        n: n-gram length in words.
    """
    if n < 1:
        raise ValueError("n must be >= 1")
    tokens, chars = _tokens(text)
    if chars:
        n *= _CHARS_PER_WORD
    total = len(tokens)
    if total < 2 * n:
        return 0.0
    seen: set[tuple[str, ...]] = set()
    covered = 0
    covered_until = 0  # tokens before this position are already counted
    for i in range(total - n + 1):
        gram = tuple(tokens[i : i + n])
        if gram in seen:
            end = i + n
            covered += end - max(i, covered_until)
            covered_until = end
        else:
            seen.add(gram)
    return covered / total


def repeats_at_end(text: str) -> bool:
    """Whether ``text`` ends in a run of one repeated sequence, as Chandra judges an answer
    to retry (chandra/model/util.py detect_repeat_token, chandra-ocr 0.2.0: a sequence of
    1-250 characters at the end, repeated more than ``4 * (1 + 3 / length)`` times; also
    checked with the last 50 characters cut off, so a loop cut mid-sequence counts)."""
    return _repeat_tail(text) or (len(text) > 50 and _repeat_tail(text[:-50]))


def _repeat_tail(text: str, window: int = 500) -> bool:
    for length in range(1, window // 2 + 1):
        pos = len(text) - length
        if pos < 0:
            continue
        tail = text[-length:]
        limit = int(4 * (1 + 3.0 / length))
        count = 0
        while pos >= 0 and text[pos:pos + length] == tail:
            count += 1
            if count > limit:
                return True
            pos -= length
    return False


def most_repeated(text: str, n: int = 4) -> tuple[str, int]:
    """The most frequent n-gram and its count, for error messages ("'the the the the' x 97")."""
    tokens, chars = _tokens(text)
    if chars:
        n *= _CHARS_PER_WORD
    if len(tokens) < n:
        return "", 0
    sep = "" if chars else " "
    counts = Counter(tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1))
    gram, count = counts.most_common(1)[0]
    return sep.join(gram), count


_OPENERS = ("table", "tr", "td", "th", "div", "ul", "ol", "math")


def truncation_reason(text: str, finish_reason: str | None = None) -> str | None:
    """Why the output looks cut off, or None.

    A page ending mid-sentence is normal (the sentence continues on the next page), so only
    structural evidence counts: the server said it hit the token budget, a code fence or
    display-math block is left open, or an HTML element (tables above all) is not closed.
    """
    if finish_reason == "length":
        return "finish_reason=length (token budget hit)"
    if text.count("```") % 2:
        return "unclosed code fence"
    if text.count("$$") % 2:
        return "unclosed $$ math block"
    lowered = text.lower()
    for tag in _OPENERS:
        opened = len(re.findall(rf"<{tag}[\s>]", lowered))
        closed = lowered.count(f"</{tag}>")
        if opened > closed:
            return f"unclosed <{tag}> ({opened} opened, {closed} closed)"
    return None


def looks_truncated(text: str, finish_reason: str | None = None) -> bool:
    """True when :func:`truncation_reason` finds evidence the output was cut off."""
    return truncation_reason(text, finish_reason) is not None


def text_chars(text: str) -> int:
    """Characters other than whitespace: the size measure the validation suite uses."""
    return sum(1 for c in text if not c.isspace())


def normalize_words(text: str) -> list[str]:
    """Lower-cased word tokens after Unicode compatibility folding (for comparisons)."""
    folded = unicodedata.normalize("NFKC", text).lower()
    return _WORD.findall(folded)


def word_recall(reference: str, hypothesis: str) -> float:
    """Share of the reference's words (as a multiset) that the hypothesis contains.

    Order-free, so two columns read in a different order still score well: it measures
    what retrieval needs (the words are there), not layout.
    """
    ref = Counter(normalize_words(reference))
    total = sum(ref.values())
    if not total:
        return 1.0
    hyp = Counter(normalize_words(hypothesis))
    return sum(min(count, hyp[word]) for word, count in ref.items()) / total


def sequence_similarity(reference: str, hypothesis: str) -> float:
    """difflib ratio (0..1) of the two word sequences: penalises reading-order mistakes."""
    a, b = normalize_words(reference), normalize_words(hypothesis)
    if not a and not b:
        return 1.0
    return difflib.SequenceMatcher(None, a, b, autojunk=False).ratio()


def weighted_mean(pairs: Iterable[tuple[float, int]]) -> float | None:
    """The mean of ``(value, weight)`` pairs by weight; None when the weights sum to 0."""
    pairs = list(pairs)
    weight = sum(n for _, n in pairs)
    if not weight:
        return None
    return sum(v * n for v, n in pairs) / weight


def mean_confidence(blocks: Iterable[Block]) -> float | None:
    """The engine's confidence in a page (0..1), weighted by each block's characters; None
    when it reports none (text layers, vision-language models)."""
    return weighted_mean((b.confidence, text_chars(b.content))
                         for b in blocks if b.confidence is not None)
