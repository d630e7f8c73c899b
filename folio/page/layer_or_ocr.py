"""Never worse than what was there: an OCR reading replaces a page's own text layer only
when it is better by a measure anyone can check, and a page whose reading failed falls
back to the layer's text whatever the layer scored.

Why: the router sends a page to OCR when its text layer is not trusted (below
``route.min_score``), but an untrusted layer can still be the better text: an earlier
OCR hidden under a newspaper scan held 3,718 words where a new OCR at the render's
resolution found 169; a page printing a font's character table has an exact layer that
scores low (few words, many symbols) while tesseract reads it at 40% confidence. The
measure, on both texts, is their words and the text layer's own judgement
(:func:`folio.pdf.text_layer.score_text`, applied to the OCR's text too): OCR wins unless
it has fewer than :data:`MIN_WORD_SHARE` of the layer's words, keeps fewer than
:data:`KEEP_SHARE` of the layer's distinct words without scoring better (and holding as
many), or it scores below the layer. A layer the text-layer engine would refuse (junk) does not beat a reading with
words; it does beat a reading with none, and it is the last resort of a page whose every
engine failed (:func:`layer_holds_text`): the page's text with a reason beats a
quarantined page. Pure.
"""

from __future__ import annotations

import unicodedata

from folio.engines.text_layer import DEFAULT_MIN_SCORE
from folio.models import TextLayer
from folio.page.quality import normalize_words
from folio.pdf.text_layer import HIDDEN_MARK, score_text

__all__ = ["KEEP_SHARE", "MIN_SCRIPT_WORDS", "MIN_WORD_SHARE", "layer_holds_text", "layer_is_better"]

#: OCR that reads fewer than this share of the layer's words lost text the layer has
MIN_WORD_SHARE = 0.5
#: OCR that keeps fewer than this share of the layer's distinct words must be the better
#: reading by the text judgement and read as many words to replace the layer: a script
#: the OCR's languages do not cover, or symbols it misreads, are words the layer has
#: right; an earlier OCR's misspellings (hidden under a scan) are not
KEEP_SHARE = 0.9
#: the layer's words in a script the OCR read none of, from this many on, are words in a
#: language the OCR was not given: the layer has them right
MIN_SCRIPT_WORDS = 2


def _scripts(words: set[str], least: int = 1) -> set[str]:
    """The scripts (the first word of a letter's Unicode name: LATIN, HANGUL, CJK,
    CYRILLIC ...) that at least ``least`` of ``words`` are written in."""
    counts: dict[str, int] = {}
    for word in words:
        names = {unicodedata.name(c, "?").split()[0] for c in word if c.isalpha()}
        for name in names:
            counts[name] = counts.get(name, 0) + 1
    return {name for name, n in counts.items() if n >= least and name != "?"}


def _quality(text: str) -> float:
    """The text judgement without its density signal: how much text a page holds says
    whether it is a scan (the router's question), not whether the text is right; a page
    of a few symbols ("± 4 a b") has an exact layer that scores low on density alone."""
    return score_text(text, page_area_pt2=0.0)[0]


def layer_holds_text(layer: TextLayer | None) -> bool:
    """Whether the layer holds any text a reader could use: one letter or digit is
    enough (a page whose whole text is seven accented letters is text); unmapped glyphs
    (U+FFFD, private-use code points) and punctuation alone are not."""
    if layer is None:
        return False
    return any(unicodedata.category(c)[0] in "LN" for c in layer.text)


def layer_is_better(ocr_text: str, layer: TextLayer | None, *, width_pt: float,
                    height_pt: float, min_score: float = DEFAULT_MIN_SCORE) -> str | None:
    """Why the page's text layer beats this OCR reading of it, or None when the OCR
    stands (or the layer is absent or empty, or junk against a reading with words)."""
    if not layer_holds_text(layer):
        return None
    assert layer is not None
    layer_words = len(normalize_words(layer.text))
    ocr_words = len(normalize_words(ocr_text))
    if not ocr_words:
        return f"text layer kept: OCR read no words where the layer has {layer_words}"
    layer_quality = _quality(layer.text)
    if HIDDEN_MARK in layer.why:  # an earlier OCR under a scan: as the router judged it
        layer_quality = min(layer_quality, layer.score)
    if layer_quality < min_score:
        return None
    if layer_words and ocr_words < MIN_WORD_SHARE * layer_words:
        return (f"text layer kept: OCR read {ocr_words} words where the layer has "
                f"{layer_words}")
    ocr_score, _ = score_text(ocr_text, page_area_pt2=width_pt * height_pt)
    layer_set, ocr_set = set(normalize_words(layer.text)), set(normalize_words(ocr_text))
    shared = len(layer_set & ocr_set)
    if shared < KEEP_SHARE * len(layer_set):
        unread = _scripts(layer_set - ocr_set, least=MIN_SCRIPT_WORDS) - _scripts(ocr_set)
        if unread:
            return (f"text layer kept: OCR read none of its {', '.join(sorted(unread))} "
                    "words (a script outside the OCR's languages)")
        if not (_quality(ocr_text) > layer_quality and ocr_words >= layer_words):
            return (f"text layer kept: OCR read {shared} of the layer's {len(layer_set)} "
                    f"distinct words and is no better a text")
    if ocr_score < layer.score:
        return f"text layer kept: OCR scores {ocr_score:.2f}, the layer {layer.score:.2f}"
    return None
