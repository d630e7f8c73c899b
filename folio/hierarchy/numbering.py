"""A heading's level from its numbering: ``1`` / ``2.3`` / ``2.3.1``, ``Chapter 3``,
``Part II``, ``Appendix A`` / ``A.1``, ``IV.``. Pure.

The depth of a dotted number is the level (``1.1.2 Scope`` is a third-level heading);
the words authors put before a chapter's or an appendix's number make a top level. List
numbering (``(2)``, ``3)``) and a number that could be a year or a quantity give no level.
"""

from __future__ import annotations

import re

#: a heading's level is at most this (markdown's ``######``)
MAX_LEVEL = 6

#: words that open a top-level division, in the languages tesseract packs are common for
_TOP_WORDS = (r"chapter|chap\.|part|book|section|kapitel|teil|abschnitt|chapitre|partie|"
              r"cap[ií]tulo|parte|capitolo|hoofdstuk|rozdzia[lł]")
_APPENDIX_WORDS = r"appendix|appendices|annex|anhang|annexe|ap[eé]ndice|anexo|appendice|bijlage"
_TOP = re.compile(rf"^(?:{_TOP_WORDS})\s+(?:\d{{1,3}}|[IVXLC]{{1,7}}|[A-Z])\b(?!\.\d)",
                  re.IGNORECASE)
_APPENDIX = re.compile(rf"^(?:{_APPENDIX_WORDS})\s+(?:[A-Z]|\d{{1,2}})((?:\.\d{{1,3}})*)\b",
                       re.IGNORECASE)
#: 1 / 1. / 1.2 / 1.2.3 (one or two digits first: a year opens no section), then a space
#: or the end
_DOTTED = re.compile(r"^\d{1,2}((?:\.\d{1,3})*)\.?(?=\s|$)")
#: A.1 / B.2.3: an appendix's sections
_LETTER_DOTTED = re.compile(r"^[A-Z]((?:\.\d{1,3})+)\.?(?=\s|$)")
#: IV. / XII. (a roman numeral with its point)
_ROMAN = re.compile(r"^[IVXLC]{1,7}\.(?=\s|$)")
#: a heading that is only its number: ``1``, ``IV``, ``Chapter 3``, ``Appendix B``
_BARE = re.compile(rf"^(?:(?:{_TOP_WORDS}|{_APPENDIX_WORDS})\s+)?(?:\d{{1,2}}(?:\.\d{{1,3}})*|"
                   r"[IVXLC]{1,7}|[A-Z])\.?$", re.IGNORECASE)


def numbering_level(text: str) -> int | None:
    """The level ``text``'s numbering gives, or None when it opens with none.

    >>> [numbering_level(t) for t in ("1 Introduction", "1.1 Scope", "2.3.1. Data",
    ...  "Chapter 3", "Appendix A.2 Tables", "B.1 Proofs", "IV. Results", "(2) Note",
    ...  "2024 in review", "Results")]
    [1, 2, 3, 1, 2, 2, 1, None, None, None]
    """
    text = " ".join(text.split()).strip("*_# ")
    if _TOP.match(text):
        return 1
    appendix = _APPENDIX.match(text)
    if appendix:
        return _capped(1 + appendix.group(1).count("."))
    for pattern in (_DOTTED, _LETTER_DOTTED):
        match = pattern.match(text)
        if match:
            return _capped(1 + match.group(1).count("."))
    if _ROMAN.match(text):
        return 1
    return None


def is_bare_number(text: str) -> bool:
    """Whether a heading is only its number (``1``, ``IV``, ``Chapter 3``): books set a
    chapter's number on a line of its own over its title, which names it with that number.

    >>> [is_bare_number(t) for t in ("1", "Chapter 3", "IV", "1 Introduction", "Results")]
    [True, True, True, False, False]
    """
    return bool(_BARE.match(" ".join(text.split()).strip("*_# ")))


_WORD_NUMBER = re.compile(rf"^(?:{_TOP_WORDS}|{_APPENDIX_WORDS})\s+(\d{{1,3}}|[IVXLC]{{1,7}}|[A-Z])((?:\.\d{{1,3}})*)\.?(?=\s|$)",
                          re.IGNORECASE)
_PLAIN_NUMBER = re.compile(r"^(\d{1,2}(?:\.\d{1,3})*|[A-Z](?:\.\d{1,3})+)\.?(?=\s|$)")


def section_number(text: str) -> tuple[str, ...] | None:
    """A heading's section number as its parts: ``2.1.6 Scope`` -> ``("2", "1", "6")``,
    ``Chapter 3. Rows`` -> ``("3",)``, ``A.2 Proofs`` -> ``("A", "2")``; None without one.

    >>> [section_number(t) for t in ("2.1.6 Scope", "Chapter 3. Rows", "A.2 Proofs", "Results")]
    [('2', '1', '6'), ('3',), ('A', '2'), None]
    """
    text = " ".join(text.split()).strip("*_# ")
    word = _WORD_NUMBER.match(text)
    if word:
        return (word.group(1).upper(), *word.group(2).split(".")[1:])
    plain = _PLAIN_NUMBER.match(text)
    return tuple(plain.group(1).split(".")) if plain else None


def _capped(level: int) -> int:
    return min(max(level, 1), MAX_LEVEL)
