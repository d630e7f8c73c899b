"""A DOCX's list numbering (``word/numbering.xml``): each numbered paragraph's marker as
its author sees it, counters computed. Pure.

``w:num`` names an abstract definition (``w:abstractNum``) and may override a level's
start; each level (``w:lvl``, ``ilvl`` 0-8) has a format (``bullet``, ``decimal``,
``lowerLetter``, ``upperRoman``, ...), a text (``%1.``, ``(%2)``, ``%1.%2.``) and a
start. Counters are kept per list (``numId``) and level: an item counts its level up and
restarts every deeper level, as Word does. Markers are normalised as
:attr:`folio.models.Block.marker` says: ``-`` for any bullet (Word's bullets are
Symbol-font private-use glyphs, never kept), else the level's text with its numbers.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from lxml import etree

__all__ = ["Numbering", "format_number"]

W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"


@dataclass(frozen=True)
class _Level:
    fmt: str
    text: str
    start: int


def _roman(n: int) -> str:
    out = []
    for value, digits in ((1000, "m"), (900, "cm"), (500, "d"), (400, "cd"), (100, "c"),
                          (90, "xc"), (50, "l"), (40, "xl"), (10, "x"), (9, "ix"), (5, "v"),
                          (4, "iv"), (1, "i")):
        while n >= value:
            out.append(digits)
            n -= value
    return "".join(out) or "0"


def _letters(n: int) -> str:
    """Word's letters: a..z, then aa..zz, aaa.. (the letter repeated)."""
    n = max(n, 1)
    return chr(ord("a") + (n - 1) % 26) * ((n - 1) // 26 + 1)


def format_number(n: int, fmt: str) -> str:
    """``n`` as the numbering format ``fmt`` writes it."""
    if fmt == "lowerLetter":
        return _letters(n)
    if fmt == "upperLetter":
        return _letters(n).upper()
    if fmt == "lowerRoman":
        return _roman(n)
    if fmt == "upperRoman":
        return _roman(n).upper()
    if fmt == "decimalZero":
        return f"{n:02d}"
    return str(n)


def _val(element: etree._Element | None, default: str = "") -> str:
    return default if element is None else element.get(f"{W}val", default)


@dataclass
class Numbering:
    """The document's list definitions and the counters of the lists read so far."""

    #: numId -> ilvl -> level
    levels: dict[str, dict[int, _Level]] = field(default_factory=dict)
    _counts: dict[str, list[int]] = field(default_factory=dict)

    @classmethod
    def parse(cls, root: etree._Element | None) -> Numbering:
        if root is None:
            return cls()
        abstract: dict[str, dict[int, _Level]] = {}
        for definition in root.iter(f"{W}abstractNum"):
            abstract[definition.get(f"{W}abstractNumId", "")] = {
                int(lvl.get(f"{W}ilvl", "0")): _level(lvl) for lvl in definition.iter(f"{W}lvl")}
        levels: dict[str, dict[int, _Level]] = {}
        for num in root.iter(f"{W}num"):
            base = dict(abstract.get(_val(num.find(f"{W}abstractNumId")), {}))
            for override in num.iter(f"{W}lvlOverride"):
                ilvl = int(override.get(f"{W}ilvl", "0"))
                lvl = override.find(f"{W}lvl")
                if lvl is not None:
                    base[ilvl] = _level(lvl)
                start = override.find(f"{W}startOverride")
                if start is not None and ilvl in base:
                    old = base[ilvl]
                    base[ilvl] = _Level(old.fmt, old.text, _int(_val(start), 1))
            levels[num.get(f"{W}numId", "")] = base
        return cls(levels=levels)

    def marker(self, num_id: str, ilvl: int) -> str | None:
        """The next item's marker in list ``num_id`` at level ``ilvl`` (counters move);
        None when the list is unknown or its level writes no marker (``none``)."""
        defined = self.levels.get(num_id)
        if not defined:
            return None
        level = defined.get(ilvl) or defined.get(0)
        if level is None:
            return None
        counts = self._counts.setdefault(num_id, [0] * 9)
        ilvl = min(max(ilvl, 0), 8)
        counts[ilvl] = counts[ilvl] + 1 if counts[ilvl] else level.start
        for deeper in range(ilvl + 1, 9):
            counts[deeper] = 0
        if level.fmt == "bullet":
            return "-"
        if level.fmt == "none":
            return None
        text = level.text or f"%{ilvl + 1}."
        for k in range(9, 0, -1):
            if f"%{k}" in text:
                lvl = defined.get(k - 1)
                n = counts[k - 1] or (lvl.start if lvl else 1)
                text = text.replace(f"%{k}", format_number(n, lvl.fmt if lvl else "decimal"))
        text = "".join(text.split())
        return text or None


def _int(text: str, default: int) -> int:
    try:
        return int(text)
    except ValueError:
        return default


def _level(lvl: etree._Element) -> _Level:
    return _Level(fmt=_val(lvl.find(f"{W}numFmt"), "decimal"),
                  text=_val(lvl.find(f"{W}lvlText"), ""),
                  start=_int(_val(lvl.find(f"{W}start"), "1"), 1))
