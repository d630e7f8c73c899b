"""ZIP detection reads a bounded central directory (issue 58, finding 8): a ZIP of a
million entries took 15 s and 500 MB in the main process, which has no memory cap,
because ``zipfile`` read its whole directory before the entry count was looked at."""

from __future__ import annotations

import io
import struct
import subprocess
import sys
import zipfile
import zlib
from pathlib import Path

import pytest

from folio.formats.detect import detect_file
from folio.formats.office_kind import sniff_office
from folio.formats.zip_directory import TooLarge, central_directory, read_member

_LOCAL = struct.Struct("<4s5H3I2H")
_CENTRAL = struct.Struct("<4s6H3I5H2I")


def _many_entries(path: Path, count: int, first: dict[str, bytes] | None = None) -> Path:
    """A real ZIP of ``count`` empty stored entries (written directly: zipfile takes
    minutes for this many), after the ``first`` ones."""
    local, central = bytearray(), bytearray()
    items = [(name.encode(), data) for name, data in (first or {}).items()]
    items += [(b"f%07d.txt" % i, b"") for i in range(count)]
    for name, data in items:
        crc = zlib.crc32(data)
        offset = len(local)
        local += _LOCAL.pack(b"PK\x03\x04", 20, 0, 0, 0, 0, crc, len(data), len(data),
                             len(name), 0) + name + data
        central += _CENTRAL.pack(b"PK\x01\x02", 20, 20, 0, 0, 0, 0, crc, len(data), len(data),
                                 len(name), 0, 0, 0, 0, 0, offset) + name
    total = len(items)
    if total > 0xFFFF or len(central) > 0xFFFFFFFF:
        zip64 = struct.pack("<4sQ2H2I4Q", b"PK\x06\x06", 44, 45, 45, 0, 0, total, total,
                            len(central), len(local))
        locator = struct.pack("<4sIQI", b"PK\x06\x07", 0, len(local) + len(central), 1)
        end = zip64 + locator + struct.pack("<4s4H2IH", b"PK\x05\x06", 0, 0, 0xFFFF, 0xFFFF,
                                            0xFFFFFFFF, 0xFFFFFFFF, 0)
    else:
        end = struct.pack("<4s4H2IH", b"PK\x05\x06", 0, 0, total, total, len(central),
                          len(local), 0)
    path.write_bytes(bytes(local) + bytes(central) + end)
    return path


DETECT = ("import pathlib, resource, sys; from folio.formats.detect import detect_file; "
          "before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss; "
          "print(detect_file(pathlib.Path(sys.argv[1])).name, "
          "resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before)")


@pytest.mark.timeout(300)
def test_a_zip_of_a_million_entries_is_told_a_zip_without_reading_its_directory(
        tmp_path: Path) -> None:
    """Detection in a real process: the directory is not read (its end record says
    how large it is), so the process grows by almost nothing; before, by 500 MB (40 s on
    this shared host, measured by hand)."""
    path = _many_entries(tmp_path / "bomb.zip", 1_000_000,
                         first={"[Content_Types].xml": b"<Types/>", "word/document.xml": b""})
    proc = subprocess.run([sys.executable, "-c", DETECT, str(path)], capture_output=True,
                          text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr
    name, grown_kib = proc.stdout.split()
    assert name == "zip"
    assert int(grown_kib) < 20_000, f"detection grew the process by {grown_kib} KiB"
    with pytest.raises(Exception, match="corrupt ZIP container"):
        sniff_office(path)  # the Office path is bounded the same way


def test_bounded_reader_reads_what_zipfile_reads(tmp_path: Path) -> None:
    """Names, sizes and members (stored, deflated, ZIP64, data before the archive) as
    zipfile reads them; an OOXML whose content types come last is still found."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as archive:
        archive.writestr("mimetype", "application/vnd.oasis.opendocument.text")
        archive.writestr("content.xml", "<x/>" * 5000, compress_type=zipfile.ZIP_DEFLATED)
        archive.writestr("ünï/名前.xml", "hi")
    data = b"#!prefix\n" * 7 + buf.getvalue()
    handle = io.BytesIO(data)
    entries = central_directory(handle, len(data))
    assert [e.name for e in entries] == ["mimetype", "content.xml", "ünï/名前.xml"]
    assert read_member(handle, entries[1], 1 << 20) == b"<x/>" * 5000
    assert read_member(handle, entries[1], 10) == b"<x/><x/><x"
    assert read_member(handle, entries[0], 256) == b"application/vnd.oasis.opendocument.text"
    with pytest.raises(TooLarge):
        central_directory(handle, len(data), max_entries=2)

    late = _many_entries(tmp_path / "late.docx", 70_000)  # ZIP64 end records
    with zipfile.ZipFile(late, "a") as archive:
        archive.writestr("[Content_Types].xml", "<Types/>")
        archive.writestr("word/document.xml", "<w/>")
    with late.open("rb") as fh:
        names = [e.name for e in central_directory(fh, late.stat().st_size)]
    with zipfile.ZipFile(late) as archive:
        assert names == archive.namelist()
    assert detect_file(late).name == "docx"
