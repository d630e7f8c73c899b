"""Never worse than what was there: an OCR reading replaces a page's own text layer only
when it is better by a measure anyone can check.

Why: the router sends a page to OCR when its text layer is not trusted (below
``route.min_score``), but an untrusted layer can still be the better text: an earlier
OCR hidden under a newspaper scan held 3,718 words where a new OCR at the render's
resolution found 169. The measure, on both texts, is their words and the text layer's
own judgement (:func:`folio.pdf.text_layer.score_text`, applied to the OCR's text too):
OCR wins unless it has fewer than :data:`MIN_WORD_SHARE` of the layer's words, or it
scores below the layer. A layer the text-layer engine would refuse (junk) never wins.
Pure.
"""

from __future__ import annotations

from folio.engines.text_layer import DEFAULT_MIN_SCORE
from folio.models import TextLayer
from folio.page.quality import normalize_words
from folio.pdf.text_layer import score_text

__all__ = ["MIN_WORD_SHARE", "layer_is_better"]

#: OCR that reads fewer than this share of the layer's words lost text the layer has
MIN_WORD_SHARE = 0.5


def layer_is_better(ocr_text: str, layer: TextLayer | None, *, width_pt: float,
                    height_pt: float, min_score: float = DEFAULT_MIN_SCORE) -> str | None:
    """Why the page's text layer beats this OCR reading of it, or None when the OCR
    stands (or the layer is absent, empty or junk)."""
    if layer is None or layer.score < min_score or not layer.text.strip():
        return None
    layer_words = len(normalize_words(layer.text))
    ocr_words = len(normalize_words(ocr_text))
    if layer_words and ocr_words < MIN_WORD_SHARE * layer_words:
        return (f"text layer kept: OCR read {ocr_words} words where the layer has "
                f"{layer_words}")
    ocr_score, _ = score_text(ocr_text, page_area_pt2=width_pt * height_pt)
    if ocr_score < layer.score:
        return f"text layer kept: OCR scores {ocr_score:.2f}, the layer {layer.score:.2f}"
    return None
