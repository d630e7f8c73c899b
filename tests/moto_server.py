"""moto's standalone S3 server with S3's conditional writes atomic, as they are on S3.

moto 5's ``put_object`` reads the key to check ``If-None-Match: *`` or ``If-Match`` and
then writes it, with nothing between the two: on its threaded server two racing creators
can both pass the check and both be told they won (seen once in
``tests/test_claims.py::test_racing_claimers_exactly_one_wins[s3]``). S3, MinIO and R2
decide the condition and the write as one step. Here every ``put_object`` takes one lock,
so a conditional write's check and write see no other write to the bucket in between
(moto keeps objects in memory: a PUT takes microseconds under the lock).

    python -m tests.moto_server -H 127.0.0.1 -p PORT   # moto.server's own options
"""

from __future__ import annotations

import threading
from typing import Any

from moto.s3.responses import S3Response

_WRITE_LOCK = threading.Lock()
_put_object = S3Response.put_object


def _atomic_put_object(self: S3Response) -> Any:
    with _WRITE_LOCK:
        return _put_object(self)


def main() -> None:
    S3Response.put_object = _atomic_put_object  # type: ignore[method-assign]
    from moto.server import main as moto_main

    moto_main()


if __name__ == "__main__":
    main()
