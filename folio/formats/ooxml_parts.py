"""An OOXML package's parts: XML parsed safely, relationships resolved.

The DOCX reader works on the XML itself (numbering, footnotes, comments and tracked
fields are beyond python-docx's API); this is the little it needs of the package: a
member's XML through a parser that resolves no entities and fetches nothing, and a
part's relationships (``word/_rels/document.xml.rels``) as id -> (type, target).
"""

from __future__ import annotations

import posixpath
import zipfile
from dataclasses import dataclass

from lxml import etree

from folio.errors import OfficeConversionError

__all__ = ["Package", "Rel", "REL_NS"]

REL_NS = "http://schemas.openxmlformats.org/package/2006/relationships"
_PARSER = etree.XMLParser(resolve_entities=False, no_network=True, load_dtd=False,
                          huge_tree=False, remove_comments=True)


@dataclass(frozen=True)
class Rel:
    type: str  # the relationship type's last word: "hyperlink", "image", "footnotes"
    target: str  # a part name inside the package, or an external URL
    external: bool


class Package:
    """An open OOXML package; close it (or use ``with``)."""

    def __init__(self, archive: zipfile.ZipFile) -> None:
        self.archive = archive
        self._names = set(archive.namelist())

    def __enter__(self) -> Package:
        return self

    def __exit__(self, *_: object) -> None:
        self.archive.close()

    def has(self, name: str) -> bool:
        return name in self._names

    def xml(self, name: str) -> etree._Element | None:
        """The part's root element; None when the package has no such part.

        Raises:
            OfficeConversionError: the part is not well-formed XML.
        """
        if name not in self._names:
            return None
        try:
            return etree.fromstring(self.archive.read(name), _PARSER)
        except (etree.XMLSyntaxError, zipfile.BadZipFile, ValueError) as err:
            raise OfficeConversionError(f"{name} is not readable XML: {err}") from None

    def read(self, name: str) -> bytes | None:
        if name not in self._names:
            return None
        try:
            return self.archive.read(name)
        except (zipfile.BadZipFile, ValueError):
            return None

    def rels(self, part: str) -> dict[str, Rel]:
        """The relationships of ``part`` (``""``: the package's own), by id."""
        folder, base = posixpath.split(part)
        root = self.xml(posixpath.join(folder, "_rels", f"{base}.rels"))
        found: dict[str, Rel] = {}
        if root is None:
            return found
        for rel in root.iter(f"{{{REL_NS}}}Relationship"):
            target = rel.get("Target", "")
            external = rel.get("TargetMode") == "External"
            if not external:
                target = (target.lstrip("/") if target.startswith("/")
                          else posixpath.normpath(posixpath.join(folder, target)))
            found[rel.get("Id", "")] = Rel(rel.get("Type", "").rsplit("/", 1)[-1], target,
                                           external)
        return found

    def main_part(self) -> str:
        """The package's main part (``word/document.xml``), from its own relationships."""
        for rel in self.rels("").values():
            if rel.type == "officeDocument":
                return rel.target
        raise OfficeConversionError("the package names no main document part")
