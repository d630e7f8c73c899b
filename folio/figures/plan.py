"""Which runs need the layout model for their figures alone.

Why: a vision model whose answer holds ``![alt](...)`` without a box (olmOCR, the
generic markdown models) says a figure is there but not where; the layout model's figure
regions on the same page say where (:func:`folio.figures.regions.match_regions`). The
CPU route runs the layout model anyway; a vision model's run does not, so it runs for
such runs only while crops are written (``figures.vlm_layout``). Chandra's answers box
their figures themselves and need no detector.
"""

from __future__ import annotations

from folio.config import LayoutSettings, PipelineConfig
from folio.vocabulary import GENERATIVE_ENGINES

__all__ = ["figure_layout"]


def figure_layout(config: PipelineConfig) -> LayoutSettings | None:
    """The layout settings a vision model's pages are detected with to place the
    figures of an answer without boxes; None when the run needs none."""
    from folio.presets import get_preset

    figures = config.figures
    if (figures.mode != "crops" or not figures.vlm_layout or not config.layout.enabled
            or config.ocr.engine not in GENERATIVE_ENGINES):
        return None
    try:
        parser = get_preset(config.ocr.preset).parser
    except Exception:  # an unknown preset fails elsewhere, with its own message
        return None
    return None if parser == "chandra" else config.layout
