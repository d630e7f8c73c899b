"""LanceDB store specifics; what every store does is in test_vector_store_contract.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from folio.config import S3Settings, StoreSettings
from folio.errors import ConfigError
from folio.stores import NullStore, default_vector_uri, open_store
from folio.stores.base import VectorStore
from folio.stores.lancedb_store import LanceDBStore, lance_storage_options
from tests.store_data import DIM, chunks, vectors


def test_dimension_change_is_a_config_error(tmp_path: Path) -> None:
    LanceDBStore(str(tmp_path / "v"), dim=DIM).replace_document(
        "a", chunks("a", 1), vectors(1, 0)
    )
    with pytest.raises(ConfigError, match="8-dim"):
        LanceDBStore(str(tmp_path / "v"), dim=384).count()


def test_open_store_kinds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    none = open_store(StoreSettings(kind="none"), default_uri="x", s3=S3Settings(), dim=DIM)
    assert (
        isinstance(none, NullStore) and none.count() == 0 and none.search(vectors(1, 0)[0]) == []
    )
    none.replace_document("a", chunks("a", 1), vectors(1, 0))
    assert none.count("a") == 0
    monkeypatch.delenv("FOLIO_PG_DSN", raising=False)
    with pytest.raises(ConfigError, match="needs a PostgreSQL DSN"):
        open_store(StoreSettings(kind="pgvector"), default_uri="x", s3=S3Settings(), dim=DIM)
    explicit = open_store(
        StoreSettings(uri=str(tmp_path / "mine"), table="t2"),
        default_uri="ignored",
        s3=S3Settings(),
        dim=DIM,
    )
    assert explicit.name == f"lancedb:{tmp_path / 'mine'}" and explicit.table == "t2"
    assert isinstance(explicit, VectorStore)


def test_default_vector_uri(tmp_path: Path) -> None:
    assert default_vector_uri("s3://b/out/") == "s3://b/out/.folio/vectors"
    assert default_vector_uri(str(tmp_path)) == str(tmp_path / ".folio" / "vectors")


def test_storage_options_for_s3_clones() -> None:
    from pydantic import SecretStr

    secret = "s3cr3t-never-shown"
    opts = lance_storage_options(
        S3Settings(
            endpoint_url="http://127.0.0.1:9000",
            access_key_id="k",
            secret_access_key=SecretStr(secret),
        )
    )
    assert opts == {
        "aws_endpoint": "http://127.0.0.1:9000",
        "allow_http": "true",
        "aws_region": "us-east-1",
        "aws_access_key_id": "k",
        "aws_secret_access_key": secret,
    }
    store = LanceDBStore("s3://b/v", dim=DIM, storage_options=opts)
    assert secret not in repr(store) and secret not in store.name
