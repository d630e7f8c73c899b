"""The one module that talks to S3 (AWS, MinIO, Cloudflare R2, moto: any S3 endpoint).

Every botocore failure leaves this module as a folio error, so callers decide on two
branches only: :class:`~folio.errors.ConfigError` (wrong bucket, wrong or missing
credentials: a person must fix the settings; retrying is pointless) and
:class:`~folio.errors.StorageError` (connection trouble, 5xx, throttling: a later run may
succeed). Messages name the operation, the S3 location and the error code, and never the
server's free text or any credential.

Example:
    >>> client = make_client(S3Settings(endpoint_url="http://127.0.0.1:9000"))  # doctest: +SKIP
    >>> [ref.key for ref in list_objects(client, "bucket", "in/")]  # doctest: +SKIP
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    CredentialRetrievalError,
    EndpointConnectionError,
    NoCredentialsError,
    NoRegionError,
    ParamValidationError,
    PartialCredentialsError,
    ProfileNotFound,
    SSOTokenLoadError,
    TokenRetrievalError,
    UnauthorizedSSOTokenError,
)
from pydantic import BaseModel

from folio.errors import BadInputError, ConfigError, StorageError
from folio.settings.config import S3Settings

if TYPE_CHECKING:
    from botocore.config import Config

__all__ = [
    "ObjectRef",
    "client_for",
    "delete_object",
    "delete_prefix",
    "download_file",
    "get_bytes",
    "get_text",
    "head_object",
    "list_objects",
    "make_client",
    "parse_s3_uri",
    "put_bytes",
    "put_if_absent",
    "put_if_match",
    "upload_file",
]

# Codes that mean "the settings are wrong": fixing them needs a person, not a retry.
_CONFIG_CODES = frozenset(
    {
        "NoSuchBucket",
        "AccessDenied",
        "AllAccessDisabled",
        "InvalidAccessKeyId",
        "SignatureDoesNotMatch",
        "ExpiredToken",
        "InvalidToken",
        "TokenRefreshRequired",
        "InvalidBucketName",
        "AuthorizationHeaderMalformed",
        "PermanentRedirect",
        "NotImplemented",  # e.g. an S3 clone without conditional writes: retrying won't help
        "403",
    }
)
# Client-side (4xx) codes that are nevertheless worth retrying.
_RETRYABLE_4XX = frozenset({"RequestTimeout", "SlowDown", "ConditionalRequestConflict"})
_MISSING_CODES = frozenset({"NoSuchKey", "404", "NotFound"})
# No or expired credentials (SSO login, assume-role): a person must act, not a retry.
_CREDENTIAL_ERRORS = (
    NoCredentialsError,
    PartialCredentialsError,
    CredentialRetrievalError,
    SSOTokenLoadError,
    TokenRetrievalError,
    UnauthorizedSSOTokenError,
)
_PRECONDITION_CODES = frozenset({"PreconditionFailed", "412"})


class ObjectRef(BaseModel, frozen=True):
    """One listed object: enough to fetch it and to notice that it changed."""

    bucket: str
    key: str
    size: int
    etag: str = ""
    last_modified: datetime | None = None

    @property
    def uri(self) -> str:
        return f"s3://{self.bucket}/{self.key}"


def parse_s3_uri(uri: str) -> tuple[str, str]:
    """Split ``s3://bucket/key/parts`` into ``("bucket", "key/parts")`` (key may be empty).

    Raises:
        ConfigError: not an ``s3://`` URI or no bucket name.
    """
    scheme, sep, rest = uri.partition("://")
    if not sep or scheme.lower() != "s3":
        raise ConfigError(f"not an s3:// URI: {uri!r}")
    bucket, _, key = rest.partition("/")
    if not bucket:
        raise ConfigError(f"no bucket in S3 URI: {uri!r}")
    return bucket, key


# --- clients ----------------------------------------------------------------------------


def _custom_endpoint(settings: S3Settings) -> str | None:
    """The non-AWS endpoint in use, from the settings or boto3's own env variables."""
    return (
        settings.endpoint_url
        or os.environ.get("AWS_ENDPOINT_URL_S3")
        or os.environ.get("AWS_ENDPOINT_URL")
    )


def _s3_errors() -> tuple[type[BaseException], ...]:
    """What boto3/botocore/s3transfer raise; OSError covers local files and sockets.
    boto3 is imported with the first client, not with this module: 0.3 s of every CLI
    start that reads no S3."""
    from boto3.exceptions import Boto3Error

    return (ClientError, BotoCoreError, Boto3Error, OSError)


def _client_config(settings: S3Settings, max_attempts: int) -> Config:
    """Retries with backoff for throttling/5xx, bounded timeouts, and S3-compatible quirks.

    Custom endpoints (MinIO, R2, moto) get path-style addressing (no wildcard DNS needed)
    and checksums only where S3 requires them (several S3 clones reject the newer
    default CRC trailers).
    """
    kwargs: dict[str, Any] = {
        "retries": {"mode": "standard", "max_attempts": max_attempts},
        "connect_timeout": 10,
        "read_timeout": 60,
        "max_pool_connections": 16,
    }
    if _custom_endpoint(settings):
        kwargs["s3"] = {"addressing_style": "path"}
        kwargs["request_checksum_calculation"] = "when_required"
        kwargs["response_checksum_validation"] = "when_required"
    from botocore import config

    return config.Config(**kwargs)


def make_client(settings: S3Settings, *, max_attempts: int = 5) -> Any:
    """A boto3 S3 client; unset settings fall back to boto3's chain (env, profile, IMDS).

    ``max_attempts`` counts the first try: throttling, 5xx and connection errors are
    retried with exponential backoff before a :class:`StorageError` reaches the caller.

    Raises:
        ConfigError: the named profile does not exist or the credentials are partial.
    """
    import boto3
    import botocore.session

    from folio.io.s3_time import parse_timestamp

    try:
        core = botocore.session.get_session()  # this client's own: nothing global changes
        parsers = core.get_component("response_parser_factory")
        parsers.set_parser_defaults(timestamp_parser=parse_timestamp)  # see folio.io.s3_time
        session = boto3.session.Session(profile_name=settings.profile, botocore_session=core)
        kwargs: dict[str, Any] = {"config": _client_config(settings, max_attempts)}
        if settings.endpoint_url:
            kwargs["endpoint_url"] = settings.endpoint_url
        if settings.region:
            kwargs["region_name"] = settings.region
        if settings.access_key_id:
            kwargs["aws_access_key_id"] = settings.access_key_id
        if settings.secret_access_key is not None:
            kwargs["aws_secret_access_key"] = settings.secret_access_key.get_secret_value()
        if settings.session_token is not None:
            kwargs["aws_session_token"] = settings.session_token.get_secret_value()
        return session.client("s3", **kwargs)
    except (ProfileNotFound, PartialCredentialsError, NoRegionError) as exc:
        raise ConfigError(f"S3 client settings: {type(exc).__name__}") from None
    except ValueError as exc:  # botocore rejects a malformed endpoint URL with ValueError
        raise ConfigError(f"S3 client settings: invalid endpoint ({type(exc).__name__})") from None


_CLIENTS: dict[tuple[str | None, ...], Any] = {}
_CLIENTS_LOCK = threading.Lock()


def _settings_key(settings: S3Settings) -> tuple[str | None, ...]:
    secret = settings.secret_access_key
    token = settings.session_token
    return (
        settings.endpoint_url,
        settings.region,
        settings.access_key_id,
        secret.get_secret_value() if secret is not None else None,
        token.get_secret_value() if token is not None else None,
        settings.profile,
    )


def client_for(settings: S3Settings) -> Any:
    """A shared client per distinct settings: building one costs ~50 ms and clients are
    thread-safe, so stages and threads reuse it."""
    key = _settings_key(settings)
    with _CLIENTS_LOCK:
        client = _CLIENTS.get(key)
        if client is None:
            client = _CLIENTS[key] = make_client(settings)
        return client


# --- error mapping ----------------------------------------------------------------------


def _error_code(exc: ClientError) -> tuple[str, int]:
    error = exc.response.get("Error", {})
    status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0)
    return str(error.get("Code", "")), int(status or 0)


def _is_missing(exc: BaseException) -> bool:
    return isinstance(exc, ClientError) and _error_code(exc)[0] in _MISSING_CODES


def _is_precondition_failed(exc: ClientError) -> bool:
    code, status = _error_code(exc)
    return code in _PRECONDITION_CODES or status == 412


def _permanent_status(code: str, status: int) -> bool:
    """4xx answers are the request's fault, except timeouts, conflicts and throttling."""
    if code in _RETRYABLE_4XX or code.startswith("Throttl") or status in (408, 409, 429):
        return False
    return 300 <= status < 500


def _raise_mapped(exc: BaseException, op: str, bucket: str, key: str = "") -> NoReturn:
    """Re-raise a botocore/s3transfer failure as a folio error with a secret-free message.

    The botocore exception is deliberately not chained: its text is the server's, and
    this module promises messages made only of what it composes itself.
    """
    from boto3.exceptions import Boto3Error

    where = f"s3://{bucket}/{key}" if key else f"s3://{bucket}"
    if isinstance(exc, Boto3Error) and isinstance(exc.__context__, ClientError):
        exc = exc.__context__  # S3UploadFailedError wraps the answer that matters
    if isinstance(exc, ClientError):
        code, status = _error_code(exc)
        msg = f"{op} {where}: {code or 'error'} (HTTP {status})"
        if code in _MISSING_CODES:
            raise BadInputError(f"{msg}; object not found", code="not-found") from None
        if code in _CONFIG_CODES or _permanent_status(code, status):
            hint = "bucket does not exist" if code == "NoSuchBucket" else "check S3 settings"
            raise ConfigError(f"{msg}; {hint}") from None
        raise StorageError(msg) from None
    if isinstance(exc, _CREDENTIAL_ERRORS):
        raise ConfigError(
            f"{op} {where}: no usable S3 credentials ({type(exc).__name__}): set "
            "AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY or AWS_PROFILE, or pass "
            "--s3-endpoint-url for MinIO/R2") from None
    if isinstance(exc, ParamValidationError):
        raise ConfigError(f"{op} {where}: invalid request parameters") from None
    # connection trouble, timeouts, s3transfer's RetriesExceededError, local I/O
    if isinstance(exc, EndpointConnectionError):
        raise StorageError(f"{op} {where}: cannot reach the S3 endpoint ({type(exc).__name__}); "
                           "check --s3-endpoint-url / AWS_ENDPOINT_URL") from None
    raise StorageError(f"{op} {where}: {type(exc).__name__}") from None


# --- operations -------------------------------------------------------------------------


def list_objects(
    client: Any, bucket: str, prefix: str = "", *, page_size: int = 1000
) -> Iterator[ObjectRef]:
    """Every object under ``prefix``, page by page, in S3's (UTF-8 byte) key order.

    ``page_size`` exists so tests can exercise pagination without writing 1000 objects.
    """
    paginator = client.get_paginator("list_objects_v2")
    pages = paginator.paginate(
        Bucket=bucket, Prefix=prefix, PaginationConfig={"PageSize": page_size}
    )
    try:
        for page in pages:
            for item in page.get("Contents", []):
                yield ObjectRef(
                    bucket=bucket,
                    key=item["Key"],
                    size=int(item.get("Size", 0)),
                    etag=str(item.get("ETag", "")),
                    last_modified=item.get("LastModified"),
                )
    except _s3_errors() as exc:
        _raise_mapped(exc, "list", bucket, prefix)


def head_object(client: Any, bucket: str, key: str) -> ObjectRef | None:
    """Size and ETag of one object, or None when it does not exist."""
    try:
        meta = client.head_object(Bucket=bucket, Key=key)
    except _s3_errors() as exc:
        if _is_missing(exc):
            return None
        _raise_mapped(exc, "head", bucket, key)
    return ObjectRef(
        bucket=bucket,
        key=key,
        size=int(meta.get("ContentLength", 0)),
        etag=str(meta.get("ETag", "")),
        last_modified=meta.get("LastModified"),
    )


def download_file(client: Any, bucket: str, key: str, dest: Path) -> Path:
    """Download to ``dest`` (multipart for large objects); never leaves a partial file.

    Raises:
        BadInputError: the object does not exist (code ``not-found``).
    """
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(f".{dest.name}.{os.getpid()}.{threading.get_ident()}.part")
    try:
        client.download_file(bucket, key, str(tmp))
        os.replace(tmp, dest)
    except _s3_errors() as exc:
        _raise_mapped(exc, "download", bucket, key)
    finally:
        tmp.unlink(missing_ok=True)
    return dest


def upload_file(
    client: Any, path: Path, bucket: str, key: str, *, content_type: str | None = None
) -> None:
    """Upload a local file (multipart above boto3's threshold)."""
    extra = {"ContentType": content_type} if content_type else None
    try:
        client.upload_file(str(path), bucket, key, ExtraArgs=extra)
    except _s3_errors() as exc:
        _raise_mapped(exc, "upload", bucket, key)


def put_bytes(
    client: Any, bucket: str, key: str, body: bytes, *, content_type: str | None = None
) -> str:
    """Write a small object in one request; returns its ETag."""
    kwargs: dict[str, Any] = {"Bucket": bucket, "Key": key, "Body": body}
    if content_type:
        kwargs["ContentType"] = content_type
    try:
        return str(client.put_object(**kwargs).get("ETag", ""))
    except _s3_errors() as exc:
        _raise_mapped(exc, "put", bucket, key)


def put_if_absent(client: Any, bucket: str, key: str, body: bytes) -> bool:
    """Create ``key`` only if nothing is there yet (S3 conditional write, If-None-Match).

    Returns False when the object already exists (412). A 409 ConditionalRequestConflict
    (another conditional write racing on the same key) raises StorageError: S3 asks the
    caller to retry, and the outcome of the other write is unknown.
    """
    try:
        client.put_object(Bucket=bucket, Key=key, Body=body, IfNoneMatch="*")
    except ClientError as exc:
        if _is_precondition_failed(exc):
            return False
        _raise_mapped(exc, "put-if-absent", bucket, key)
    except _s3_errors() as exc:
        _raise_mapped(exc, "put-if-absent", bucket, key)
    return True


def put_if_match(client: Any, bucket: str, key: str, body: bytes, etag: str) -> bool:
    """Replace ``key`` only if its ETag is still ``etag`` (compare-and-swap for claims).

    Returns False when the object changed or vanished since ``etag`` was read.
    """
    try:
        client.put_object(Bucket=bucket, Key=key, Body=body, IfMatch=etag)
    except ClientError as exc:
        if _is_precondition_failed(exc) or _is_missing(exc):
            return False
        _raise_mapped(exc, "put-if-match", bucket, key)
    except _s3_errors() as exc:
        _raise_mapped(exc, "put-if-match", bucket, key)
    return True


def get_bytes(client: Any, bucket: str, key: str) -> bytes | None:
    """The whole object, or None when it does not exist (meant for small objects)."""
    try:
        body = client.get_object(Bucket=bucket, Key=key)["Body"]
        try:
            return bytes(body.read())
        finally:
            body.close()
    except _s3_errors() as exc:
        if _is_missing(exc):
            return None
        _raise_mapped(exc, "get", bucket, key)


def get_text(client: Any, bucket: str, key: str) -> str | None:
    """The object decoded as UTF-8, or None when it does not exist."""
    data = get_bytes(client, bucket, key)
    return None if data is None else data.decode("utf-8")


def delete_object(client: Any, bucket: str, key: str) -> None:
    """Delete one object (no error when it is already gone: S3 deletes are idempotent)."""
    try:
        client.delete_object(Bucket=bucket, Key=key)
    except _s3_errors() as exc:
        _raise_mapped(exc, "delete", bucket, key)


def delete_prefix(client: Any, bucket: str, prefix: str) -> int:
    """Delete every object under ``prefix`` (1000 per request); returns how many."""
    deleted = 0
    batch: list[dict[str, str]] = []
    for ref in list_objects(client, bucket, prefix):
        batch.append({"Key": ref.key})
        if len(batch) == 1000:
            deleted += _delete_batch(client, bucket, batch)
            batch = []
    if batch:
        deleted += _delete_batch(client, bucket, batch)
    return deleted


def _delete_batch(client: Any, bucket: str, batch: list[dict[str, str]]) -> int:
    try:
        answer = client.delete_objects(Bucket=bucket, Delete={"Objects": batch, "Quiet": True})
    except _s3_errors() as exc:
        _raise_mapped(exc, "delete", bucket, batch[0]["Key"])
    errors = answer.get("Errors", [])
    if errors:
        first = errors[0]
        raise StorageError(
            f"delete s3://{bucket}/{first.get('Key', '')}: {first.get('Code', 'error')} "
            f"({len(errors)} of {len(batch)} objects not deleted)"
        )
    return len(batch)
