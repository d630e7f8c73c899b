"""The done ledger's names held in 8 bytes each while a sweep plans.

Why: a sweep reads every done record's name (one listing request per 1000) and checks
each listed source against them. Kept as Python strings, 1M names cost about 150 MB, and
the sweep's memory grew with the bucket; as sorted 64-bit hashes they cost 8 MB, and a
check is a binary search. A hash collision (a new source taken for done) has odds of
about n / 2**64 per check: 5e-14 at 1M done records.

The hashes are sorted in place, in the buffer they were collected in: ``np.unique`` (numpy
2.4) took 54 MB at its peak for 1M hashes and left 37 MB of the process's RSS behind,
seven times the set itself. Duplicates need no removal: a listing names each record
once, and a repeated hash would only answer ``in`` as its first copy does.
"""

from __future__ import annotations

import hashlib
from array import array
from collections.abc import Iterable

import numpy as np

__all__ = ["DoneSet"]


def _hash(name: str) -> int:
    return int.from_bytes(hashlib.blake2b(name.encode(), digest_size=8).digest(), "little")


class DoneSet:
    """A read-only set of names, built from a stream of them (never all held at once).

    Example:
        >>> done = DoneSet(["a-1", "b-2"])
        >>> "a-1" in done, "c-3" in done
        (True, False)
    """

    def __init__(self, names: Iterable[str]) -> None:
        hashes = array("Q", (_hash(name) for name in names))
        self._sorted = np.frombuffer(hashes, dtype=np.uint64)  # a view: the array's 8 bytes
        self._sorted.sort()

    def __contains__(self, name: object) -> bool:
        if not isinstance(name, str):
            return False
        value = np.uint64(_hash(name))
        at = int(np.searchsorted(self._sorted, value))
        return at < self._sorted.size and self._sorted[at] == value

    def __len__(self) -> int:
        """How many names it was built from (a name given twice counts twice)."""
        return int(self._sorted.size)
