"""The page's own text layer as an engine: no OCR, just what the page worker extracted.

The router sends pages with a *trusted* layer here directly; as a fallback (after the
primary engine failed) it also serves layers weaker than the trusted threshold, because
an imperfect layer beats a quarantined page. Junk layers (score below ``min_score``:
fonts without Unicode maps, garbage from an earlier OCR) are refused so the page is
quarantined with the reason instead of being indexed as noise.
"""

from __future__ import annotations

from folio.engines.base import EngineOutput
from folio.engines.markdown import blocks_to_markdown
from folio.errors import BadOutputError
from folio.models import Attempt, Block, Label, PagePrep

#: below this text-layer score a layer is junk, even as a last resort
DEFAULT_MIN_SCORE = 0.3


class TextLayerEngine:
    """Serve ``page.text_layer`` as blocks + markdown; deterministic and instant."""

    name = "text-layer"
    #: the same page gives the same answer: the pipeline skips retries and falls back
    deterministic = True
    model = "pdfium-text-layer"

    def __init__(self, min_score: float = DEFAULT_MIN_SCORE) -> None:
        self.min_score = min_score

    def recognize(self, page: PagePrep, attempt: int = 0) -> EngineOutput:
        """Return the layer's blocks (or one Text block of its text when it has none).

        Raises:
            BadOutputError: ``no usable text layer: <why>`` when the layer is absent, empty
                or scored below ``min_score``.
        """
        layer = page.text_layer
        if layer is None:
            raise BadOutputError("no usable text layer: page has none")
        if layer.score < self.min_score:
            raise BadOutputError(
                f"no usable text layer: score {layer.score:.2f} < {self.min_score:.2f}"
                + (f" ({layer.why})" if layer.why else "")
            )
        blocks = [b.model_copy(deep=True) for b in layer.blocks if b.content.strip()]
        if not blocks and layer.text.strip():
            blocks = [Block(label=Label.TEXT.value, content=layer.text.strip(), order=0)]
        if not blocks:
            raise BadOutputError("no usable text layer: it is empty")
        return EngineOutput(
            blocks=blocks,
            markdown=blocks_to_markdown(blocks),
            attempt=Attempt(engine=self.name, model=self.model),
            words=layer.words,
            rulings=layer.rulings,
        )

    def close(self) -> None:
        """Nothing to release."""
