"""A page's own text layer: extract it with geometry, and judge whether to trust it.

"No text layer means OCR" is wrong both ways: fonts without Unicode maps, earlier bad OCR
and glyph soup produce text layers that are worse than OCR, and a scan's thin layer of
page numbers is not the page. :func:`score_text` is a pure judgement (0..1 plus a reason a
person can read); :func:`extract` reads pdfium and builds the :class:`TextLayer`, its lines
cut into paragraph blocks by :mod:`folio.pdf.text_blocks`.
"""

from __future__ import annotations

import ctypes
import math
import statistics
import unicodedata
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

import pypdfium2 as pdfium
import pypdfium2.raw as pdfium_c

from folio.models import TextLayer, WordBox
from folio.page import headings
from folio.page.list_items import is_bullet_glyph
from folio.pdf.glyphs import ALEFS, LAM, same_box, swap_last_two, utf16_char
from folio.pdf.pdfium_doc import PageGeometry, hidden_text_share, page_geometry
from folio.pdf.text_blocks import (
    _BREAK_HYPHENS,
    _blocks,
    _clean,
    _Line,
    _mark_cells,
    _merge_runs,
    _paragraphs,
)
from folio.settings.config import RouteSettings

# --- judging ------------------------------------------------------------------------------

#: a full page of text has thousands of chars; fewer than one per this many pt² is thin
_PT2_PER_EXPECTED_CHAR = 4800.0
_MIN_EXPECTED_CHARS = 20.0
_VOWELS = frozenset("aeiouy")
#: leader dots and rules: left out of the letters/digits share
_FILLERS = frozenset(".·…_-‐–—")
#: scripts written without spaces between words: word-length rules do not apply
_UNSPACED_RANGES = (
    (0x0E00, 0x0EFF),  # Thai, Lao
    (0x1000, 0x109F),  # Myanmar
    (0x1780, 0x17FF),  # Khmer
    (0x2E80, 0x9FFF),  # CJK radicals, kana, CJK ideographs
    (0xF900, 0xFAFF),  # CJK compatibility ideographs
    (0xFF66, 0xFF9F),  # half-width katakana
    (0x20000, 0x3FFFF),  # CJK extensions
)
#: an earlier OCR hidden under a scan is re-OCR'd at the default min_score (0.8): even a
#: flawless-looking one scores 0.75 (its errors are words our signals cannot see)
_HIDDEN_LAYER_FACTOR = 0.75
#: how a hidden layer's ``why`` opens (folio.page.layer_or_ocr reads it)
HIDDEN_MARK = "hidden text layer"


def score_text(
    text: str, *, page_area_pt2: float, chars_with_unicode_errors: int = 0
) -> tuple[float, str]:
    """How far a text layer can be trusted, 0 (junk or absent) to 1, and why.

    Each signal gives a factor in 0..1 and the score is the lowest one, so the reason
    names the signal that decided. Letters of any script count as letters; the vowel and
    word-length checks only look at scripts where they mean something.

    Example:
        >>> score_text("The quarterly report covers revenue and growth. " * 20,
        ...            page_area_pt2=612 * 792)[0]
        1.0
        >>> score_text("!#$%& ()*+ ,-./:; " * 40, page_area_pt2=612 * 792)[0]
        0.0
    """
    # every signal below judges each distinct character once and weighs it by its count:
    # a page is thousands of characters of a hundred kinds, and this runs on every OCR
    # answer too, on the GPU flow's busiest thread (per-character Python held its GIL)
    counts = Counter(text)
    glyphs = {c: n for c, n in counts.items() if not c.isspace()}
    n_glyphs = sum(glyphs.values())
    if not n_glyphs:
        return 0.0, "no text"
    factors = [
        _bad_char_factor(glyphs, n_glyphs, chars_with_unicode_errors),
        _alnum_factor(glyphs, n_glyphs),
        _density_factor(n_glyphs, page_area_pt2),
        _mojibake_factor(glyphs),
        *_word_factors(text, counts.keys()),
    ]
    issues = sorted((f for f in factors if f[0] < 1.0), key=lambda f: f[0])
    if not issues:
        return 1.0, f"good: {n_glyphs} chars"
    score = max(0.0, round(issues[0][0], 3))
    return score, "; ".join(why for _, why in issues)


def _clamp(value: float) -> float:
    return min(1.0, max(0.0, value))


def _is_bad(char: str) -> bool:
    if char == "\ufffd":
        return True
    return unicodedata.category(char) in ("Co", "Cn", "Cs", "Cc")


def _bad_char_factor(glyphs: dict[str, int], n_glyphs: int, unicode_errors: int
                     ) -> tuple[float, str]:
    bad = min(n_glyphs, sum(n for c, n in glyphs.items() if _is_bad(c)) + unicode_errors)
    share = bad / n_glyphs
    return _clamp(1.0 - 10.0 * share), f"{share:.1%} unmapped/replacement/control chars"


def _alnum_factor(glyphs: dict[str, int], n_glyphs: int) -> tuple[float, str]:
    """Letters and digits among glyphs, leader dots and rules aside (a table of contents
    is mostly ". . . ." and still a trustworthy text layer)."""
    counted = {c: n for c, n in glyphs.items() if c not in _FILLERS} or glyphs
    total = n_glyphs if counted is glyphs else sum(counted.values())
    alnum = sum(n for c, n in counted.items() if unicodedata.category(c)[0] in "LMN")
    share = alnum / total
    return _clamp((share - 0.4) / 0.3), f"only {share:.0%} letters/digits"


def _density_factor(n_glyphs: int, page_area_pt2: float) -> tuple[float, str]:
    if page_area_pt2 <= 0:
        return 1.0, ""
    expected = max(_MIN_EXPECTED_CHARS, page_area_pt2 / _PT2_PER_EXPECTED_CHAR)
    return (
        _clamp(n_glyphs / expected),
        f"only {n_glyphs} chars where a text page has {expected:.0f}+ (scan or figure?)",
    )


def _is_latin_letter(char: str) -> bool:
    code = ord(char)
    return char.isalpha() and (code < 0x250 or 0x1E00 <= code <= 0x1EFF)


def _mojibake_factor(glyphs: dict[str, int]) -> tuple[float, str]:
    """Text decoded with the wrong code page ("Ã©", "ÿþ") is mostly Latin-1 letters."""
    latin = {c: n for c, n in glyphs.items() if _is_latin_letter(c)}
    total = sum(latin.values())
    if total < 2:
        return 1.0, ""
    share = sum(n for c, n in latin.items() if 0x80 <= ord(c) < 0x250) / total
    return _clamp((0.5 - share) / 0.25), f"{share:.0%} accented Latin letters (mojibake?)"


def _is_unspaced(char: str) -> bool:
    code = ord(char)
    return any(low <= code <= high for low, high in _UNSPACED_RANGES)


def _has_vowel(char: str) -> bool:
    """Whether ``char`` lower-cased holds a vowel, accents aside ("É" does)."""
    return any(unicodedata.normalize("NFD", c)[0] in _VOWELS for c in char.lower())


def _word_factors(text: str, chars: Iterable[str]) -> list[tuple[float, str]]:
    """Word length (spaced scripts) and vowels (Latin): letter-spaced or consonant soup.
    ``chars``: the distinct characters of ``text``, each classified once, so a word is
    judged with C-speed string and set operations."""
    chars = list(chars)
    not_letters = {ord(c): None for c in chars if not c.isalpha()}
    unspaced = {c for c in chars if _is_unspaced(c)}
    latin_letters = {c for c in chars if _is_latin_letter(c)}
    vowels = {c for c in latin_letters if _has_vowel(c)}
    words = []
    for token in text.split():
        letters = token.translate(not_letters)
        if letters and unspaced.isdisjoint(letters):
            words.append(letters)
    factors: list[tuple[float, str]] = []
    if len(words) >= 5:
        mean = statistics.fmean(len(w) for w in words)
        length = min(_clamp(mean - 1.5), _clamp((25.0 - mean) / 10.0))
        factors.append((length, f"implausible mean word length {mean:.1f}"))
    latin = [w for w in words if len(w) >= 2 and latin_letters.issuperset(w)]
    if len(latin) >= 5:
        share = sum(1 for w in latin if not vowels.isdisjoint(w)) / len(latin)
        factors.append((_clamp((share - 0.5) / 0.3), f"only {share:.0%} of words have vowels"))
    return factors


# --- extraction ---------------------------------------------------------------------------

#: ignore the smallest 5% of glyph sizes (superscripts, stray dots) for min_font_pt
_MIN_FONT_PERCENTILE = 0.05
#: within pdfium's content order, a gap wider than this many ems splits a line (table
#: cells, columns drawn line by line); justified word and sentence spaces reach ~0.9em
_SPLIT_EM = 1.5
#: a glyph whose baseline is turned more than this from level (degrees) runs up or down
#: the page (a column heading set sideways): its line is a column of glyphs. Headings
#: turned 45 degrees stay level runs (the table grid places those by their first letter)
_VERTICAL_DEG = 60.0
_STEEP = math.tan(math.radians(_VERTICAL_DEG))


@dataclass
class _Run:
    """Glyphs being collected into one line, in user space (y up)."""

    chars: list[str] = field(default_factory=list)
    left: float = math.inf
    bottom: float = math.inf
    right: float = -math.inf
    top: float = -math.inf
    size: float = 0.0
    #: the size of a bullet that opens the run (:func:`folio.page.list_items.is_bullet_glyph`)
    lead_size: float = 0.0
    vertical: bool = False  # its glyphs run up or down the page
    style: headings.Style = field(default_factory=headings.Style)

    def add(self, char: str, box: pdfium_c.FS_RECTF, size: float | None,
            vertical: bool = False, face: tuple[str, bool, bool, bool] | None = None
            ) -> None:
        if not self.chars and is_bullet_glyph(char):
            # a bullet is often set in a dingbat font at another size than its words
            # (Wingdings at 13 pt before 9 pt text): the line's size and face are its
            # words', or the item's first line would not join its second (a paragraph
            # is one size) and would count as a heading set larger than the body
            self.lead_size = size or 0.0
            face = None
            size = None
        if face is not None:  # (name, bold, italic, monospaced) of the glyph's font
            self.style.glyphs += 1
            self.style.bold += face[1]
            self.style.italic += face[2]
            self.style.mono += face[3]
            self.style.faces[face[0]] = self.style.faces.get(face[0], 0) + 1
            self.style.face = self.style.face or face[0]
        if not self.chars or self.right == -math.inf:
            self.vertical = vertical
        self.chars.append(char)
        self.left, self.right = min(self.left, box.left), max(self.right, box.right)
        self.bottom, self.top = min(self.bottom, box.bottom), max(self.top, box.top)
        self.size = max(self.size, size or 0.0)

    def far_from(self, box: pdfium_c.FS_RECTF, size: float | None,
                 vertical: bool = False) -> bool:
        """A wide gap (:data:`_SPLIT_EM`) or a glyph off the line's band ends the line,
        and so does a turn between level and sideways glyphs.

        The band catches a word hyphenated across lines, where pdfium emits no break. A
        sideways line's band is its x-range and its gaps run along y: its glyphs stack,
        each box touching the last, and a level band would split it at every glyph whose
        box overlaps the one before by less than a rounding error.
        """
        if not self.chars or self.right == -math.inf:
            return False
        if vertical != self.vertical:
            return True
        gap = _SPLIT_EM * max(self.size, self.lead_size, size or 0.0, 1.0)
        if vertical:
            off_band = box.right < self.left or box.left > self.right
            return off_band or box.bottom - self.top > gap or self.bottom - box.top > gap
        off_band = box.top < self.bottom or box.bottom > self.top
        return off_band or box.left - self.right > gap or self.left - box.right > gap

    def line(self, geometry: PageGeometry) -> _Line | None:
        text = "".join(self.chars).strip()
        if not text or self.right == -math.inf:
            return None
        box = geometry.to_top_left(self.left, self.bottom, self.right, self.top)
        size = self.size or self.lead_size or None  # a marker alone: its own size
        self.style.size = size
        return _Line(box, text, size, style=self.style)


@dataclass
class _Scan:
    """What one pass over pdfium's characters yields."""

    glyphs: int = 0
    unicode_errors: int = 0
    sizes: list[float] = field(default_factory=list)
    lines: list[_Line] = field(default_factory=list)
    words: list[WordBox] = field(default_factory=list)
    word: _Run = field(default_factory=_Run)  # the word being collected

    def end_word(self, geometry: PageGeometry) -> None:
        """Close the word being collected (at a space, a line end or a line split).

        A sideways line (:attr:`_Run.vertical`) is one word: its words have no level
        neighbours to be ordered by, and a table grid orders words top to bottom, which
        would reverse a heading that runs up the page; kept whole, it reads in pdfium's
        order."""
        word = self.word
        text = "".join(word.chars).strip()
        if text and word.right != -math.inf:
            box = geometry.to_top_left(word.left, word.bottom, word.right, word.top)
            self.words.append(WordBox(text=text, x0=box.x0, y0=box.y0, x1=box.x1, y1=box.y1))
        self.word = _Run()


def extract(
    page: pdfium.PdfPage, *, width_pt: float, height_pt: float, settings: RouteSettings
) -> TextLayer:
    """Read the page's text layer, cut it into paragraph blocks, and judge it.

    ``text`` is pdfium's full text in content order (nothing lost); ``blocks`` are the
    same glyphs cut into lines (at pdfium's line breaks and at gaps over 1.5 em),
    grouped into paragraphs with boxes, ordered by columns (XY cut); ``words`` are the
    glyphs cut at spaces too, each with its box (for table grids: the page worker keeps
    only those inside table regions).
    """
    geometry = page_geometry(page)
    textpage = page.get_textpage()
    try:
        scan = _scan_chars(textpage, geometry)
        text = _clean(textpage.get_text_range())
    finally:
        textpage.close()
    size = statistics.median(scan.sizes) if scan.sizes else None
    lines = _mark_cells(_merge_runs(scan.lines))
    body = headings.body_of([line.style for line in lines if not line.cell], size)
    blocks = _blocks(_paragraphs(lines, body), body)
    score, why = score_text(
        text, page_area_pt2=width_pt * height_pt, chars_with_unicode_errors=scan.unicode_errors
    )
    if score > 0 and hidden_text_share(page) > 0.5:
        score = round(score * _HIDDEN_LAYER_FACTOR, 3)
        why = f"{HIDDEN_MARK} (an earlier OCR under a scan); {why}"
    return TextLayer(
        chars=scan.glyphs,
        text=text,
        blocks=blocks,
        min_font_pt=_low_percentile(scan.sizes),
        score=score,
        trusted=score >= settings.min_score,
        why=why,
        words=scan.words,
    )


def _scan_chars(textpage: pdfium.PdfTextPage, geometry: PageGeometry) -> _Scan:
    """One pass over the glyphs: sizes as drawn, Unicode map errors, and line runs."""
    scan = _Scan()
    run = _Run()
    previous: tuple[str, tuple[float, float, float, float]] = ("", (0.0, 0.0, 0.0, 0.0))
    box = pdfium_c.FS_RECTF()
    matrix = pdfium_c.FS_MATRIX()
    fonts = _Fonts(textpage)
    count, paired = textpage.count_chars(), -1
    for index in range(count):
        if index == paired:
            continue  # the low half of a character outside the BMP, read with its high half
        code = pdfium_c.FPDFText_GetUnicode(textpage, index)
        low = (pdfium_c.FPDFText_GetUnicode(textpage, index + 1)
               if 0xD800 <= code <= 0xDBFF and index + 1 < count else 0)
        char, both = utf16_char(code, low)
        if both:
            paired = index + 1
        if char in "\r\n":
            run = _flush(run, scan, geometry)
            scan.end_word(geometry)
            continue
        if char.isspace():
            run.chars.append(" ")
            if scan.word.vertical and scan.word.chars:
                scan.word.chars.append(" ")  # a sideways line stays one word box
            else:
                scan.end_word(geometry)
            continue
        size = _effective_size(textpage, index, matrix)
        sideways = size is not None and abs(matrix.b) > _STEEP * abs(matrix.a)
        has_box = pdfium_c.FPDFText_GetLooseCharBox(textpage, index, box)
        if has_box and run.far_from(box, size, sideways):
            run = _flush(run, scan, geometry)
            scan.end_word(geometry)
        if has_box:
            here = (box.left, box.bottom, box.right, box.top)
            face = fonts.face(index)
            run.add(char, box, size, sideways, face)
            if face is not None and size:
                fonts.measure(face, char, box.right - box.left, size)
            if char not in _BREAK_HYPHENS:
                scan.word.add(char, box, size, sideways)
            if char == LAM and previous[0] in ALEFS and same_box(previous[1], here):
                swap_last_two(run.chars)
                swap_last_two(scan.word.chars)
            previous = (char, here)
        if pdfium_c.FPDFText_IsGenerated(textpage, index) == 1:
            continue
        scan.glyphs += 1
        if not _is_bad(char):  # bad glyphs are counted from the text already
            scan.unicode_errors += pdfium_c.FPDFText_HasUnicodeMapError(textpage, index) == 1
        if size is not None:
            scan.sizes.append(size)
    _flush(run, scan, geometry)
    scan.end_word(geometry)
    measured = fonts.measured_mono()
    for line in scan.lines if measured else ():
        line.style.mono += sum(n for name, n in line.style.faces.items() if name in measured)
    return scan


def _flush(run: _Run, scan: _Scan, geometry: PageGeometry) -> _Run:
    line = run.line(geometry)
    if line is not None:
        scan.lines.append(line)
    return _Run()


def _effective_size(
    textpage: pdfium.PdfTextPage, index: int, matrix: pdfium_c.FS_MATRIX
) -> float | None:
    """The glyph's height on the page: ``1 Tf`` scaled by ``11 0 0 11 Tm`` is 11pt."""
    font_size = pdfium_c.FPDFText_GetFontSize(textpage, index)
    if not pdfium_c.FPDFText_GetMatrix(textpage, index, matrix):
        return None
    size = float(font_size) * math.hypot(matrix.c, matrix.d)
    return size if size > 0 and math.isfinite(size) else None


def _low_percentile(sizes: list[float]) -> float | None:
    if not sizes:
        return None
    ordered = sorted(sizes)
    return round(ordered[int(_MIN_FONT_PERCENTILE * (len(ordered) - 1))], 2)


#: glyphs of one face, all of one advance, that make it monospaced by measure
_MONO_MEASURED = 12
#: ... among them this many different letters
_MONO_LETTERS = 5


class _Fonts:
    """Each glyph's font as (name, bold, italic, monospaced) (:mod:`folio.page.headings`),
    judged once a font name and flags."""

    def __init__(self, textpage: pdfium.PdfTextPage) -> None:
        self.textpage = textpage
        self.buffer = ctypes.create_string_buffer(128)
        self.flags = ctypes.c_int()
        self.known: dict[tuple[bytes, int, int], tuple[str, bool, bool, bool]] = {}
        self.advances: dict[str, Counter[float]] = {}
        self.letters: dict[str, set[str]] = {}

    def measure(self, face: tuple[str, bool, bool, bool], char: str, width: float,
                size: float) -> None:
        """Note a glyph's advance (its loose box's width) over its size, for a face not
        named monospaced: :meth:`measured_mono` finds the faces all of whose glyphs
        advance alike (an IBM manual's BookMaster, a code font without the flag)."""
        if not face[3] and width > 0:
            self.advances.setdefault(face[0], Counter())[round(width / size, 2)] += 1
            if char.isalpha():
                self.letters.setdefault(face[0], set()).add(char.lower())

    def measured_mono(self) -> set[str]:
        """Faces with :data:`_MONO_MEASURED` glyphs or more on the page, all of one
        advance, among them several letters (a proportional face's digits advance alike
        too: a column of figures is no code)."""
        return {name for name, widths in self.advances.items()
                if len(widths) == 1 and widths.total() >= _MONO_MEASURED
                and len(self.letters.get(name, ())) >= _MONO_LETTERS}

    def face(self, index: int) -> tuple[str, bool, bool, bool] | None:
        got = pdfium_c.FPDFText_GetFontInfo(self.textpage, index, self.buffer,
                                            len(self.buffer), ctypes.byref(self.flags))
        if not got:
            return None
        weight = pdfium_c.FPDFText_GetFontWeight(self.textpage, index)
        key = (self.buffer.value, self.flags.value, weight)
        face = self.known.get(key)
        if face is None:
            name = headings.face_name(self.buffer.value.decode("utf-8", "replace"))
            face = (name, headings.is_bold(name, weight, self.flags.value),
                    headings.is_italic(name, self.flags.value),
                    headings.is_monospaced(name, self.flags.value))
            self.known[key] = face
        return face
