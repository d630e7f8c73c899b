"""Secrets kept out of what folio writes, prints and hands to other processes.

Why: a PDF password, a database password in a DSN, an S3 secret key or an OCR server's
token given to folio must reach only the code that uses it. Prefect stores a flow run's
parameters in its database and shows them in the UI; reports, document.json and logs
are read by others; a child's command line is visible to every local user (``ps``) and
its environment to the user's other processes for as long as it lives (the shared
servers live for idle minutes). So:

- settings that are secrets (:data:`SECRET_SETTINGS`) travel as environment variables
  of the run's own process (:func:`secret_env_name`), never as flow-run parameters;
- a child starts with :func:`child_env`, the environment without any secret;
- credentials inside URLs and DSNs are masked (:func:`redact_uri`) wherever settings
  are written.

Example:
    >>> redact_uri("postgresql://folio:hunter2@db:5432/rag")
    'postgresql://folio:***@db:5432/rag'
    >>> redact_uri("postgresql://folio:hun/ter2@db:5432/rag")
    'postgresql://folio:***@db:5432/rag'
    >>> redact_uri("host=db user=folio password=hunter2 dbname=rag")
    'host=db user=folio password=*** dbname=rag'
    >>> secret_env_name("s3.secret_access_key")
    'FOLIO_S3__SECRET_ACCESS_KEY'
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping

__all__ = ["MODEL_HUB_SECRETS", "PG_DSN_ENV", "SECRET_SETTINGS", "child_env", "is_secret_env", "redact_text", "redact_uri",
           "secret_env_name"]

#: settings that hold secrets: from the run's environment, never a flow-run parameter
SECRET_SETTINGS = frozenset({"password", "ocr.api_key", "s3.secret_access_key",
                             "s3.session_token", "s3.access_key_id"})

#: variables that carry secrets by name (besides those matched by :data:`_SECRET_WORDS`)
#: the variable a PostgreSQL DSN with its password comes in (never a run's setting)
PG_DSN_ENV = "FOLIO_PG_DSN"
_SECRET_NAMES = frozenset({PG_DSN_ENV, "FOLIO_STORE__URI", "AWS_ACCESS_KEY_ID",
                           "DATABASE_URL", "PGPASSFILE"})
_SECRET_WORDS = re.compile(r"PASSWORD|PASSWD|SECRET|TOKEN|API_KEY|APIKEY|AUTH_STRING|"
                           r"CREDENTIAL|_DSN$|PRIVATE_KEY", re.IGNORECASE)
_MASK = "***"
#: what a model server may need from the environment to fetch its weights: kept in the
#: environments of the vLLM servers folio starts (folio.gpu), stripped from every other child
MODEL_HUB_SECRETS = ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN")
#: a password may hold a raw "/" (libpq and psycopg take ``postgresql://u:pa/ss@db/x``):
#: it runs to the "@", or a part of it was printed (issue 58); a URL whose path holds an
#: "@" after a port is masked more than needed, never less
_URI_USERINFO = re.compile(r"(?P<scheme>[a-zA-Z][a-zA-Z0-9+.-]*://)(?P<user>[^/@:\s]*)"
                           r"(?::(?P<password>[^@\s]*))?@")
_LIBPQ_PASSWORD = re.compile(r"(\bpassword\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)", re.IGNORECASE)
_QUERY_SECRET = re.compile(r"([?&](?:password|token|api_key|apikey|secret|sig|signature|"
                           r"x-amz-signature|x-amz-credential|x-amz-security-token)=)[^&#\s]*",
                           re.IGNORECASE)


def secret_env_name(key: str) -> str:
    """The ``FOLIO_*`` variable a dotted secret setting is read from (pydantic-settings'
    nested delimiter ``__``)."""
    return "FOLIO_" + key.upper().replace(".", "__")


def is_secret_env(name: str, value: str = "") -> bool:
    """Whether an environment variable holds a secret: by its name (a secret setting's
    variable, a word like PASSWORD or TOKEN), or by its value (a URI with credentials)."""
    upper = name.upper()
    if upper in _SECRET_NAMES or bool(_SECRET_WORDS.search(upper)):
        return True
    if upper.startswith("FOLIO_") and upper.removeprefix("FOLIO_").lower().replace(
            "__", ".") in SECRET_SETTINGS:
        return True
    if upper.endswith("_PROXY"):  # a model download may need it; the user's own setting
        return False
    return "@" in value and redact_uri(value) != value


def child_env(base: Mapping[str, str] | None = None, *, keep: Iterable[str] = (),
              **extra: str) -> dict[str, str]:
    """``base`` (default: this process's environment) without any secret variable, except
    those named in ``keep``, with ``extra`` added. What every child folio starts gets."""
    env = os.environ if base is None else base
    kept = {name.upper() for name in keep}
    clean = {k: v for k, v in env.items() if k.upper() in kept or not is_secret_env(k, v)}
    clean.update(extra)
    return clean


def redact_uri(value: str) -> str:
    """``value`` with the password of a URL's user part, a libpq ``password=`` and
    credential-like query parameters masked; anything else unchanged."""
    def userinfo(match: re.Match[str]) -> str:
        if match.group("password") is None:  # user@host: over HTTP the user part may be a
            scheme = match.group("scheme").lower()  # token; a database's user is no secret
            token = match.group("user") and scheme.startswith(("http", "ws"))
            return f"{match.group('scheme')}{_MASK}@" if token else match.group(0)
        return f"{match.group('scheme')}{match.group('user')}:{_MASK}@"

    value = _URI_USERINFO.sub(userinfo, value)
    value = _LIBPQ_PASSWORD.sub(lambda m: m.group(1) + _MASK, value)
    return _QUERY_SECRET.sub(lambda m: m.group(1) + _MASK, value)


def redact_text(text: str, secrets: Iterable[str | None]) -> str:
    """``text`` with every occurrence of each (non-empty) secret masked, and URIs
    redacted (:func:`redact_uri`)."""
    for secret in sorted((s for s in secrets if s), key=len, reverse=True):
        text = text.replace(secret, _MASK)
    return redact_uri(text)
