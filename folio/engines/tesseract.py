"""Tesseract 5 as an OCR engine: the CPU default, needing no GPU and no network.

It runs the ``tesseract`` command (an argument list, never a shell) with TSV output, which
carries word boxes and confidences, and groups words into paragraph blocks. Measured on
this project's 2-core machines: 2 s per 200-DPI scanned page and word recall 0.96 on
OCRmyPDF's ``linn`` scan, with ``OMP_THREAD_LIMIT=1``; without it Tesseract's OpenMP
threads oversubscribe the cores and the same page takes 11-13 s.

Example:
    >>> engine = TesseractEngine(languages="eng")  # doctest: +SKIP
    >>> out = engine.recognize(page)  # doctest: +SKIP
    >>> out.blocks[0].bbox  # doctest: +SKIP
    BBox(x0=72.5, y0=57.6, x1=341.6, y1=76.3)
"""

from __future__ import annotations

import functools
import os
import signal
import statistics
import subprocess
import time
from collections.abc import Collection
from dataclasses import dataclass, field

from folio.engines.base import EngineOutput
from folio.engines.markdown import blocks_to_markdown
from folio.errors import (
    BadInputError,
    BadOutputError,
    ConfigError,
    EngineUnavailableError,
    FolioError,
    TimeoutExpired,
)
from folio.models import Attempt, BBox, Block, Label, PagePrep, WordBox
from folio.page.list_items import ItemLine, list_pieces
from folio.page.quality import weighted_mean
from folio.page.visual_bullets import LineBox, bullet_lines
from folio.security.redaction import child_env

#: a short paragraph whose lines are all this much taller than the page's median line is a
#: header (a 20pt title over 11pt body text measures about 1.8; body lines about 1.0)
HEADER_HEIGHT_RATIO = 1.3
#: headers are short: at most this many lines and words
HEADER_MAX_LINES = 2
HEADER_MAX_WORDS = 12
#: fewer lines than this on the page and its median means little: no header detection
HEADER_MIN_LINES = 3
#: a big-font line ending like a sentence is lead text or a bullet, not a header
_SENTENCE_END = tuple(".,;!?")

_META_TIMEOUT_S = 30.0

#: below this mean word confidence (0..1) the page's orientation is checked with
#: Tesseract's OSD: readable print scores 0.85-0.96; an upside-down scan read as it lies
#: scores about 0.35 (its words come out as mirrored gibberish)
ORIENTATION_CHECK_CONFIDENCE = 0.6


def _run(cmd: list[str], timeout_s: float) -> subprocess.CompletedProcess[str]:
    """Run ``cmd`` in its own process group; on timeout kill the whole group.

    Tesseract may start helper threads or, via wrappers, child processes; killing only the
    direct child could leave them running, so the group is killed.
    """
    env = child_env(OMP_THREAD_LIMIT="1")
    try:
        proc = subprocess.Popen(
            cmd,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            process_group=0,  # its own group, the caller's session: see folio/pdf/zygote.py
        )
    except FileNotFoundError as exc:
        raise EngineUnavailableError(f"{cmd[0]} not found: install tesseract-ocr") from exc
    except PermissionError as exc:
        raise EngineUnavailableError(f"{cmd[0]} is not executable: {exc}") from exc
    try:
        stdout, stderr = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        raise TimeoutExpired(f"{cmd[0]} took longer than {timeout_s:g}s") from None
    except BaseException:  # interrupted (Ctrl-C, task cancelled): leave nothing running
        _kill_group(proc)
        raise
    return subprocess.CompletedProcess(cmd, proc.returncode, stdout, stderr)


def _kill_group(proc: subprocess.Popen[str]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.communicate()  # reap it and close the pipes


@functools.lru_cache(maxsize=8)
def tesseract_version(binary: str = "tesseract") -> str:
    """Version string such as ``"5.3.0"`` (recorded in every Attempt's model field)."""
    result = _run([binary, "--version"], _META_TIMEOUT_S)
    first = (result.stdout or result.stderr).strip().splitlines()
    if result.returncode != 0 or not first:
        raise EngineUnavailableError(f"{binary} --version failed: {result.stderr.strip()[:200]}")
    return first[0].split()[-1]


@functools.lru_cache(maxsize=8)
def tesseract_languages(binary: str = "tesseract") -> frozenset[str]:
    """Installed language packs (``--list-langs``), e.g. ``{"eng", "osd"}``."""
    result = _run([binary, "--list-langs"], _META_TIMEOUT_S)
    if result.returncode != 0:
        raise EngineUnavailableError(f"{binary} --list-langs failed: {result.stderr.strip()[:200]}")
    lines = result.stdout.strip().splitlines()
    return frozenset(line.strip() for line in lines[1:] if line.strip())


def apt_package(language: str) -> str:
    """Debian/Ubuntu package holding a language pack: ``chi_sim`` -> ``tesseract-ocr-chi-sim``."""
    return "tesseract-ocr-" + language.lower().replace("_", "-")


def check_languages(languages: str, binary: str = "tesseract") -> None:
    """Raise ConfigError naming the packages to install when a language pack is missing."""
    wanted = [lang for lang in languages.split("+") if lang]
    if not wanted:
        raise ConfigError("no tesseract language given (e.g. 'eng' or 'eng+deu')")
    missing = [lang for lang in wanted if lang not in tesseract_languages(binary)]
    if missing:
        packages = " ".join(apt_package(lang) for lang in missing)
        raise ConfigError(
            f"tesseract language pack(s) {'+'.join(missing)} not installed; "
            f"install with: apt-get install {packages}"
        )


# --- TSV parsing ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Word:
    """One recognised word, in image pixels."""

    text: str
    left: int
    top: int
    width: int
    height: int
    conf: float  # 0..100


@dataclass
class Line:
    height: int
    words: list[Word] = field(default_factory=list)


@dataclass
class Paragraph:
    lines: list[Line] = field(default_factory=list)

    @property
    def words(self) -> list[Word]:
        return [w for line in self.lines for w in line.words]


def parse_tsv(tsv: str) -> list[Paragraph]:
    """Paragraphs in Tesseract's reading order, each with its lines and words.

    Lines without words (Tesseract reports empty lines on graphics) are dropped, and so
    are paragraphs left empty.
    """
    paragraphs: dict[tuple[int, int], Paragraph] = {}
    lines: dict[tuple[int, int, int], Line] = {}
    for row in tsv.splitlines()[1:]:
        cols = row.split("\t", 11)
        if len(cols) < 11 or not cols[0].isdigit():
            continue
        level, block, par, line = int(cols[0]), int(cols[2]), int(cols[3]), int(cols[4])
        left, top, width, height = (int(c) for c in cols[6:10])
        if level == 4:
            lines[(block, par, line)] = Line(height=height)
            paragraphs.setdefault((block, par), Paragraph()).lines.append(lines[(block, par, line)])
        elif level == 5:
            text = cols[11].strip() if len(cols) > 11 else ""
            key = (block, par, line)
            if text and key in lines:
                conf = max(float(cols[10]), 0.0)
                lines[key].words.append(Word(text, left, top, width, height, conf))
    result = []
    for para in paragraphs.values():
        para.lines = [line for line in para.lines if line.words]
        if para.lines:
            result.append(para)
    return result


def words_confidence(paragraphs: list[Paragraph]) -> float | None:
    """Mean word confidence, 0..1, weighted by word length (None without words): short
    words and punctuation, often misread on good pages too, weigh less."""
    mean = weighted_mean((w.conf, len(w.text)) for para in paragraphs for w in para.words)
    return None if mean is None else mean / 100.0


def parse_osd_rotation(osd: str) -> int:
    """Degrees (0, 90, 180, 270) to turn the image clockwise so its text stands upright,
    from ``tesseract --psm 0`` output; 0 when it says nothing usable."""
    for line in osd.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "Rotate":
            try:
                degrees = int(value.strip())
            except ValueError:
                return 0
            return degrees if degrees in (90, 180, 270) else 0
    return 0


def unrotate(paragraphs: list[Paragraph], degrees: int, size: tuple[int, int]) -> None:
    """Map word boxes read from the image turned ``degrees`` clockwise back onto the
    original image of ``size`` (width, height) pixels, in place."""
    width, height = size

    def back(x: int, y: int) -> tuple[int, int]:
        if degrees == 180:
            return width - x, height - y
        if degrees == 90:
            return y, height - x
        if degrees == 270:
            return width - y, x
        return x, y

    for para in paragraphs:
        for line in para.lines:
            moved = []
            for w in line.words:
                (ax, ay), (bx, by) = back(w.left, w.top), back(w.left + w.width, w.top + w.height)
                moved.append(Word(w.text, min(ax, bx), min(ay, by), abs(bx - ax), abs(by - ay),
                                  w.conf))
            line.words = moved


def _is_header(para: Paragraph, median_line_height: float | None) -> bool:
    """Short, in a clearly bigger font than most of the page, and not ending like a sentence.

    Line boxes span ascender to descender, so body lines vary by about 1.3x with their
    letters; the punctuation rule keeps big-font lead paragraphs and bullets out.
    """
    if median_line_height is None or len(para.lines) > HEADER_MAX_LINES:
        return False
    words = para.words
    if len(words) > HEADER_MAX_WORDS or words[-1].text.endswith(_SENTENCE_END):
        return False
    return all(line.height >= HEADER_HEIGHT_RATIO * median_line_height for line in para.lines)


def _median_line_height(paragraphs: list[Paragraph]) -> float | None:
    heights = [line.height for para in paragraphs for line in para.lines]
    return statistics.median(heights) if len(heights) >= HEADER_MIN_LINES else None


def _bbox(words: list[Word], scale: tuple[float, float] | None) -> BBox | None:
    if scale is None:
        return None
    sx, sy = scale
    return BBox(
        x0=round(min(w.left for w in words) * sx, 2),
        y0=round(min(w.top for w in words) * sy, 2),
        x1=round(max(w.left + w.width for w in words) * sx, 2),
        y1=round(max(w.top + w.height for w in words) * sy, 2),
    )


def paragraphs_to_blocks(
    paragraphs: list[Paragraph], scale: tuple[float, float] | None,
    bullets: Collection[tuple[int, int]] = (),
) -> list[Block]:
    """Blocks with labels and confidences; ``scale`` is points per pixel (x, y), or None
    when the page size is unknown (then blocks carry no bbox rather than a wrong one).
    List items are cut out of the paragraphs (:mod:`folio.page.list_items`, with the
    marks OCR makes of bullets), each a block with its marker and nesting level;
    ``bullets``: the (paragraph, line) pairs that a bullet the engine did not read opens
    (:func:`visual_bullets`)."""
    median = _median_line_height(paragraphs)
    headers = [_is_header(para, median) for para in paragraphs]
    pieces = list_pieces(
        [[ItemLine(("• " if (p, i) in bullets else "") + _line_text(line),
                   min(w.left for w in line.words), line.height)
          for i, line in enumerate(para.lines)] for p, para in enumerate(paragraphs)],
        headers, ocr=True)
    blocks: list[Block] = []
    for piece in pieces:
        para = paragraphs[piece.para]
        lines = [para.lines[i] for i in piece.lines]
        words = [w for line in lines for w in line.words]
        header = headers[piece.para]
        confidence = round(statistics.fmean(w.conf for w in words) / 100.0, 4)
        if piece.marker is not None:
            blocks.append(Block(label=Label.LIST_ITEM.value, bbox=_bbox(words, scale),
                                content=" ".join(t.strip() for t in piece.item_texts),
                                order=len(blocks), confidence=confidence,
                                marker=piece.marker.marker, level=piece.level))
            continue
        label = Label.SECTION_HEADER if header else Label.TEXT
        # a header's line height over the page's median: its type size, for its level
        size = (round(min(line.height for line in para.lines) / median, 2)
                if header and median else None)
        blocks.append(
            Block(label=label.value, bbox=_bbox(words, scale),
                  content=" ".join(_line_text(line) for line in lines), order=len(blocks),
                  confidence=confidence, type_size=size)
        )
    return blocks


def visual_bullets(image_path: str, paragraphs: list[Paragraph]) -> set[tuple[int, int]]:
    """The (paragraph, line) pairs whose bullet is in the image but not in the engine's
    words (:mod:`folio.page.visual_bullets`); word boxes in the image's pixels."""
    import numpy as np
    from PIL import Image

    where: list[tuple[int, int]] = []
    lines: list[LineBox] = []
    for p, para in enumerate(paragraphs):
        for i, line in enumerate(para.lines):
            if line.words:
                where.append((p, i))
                lines.append(LineBox(left=min(w.left for w in line.words),
                                     top=min(w.top for w in line.words), height=line.height))
    if len(lines) < 2:
        return set()
    with Image.open(image_path) as img:
        gray = np.asarray(img.convert("L"))
    return {where[k] for k in bullet_lines(gray, lines)}


def _line_text(line: Line) -> str:
    return " ".join(w.text for w in line.words)


def word_boxes(paragraphs: list[Paragraph], scale: tuple[float, float] | None
               ) -> list[WordBox]:
    """Every word with its box in points (none without a scale): what a table's grid is
    built from when a layout region says the words are a table."""
    if scale is None:
        return []
    sx, sy = scale
    return [WordBox(text=w.text, x0=w.left * sx, y0=w.top * sy, x1=(w.left + w.width) * sx,
                    y1=(w.top + w.height) * sy)
            for para in paragraphs for w in para.words]


# --- the engine ----------------------------------------------------------------------------


def _image_size(page: PagePrep, image_path: str) -> tuple[int, int]:
    """Pixel size of the render: from the plan, or the image header when there is none."""
    if page.plan is not None:
        return page.plan.width_px, page.plan.height_px
    from PIL import Image

    with Image.open(image_path) as img:
        return img.size


def _points_per_pixel(page: PagePrep, image_path: str) -> tuple[float, float] | None:
    if not page.width_pt or not page.height_pt:
        return None
    width_px, height_px = _image_size(page, image_path)
    return page.width_pt / width_px, page.height_pt / height_px


class TesseractEngine:
    """OCR with the ``tesseract`` command; deterministic, so ``attempt`` is ignored."""

    name = "tesseract"
    #: the same page gives the same answer: the pipeline skips retries and falls back
    deterministic = True

    def __init__(
        self,
        languages: str = "eng",
        timeout_s: float = 120.0,
        psm: int = 1,
        binary: str = "tesseract",
    ) -> None:
        check_languages(languages, binary)
        if psm == 1:  # orientation and script detection needs the osd pack
            check_languages("osd", binary)
        self.languages = languages
        self.timeout_s = timeout_s
        self.psm = psm
        self.binary = binary
        self.model = f"tesseract {tesseract_version(binary)} {languages}"

    def command(self, image_path: str, dpi: float | None = None) -> list[str]:
        """The argument list; ``--dpi`` tells Tesseract the scale when the PNG does not."""
        cmd = [self.binary, image_path, "stdout", "-l", self.languages, "--psm", str(self.psm)]
        if dpi:
            cmd += ["--dpi", str(round(dpi))]
        return [*cmd, "tsv"]

    def recognize(self, page: PagePrep, attempt: int = 0) -> EngineOutput:
        """OCR one rendered page into paragraph blocks (bboxes in points, top-left origin).

        Raises:
            BadInputError: the page has no rendered image.
            BadOutputError: Tesseract failed on the image.
            TimeoutExpired: it ran longer than ``timeout_s`` (the process group is killed).
            EngineUnavailableError: the binary is gone.
        """
        started = time.perf_counter()
        try:
            paragraphs, rotated = self._paragraphs(page)
        except FolioError as err:
            # the pipeline records this Attempt (with its seconds) instead of a bare error
            err.attempt = self._attempt(started, error=err.reason)  # type: ignore[attr-defined]
            raise
        assert page.image_path  # _paragraphs refused a page without one
        scale = _points_per_pixel(page, page.image_path)
        # a turned page's words were mapped back onto the image: its bullets stand
        # elsewhere than left of them
        bullets = visual_bullets(page.image_path, paragraphs) if not rotated else set()
        blocks = paragraphs_to_blocks(paragraphs, scale, bullets)
        # no words is a reading, not a failure: a drawing or a photo holds no text (the
        # pipeline decides whether the page's own layer says otherwise)
        return EngineOutput(blocks=blocks, markdown=blocks_to_markdown(blocks),
                            attempt=self._attempt(started, rotated=rotated),
                            words=word_boxes(paragraphs, scale), no_text=not blocks)

    def _paragraphs(self, page: PagePrep) -> tuple[list[Paragraph], int]:
        """The page's paragraphs, and the degrees its image was turned to read it upright."""
        if not page.image_path:
            raise BadInputError(
                f"page {page.index} has no rendered image ({page.error or 'no render'})"
            )
        paragraphs = self._read(page, page.image_path)
        rotated = 0
        confidence = words_confidence(paragraphs)
        if confidence is not None and confidence < ORIENTATION_CHECK_CONFIDENCE:
            paragraphs, rotated = self._upright(page, paragraphs, confidence)
        return paragraphs, rotated

    def _read(self, page: PagePrep, image_path: str) -> list[Paragraph]:
        dpi = page.plan.dpi if page.plan is not None else None
        result = _run(self.command(image_path, dpi), self.timeout_s)
        if result.returncode != 0:
            raise BadOutputError(
                f"tesseract exit {result.returncode} on page {page.index}: "
                f"{result.stderr.strip()[-300:]}"
            )
        return parse_tsv(result.stdout)

    def _upright(self, page: PagePrep, paragraphs: list[Paragraph],
                 confidence: float) -> tuple[list[Paragraph], int]:
        """A poorly read page may lie on its side or upside down (Tesseract reads 90 and
        270 degrees by itself, not 180): ask OSD, read the turned image, and keep the
        reading with the higher confidence, so a wrong answer from OSD costs only time."""
        assert page.image_path
        osd = _run([self.binary, page.image_path, "stdout", "--psm", "0"], self.timeout_s)
        degrees = parse_osd_rotation(osd.stdout) if osd.returncode == 0 else 0
        if not degrees:
            return paragraphs, 0
        from PIL import Image

        turned_path = f"{page.image_path}.upright.png"
        try:
            with Image.open(page.image_path) as img:
                size = img.size
                img.rotate(-degrees, expand=True).save(turned_path)  # PIL turns anticlockwise
            turned = self._read(page, turned_path)
        finally:
            try:
                os.unlink(turned_path)
            except OSError:
                pass
        better = words_confidence(turned)
        if better is None or better <= confidence:
            return paragraphs, 0
        unrotate(turned, degrees, size)
        return turned, degrees

    def _attempt(self, started: float, error: str | None = None, rotated: int = 0) -> Attempt:
        seconds = round(time.perf_counter() - started, 3)
        return Attempt(engine=self.name, model=self.model, seconds=seconds, error=error,
                       rotated=rotated)

    def close(self) -> None:
        """Nothing to release: every page is a separate process."""
