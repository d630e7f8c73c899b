"""The OCR engine interface: every engine turns one prepared page into blocks + markdown.

Engines raise :class:`folio.errors.BadOutputError` when they answered but the answer is
unusable (the pipeline then retries or falls back) and :class:`folio.errors.TransientError`
when the engine itself is unreachable.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from pydantic import BaseModel, Field

from folio.models import Attempt, BBox, Block, PagePrep, WordBox
from folio.settings.vocabulary import GENERATIVE_ENGINES

# Engines that generate text token by token can loop; only their output is checked for
# degenerate repetition (a document's own text layer or tesseract may repeat legitimately:
# forms, lists, lorem ipsum).
__all__ = ["GENERATIVE_ENGINES", "EngineOutput", "OcrEngine"]


class EngineOutput(BaseModel):
    blocks: list[Block] = Field(default_factory=list)
    markdown: str = ""
    attempt: Attempt
    prompt_format: str = ""
    #: the page's word boxes and ruling lines in points, for table grids (CPU engines;
    #: never written out: the grid they make is, in the table's block)
    words: list[WordBox] = Field(default_factory=list)
    rulings: list[BBox] = Field(default_factory=list)
    #: the answer is a valid one that says the page holds no text (olmOCR's front matter
    #: with an empty body): the page is read, not failed, as its reference pipeline has it
    no_text: bool = False


@runtime_checkable
class OcrEngine(Protocol):
    """One engine. ``attempt`` counts from 0; engines with sampling use it to pick a
    temperature from the retry ladder, deterministic ones may ignore it."""

    name: str
    model: str

    def recognize(self, page: PagePrep, attempt: int = 0) -> EngineOutput: ...

    def close(self) -> None: ...
