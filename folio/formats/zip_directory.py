"""A ZIP's central directory read within bounds, and one small member from it.

Why: telling an OOXML or ODF document from a plain ZIP needs the entries' names and one
small member (``mimetype``, ``[Content_Types].xml``). ``zipfile.ZipFile`` reads the whole
central directory into objects first, in the main process, which has no memory cap: a ZIP
of a million entries took 15 s and 500 MB before any check (issue 58). Here the end
record says how many entries and bytes the directory holds; one over :data:`MAX_ENTRIES`
or :data:`MAX_DIRECTORY_BYTES` is not read at all (the caller takes it for a plain ZIP),
and a member is read up to a limit, stored or deflated only.
"""

from __future__ import annotations

import struct
import zlib
from typing import BinaryIO, NamedTuple

__all__ = ["MAX_DIRECTORY_BYTES", "MAX_ENTRIES", "TooLarge", "ZipEntry", "ZipError",
           "central_directory", "read_member"]

#: more entries than any Office document holds (a 2000-slide deck has about 8000)
MAX_ENTRIES = 100_000
#: the central directory's size at most (100,000 entries of names up to ~120 bytes)
MAX_DIRECTORY_BYTES = 16 << 20

_EOCD = b"PK\x05\x06"
_EOCD64_LOCATOR = b"PK\x06\x07"
_EOCD64 = b"PK\x06\x06"
_CENTRAL = b"PK\x01\x02"
_LOCAL = b"PK\x03\x04"
_TAIL = 22 + 0xFFFF  # the end record and the longest comment
_MASK32 = 0xFFFFFFFF


class ZipError(ValueError):
    """Not a readable ZIP (truncated, damaged), or a member folio does not decompress."""


class TooLarge(ZipError):
    """The central directory holds more than the bounds: not read."""


class ZipEntry(NamedTuple):
    name: str
    method: int  # 0 stored, 8 deflated
    compressed_size: int
    size: int
    local_offset: int  # in the file (any data before the archive included)
    encrypted: bool


def central_directory(handle: BinaryIO, file_size: int, *, max_entries: int = MAX_ENTRIES,
                      max_bytes: int = MAX_DIRECTORY_BYTES) -> list[ZipEntry]:
    """The entries of the ZIP open in ``handle``, in directory order.

    Raises:
        TooLarge: the end record declares more than ``max_entries`` or ``max_bytes``.
        ZipError: no end record, or a damaged directory.
    """
    tail_start = max(0, file_size - _TAIL)
    handle.seek(tail_start)
    tail = handle.read(file_size - tail_start)
    at = tail.rfind(_EOCD)
    if at < 0 or len(tail) - at < 22:
        raise ZipError("no end of central directory record")
    eocd_pos = tail_start + at
    _, _, _, count, size, offset, _ = struct.unpack("<4H2IH", tail[at + 4:at + 22])
    end = eocd_pos
    if count == 0xFFFF or size == _MASK32 or offset == _MASK32:
        count, size, offset, end = _zip64_end(handle, eocd_pos)
    if count > max_entries or size > max_bytes:
        raise TooLarge(f"{count} entries, {size} bytes of central directory")
    start = end - size
    if start < 0:
        raise ZipError("the central directory starts before the file")
    handle.seek(start)
    directory = handle.read(size)
    return _entries(directory, count, start - offset)


def _zip64_end(handle: BinaryIO, eocd_pos: int) -> tuple[int, int, int, int]:
    """(entries, directory size, directory offset, ZIP64 end record's position)."""
    if eocd_pos < 20:
        raise ZipError("ZIP64 archive without its locator")
    handle.seek(eocd_pos - 20)
    locator = handle.read(20)
    if not locator.startswith(_EOCD64_LOCATOR):
        raise ZipError("ZIP64 archive without its locator")
    handle.seek(eocd_pos - 20 - 56)  # right before the locator (as zipfile reads it)
    record = handle.read(56)
    if not record.startswith(_EOCD64):
        raise ZipError("damaged ZIP64 end record")
    count, size, offset = struct.unpack("<3Q", record[32:56])
    return count, size, offset, eocd_pos - 20 - 56


_HEADER = struct.Struct("<4s4x2H8x2I3H8xI")  # a central directory entry's fixed 46 bytes


def _entries(directory: bytes, count: int, concat: int) -> list[ZipEntry]:
    entries: list[ZipEntry] = []
    pos = 0
    unpack = _HEADER.unpack_from
    for _ in range(count):
        if len(directory) < pos + 46:
            raise ZipError("damaged central directory")
        (signature, flags, method, csize, usize, name_len, extra_len, comment_len,
         local) = unpack(directory, pos)
        if signature != _CENTRAL:
            raise ZipError("damaged central directory")
        name_bytes = directory[pos + 46:pos + 46 + name_len]
        if _MASK32 in (usize, csize, local):
            extra = directory[pos + 46 + name_len:pos + 46 + name_len + extra_len]
            usize, csize, local = _zip64_sizes(extra, usize, csize, local)
        name = name_bytes.decode("utf-8" if flags & 0x800 else "cp437", errors="replace")
        entries.append(ZipEntry(name, method, csize, usize, local + concat, bool(flags & 1)))
        pos += 46 + name_len + extra_len + comment_len
    return entries


def _zip64_sizes(extra: bytes, usize: int, csize: int, local: int) -> tuple[int, int, int]:
    """The real sizes and offset where the entry says 0xFFFFFFFF (its ZIP64 extra field)."""
    pos = 0
    while pos + 4 <= len(extra):
        tag, length = struct.unpack("<2H", extra[pos:pos + 4])
        if tag == 1:
            values = list(struct.unpack(f"<{length // 8}Q", extra[pos + 4:pos + 4 + length // 8 * 8]))
            fields = [usize, csize, local]
            for index, value in enumerate(fields):
                if value == _MASK32 and values:
                    fields[index] = values.pop(0)
            return fields[0], fields[1], fields[2]
        pos += 4 + length
    return usize, csize, local


def read_member(handle: BinaryIO, entry: ZipEntry, limit: int) -> bytes:
    """Up to ``limit`` bytes of ``entry``'s content.

    Raises:
        ZipError: encrypted, a method other than stored or deflated, or damaged.
    """
    if entry.encrypted:
        raise ZipError(f"{entry.name} is encrypted")
    handle.seek(entry.local_offset)
    header = handle.read(30)
    if not header.startswith(_LOCAL) or len(header) < 30:
        raise ZipError(f"damaged local header of {entry.name}")
    name_len, extra_len = struct.unpack("<2H", header[26:30])
    handle.seek(entry.local_offset + 30 + name_len + extra_len)
    if entry.method == 0:
        return handle.read(min(limit, entry.compressed_size))
    if entry.method != 8:
        raise ZipError(f"{entry.name}: compression method {entry.method}")
    inflate = zlib.decompressobj(-15)
    out = bytearray()
    left = entry.compressed_size
    try:
        while left > 0 and len(out) < limit:
            chunk = handle.read(min(left, 64 << 10))
            if not chunk:
                break
            left -= len(chunk)
            out += inflate.decompress(chunk, limit - len(out))
            if inflate.unconsumed_tail:  # the limit reached mid-chunk
                break
    except zlib.error as exc:
        raise ZipError(f"{entry.name}: {exc}") from None
    return bytes(out[:limit])
