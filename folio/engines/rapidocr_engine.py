"""RapidOCR (PaddleOCR's PP-OCR models on ONNX Runtime) as a CPU OCR engine, a setting
beside Tesseract (``ocr.engine=rapidocr``); an optional dependency: ``folio[rapidocr]``.

Its wheel holds its models, so it runs offline. It finds text lines (quadrilaterals) and
reads each; it knows no paragraphs and returns lines top to bottom across the whole page,
so a two-column page comes back interleaved line by line. This module therefore groups
the lines into paragraphs (a line continues the paragraph whose last line lies just above
it and overlaps it horizontally) and orders the paragraphs by an XY cut (columns first,
then bands), and hands them to the same block builder as Tesseract
(:func:`folio.engines.tesseract.paragraphs_to_blocks`): blocks with boxes in points,
header labels from line heights, confidences, and word boxes for table grids.

Measured by ``bench/ocr_engines.py`` (bench/results/ocr_engines.json) against Tesseract on
the corpus's nine ``linn`` scan pages: word recall 0.958 vs 0.966 (median), sequence
similarity 0.873 vs 0.979, 10.9 vs 3.2 CPU s a page; Tesseract stays the default. On
``linn`` this module's reading order lifts sequence similarity from 0.737 (RapidOCR's line
order) to 0.899.

Not done here, unlike Tesseract: no page-level orientation check (RapidOCR's line
classifier turns upside-down lines, not pages: on OCRmyPDF's ``cardinal``, pages turned
180 and 270 degrees lose a quarter of their words, and no turned page reads in order), and
``ocr.languages`` is not used (the wheel's recogniser reads Chinese and English). Like
Tesseract, it gets the pipeline's finer render for small text (``ocr_resolution``, asked for
every engine of ``CPU_OCR_ENGINES``), as ``bench/ocr_engines.py`` measured it.

Example:
    >>> engine = RapidOcrEngine()  # doctest: +SKIP
    >>> out = engine.recognize(page)  # doctest: +SKIP
"""

from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from folio.engines.base import EngineOutput
from folio.engines.markdown import blocks_to_markdown
from folio.engines.tesseract import (
    Line,
    Paragraph,
    Word,
    _points_per_pixel,
    paragraphs_to_blocks,
    visual_bullets,
    word_boxes,
)
from folio.errors import BadInputError, BadOutputError, ConfigError, FolioError
from folio.models import Attempt, PagePrep

INSTALL_HINT = "pip install 'folio[rapidocr]' (rapidocr and onnxruntime)"

#: a line continues a paragraph when the gap above it is at most this many line heights
PARAGRAPH_GAP = 0.8
#: ... and it overlaps the paragraph's last line by this share of the narrower of the two
PARAGRAPH_OVERLAP = 0.5
#: ... and its height is within this ratio of that line's (a title does not join body text)
PARAGRAPH_HEIGHT_RATIO = 1.4
#: columns are cut where the paragraphs leave a vertical gap this many line heights wide
COLUMN_GAP = 1.0


@dataclass(frozen=True)
class RawLine:
    """One line as RapidOCR reports it, in image pixels: its quadrilateral, text, score
    (0..1) and, when it gave them, its words as (text, score, quadrilateral)."""

    quad: tuple[tuple[float, float], ...]
    text: str
    score: float
    words: tuple[tuple[str, float, tuple[tuple[float, float], ...]], ...] = ()


#: reads one image file into lines; the engine's own runs RapidOCR in this process, a
#: benchmark may pass one that asks another interpreter (bench/ocr_engines.py)
Reader = Callable[[str], list[RawLine]]


def _quad(points: Any) -> tuple[tuple[float, float], ...]:
    return tuple((float(x), float(y)) for x, y in points)


def raw_lines(boxes: Any, txts: Sequence[str] | None, scores: Sequence[float] | None,
              word_results: Sequence[Any] | None = None) -> list[RawLine]:
    """RapidOCR's output fields (``RapidOCROutput.boxes``, ``.txts``, ``.scores``,
    ``.word_results``, or the same as JSON lists) as :class:`RawLine` s."""
    if boxes is None or not txts:
        return []
    scores = scores or [1.0] * len(txts)
    words_per_line: Sequence[Any] = word_results or [()] * len(txts)
    if len(words_per_line) != len(txts):
        words_per_line = [()] * len(txts)
    lines = []
    for box, text, score, words in zip(boxes, txts, scores, words_per_line, strict=True):
        if not str(text).strip():
            continue
        parsed = tuple((str(w[0]), float(w[1]), _quad(w[2])) for w in words
                       if len(w) == 3 and str(w[0]).strip())
        lines.append(RawLine(_quad(box), str(text).strip(), float(score), parsed))
    return lines


def rapidocr_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("rapidocr")
    except PackageNotFoundError:
        return "unknown"


def load_reader(threads: int = 1) -> Reader:
    """RapidOCR in this process, its ONNX sessions limited to ``threads`` threads each
    (pages run in parallel in folio's scheduler, as Tesseract's do with one thread).

    Raises:
        ConfigError: rapidocr (or its onnxruntime, or cv2) cannot be imported.
    """
    try:
        from rapidocr import RapidOCR
    except ImportError as exc:
        raise ConfigError(
            f"OCR engine 'rapidocr' is not installed ({exc}); install it with: {INSTALL_HINT}, "
            "or choose ocr.engine=tesseract"
        ) from exc
    ocr = RapidOCR(params={
        "Global.log_level": "warning",
        "EngineConfig.onnxruntime.intra_op_num_threads": threads,
        "EngineConfig.onnxruntime.inter_op_num_threads": 1,
    })

    def read(image_path: str) -> list[RawLine]:
        out = ocr(image_path, return_word_box=True)
        return raw_lines(getattr(out, "boxes", None), getattr(out, "txts", None),
                         getattr(out, "scores", None), getattr(out, "word_results", None))

    return read


# --- lines into paragraphs, in reading order -----------------------------------------------


def _rect(quad: Sequence[tuple[float, float]]) -> tuple[float, float, float, float]:
    xs, ys = [p[0] for p in quad], [p[1] for p in quad]
    return min(xs), min(ys), max(xs), max(ys)


def _words(line: RawLine) -> list[Word]:
    """The line's words as boxes: RapidOCR's own when it gave them for every word of the
    text, else the line's box shared out by characters."""
    x0, y0, x1, y1 = _rect(line.quad)
    top, height = round(y0), max(1, round(y1 - y0))
    tokens = line.text.split()
    given = [w for w in line.words if w[0].strip()]
    if given and [w[0] for w in given] == tokens:
        out = []
        for text, score, quad in given:
            a, _, b, _ = _rect(quad)
            out.append(Word(text, round(a), top, max(1, round(b - a)), height, score * 100))
        return out
    total = sum(len(t) for t in tokens) + max(0, len(tokens) - 1)
    per_char = (x1 - x0) / max(1, total)
    out, pos = [], x0
    for token in tokens:
        width = per_char * len(token)
        out.append(Word(token, round(pos), top, max(1, round(width)), height, line.score * 100))
        pos += width + per_char
    return out


@dataclass
class _Para:
    lines: list[tuple[tuple[float, float, float, float], Line]]

    @property
    def rect(self) -> tuple[float, float, float, float]:
        rects = [r for r, _ in self.lines]
        return (min(r[0] for r in rects), min(r[1] for r in rects),
                max(r[2] for r in rects), max(r[3] for r in rects))


def _continues(last: tuple[float, float, float, float], rect: tuple[float, float, float, float]
               ) -> bool:
    h_last, h = last[3] - last[1], rect[3] - rect[1]
    if max(h_last, h) > PARAGRAPH_HEIGHT_RATIO * max(1.0, min(h_last, h)):
        return False
    gap = rect[1] - last[3]
    if gap > PARAGRAPH_GAP * max(h_last, h) or rect[1] < last[1] + 0.5 * h_last:
        return False
    overlap = min(last[2], rect[2]) - max(last[0], rect[0])
    narrower = min(last[2] - last[0], rect[2] - rect[0])
    return overlap >= PARAGRAPH_OVERLAP * max(1.0, narrower)


def group_paragraphs(lines: Sequence[RawLine]) -> list[Paragraph]:
    """Lines into paragraphs, in reading order (see the module's docstring)."""
    items = sorted(((_rect(line.quad), line) for line in lines), key=lambda it: it[0][1])
    paras: list[_Para] = []
    for rect, raw in items:
        line = Line(height=max(1, round(rect[3] - rect[1])), words=_words(raw))
        if not line.words:
            continue
        home = next((p for p in reversed(paras) if _continues(p.lines[-1][0], rect)), None)
        if home is None:
            paras.append(_Para([(rect, line)]))
        else:
            home.lines.append((rect, line))
    if not paras:
        return []
    median_height = statistics.median(r[3] - r[1] for p in paras for r, _ in p.lines)
    ordered = _xy_order(paras, COLUMN_GAP * median_height)
    return [Paragraph(lines=[line for _, line in p.lines]) for p in ordered]


def _split(paras: list[_Para], axis: int, min_gap: float) -> list[list[_Para]]:
    """Groups of paragraphs separated by an empty stripe at least ``min_gap`` wide along
    ``axis`` (0: x, columns; 1: y, bands), in order along it."""
    spans = sorted(paras, key=lambda p: p.rect[axis])
    groups: list[list[_Para]] = [[spans[0]]]
    reach = spans[0].rect[axis + 2]
    for para in spans[1:]:
        if para.rect[axis] - reach >= min_gap:
            groups.append([para])
        else:
            groups[-1].append(para)
        reach = max(reach, para.rect[axis + 2])
    return groups


def _xy_order(paras: list[_Para], column_gap: float, depth: int = 0) -> list[_Para]:
    """Columns first (a gap down the whole group), then bands (a gap across it), each
    part ordered the same way; what cannot be cut reads top to bottom."""
    if len(paras) < 2 or depth > 32:
        return sorted(paras, key=lambda p: (p.rect[1], p.rect[0]))
    for axis, gap in ((0, column_gap), (1, 0.0)):
        parts = _split(paras, axis, gap)
        if len(parts) > 1:
            return [p for part in parts for p in _xy_order(part, column_gap, depth + 1)]
    return sorted(paras, key=lambda p: (p.rect[1], p.rect[0]))


# --- the engine ----------------------------------------------------------------------------


class RapidOcrEngine:
    """OCR with RapidOCR in this process; deterministic, so ``attempt`` is ignored.

    Args:
        threads: ONNX Runtime threads per session (1: the scheduler runs pages side by side).
        reader: reads an image into lines; default RapidOCR here, one per calling thread.

    Raises:
        ConfigError: rapidocr is not installed (the message says how to install it).
    """

    name = "rapidocr"
    deterministic = True

    def __init__(self, threads: int = 1, reader: Reader | None = None) -> None:
        self.threads = threads
        self._reader = reader
        self._local = threading.local()
        if reader is None:
            self._local.reader = load_reader(threads)  # fails here, at build time
        self.model = f"rapidocr {rapidocr_version()} PP-OCR (wheel models, onnxruntime)"

    def _read(self, image_path: str) -> list[RawLine]:
        if self._reader is not None:
            return self._reader(image_path)
        reader = getattr(self._local, "reader", None)
        if reader is None:  # sessions per thread: pages read side by side need no lock
            reader = self._local.reader = load_reader(self.threads)
        lines: list[RawLine] = reader(image_path)
        return lines

    def recognize(self, page: PagePrep, attempt: int = 0) -> EngineOutput:
        """OCR one rendered page into paragraph blocks (bboxes in points, top-left origin).

        Raises:
            BadInputError: the page has no rendered image.
            BadOutputError: RapidOCR failed on the image, or found no text on a page that
                is not blank.
        """
        started = time.perf_counter()
        try:
            paragraphs = self._paragraphs(page)
        except FolioError as err:
            err.attempt = self._attempt(started, error=err.reason)  # type: ignore[attr-defined]
            raise
        assert page.image_path
        if not paragraphs:  # no text is a reading (a drawing), not a failure
            return EngineOutput(attempt=self._attempt(started), no_text=True)
        scale = _points_per_pixel(page, page.image_path)
        blocks = paragraphs_to_blocks(paragraphs, scale,
                                      visual_bullets(page.image_path, paragraphs))
        return EngineOutput(blocks=blocks, markdown=blocks_to_markdown(blocks),
                            attempt=self._attempt(started),
                            words=word_boxes(paragraphs, scale))

    def _paragraphs(self, page: PagePrep) -> list[Paragraph]:
        if not page.image_path:
            raise BadInputError(
                f"page {page.index} has no rendered image ({page.error or 'no render'})"
            )
        try:
            lines = self._read(page.image_path)
        except FolioError:
            raise
        except Exception as exc:  # onnxruntime/cv2 errors on a bad image
            raise BadOutputError(
                f"rapidocr failed on page {page.index}: {type(exc).__name__}: {exc}"
            ) from exc
        return group_paragraphs(lines)

    def _attempt(self, started: float, error: str | None = None) -> Attempt:
        seconds = round(time.perf_counter() - started, 3)
        return Attempt(engine=self.name, model=self.model, seconds=seconds, error=error)

    def close(self) -> None:
        """Nothing to release: the sessions go with the engine."""
