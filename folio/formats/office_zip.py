"""Bounds on an OOXML package before a reader opens it: a ZIP whose members unpack to
more than a document could hold is refused, typed, before any XML is parsed.

Why here and not in the readers: python-docx, python-pptx and openpyxl inflate members
as they need them and have no limits of their own; a 40 KB "zip bomb" of one member of
zeros unpacks to gigabytes. The central directory tells every member's size before any
of it is inflated, so the checks cost nothing. Declared sizes can lie; the readers
inflate through :mod:`zipfile`, which stops at the declared size (a member that inflates
past it fails its CRC), so a lying directory makes a corrupt file, not a bomb.
"""

from __future__ import annotations

from pathlib import Path

from folio.errors import BadInputError, OfficeConversionError
from folio.formats.zip_directory import TooLarge, ZipError, central_directory

__all__ = ["MAX_MEMBERS", "RATIO_FLOOR_BYTES", "check_package"]

#: members of a package: Office's own hold dozens to a few thousand (one per image, slide)
MAX_MEMBERS = 20_000
#: a member at least this large (unpacked) is held to the ratio cap; smaller ones are not
#: (a sheet of repeated values compresses 100x and is no threat at a few MB)
RATIO_FLOOR_BYTES = 16 << 20


#: XML parts read as a stream, never whole (openpyxl's read-only sheets): not held to the
#: part cap, which bounds what lxml builds in memory
_STREAMED = ("xl/worksheets/",)


def check_package(path: Path, *, max_unpacked_mb: int, max_ratio: int,
                  max_part_mb: int) -> None:
    """Refuse ``path`` when its members would unpack past ``max_unpacked_mb`` in all, one
    member over :data:`RATIO_FLOOR_BYTES` unpacks more than ``max_ratio`` times its packed
    size, or an XML part parsed whole (every one but a sheet's) is over ``max_part_mb``
    (a tree in memory takes several times its text).

    Raises:
        OfficeConversionError: not a readable ZIP.
        BadInputError: ``too-large`` (over the unpacked cap, too many members) or
            ``zip-bomb`` (over the ratio).
    """
    try:
        with path.open("rb") as handle:
            # the bounded reader detection uses: a directory of a million entries is
            # refused from its end record, never read into memory (issue 58)
            members = central_directory(handle, path.stat().st_size, max_entries=MAX_MEMBERS)
    except TooLarge as err:
        raise BadInputError(f"the package's directory ({err}) is over the {MAX_MEMBERS} "
                            "members an Office document holds", code="too-large") from None
    except (ZipError, OSError) as err:
        raise OfficeConversionError(f"a broken ZIP package: {err}") from None
    total = sum(m.size for m in members)
    if total > max_unpacked_mb << 20:
        raise BadInputError(
            f"the package unpacks to {total >> 20} MB, over the {max_unpacked_mb} MB limit "
            "(office.max_unpacked_mb)", code="too-large")
    for member in members:
        if member.size >= RATIO_FLOOR_BYTES and (
                member.size > max_ratio * max(member.compressed_size, 1)):
            raise BadInputError(
                f"member {member.name!r} unpacks {member.size >> 20} MB from "
                f"{member.compressed_size} bytes (over {max_ratio}x: office.max_ratio)",
                code="zip-bomb")
        if (member.name.endswith((".xml", ".rels")) and member.size > max_part_mb << 20
                and not member.name.startswith(_STREAMED)):
            raise BadInputError(
                f"part {member.name!r} is {member.size >> 20} MB of XML, over the "
                f"{max_part_mb} MB a part may have (office.max_part_mb)", code="too-large")
