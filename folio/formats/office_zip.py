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

import zipfile
from pathlib import Path

from folio.errors import BadInputError, OfficeConversionError

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
        with zipfile.ZipFile(path) as archive:
            members = archive.infolist()
    except (zipfile.BadZipFile, OSError, ValueError) as err:
        raise OfficeConversionError(f"a broken ZIP package: {err}") from None
    if len(members) > MAX_MEMBERS:
        raise BadInputError(f"{len(members)} members in the package is over the "
                            f"{MAX_MEMBERS} an Office document holds", code="too-large")
    total = sum(m.file_size for m in members)
    if total > max_unpacked_mb << 20:
        raise BadInputError(
            f"the package unpacks to {total >> 20} MB, over the {max_unpacked_mb} MB limit "
            "(office.max_unpacked_mb)", code="too-large")
    for member in members:
        if member.file_size >= RATIO_FLOOR_BYTES and (
                member.file_size > max_ratio * max(member.compress_size, 1)):
            raise BadInputError(
                f"member {member.filename!r} unpacks {member.file_size >> 20} MB from "
                f"{member.compress_size} bytes (over {max_ratio}x: office.max_ratio)",
                code="zip-bomb")
        if (member.filename.endswith((".xml", ".rels")) and member.file_size > max_part_mb << 20
                and not member.filename.startswith(_STREAMED)):
            raise BadInputError(
                f"part {member.filename!r} is {member.file_size >> 20} MB of XML, over the "
                f"{max_part_mb} MB a part may have (office.max_part_mb)", code="too-large")
