"""moto's standalone S3 server with S3's conditional writes atomic, as they are on S3.

moto 5's ``put_object`` reads the key to check ``If-None-Match: *`` or ``If-Match`` and
then writes it, with nothing between the two: on its threaded server two racing creators
can both pass the check and both be told they won (seen once in
``tests/test_claims.py::test_racing_claimers_exactly_one_wins[s3]``). S3, MinIO and R2
decide the condition and the write as one step. Here every conditional ``put_object``
takes one lock, so no other conditional write comes between its check and its write
(the claims write their keys only that way); plain uploads, LanceDB's large fragments
among them, stay side by side.

    python -m tests.moto_server -H 127.0.0.1 -p PORT   # moto.server's own options
"""

from __future__ import annotations

import threading
from typing import Any

from moto.s3.responses import S3Response

_WRITE_LOCK = threading.Lock()
_put_object = S3Response.put_object


def _atomic_put_object(self: S3Response) -> Any:
    if self.headers.get("If-None-Match") is None and self.headers.get("If-Match") is None:
        return _put_object(self)
    with _WRITE_LOCK:
        return _put_object(self)


def main() -> None:
    S3Response.put_object = _atomic_put_object  # type: ignore[method-assign]
    from moto.server import main as moto_main

    moto_main()


if __name__ == "__main__":
    main()
