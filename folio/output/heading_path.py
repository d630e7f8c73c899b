"""A chunk's heading path: the headings over its text, one a level. Pure
(folio.output.chunking)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from folio.hierarchy.numbering import is_bare_number, section_number
from folio.models import Block, Label

_DEFAULT_SECTION_LEVEL = 2
_MD_HEADING = re.compile(r"^(#{1,6})\s+(.*)$", re.DOTALL)


def heading_of(block: Block) -> tuple[int, str]:
    """(level, text): the block's level in the document (:mod:`folio.hierarchy`) where it
    is known, else the '#' count when the content is markdown, else Title 1 / section 2."""
    content = block.content.strip()
    match = _MD_HEADING.match(content)
    if match:
        level, text = len(match.group(1)), match.group(2)
    else:
        level = 1 if block.label.lower() == Label.TITLE.lower() else _DEFAULT_SECTION_LEVEL
        text = content
    if block.level is not None:
        level = block.level
    return level, " ".join(text.split()).strip("#*_ ")


@dataclass
class HeadingPath:
    """The headings over the current text, one a level: a new heading pops the path to
    its level (``1.2`` after ``1.1.3`` leaves ``1`` > ``1.2``)."""

    levels: list[tuple[int, str]] = field(default_factory=list)

    def enter(self, level: int, text: str, *, after_text: bool = True) -> None:
        """Enter a heading; ``after_text``: some text came since the last heading. A
        chapter's number set on a line of its own over its title (``1``, then ``Securing
        the data``, nothing between) makes one entry, ``1 Securing the data``, at the
        number's level: the title alone would lose the number, the number alone names
        nothing."""
        if (not after_text and self.levels and is_bare_number(self.levels[-1][1])
                and not is_bare_number(text)):
            number_level, number = self.levels.pop()
            level = min(level, number_level)
            if section_number(text) is None:  # "Chapter 1. Securing ..." names itself
                text = f"{number} {text}"
        while self.levels and self.levels[-1][0] >= level:
            self.levels.pop()
        self.leave_other_numbers(text)
        self.levels.append((level, text))

    def leave_other_numbers(self, text: str) -> None:
        """A numbered heading is not inside a numbered heading whose number does not
        open its own: ``2.1.6`` leaves ``1.2`` and ``Chapter 1`` though no ``2`` or
        ``2.1`` heading came between (a page that was not read, a heading not found)."""
        number = section_number(text)
        while number is not None and self.levels:
            above = section_number(self.levels[-1][1])
            if above is None or number[:len(above)] == above:
                return
            self.levels.pop()

    def names(self) -> list[str]:
        return [text for _, text in self.levels]
