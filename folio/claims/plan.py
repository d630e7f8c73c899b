"""A sweep's listing pass: what each source under a prefix needs, streamed.

Why its own module: it is the part of a sweep whose cost grows with the bucket, so it is
what ``bench/sweep_plan.py`` measures. Its cost per source already done: a share of one
listing request of the sources and one of the done ledger (1000 names a page), and 8
bytes of memory (:class:`~folio.claims.done_set.DoneSet`); no request of its own.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Literal

from folio.claims.ledger import ClaimLedger
from folio.claims.records import key_hash
from folio.io.s3 import ObjectRef
from folio.io.sources import list_s3_entries
from folio.settings.config import S3Settings, SourceSettings

__all__ = ["Verdict", "plan_sweep"]

#: ``skipped``: done with this config and source version; ``given_up``: failed on its
#: own merits ``max_attempts`` times; ``todo``: to claim and process
Verdict = Literal["skipped", "given_up", "todo"]


def plan_sweep(
    prefix: str, ledger: ClaimLedger, s3: S3Settings, *, max_attempts: int,
    scope: SourceSettings | None = None,
    on_excluded: Callable[[ObjectRef], None] | None = None, own: Sequence[str] = (),
) -> Iterator[tuple[ObjectRef, Verdict]]:
    """Every object under ``prefix`` in key order with what it needs (those ``scope``
    leaves out go to ``on_excluded``). The done and failed records are listed once,
    before the first source; a failed source costs one read of its failure record."""
    done, failed = ledger.done_names(), ledger.failed_names()
    for obj in list_s3_entries(prefix, s3, scope=scope, on_excluded=on_excluded, own=own):
        if ledger.is_done(obj, done):
            yield obj, "skipped"
        elif key_hash(obj.uri) in failed and not ledger.should_retry(obj, max_attempts):
            yield obj, "given_up"
        else:
            yield obj, "todo"
