"""folio.io.s3 against moto's real HTTP server."""

from __future__ import annotations

import threading
import traceback
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr

from folio.errors import BadInputError, ConfigError, StorageError
from folio.io import s3 as s3io
from folio.settings.config import S3Settings
from tests.s3_server import S3Server

SECRET = "s3cr3t-Value-That-Must-Not-Leak"


def test_parse_s3_uri() -> None:
    assert s3io.parse_s3_uri("s3://bucket/a/b.pdf") == ("bucket", "a/b.pdf")
    assert s3io.parse_s3_uri("S3://bucket") == ("bucket", "")
    for bad in ("bucket/key", "gs://b/k", "s3:///key"):
        with pytest.raises(ConfigError):
            s3io.parse_s3_uri(bad)


def test_client_uses_path_style_for_custom_endpoints() -> None:
    client = s3io.make_client(S3Settings(endpoint_url="http://127.0.0.1:1", region="auto"))
    assert client.meta.config.s3["addressing_style"] == "path"
    assert client.meta.config.retries["mode"] == "standard"
    assert client.meta.endpoint_url == "http://127.0.0.1:1"


def test_bytes_roundtrip_and_missing(s3_server: S3Server, s3_bucket: str) -> None:
    client = s3_server.client
    etag = s3io.put_bytes(client, s3_bucket, "a/b.txt", "héllo".encode())
    assert etag
    assert s3io.get_text(client, s3_bucket, "a/b.txt") == "héllo"
    assert s3io.get_text(client, s3_bucket, "a/missing.txt") is None
    assert s3io.head_object(client, s3_bucket, "a/missing.txt") is None
    head = s3io.head_object(client, s3_bucket, "a/b.txt")
    assert head is not None and head.size == len("héllo".encode()) and head.etag == etag


def test_file_roundtrip(s3_server: S3Server, s3_bucket: str, tmp_path: Path) -> None:
    src = tmp_path / "src.bin"
    src.write_bytes(b"x" * 10_000)
    s3io.upload_file(s3_server.client, src, s3_bucket, "in/src.bin")
    dest = s3io.download_file(s3_server.client, s3_bucket, "in/src.bin", tmp_path / "d" / "o.bin")
    assert dest.read_bytes() == src.read_bytes()
    with pytest.raises(BadInputError) as info:
        s3io.download_file(s3_server.client, s3_bucket, "in/nope.bin", tmp_path / "n.bin")
    assert info.value.code == "not-found"
    assert not list((tmp_path).glob("*.part")) and not (tmp_path / "n.bin").exists()


def test_list_paginates(s3_server: S3Server, s3_bucket: str) -> None:
    keys = [f"p/{i:04d}.pdf" for i in range(25)]
    for key in keys:
        s3io.put_bytes(s3_server.client, s3_bucket, key, b"")
    s3io.put_bytes(s3_server.client, s3_bucket, "other/x.pdf", b"")
    listed = [r.key for r in s3io.list_objects(s3_server.client, s3_bucket, "p/", page_size=7)]
    assert listed == keys


@pytest.mark.parametrize("value", [
    "2026-12-01T21:43:33.000Z", "2026-12-01T21:43:33Z", "2026-12-01T21:43:33.123456Z",
    "2026-12-01T21:43:33.5Z", "2026-12-01T21:43:33+00:00", "2026-12-01T21:43:33.000+01:00",
    "Tue, 01 Dec 2026 21:38:52 GMT", "1700000000", "2026-12-01T24:00:00Z",
])  # fmt: skip
def test_timestamps_read_as_botocore_reads_them(value: str) -> None:
    from botocore.utils import parse_timestamp

    from folio.io.s3_time import parse_timestamp as fast

    try:
        expected = parse_timestamp(value)
    except ValueError:
        with pytest.raises(ValueError):
            fast(value)
        return
    got = fast(value)
    assert got == expected and got.utcoffset() == expected.utcoffset()


def test_listing_reads_timestamps_without_dateutil(
    s3_server: S3Server, s3_bucket: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A listing's ``LastModified`` values take the fast path; a HEAD's HTTP date, the
    other form S3 writes, still goes to botocore's parser, and both agree."""
    from folio.io import s3_time

    slow: list[str] = []
    original = s3_time._slow

    def counted(value: str) -> Any:
        slow.append(value)
        return original(value)

    monkeypatch.setattr(s3_time, "_slow", counted)
    client = s3io.make_client(s3_server.settings)
    s3io.put_bytes(client, s3_bucket, "t/a.pdf", b"a")
    (listed,) = s3io.list_objects(client, s3_bucket, "t/")
    assert slow == [] and listed.last_modified is not None
    head = s3io.head_object(client, s3_bucket, "t/a.pdf")
    assert head is not None and head.last_modified == listed.last_modified and len(slow) == 1


@pytest.mark.slow
def test_list_more_than_1000(s3_server: S3Server, s3_bucket: str) -> None:
    """The default page size is S3's maximum (1000): a second page must follow."""
    keys = [f"k/{i:05d}" for i in range(1005)]
    client = s3_server.client
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda k: client.put_object(Bucket=s3_bucket, Key=k, Body=b""), keys))
    listed = [r.key for r in s3io.list_objects(client, s3_bucket, "k/")]
    assert listed == keys
    assert s3io.delete_prefix(client, s3_bucket, "k/") == 1005
    assert list(s3io.list_objects(client, s3_bucket, "k/")) == []


def test_conditional_writes(s3_server: S3Server, s3_bucket: str) -> None:
    client = s3_server.client
    assert s3io.put_if_absent(client, s3_bucket, "claim", b"one") is True
    assert s3io.put_if_absent(client, s3_bucket, "claim", b"two") is False
    assert s3io.get_text(client, s3_bucket, "claim") == "one"
    head = s3io.head_object(client, s3_bucket, "claim")
    assert head is not None
    assert s3io.put_if_match(client, s3_bucket, "claim", b"three", head.etag) is True
    assert s3io.put_if_match(client, s3_bucket, "claim", b"four", head.etag) is False  # stale
    assert s3io.get_text(client, s3_bucket, "claim") == "three"


def test_racing_conditional_writes_have_one_winner(s3_server: S3Server, s3_bucket: str) -> None:
    """The endpoint decides a conditional write's condition and the write as one step, as
    S3 does (the claims' exactly-once rests on it; tests/moto_server.py). Each round, eight
    clients released together create one key, then swap it from the ETag they all read."""
    clients = [s3io.make_client(s3_server.settings) for _ in range(8)]
    with ThreadPoolExecutor(len(clients)) as pool:
        for round_ in range(15):
            key = f"race/{round_}"
            barrier = threading.Barrier(len(clients))

            def create(i: int, key: str = key, barrier: threading.Barrier = barrier) -> bool:
                barrier.wait()
                return s3io.put_if_absent(clients[i], s3_bucket, key, f"c{i}".encode())

            created = list(pool.map(create, range(len(clients))))
            assert created.count(True) == 1, created
            head = s3io.head_object(s3_server.client, s3_bucket, key)
            assert head is not None

            def swap(i: int, key: str = key, barrier: threading.Barrier = barrier,
                     etag: str = head.etag) -> bool:
                barrier.wait()
                return s3io.put_if_match(clients[i], s3_bucket, key, f"s{i}".encode(), etag)

            swapped = list(pool.map(swap, range(len(clients))))
            assert swapped.count(True) == 1, swapped
            winner = swapped.index(True)
            assert s3io.get_text(s3_server.client, s3_bucket, key) == f"s{winner}"


def test_missing_bucket_is_config_error(s3_server: S3Server, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="bucket does not exist"):
        list(s3io.list_objects(s3_server.client, "no-such-bucket-xyz", ""))
    with pytest.raises(ConfigError):
        s3io.put_bytes(s3_server.client, "no-such-bucket-xyz", "k", b"")
    (tmp_path / "f").write_bytes(b"x")
    with pytest.raises(ConfigError, match="NoSuchBucket"):  # unwrapped from S3UploadFailedError
        s3io.upload_file(s3_server.client, tmp_path / "f", "no-such-bucket-xyz", "k")


def test_bad_client_settings_are_config_errors() -> None:
    with pytest.raises(ConfigError):
        s3io.make_client(S3Settings(secret_access_key=SecretStr(SECRET)))  # no key id
    with pytest.raises(ConfigError):
        s3io.make_client(S3Settings(profile="folio-no-such-profile"))


def test_connection_failure_is_transient_and_secret_free() -> None:
    port = _closed_port()
    settings = S3Settings(
        endpoint_url=f"http://127.0.0.1:{port}",
        region="us-east-1",
        access_key_id="AKIAEXAMPLEKEY123456",
        secret_access_key=SecretStr(SECRET),
        session_token=SecretStr(SECRET + "-token"),
    )
    client = s3io.make_client(settings, max_attempts=1)  # fail fast in the test
    with pytest.raises(StorageError) as info:
        s3io.get_text(client, "bucket", "key")
    _assert_no_secret(info.value)
    assert info.value.code == "storage"


def test_access_errors_are_config_and_secret_free(
    s3_server: S3Server, s3_bucket: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A 403 (bad credentials, denied) is the settings' fault: ConfigError, no secret."""
    from botocore.exceptions import ClientError

    def denied(**_: object) -> None:
        raise ClientError(
            {
                "Error": {"Code": "InvalidAccessKeyId", "Message": f"key {SECRET} unknown"},
                "ResponseMetadata": {"HTTPStatusCode": 403},
            },
            "GetObject",
        )

    client = s3io.make_client(
        s3_server.settings.model_copy(update={"secret_access_key": SecretStr(SECRET)})
    )
    monkeypatch.setattr(client, "get_object", denied)
    with pytest.raises(ConfigError) as info:
        s3io.get_text(client, s3_bucket, "k")
    assert "InvalidAccessKeyId" in str(info.value)
    _assert_no_secret(info.value)


@pytest.mark.parametrize(
    ("code", "status", "expected"),
    [
        ("SlowDown", 503, StorageError),
        ("InternalError", 500, StorageError),
        ("RequestTimeout", 400, StorageError),
        ("AccessDenied", 403, ConfigError),
        ("NoSuchKey", 404, BadInputError),
    ],
)
def test_error_mapping(code: str, status: int, expected: type[Exception]) -> None:
    from botocore.exceptions import ClientError

    exc = ClientError(
        {
            "Error": {"Code": code, "Message": SECRET},
            "ResponseMetadata": {"HTTPStatusCode": status},
        },
        "PutObject",
    )
    with pytest.raises(expected) as info:
        s3io._raise_mapped(exc, "put", "b", "k")
    _assert_no_secret(info.value)


def test_client_for_caches_per_settings() -> None:
    a = S3Settings(
        endpoint_url="http://127.0.0.1:1", access_key_id="k", secret_access_key=SecretStr("a")
    )
    b = a.model_copy(update={"secret_access_key": SecretStr("b")})
    assert s3io.client_for(a) is s3io.client_for(a.model_copy())
    assert s3io.client_for(a) is not s3io.client_for(b)


def _closed_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _assert_no_secret(exc: BaseException) -> None:
    """Neither the message nor the traceback a logger would print shows the secret."""
    assert SECRET not in str(exc) and SECRET not in repr(exc)
    assert SECRET not in "".join(traceback.format_exception(exc))


def test_no_credentials_is_config_error(
    s3_server: S3Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    client = s3io.make_client(S3Settings(endpoint_url=s3_server.endpoint_url, region="us-east-1"))
    with pytest.raises(ConfigError, match="credentials"):
        s3io.get_text(client, "any", "key")
