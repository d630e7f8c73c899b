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
