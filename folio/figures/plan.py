"""Which runs need the layout model for their figures alone.

Why: olmOCR's answer holds ``![alt](...)``, often without a usable box: it says a figure
is there but not where; the layout model's figure regions on the same page say where
(:func:`folio.figures.regions.match_regions`). The CPU route runs the layout model
anyway; a vision model's run does not, so it runs on olmOCR runs' pages while crops are
written (``figures.vlm_layout``: a tenth of a CPU second or so a page, beside a GPU).
Chandra's answers box their figures themselves; the generic markdown models
(Qwen-VL and the like) seldom write image links at all, and a run of them does not pay
for a detector on every page (their figures keep the box the link gives, if any).
"""

from __future__ import annotations

from folio.settings.config import LayoutSettings, PipelineConfig
from folio.settings.vocabulary import GENERATIVE_ENGINES

__all__ = ["figure_layout"]


def figure_layout(config: PipelineConfig) -> LayoutSettings | None:
    """The layout settings a vision model's pages are detected with to place the
    figures of an answer without boxes; None when the run needs none."""
    from folio.settings.presets import get_preset

    figures = config.figures
    if (figures.mode != "crops" or not figures.vlm_layout or not config.layout.enabled
            or config.ocr.engine not in GENERATIVE_ENGINES):
        return None
    try:
        parser = get_preset(config.ocr.preset).parser
    except Exception:  # an unknown preset fails elsewhere, with its own message
        return None
    return config.layout if parser == "olmocr" else None
