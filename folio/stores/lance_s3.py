"""LanceDB's object_store options for an ``s3://`` table: endpoint, region, credentials.

Why: Lance does not read boto3's configuration (no named profiles); these options mirror
:func:`folio.io.s3.make_client` so a LanceDB table on S3 reaches the same bucket with the
same credentials as the rest of folio. Kept apart from the store itself, which only
passes them on.
"""

from __future__ import annotations

import os

from folio.errors import ConfigError
from folio.settings.config import S3Settings

__all__ = ["lance_storage_options"]


def lance_storage_options(s3: S3Settings) -> dict[str, str]:
    """object_store options for an ``s3://`` URI, mirroring :func:`folio.io.s3.make_client`.

    Unset values are left to object_store's own env lookup; a named profile is resolved
    through boto3 (object_store has no profile support).
    """
    opts: dict[str, str] = {}
    endpoint = (
        s3.endpoint_url
        or os.environ.get("AWS_ENDPOINT_URL_S3")
        or os.environ.get("AWS_ENDPOINT_URL")
    )
    if endpoint:
        opts["aws_endpoint"] = endpoint
        opts["allow_http"] = str(endpoint.startswith("http://")).lower()
    region = s3.region or os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
    if region:
        opts["aws_region"] = region
    elif endpoint:
        opts["aws_region"] = "us-east-1"  # S3 clones ignore it, but signing needs one
    if s3.access_key_id and s3.secret_access_key is not None:
        opts["aws_access_key_id"] = s3.access_key_id
        opts["aws_secret_access_key"] = s3.secret_access_key.get_secret_value()
        if s3.session_token is not None:
            opts["aws_session_token"] = s3.session_token.get_secret_value()
    elif s3.profile:
        opts.update(_profile_credentials(s3.profile))
    return opts


def _profile_credentials(profile: str) -> dict[str, str]:
    import boto3
    from botocore.exceptions import BotoCoreError

    try:
        creds = boto3.session.Session(profile_name=profile).get_credentials()
    except BotoCoreError as exc:
        raise ConfigError(f"AWS profile {profile!r}: {type(exc).__name__}") from None
    if creds is None:
        raise ConfigError(f"AWS profile {profile!r} has no credentials")
    frozen = creds.get_frozen_credentials()
    opts = {"aws_access_key_id": frozen.access_key, "aws_secret_access_key": frozen.secret_key}
    if frozen.token:
        opts["aws_session_token"] = frozen.token
    return opts
