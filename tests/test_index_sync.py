"""The index mirrors its sources (issue 48, docs/index-sync.md): a changed source's old
chunks and folder leave in the run that writes its new version, a deleted source leaves
with ``--sync``, the same bytes under two sources keep rows of their own, a settings change
and back leaves what a default run writes, and no document.json says ok before its
vectors and done marker exist. Real stores (LanceDB, PostgreSQL), local folders and the
moto S3 server; tiny born-digital PDFs on the text-layer route, one pipeline run a step.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from folio.index.live import live_path, live_prefix, read_live
from folio.index.sync import SyncResult, now, sync_roots
from folio.io.sinks import LocalSink, Sink, open_sink
from folio.io.sources import discover
from folio.models import DocumentOutcome, DocumentResult
from folio.pipeline import Services, process_documents
from folio.samples import report_pages, write_text_pdf
from folio.settings.config import PipelineConfig
from folio.stores.base import NullStore


def test_live_records_mirror_the_source_tree() -> None:
    assert live_path("s3://b/in/x/a.pdf") == "_live/s3_b/in/x/a.pdf.json"
    assert live_prefix("s3://b/in") == live_prefix("s3://b/in/") == "_live/s3_b/in/"
    # a sibling prefix is not under the root: folder semantics, as discovery has
    assert not live_path("s3://b/inbox/a.pdf").startswith(live_prefix("s3://b/in"))
    odd = live_path("s3://b/in/../.hidden/a b%.pdf")
    assert odd == "_live/s3_b/in/%2E2E/%2Ehidden/a b%25.pdf.json"
    assert live_path("/data/in/r.pdf") == "_live/file/data/in/r.pdf.json"
    long = live_path("s3://b/" + "x" * 300 + ".pdf")
    assert len(long.split("/")[-1]) < 60  # a hash: file systems allow 255 bytes a name


# --- pipeline runs --------------------------------------------------------------------


def _config(tmp_path: Path, store: dict[str, Any], s3: Any = None,
            **extra: Any) -> PipelineConfig:
    data: dict[str, Any] = {
        "route": {"mode": "text-layer"}, "compress": False, "work_dir": str(tmp_path / "w"),
        "validation": {"enabled": False}, "store": store, **extra}
    if s3 is not None:
        data["s3"] = s3.settings.model_dump(mode="json") | {
            "access_key_id": "test", "secret_access_key": "test"}
    return PipelineConfig.model_validate(data)


def _run(config: PipelineConfig, root: str, out: str, *, sync: bool = False
         ) -> tuple[dict[str, DocumentResult], SyncResult]:
    services = Services(config, out)
    try:
        started = now()
        refs = discover([root], config.s3)
        docs = {d.source: d for d in process_documents(refs, services)}
        synced = sync_roots(services.sink, services.store, [root], [r.uri for r in refs],
                            apply=sync, dry_run=False, started=started, s3=config.s3)
        return docs, synced
    finally:
        services.close()


def _rows(config: PipelineConfig, out: str) -> list[dict[str, Any]]:
    """Every row of the run's store: (source, sha256, config_hash, page_end, text)."""
    from folio.output.embeddings import Embedder
    from folio.stores import open_store

    sink = open_sink(out, config.s3)
    store = open_store(config.store, default_uri=sink.uri("_vectors"), s3=config.s3,
                       dim=Embedder(config.embedding).dim)
    if config.store.kind == "pgvector":
        import psycopg

        with psycopg.connect(config.store.uri or "") as conn:
            got = conn.execute(
                f"SELECT source, sha256, config_hash, page_end, text, id FROM {store.table}"
                f" UNION ALL SELECT source, sha256, config_hash, page_end, text, id"
                f" FROM {store.table}_delta").fetchall()
        return [dict(zip(("source", "sha256", "config_hash", "page_end", "text", "id"), r,
                         strict=True)) for r in got]
    table = store._open(create=False)  # type: ignore[attr-defined]
    frame = table.to_pandas()
    return frame[["source", "sha256", "config_hash", "page_end", "text", "id"]].to_dict("records")


def _store(kind: str, request: pytest.FixtureRequest) -> dict[str, Any]:
    if kind == "lancedb":
        return {"kind": "lancedb"}
    dsn = request.getfixturevalue("pg_dsn")
    return {"kind": "pgvector", "uri": dsn, "table": request.getfixturevalue("pg_table")}


class Place:
    """Sources under a local folder or an S3 prefix, written and deleted alike."""

    def __init__(self, where: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
        self.s3 = None
        if where == "local":
            self.root, self.out = str(tmp_path / "in"), str(tmp_path / "out")
            (tmp_path / "in").mkdir()
        else:
            self.s3 = request.getfixturevalue("s3_server")
            bucket = self.s3.create_bucket()
            self.bucket = bucket
            self.root, self.out = f"s3://{bucket}/in", f"s3://{bucket}/out"
        self.tmp = tmp_path

    def uri(self, rel: str) -> str:
        return f"{self.root}/{rel}"

    def put(self, rel: str, pdf: Path) -> str:
        if self.s3 is None:
            target = Path(self.root) / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(pdf, target)
        else:
            self.s3.client.put_object(Bucket=self.bucket, Key=f"in/{rel}", Body=pdf.read_bytes())
        return self.uri(rel)

    def delete(self, rel: str) -> None:
        if self.s3 is None:
            (Path(self.root) / rel).unlink()
        else:
            self.s3.client.delete_object(Bucket=self.bucket, Key=f"in/{rel}")

    def sink(self, config: PipelineConfig) -> Sink:
        return open_sink(self.out, config.s3)


@pytest.mark.parametrize("where", ["local", "s3"])
@pytest.mark.parametrize("kind", ["lancedb", "pgvector"])
def test_changed_source_replaced_deleted_source_synced_shared_bytes_kept(
    kind: str, where: str, tmp_path: Path, request: pytest.FixtureRequest,
) -> None:
    place = Place(where, tmp_path, request)
    config = _config(tmp_path, _store(kind, request), place.s3)
    four = write_text_pdf(tmp_path / "four.pdf", report_pages(seed=48, n=4))
    two = write_text_pdf(tmp_path / "two.pdf", report_pages(seed=49, n=2))
    one = write_text_pdf(tmp_path / "one.pdf", report_pages(seed=50, n=1))
    a = place.put("a.pdf", four)
    b = place.put("b.pdf", one)
    dup = place.put("dup/b.pdf", one)  # the same bytes and name: one folder name too
    c = place.put("c.pdf", two)

    first, _ = _run(config, place.root, place.out)
    assert {d.outcome for d in first.values()} == {DocumentOutcome.OK}
    old_a = first[a]
    sink = place.sink(config)
    old_folder = read_live(sink, a).folder  # type: ignore[union-attr]
    assert sink.exists(f"{old_folder}/document.json")
    rows = _rows(config, place.out)
    assert {r["source"] for r in rows} == {a, b, dup, c}  # the same bytes: rows per source
    assert max(r["page_end"] for r in rows if r["source"] == a) == 4

    place.put("a.pdf", two)  # rewritten in place: four pages became two, other text
    place.delete("dup/b.pdf")
    broken = tmp_path / "broken.pdf"
    broken.write_bytes(b"%PDF-1.4 not really")
    place.put("c.pdf", broken)  # new bytes quarantined for good: the old version leaves
    c_folder = read_live(place.sink(config), c).folder  # type: ignore[union-attr]
    second, synced = _run(config, place.root, place.out, sync=True)
    assert second[c].outcome is DocumentOutcome.QUARANTINED and not second[c].retryable
    new_a = second[a]
    assert not new_a.cached and new_a.sha256 != old_a.sha256
    rows = _rows(config, place.out)
    mine = [r for r in rows if r["source"] == a]
    assert mine and {r["sha256"] for r in mine} == {new_a.sha256}, "old chunks left behind"
    assert max(r["page_end"] for r in mine) == 2 and len(mine) == new_a.chunks
    assert {r["config_hash"] for r in rows} == {config.config_hash()}
    # the old version's folder left whole; the record names the live version
    assert not list(sink.names(old_folder))
    live = read_live(sink, a)
    assert live is not None and (live.sha256, live.folder) == (new_a.sha256,
                                                               new_a.outputs["json"].split("/")[-2])
    assert json.loads(sink.read_text(f"{live.folder}/document.json") or "{}")["outcome"] == "ok"
    # the deleted source left with --sync; the same bytes under b.pdf kept rows and folder
    assert synced.removed == [dup] and synced.applied
    assert {r["source"] for r in rows} == {a, b}  # c.pdf's old version left too
    assert not list(sink.names(c_folder)) and read_live(sink, c).state == "quarantined"  # type: ignore[union-attr]
    kept = read_live(sink, b)
    assert kept is not None and sink.exists(f"{kept.folder}/document.json")
    assert read_live(sink, dup) is None

    if (kind, where) == ("lancedb", "s3"):  # once: a rerun after the replacement is cached
        third, synced = _run(config, place.root, place.out)
        assert all(d.cached for d in third.values()) and synced.gone_count == 0


@pytest.mark.parametrize("kind", ["lancedb", "pgvector"])
def test_settings_change_and_back_leaves_what_a_default_run_writes(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest,
) -> None:
    root, out = tmp_path / "in", str(tmp_path / "out")
    root.mkdir()
    write_text_pdf(root / "r.pdf", report_pages(seed=51, n=3))
    store = _store(kind, request)
    default, short = _config(tmp_path, store), _config(tmp_path, store, chunk={"max_chars": 600})
    _run(default, str(root), out)
    fresh = sorted((r["id"], r["text"]) for r in _rows(default, out))
    _run(short, str(root), out)
    assert sorted((r["id"], r["text"]) for r in _rows(short, out)) != fresh
    back, _ = _run(default, str(root), out)
    (doc,) = back.values()
    assert not doc.cached, "the default settings' done marker outlived its rows"
    assert sorted((r["id"], r["text"]) for r in _rows(default, out)) == fresh


def test_document_json_never_says_ok_before_the_vectors(tmp_path: Path) -> None:
    """The vector write fails (no server at the DSN): the document is quarantined for a
    retry, and no document.json on disk says ``ok`` (it was written before the vectors)."""
    root = tmp_path / "in"
    root.mkdir()
    write_text_pdf(root / "r.pdf", report_pages(seed=52, n=1))
    config = _config(tmp_path, {"kind": "pgvector", "uri": "postgresql://x@127.0.0.1:9/none"})
    docs, _ = _run(config, str(root), str(tmp_path / "out"))
    (doc,) = docs.values()
    assert doc.outcome is DocumentOutcome.QUARANTINED and doc.retryable
    for path in (tmp_path / "out").rglob("document.json"):
        assert json.loads(path.read_text())["outcome"] != "ok", path
    assert not list((tmp_path / "out").glob("_index/*.json"))


# --- sync without pipeline runs: records only -------------------------------------------


def _record(sink: Sink, uri: str) -> str:
    """A record as folio writes it (its folder derived from the source: folio.io.keys)."""
    from folio.index.live import LiveRecord, write_live
    from folio.index.retire import use_folder
    from folio.io.keys import doc_slug

    folder = doc_slug(uri, "0" * 32)
    use_folder(sink, folder, uri)
    sink.write_text(f"{folder}/document.json", "{}")
    write_live(sink, LiveRecord(source=uri, sha256="0" * 64, config_hash="c", doc_id="0" * 32,
                                folder=folder))
    return folder


def test_sync_stays_inside_its_roots_and_refuses_an_empty_root(tmp_path: Path) -> None:
    from folio.errors import ConfigError

    sink = LocalSink(tmp_path / "out")
    present = tmp_path / "in" / "sub" / "here.pdf"
    present.parent.mkdir(parents=True)
    present.write_bytes(b"%PDF")
    (tmp_path / "in" / "subway").mkdir()
    for rel in ("sub/here.pdf", "sub/gone.pdf", "subway/other.pdf", "elsewhere.pdf"):
        _record(sink, str(tmp_path / "in" / rel))
    gone_folder = _record(sink, str(tmp_path / "in" / "sub" / "gone.pdf"))
    root = str(tmp_path / "in" / "sub")

    counted = sync_roots(sink, NullStore, [root], [str(present)], apply=False, dry_run=False,
                         started=now(), s3=PipelineConfig().s3)
    assert (counted.indexed, counted.gone_count, counted.applied) == (2, 1, False)
    assert counted.gone == [str(tmp_path / "in/sub/gone.pdf")]  # named without --sync too
    dry = sync_roots(sink, NullStore, [root], [str(present)], apply=True, dry_run=True,
                     started=now(), s3=PipelineConfig().s3)
    assert dry.gone == [str(tmp_path / "in/sub/gone.pdf")] and not dry.applied
    assert sink.exists(f"{gone_folder}/document.json")  # a dry run changes nothing
    with pytest.raises(ConfigError, match="lists no document"):
        sync_roots(sink, NullStore, [str(tmp_path / "in" / "subway")], [], apply=True,
                   dry_run=False, started=now(), s3=PipelineConfig().s3)
    done = sync_roots(sink, NullStore, [root], [str(present)], apply=True, dry_run=False,
                      started=now(), s3=PipelineConfig().s3)
    assert done.removed == [str(tmp_path / "in/sub/gone.pdf")]
    assert not sink.exists(f"{gone_folder}/document.json")
    for rel in ("sub/here.pdf", "subway/other.pdf", "elsewhere.pdf"):  # outside, or present
        assert read_live(sink, str(tmp_path / "in" / rel)) is not None


def test_sync_keeps_a_source_put_back_or_rewritten_since_its_listing(tmp_path: Path) -> None:
    """Another run may write a source after this run listed it as gone: a source found
    again, or whose record was rewritten after the listing, is not removed."""
    sink = LocalSink(tmp_path / "out")
    here = tmp_path / "in" / "here.pdf"
    here.parent.mkdir()
    here.write_bytes(b"%PDF")
    started = now()
    back, rewritten = tmp_path / "in" / "back.pdf", tmp_path / "in" / "rewritten.pdf"
    back_folder = _record(sink, str(back))
    rewritten_folder = _record(sink, str(rewritten))  # written after `started`
    back.write_bytes(b"%PDF")  # put back after the listing below
    result = sync_roots(sink, NullStore, [str(tmp_path / "in")], [str(here)], apply=True,
                        dry_run=False, started=started, s3=PipelineConfig().s3)
    assert result.removed == [] and sorted(result.kept) == sorted([str(back), str(rewritten)])
    assert sink.exists(f"{back_folder}/document.json")
    assert sink.exists(f"{rewritten_folder}/document.json")


def test_trigger_requests_carry_sync_without_changing_older_keys() -> None:
    from folio.settings.run_config import IngestRequest

    plain = IngestRequest(source="s3://b/in/", out="s3://b/out")
    synced = plain.model_copy(update={"sync": True})
    assert plain.parameters()["sync"] is False and synced.parameters()["sync"] is True
    assert plain.key != synced.key


def test_a_run_without_a_store_syncs_without_loading_the_embedder(tmp_path: Path) -> None:
    """With ``store.kind`` none the embedding model is never needed: a missing one must not
    stop a sync (or a quarantined document's clean-up), which ask for the run's store."""
    config = _config(tmp_path, {"kind": "none"},
                     embedding={"model_path": str(tmp_path / "no-such-model.onnx")})
    services = Services(config, str(tmp_path / "out"))
    try:
        store = services.store()  # loading the model would raise: it is not there
        assert isinstance(store, NullStore)
        store.delete_sources(["file:///gone.pdf"])
    finally:
        services.close()


def test_a_run_without_sync_names_the_first_gone_sources_and_counts_the_rest(
    tmp_path: Path,
) -> None:
    from folio.index.sync import GONE_NAMED
    from folio.output.report import markdown_summary

    sink = LocalSink(tmp_path / "out")
    root = tmp_path / "in"
    for i in range(GONE_NAMED + 5):
        _record(sink, str(root / f"gone{i:02d}.pdf"))
    counted = sync_roots(sink, NullStore, [str(root)], [], apply=False, dry_run=False,
                         started=now(), s3=PipelineConfig().s3)
    assert counted.gone_count == GONE_NAMED + 5 and len(counted.gone) == GONE_NAMED
    assert set(counted.gone) < {str(root / f"gone{i:02d}.pdf") for i in range(GONE_NAMED + 5)}
    report = {"documents": [], "sync": counted.model_dump(),
              "totals": {"documents": 0, "pages": 0, "seconds": 1.0, "pages_per_s": 0.0,
                         "ok": 0, "partial": 0, "quarantined": 0, "cached": 0, "out": "out"}}
    line = markdown_summary(report).splitlines()[1]
    assert line.startswith(f"{GONE_NAMED + 5} indexed source(s) are gone from the roots: ")
    assert counted.gone[0] in line and " and 5 more; `folio ingest --sync`" in line
