"""Characters from pdfium's glyph stream (for :mod:`folio.pdf.text_layer`): UTF-16 units
to characters and a lam-alef ligature's letters put in reading order. Pure."""

from __future__ import annotations


def utf16_char(code: int, low: int = 0) -> tuple[str, bool]:
    """The character of pdfium's UTF-16 unit ``code`` (with the next unit ``low``), and
    whether it took both: a character outside the BMP (math italic letters, CJK
    extensions, emoji) is a surrogate pair, one character; a lone surrogate (a broken
    font) cannot be encoded and counts as a bad glyph (U+FFFD)."""
    if 0xD800 <= code <= 0xDBFF and 0xDC00 <= low <= 0xDFFF:
        return chr(0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00)), True
    if 0 < code < 0x110000 and not 0xD800 <= code <= 0xDFFF:
        return chr(code), False
    return "\ufffd", False


#: Arabic lam and the alefs it forms a ligature with (lam-alef, one glyph, two letters)
LAM = "\u0644"
ALEFS = frozenset("\u0627\u0623\u0625\u0622")


def same_box(a: tuple[float, float, float, float], b: tuple[float, float, float, float]
              ) -> bool:
    return all(abs(x - y) < 0.01 for x, y in zip(a, b, strict=True))


def swap_last_two(chars: list[str]) -> None:
    """Put a lam-alef ligature's letters in reading order. pdfium reverses a right-to-
    left run glyph by glyph, and a ligature's two letters (one glyph, one box) come out
    alef first ("اإلنتاجية" for "الإنتاجية"); two letters sharing one box are that glyph,
    while a real alef-lam (the article) has two boxes."""
    if len(chars) >= 2:
        chars[-2], chars[-1] = chars[-1], chars[-2]
