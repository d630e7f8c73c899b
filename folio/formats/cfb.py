"""A reader of Microsoft's Compound File Binary containers ([MS-CFB]), just enough to tell
what an Office file in one is: the legacy binary formats (DOC, XLS, PPT) and password-
encrypted OOXML files (DOCX, XLSX, PPTX) are all CFB containers of named streams.

Read only: the directory (stream names) and the first bytes of a stream. Every chain is
bounded by the file's own sector count, so a crafted file with a looping or out-of-range
chain ends in :class:`CfbError`, never in a hang or a huge read.
"""

from __future__ import annotations

import struct
from typing import BinaryIO

MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"
_END_OF_CHAIN = 0xFFFFFFFE
_HEADER_DIFAT = 109
_DIR_ENTRY = 128
_STREAM = 2
_ROOT = 5


class CfbError(ValueError):
    """The container's structure is broken (truncated, a chain out of range or looping)."""


def is_cfb(head: bytes) -> bool:
    return head.startswith(MAGIC)


class CompoundFile:
    """The directory of a CFB file, with bounded reads of its streams."""

    def __init__(self, handle: BinaryIO, size: int) -> None:
        self._f = handle
        header = self._read_at(0, 512)
        if len(header) < 512 or not is_cfb(header):
            raise CfbError("not a compound file (bad header)")
        shift, mini_shift = struct.unpack_from("<HH", header, 0x1E)
        if shift not in (9, 12) or mini_shift != 6:
            raise CfbError(f"unsupported sector sizes (2^{shift}, 2^{mini_shift})")
        self._ssz = 1 << shift
        self._sectors = max(0, (size - 512) // self._ssz) + 1
        (n_fat, first_dir, _, self._cutoff, first_minifat, _, first_difat, n_difat) = (
            struct.unpack_from("<IIIIIIII", header, 0x2C))
        fat_sectors = list(struct.unpack_from(f"<{_HEADER_DIFAT}I", header, 0x4C))
        per_difat = self._ssz // 4 - 1
        sector = first_difat
        for _ in range(min(n_difat, self._sectors)):
            if sector >= self._sectors:
                break
            values = struct.unpack(f"<{per_difat + 1}I", self._sector(sector))
            fat_sectors += values[:per_difat]
            sector = values[per_difat]
        self._fat: list[int] = []
        for fat_sector in fat_sectors[: min(n_fat, self._sectors)]:
            if fat_sector >= self._sectors:
                raise CfbError("FAT sector out of range")
            self._fat += struct.unpack(f"<{self._ssz // 4}I", self._sector(fat_sector))
        self._entries = self._directory(first_dir)
        root = self._entries.get("Root Entry")
        self._ministream = root if root is not None else (0, 0)
        self._minifat: list[int] = []
        if first_minifat < self._sectors:
            raw = self._read_chain(first_minifat, None)
            self._minifat = list(struct.unpack(f"<{len(raw) // 4}I", raw[: len(raw) // 4 * 4]))

    # --- what callers ask ----------------------------------------------------------------

    def names(self) -> set[str]:
        """Names of the streams and storages (all levels, without their paths)."""
        return set(self._entries) - {"Root Entry"}

    def read_stream(self, name: str, limit: int) -> bytes:
        """Up to ``limit`` bytes from the start of the stream called ``name``."""
        start, size = self._entries[name]
        want = min(size, limit)
        if size < self._cutoff:
            return self._read_mini(start, want)
        return self._read_chain(start, want)

    # --- structure -------------------------------------------------------------------------

    def _directory(self, first: int) -> dict[str, tuple[int, int]]:
        raw = self._read_chain(first, None)
        entries: dict[str, tuple[int, int]] = {}
        for offset in range(0, len(raw) - _DIR_ENTRY + 1, _DIR_ENTRY):
            entry = raw[offset: offset + _DIR_ENTRY]
            name_len = struct.unpack_from("<H", entry, 0x40)[0]
            kind = entry[0x42]
            if kind not in (1, _STREAM, _ROOT) or not 2 <= name_len <= 64:
                continue
            name = entry[: name_len - 2].decode("utf-16-le", errors="replace")
            start, size = struct.unpack_from("<IQ", entry, 0x74)
            if self._ssz == 512:
                size &= 0xFFFFFFFF  # version 3 files leave the high half undefined
            entries.setdefault(name, (start, size))
        return entries

    def _chain(self, start: int, table: list[int], bound: int) -> list[int]:
        chain: list[int] = []
        sector = start
        while sector != _END_OF_CHAIN:
            if sector >= len(table) or len(chain) >= bound:
                raise CfbError("a sector chain runs out of range or loops")
            chain.append(sector)
            sector = table[sector]
        return chain

    def _read_chain(self, start: int, limit: int | None) -> bytes:
        out = bytearray()
        for sector in self._chain(start, self._fat, self._sectors):
            if limit is not None and len(out) >= limit:
                break
            out += self._sector(sector)
        return bytes(out if limit is None else out[:limit])

    def _read_mini(self, start: int, limit: int) -> bytes:
        mini_start, _ = self._ministream
        chain = self._chain(start, self._minifat, len(self._minifat))
        needed = chain[: (limit + 63) // 64]
        stream = self._read_chain(mini_start, (max(needed, default=0) + 1) * 64)
        data = b"".join(stream[s * 64: s * 64 + 64] for s in needed)
        return data[:limit]

    def _sector(self, index: int) -> bytes:
        data = self._read_at((index + 1) * self._ssz, self._ssz)
        if len(data) < self._ssz:
            raise CfbError("truncated: a sector lies past the end of the file")
        return data

    def _read_at(self, offset: int, length: int) -> bytes:
        self._f.seek(offset)
        return self._f.read(length)
