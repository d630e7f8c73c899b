"""folio.formats.detect: the kind of a file from its content, on real files written here
(Pillow's encoders, zipfile, a compound file laid out by hand), whatever their names."""

from __future__ import annotations

import struct
import zipfile
from pathlib import Path

import pytest
from PIL import Image

from folio.formats.detect import detect_bytes, detect_file
from folio.formats.handling import skip_reason


def _image(path: Path, fmt: str, **kw: object) -> Path:
    Image.new("RGB", (40, 30), (200, 10, 10)).save(path, fmt, **kw)
    return path


@pytest.mark.parametrize(("fmt", "name"), [
    ("PNG", "png"), ("JPEG", "jpeg"), ("TIFF", "tiff"), ("WEBP", "webp"), ("BMP", "bmp"),
    ("GIF", "gif"), ("JPEG2000", "jpeg2000")])
def test_images_by_their_signature_whatever_the_name(tmp_path: Path, fmt: str, name: str) -> None:
    path = _image(tmp_path / "scan.dat", fmt)
    found = detect_file(path)
    assert (found.kind, found.name) == ("image", name)
    assert found.mime.startswith("image/")


def test_a_jpeg_named_pdf_is_a_jpeg_and_random_bytes_named_pdf_stay_a_pdf(tmp_path: Path) -> None:
    assert detect_file(_image(tmp_path / "photo.pdf", "JPEG")).name == "jpeg"
    junk = tmp_path / "junk.pdf"
    junk.write_bytes(bytes(range(7, 200)) * 10)
    assert detect_file(junk).kind == "pdf"  # pdfium says not-a-pdf, as before
    other = tmp_path / "junk.bin"
    other.write_bytes(bytes(range(7, 200)) * 10)
    found = detect_file(other)
    assert (found.kind, found.mime) == ("unsupported", "application/octet-stream")


def test_pdf_header_within_the_first_kib(tmp_path: Path) -> None:
    path = tmp_path / "noname"
    path.write_bytes(b"\x00" * 300 + b"%PDF-1.7\n" + b"x" * 100)
    assert detect_file(path).kind == "pdf"


def _zip(path: Path, entries: dict[str, bytes]) -> Path:
    with zipfile.ZipFile(path, "w") as archive:
        for name, body in entries.items():
            archive.writestr(name, body)
    return path


@pytest.mark.parametrize(("folder", "name"), [("word/", "docx"), ("ppt/", "pptx"),
                                              ("xl/", "xlsx")])
def test_ooxml_told_apart_by_its_parts(tmp_path: Path, folder: str, name: str) -> None:
    path = _zip(tmp_path / "file", {"[Content_Types].xml": b"<Types/>",
                                    f"{folder}main.xml": b"<x/>"})
    found = detect_file(path)
    assert (found.kind, found.name) == ("office", name)


@pytest.mark.parametrize(("mime", "name"), [
    ("application/vnd.oasis.opendocument.text", "odt"),
    ("application/vnd.oasis.opendocument.presentation", "odp"),
    ("application/vnd.oasis.opendocument.spreadsheet", "ods")])
def test_odf_by_its_mimetype_entry(tmp_path: Path, mime: str, name: str) -> None:
    path = _zip(tmp_path / "doc.zip", {"mimetype": mime.encode(), "content.xml": b"<x/>"})
    assert (detect_file(path).kind, detect_file(path).name) == ("office", name)


def test_other_zips_are_unsupported_with_their_type(tmp_path: Path) -> None:
    plain = detect_file(_zip(tmp_path / "bundle.docx", {"a.txt": b"hi"}))
    assert (plain.kind, plain.mime) == ("unsupported", "application/zip")
    assert skip_reason(plain) == "unsupported format: application/zip"
    epub = detect_file(_zip(tmp_path / "book", {"mimetype": b"application/epub+zip"}))
    assert (epub.kind, epub.mime) == ("unsupported", "application/epub+zip")
    broken = tmp_path / "broken.zip"
    broken.write_bytes(b"PK\x03\x04" + b"\x00" * 50)
    assert detect_file(broken).mime == "application/zip"


def _compound_file(path: Path, stream: str) -> Path:
    """A minimal OLE2 compound file (MS-CFB, 512-byte sectors): the header, one FAT
    sector, one directory sector holding the root and ``stream``."""
    free, end, fat_sect = 0xFFFFFFFF, 0xFFFFFFFE, 0xFFFFFFFD
    header = bytearray(512)
    header[0:8] = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"
    struct.pack_into("<HHHHH", header, 0x18, 0x3E, 3, 0xFFFE, 9, 6)
    struct.pack_into("<I", header, 0x2C, 1)  # FAT sectors
    struct.pack_into("<I", header, 0x30, 1)  # first directory sector
    struct.pack_into("<III", header, 0x38, 4096, end, 0)
    struct.pack_into("<II", header, 0x44, end, 0)
    struct.pack_into("<109I", header, 0x4C, 0, *([free] * 108))
    fat = struct.pack("<128I", fat_sect, end, *([free] * 126))

    def entry(name: str, kind: int) -> bytes:
        raw = bytearray(128)
        encoded = (name + "\x00").encode("utf-16-le")
        raw[: len(encoded)] = encoded
        struct.pack_into("<HB", raw, 64, len(encoded), kind)
        return bytes(raw)

    directory = entry("Root Entry", 5) + entry(stream, 2) + bytes(256)
    path.write_bytes(bytes(header) + fat + directory)
    return path


@pytest.mark.parametrize(("stream", "name"), [("WordDocument", "doc"),
                                              ("PowerPoint Document", "ppt"),
                                              ("Workbook", "xls")])
def test_ole2_by_its_streams(tmp_path: Path, stream: str, name: str) -> None:
    found = detect_file(_compound_file(tmp_path / "legacy", stream))
    assert (found.kind, found.name) == ("office", name)


def test_ole2_without_an_office_stream_is_unsupported(tmp_path: Path) -> None:
    found = detect_file(_compound_file(tmp_path / "thumbs.db", "Catalog"))
    assert (found.kind, found.mime) == ("unsupported", "application/x-ole-storage")


def test_a_damaged_compound_file_goes_to_the_office_path_which_names_the_damage(
        tmp_path: Path) -> None:
    """Skipping it would hide a damaged DOC; the Office reader ends it with a reason."""
    from folio.errors import OfficeConversionError
    from folio.formats.office_kind import sniff_office

    whole = _compound_file(tmp_path / "whole.doc", "WordDocument").read_bytes()
    damaged = tmp_path / "damaged.doc"
    damaged.write_bytes(whole[:300])  # the header cut short
    assert detect_file(damaged).kind == "office"
    with pytest.raises(OfficeConversionError, match="corrupt compound file"):
        sniff_office(damaged)


def test_rtf_text_markdown_html() -> None:
    assert detect_bytes(b"{\\rtf1\\ansi hello}").name == "rtf"
    assert detect_bytes(b"  <!DOCTYPE html><html><body>x</body></html>").mime == "text/html"
    assert detect_bytes(b"# Title\n\nsome words\n", "notes.md").mime == "text/markdown"
    assert detect_bytes("Grüße, plain text\n".encode(), "readme").mime == "text/plain"
    text = detect_bytes(b"hello\n", "a.txt")
    assert text.kind == "text" and "text/plain" in skip_reason(text)
    assert detect_bytes(b"\x1f\x8b\x08\x00rest").mime == "application/gzip"
    assert detect_bytes(b"", "empty").mime == "application/x-empty"
