"""Settings that hold secrets, taken out of a run's parameters.

Why: ``folio ingest --set password=...`` (or ``ocr.api_key``, ``s3.secret_access_key``,
a ``store.uri`` DSN with its password, an ``ocr.endpoint`` with ``user:token@``) used to
become a flow-run parameter, which Prefect stores in its database and shows in the UI
and its API. The CLI runs the flow in its own process, so it hands such a setting over
as the ``FOLIO_*`` variable the flow's settings read anyway (:func:`split`); a request
that reaches a flow with one (a UI run, a trigger) is refused (:func:`refuse`): a worker
reads its secrets from its own environment. On ``folio``'s command line a secret is
refused before this (:mod:`folio.security.command_line`): every local user can read it.

Example:
    >>> public, env = split({"render.max_dpi": 200, "password": "pw",
    ...                      "store.uri": "postgresql://u:pw@db/rag"})
    >>> public, sorted(env)
    ({'render.max_dpi': 200}, ['FOLIO_PASSWORD', 'FOLIO_PG_DSN'])
"""

from __future__ import annotations

import json
from typing import Any

from folio.errors import ConfigError
from folio.security.redaction import PG_DSN_ENV, SECRET_SETTINGS, redact_uri, secret_env_name

__all__ = ["holds_secret", "is_postgres_dsn", "refuse", "split"]

#: libpq keywords a ``key=value`` DSN starts with (a folder may contain "=" too)
_LIBPQ_KEYWORDS = {"host", "hostaddr", "port", "dbname", "user", "password", "passfile",
                   "service", "sslmode", "connect_timeout", "application_name", "options"}


def holds_secret(key: str, value: Any) -> bool:
    """Whether the setting ``key`` (dotted) with ``value`` carries a secret: a secret
    setting, or a value with credentials in it (a URL's password, a libpq password)."""
    if key in SECRET_SETTINGS:
        return value is not None
    if isinstance(value, dict):
        return any(holds_secret(f"{key}.{k}", v) for k, v in value.items())
    if isinstance(value, list):
        return any(holds_secret(key, v) for v in value)
    return isinstance(value, str) and redact_uri(value) != value


def split(settings: dict[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
    """(the settings without secrets, the environment variables that carry them)."""
    public: dict[str, Any] = {}
    env: dict[str, str] = {}
    for key, value in settings.items():
        if not holds_secret(key, value):
            public[key] = value
        elif key == "store.uri" and isinstance(value, str) and is_postgres_dsn(value):
            env[PG_DSN_ENV] = value
        elif isinstance(value, (dict, list)):
            env[secret_env_name(key)] = json.dumps(value)
        else:
            env[secret_env_name(key)] = str(value)
    return public, env


def refuse(settings: dict[str, Any]) -> None:
    """Raise :class:`ConfigError` naming the first setting that carries a secret.

    Raises:
        ConfigError: a secret would become a parameter Prefect stores and shows.
    """
    for key, value in settings.items():
        if holds_secret(key, value):
            raise ConfigError(
                f"setting {key} carries a secret, and a run's settings are stored by Prefect "
                f"and shown in its UI: give it to the worker in its environment "
                f"({secret_env_name(key) if key != 'store.uri' else PG_DSN_ENV}) instead")


def is_postgres_dsn(uri: str) -> bool:
    """Whether a store URI is a PostgreSQL DSN (a URL, or libpq's ``key=value`` form), which
    travels as FOLIO_PG_DSN rather than as ``store.uri`` (it may hold a password)."""
    scheme, sep, _ = uri.partition("://")
    if sep:
        return scheme.lower() in ("postgresql", "postgres")
    first = uri.split(None, 1)[0] if uri.strip() else ""
    return first.partition("=")[0] in _LIBPQ_KEYWORDS and "=" in first
