"""``folio search`` as a RAG team uses it: citations a program can read (``--json``:
document id, pages from 1, boxes as a structure) and the same S3 options as ingest."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from folio.io.layout import VECTORS
from folio.io.sinks import open_sink
from folio.models import BBox, Chunk
from folio.output.chunking import embedding_text
from folio.output.embeddings import Embedder
from folio.settings.config import EmbeddingSettings, S3Settings, StoreSettings
from folio.stores import open_store
from tests.s3_server import S3Server

REPO = Path(__file__).resolve().parent.parent


def _index(out: str, s3: S3Settings) -> None:
    """Two chunks of one document as an ingest writes them (pages from 1)."""
    chunks = [
        Chunk(id="c0", doc_id="doc-abc", source="/in/report.pdf", index=0,
              text="Revenue grew by twelve percent in the northern region.",
              page_start=2, page_end=3, headings=["Finances"],
              boxes=[(2, BBox(x0=72, y0=600, x1=540, y1=700)),
                     (3, BBox(x0=72, y0=40, x1=540, y1=90))]),
        Chunk(id="c1", doc_id="doc-abc", source="/in/report.pdf", index=1,
              text="The cafeteria menu changes every Tuesday.", page_start=4, page_end=4),
    ]
    embedder = Embedder(EmbeddingSettings())
    store = open_store(StoreSettings(), default_uri=open_sink(out, s3).uri(VECTORS), s3=s3,
                       dim=embedder.dim)
    store.replace_document("doc-abc", chunks, embedder.embed([embedding_text(c) for c in chunks]))


def search(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "folio.cli", "search", *args], cwd=REPO,
                          capture_output=True, text=True, timeout=300, env=env)


def test_json_output_carries_document_id_pages_from_1_and_boxes(tmp_path: Path) -> None:
    out = str(tmp_path / "out")
    _index(out, S3Settings())
    proc = search("revenue growth by region", "--out", out, "-k", "1", "--json")
    assert proc.returncode == 0, proc.stderr[-2000:]
    (hit,) = json.loads(proc.stdout)
    assert hit["doc_id"] == "doc-abc" and hit["id"] == "c0" and hit["source"] == "/in/report.pdf"
    assert (hit["page_start"], hit["page_end"]) == (2, 3)
    assert hit["boxes"] == [{"page": 2, "x0": 72, "y0": 600, "x1": 540, "y1": 700},
                            {"page": 3, "x0": 72, "y0": 40, "x1": 540, "y1": 90}]
    assert hit["headings"] == ["Finances"] and 0 < hit["score"] <= 1
    assert hit["text"].startswith("Revenue grew")


def test_plain_output_cites_the_page_as_stored_and_the_document(tmp_path: Path) -> None:
    out = str(tmp_path / "out")
    _index(out, S3Settings())
    proc = search("revenue growth by region", "--out", out, "-k", "1")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert " p2-3 " in proc.stdout and "doc-abc" in proc.stdout


def test_search_on_an_s3_endpoint_given_as_an_option(s3_server: S3Server) -> None:
    """ingest has --s3-endpoint-url; search needs it too (AWS_ENDPOINT_URL unset)."""
    out = f"s3://{s3_server.create_bucket()}/out"
    _index(out, s3_server.settings)
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update({"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test",
                "AWS_DEFAULT_REGION": "us-east-1"})
    proc = search("revenue", "--out", out, "-k", "1", "--json",
                  "--s3-endpoint-url", s3_server.endpoint_url, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads(proc.stdout)[0]["doc_id"] == "doc-abc"


@pytest.mark.parametrize("url", ["not a url", "127.0.0.1:9000", "ftp://host"])
def test_a_malformed_s3_endpoint_is_exit_2_not_try_again(tmp_path: Path, url: str) -> None:
    proc = search("revenue", "--out", "s3://bucket/out", "--s3-endpoint-url", url)
    assert proc.returncode == 2, proc.stderr[-2000:]
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "try again" not in lines[0] and "endpoint" in lines[0], lines
