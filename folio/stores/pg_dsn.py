"""A PostgreSQL DSN read for the pgvector store: parsed, shown without secrets, and the
forms its password may take in a driver's message.

Why: a DSN may hold a password, and libpq's own errors quote the DSN; what of it can be
shown (host, port, database, user) and what must be blanked out of every message is a
rule of its own, apart from the store's SQL.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote, quote_plus

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from folio.errors import ConfigError

__all__ = ["redact_dsn"]

#: connection parameters shown in names and errors; everything else may be a secret
_SHOWN_PARAMS = ("host", "hostaddr", "port", "dbname", "user")
_SECRET_PARAMS = ("password", "sslpassword")


def redact_dsn(dsn: str) -> str:
    """Host, port, database and user of ``dsn`` as a conninfo string: never a password.

    Raises:
        ConfigError: ``dsn`` is not a PostgreSQL URI or ``key=value`` string (the message
            does not echo it, since it may hold a password).
    """
    return _shown(_parse_dsn(dsn))


def _shown(params: dict[str, Any]) -> str:
    return make_conninfo(**{k: v for k, v in params.items() if k in _SHOWN_PARAMS})


def _secret_forms(params: dict[str, Any]) -> list[str]:
    """Each password as given and URL-encoded (a URI DSN holds the encoded form), longest
    first so that blanking a shorter form never leaves part of a longer one."""
    values = [str(params[key]) for key in _SECRET_PARAMS if params.get(key)]
    forms = {form for v in values for form in (v, quote(v, safe=""), quote_plus(v))}
    return sorted(forms, key=len, reverse=True)


def _parse_dsn(dsn: str) -> dict[str, Any]:
    if not dsn.strip():
        raise ConfigError("empty PostgreSQL DSN: set store.uri to postgresql://user@host/db")
    if _slash_in_userinfo(dsn):
        raise ConfigError(
            "the PostgreSQL DSN's password holds a raw '/': libpq reads the part before it "
            "as the host and the rest as the database (and showed them); write it as %2F")
    try:
        return conninfo_to_dict(dsn)
    except psycopg.ProgrammingError:  # libpq's message quotes the DSN: not shown
        raise ConfigError(
            "store.uri is not a PostgreSQL DSN (postgresql://user:password@host:port/db "
            "or 'host=... dbname=...')"
        ) from None


def _slash_in_userinfo(dsn: str) -> bool:
    """Whether a URI DSN has an ``@`` only after the first ``/`` of its authority, as
    ``postgresql://u:pa/ss@db/rag`` has: a raw ``/`` in the password (issue 58)."""
    scheme, sep, rest = dsn.strip().partition("://")
    if not sep or scheme.lower() not in ("postgresql", "postgres"):
        return False
    authority, slash, after = rest.partition("/")
    return bool(slash) and "@" not in authority and "@" in after.split("?", 1)[0]
