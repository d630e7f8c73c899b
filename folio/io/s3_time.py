"""The timestamps of an S3 listing, read without dateutil.

Why: botocore reads every timestamp with dateutil's general parser, about 40 µs each on
this host. A listing page carries 1000 ``LastModified`` values, and reading them took half
of a sweep's planning CPU (``bench/results/sweep_plan.json``, ``where_time_goes``). S3 and
its clones (MinIO, R2, moto) write them in one ISO 8601 form, ``2026-12-01T21:43:33.000Z``,
which :meth:`datetime.fromisoformat` reads in about a microsecond. Every other form (HTTP
dates in headers, epoch seconds, offsets) goes to botocore's own parser, and the fast path
returns what it would: the same instant with dateutil's ``tzutc``.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from dateutil.tz import tzutc

__all__ = ["parse_timestamp"]

_UTC = tzutc()


def parse_timestamp(value: Any) -> datetime:
    """A botocore ``timestamp_parser``: ``YYYY-MM-DDTHH:MM:SS[.fff]Z`` directly, the rest
    by :func:`botocore.utils.parse_timestamp`."""
    if isinstance(value, str) and len(value) >= 20 and value[10] == "T" and value[-1] == "Z":
        try:
            parsed = datetime.fromisoformat(value[:-1])
        except ValueError:
            pass
        else:
            if parsed.tzinfo is None:
                return parsed.replace(tzinfo=_UTC)
    return _slow(value)


def _slow(value: Any) -> datetime:
    from botocore.utils import parse_timestamp as botocore_parse

    parsed: datetime = botocore_parse(value)
    return parsed
