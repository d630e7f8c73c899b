"""A TIFF read from one of its frames on, without Pillow walking every frame before it.

Why: Pillow finds frame ``k`` of a TIFF by loading the tag directory of each frame before
it, and checks each new directory against every one it saw (quadratic): a page batch at
the end of a 10,000-frame file took seconds to open, and every batch paid it again. The
frames are a chain of directories, each naming the next one's offset; following the
chain costs two small reads a frame. The file is then shown to Pillow with its header
naming that frame's directory as the first, so Pillow opens it as frame 0 at once (tag
values point to absolute offsets, which stay as they are).
"""

from __future__ import annotations

import io
import struct
from pathlib import Path
from typing import BinaryIO

__all__ = ["open_from_frame"]


def _layout(header: bytes) -> tuple[str, bool] | None:
    """(byte order, BigTIFF) of a TIFF header; None for anything else."""
    order = {b"II": "<", b"MM": ">"}.get(header[:2])
    if order is None or len(header) < 16:
        return None
    magic = struct.unpack(order + "H", header[2:4])[0]
    return (order, magic == 43) if magic in (42, 43) else None


def _frame_offset(fh: BinaryIO, order: str, big: bool, first: int, index: int,
                  size: int) -> int | None:
    """The offset of frame ``index``'s directory, following the chain from ``first``."""
    count_fmt, entry, next_fmt = ("Q", 20, "Q") if big else ("H", 12, "L")
    count_size, next_size = struct.calcsize(order + count_fmt), struct.calcsize(order + next_fmt)
    offset = first
    for _ in range(index):
        if not 0 < offset < size:
            return None
        fh.seek(offset)
        (count,) = struct.unpack(order + count_fmt, fh.read(count_size))
        fh.seek(offset + count_size + count * entry)
        raw = fh.read(next_size)
        if len(raw) < next_size:
            return None
        (offset,) = struct.unpack(order + next_fmt, raw)
    return offset if 0 < offset < size else None


class _Rebased(io.RawIOBase):
    """The file with its header's first-directory offset replaced."""

    def __init__(self, fh: BinaryIO, patch_at: int, patch: bytes) -> None:
        self._fh, self._at, self._patch = fh, patch_at, patch

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        return self._fh.seek(offset, whence)

    def tell(self) -> int:
        return self._fh.tell()

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        start = self._fh.tell()
        data = self._fh.read(len(buffer))
        end = start + len(data)
        lo, hi = max(start, self._at), min(end, self._at + len(self._patch))
        if lo < hi:
            data = (data[:lo - start] + self._patch[lo - self._at:hi - self._at]
                    + data[hi - start:])
        buffer[:len(data)] = data
        return len(data)

    def close(self) -> None:
        self._fh.close()
        super().close()


def open_from_frame(path: Path, index: int) -> BinaryIO | None:
    """``path`` as a TIFF whose frame 0 is its frame ``index``; None when it is no TIFF or
    its chain does not reach that frame (the caller opens it as it is and Pillow says why)."""
    fh = path.open("rb")
    try:
        header = fh.read(16)
        layout = _layout(header)
        if layout is None:
            fh.close()
            return None
        order, big = layout
        size = path.stat().st_size
        fmt, at = ("Q", 8) if big else ("L", 4)
        (first,) = struct.unpack(order + fmt, header[at:at + struct.calcsize(order + fmt)])
        offset = _frame_offset(fh, order, big, first, index, size)
        if offset is None:
            fh.close()
            return None
        fh.seek(0)
        return io.BufferedReader(_Rebased(fh, at, struct.pack(order + fmt, offset)))
    except (OSError, struct.error):
        fh.close()
        return None
