"""No secret on a command line: refused, with where to give it instead.

Why: a process's command line (``/proc/<pid>/cmdline``, what ``ps`` shows) is readable by
every local user for as long as the process lives, the whole run for ``folio ingest``.
A PDF password, a DSN's password, an S3 secret key or an OCR server's token given there
is given to everyone on the host. So ``folio`` refuses it before doing anything, in one
line naming the environment variable that takes it (or, for the PDF password, a file or
stdin: ``--password-file``); docs/security.md lists them.

Example:
    >>> where_instead("ocr.api_key", "k")
    'FOLIO_OCR__API_KEY'
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from folio.errors import ConfigError
from folio.security.redaction import PG_DSN_ENV, redact_uri, secret_env_name
from folio.security.secret_settings import holds_secret, is_postgres_dsn

__all__ = ["read_password_file", "refuse_secrets", "where_instead"]

#: options whose value is a setting: the variable that takes it from the environment
_OPTION_SETTINGS = {"store_uri": "store.uri", "endpoint": "ocr.endpoint",
                    "s3_endpoint_url": "s3.endpoint_url"}
#: options naming a source or an output location (a URL with credentials in it is refused)
_LOCATIONS = ("sources", "source", "out")
_HINT = "a command line is readable by every local user (ps)"


def where_instead(key: str, value: Any) -> str:
    """The environment variable a secret setting ``key`` is read from."""
    if key == "store.uri" and isinstance(value, str) and is_postgres_dsn(value):
        return PG_DSN_ENV
    return secret_env_name("ocr.endpoint" if key == "ocr.endpoints" else key)


def refuse_secrets(args: argparse.Namespace) -> None:
    """Raise :class:`ConfigError` for the first secret among the parsed options.

    Raises:
        ConfigError: ``--password``, a ``--set`` secret setting, or any option value with
            credentials in it (a URL's or a DSN's password).
    """
    if getattr(args, "password", None):
        raise ConfigError(f"--password: {_HINT}; set FOLIO_PASSWORD in the environment, or "
                          "give --password-file FILE (a file of yours, or - to read stdin)")
    for item in getattr(args, "set", None) or []:
        key, _, raw = item.partition("=")
        try:
            value = json.loads(raw)
        except json.JSONDecodeError:
            value = raw
        if holds_secret(key, value):
            raise ConfigError(f"--set {key}: {_HINT}; set {where_instead(key, value)} in "
                              "the environment instead")
    for name in (*_OPTION_SETTINGS, *_LOCATIONS):
        value = getattr(args, name, None)
        for text in value if isinstance(value, list) else [value]:
            if not isinstance(text, str) or redact_uri(text) == text:
                continue
            if name in _LOCATIONS and "://" not in text:
                continue  # a local path that happens to hold "password="
            key = _OPTION_SETTINGS.get(name, "")
            instead = f"give it in {where_instead(key, text)}" if key else (
                "give the credentials in the environment (AWS_* for S3)")
            raise ConfigError(f"{_option(name)}: holds credentials and {_HINT}; "
                              f"{instead} instead")


def read_password_file(path: str) -> str:
    """The PDF password from a file (its first line), or from stdin for ``-``.

    Raises:
        ConfigError: the file cannot be read.
    """
    try:
        if path == "-":
            text = sys.stdin.readline()
        else:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
            with os.fdopen(fd, encoding="utf-8") as fh:
                text = fh.readline()
    except OSError as exc:
        raise ConfigError(f"--password-file {path}: {exc.strerror or exc}") from None
    return text.rstrip("\r\n")


def _option(name: str) -> str:
    return name.upper() if name in _LOCATIONS else "--" + name.replace("_", "-")
