"""folio.io.sources and folio.io.sinks, local and on moto's S3 server."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from folio.errors import ConfigError
from folio.io import s3 as s3io
from folio.io.sinks import LocalSink, S3Sink, Sink, open_sink
from folio.io.sources import discover, discover_entries, fetch
from folio.settings.config import S3Settings, SourceSettings
from tests.s3_server import S3Server

NO_S3 = S3Settings()


def _tree(root: Path) -> None:
    for rel in ["b.pdf", "a.PDF", "sub/c.pdf", "sub/deeper/d.Pdf", "notes.txt", "sub/e.pdf.txt"]:
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"%PDF-1.4 " + rel.encode())


def test_discover_local_folder_recursive_sorted(tmp_path: Path) -> None:
    """Every entry, whatever its name: what it is is read from its content later."""
    _tree(tmp_path / "in")
    refs = discover([str(tmp_path / "in")], NO_S3)
    names = [Path(r.uri).relative_to(tmp_path / "in").as_posix() for r in refs]
    assert names == ["a.PDF", "b.pdf", "notes.txt", "sub/c.pdf", "sub/deeper/d.Pdf",
                     "sub/e.pdf.txt"]
    assert all(r.size > 0 and r.mtime is not None and not r.is_s3 and r.skip is None
               for r in refs)


def test_include_and_exclude_globs_scope_a_folder_and_count_what_they_leave(
        tmp_path: Path) -> None:
    _tree(tmp_path / "in")
    scope = SourceSettings(include=["*.pdf", "*.PDF", "*.Pdf"], exclude=["sub/deeper/*"])
    found = discover_entries([str(tmp_path / "in")], NO_S3, scope)
    assert [r.name for r in found.refs] == ["a.PDF", "b.pdf", "c.pdf"]
    assert found.excluded == 3  # notes.txt, e.pdf.txt (include), d.Pdf (exclude)
    named = discover_entries([str(tmp_path / "in" / "notes.txt")], NO_S3, scope)
    assert [r.name for r in named.refs] == ["notes.txt"] and named.excluded == 0


def test_discover_local_file_and_dedup(tmp_path: Path) -> None:
    _tree(tmp_path)
    one = str(tmp_path / "notes.txt")  # named explicitly: taken as is
    refs = discover([one, str(tmp_path / "b.pdf"), one, f"file://{tmp_path / 'b.pdf'}"], NO_S3)
    assert [r.name for r in refs] == ["notes.txt", "b.pdf"]


def test_discover_does_not_follow_symlinks_out(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    _tree(outside)
    root = tmp_path / "in"
    root.mkdir()
    (root / "own.pdf").write_bytes(b"%PDF")
    os.symlink(outside / "b.pdf", root / "escape.pdf")
    os.symlink(outside, root / "linked-dir")
    os.symlink(root / "own.pdf", root / "alias.pdf")
    os.symlink(root / "gone.pdf", root / "broken.pdf")
    os.mkfifo(root / "pipe")
    refs = discover([str(root)], NO_S3)
    assert {r.name: r.skip for r in refs} == {
        "alias.pdf": None, "own.pdf": None,
        "escape.pdf": "symlink to a file outside the source",
        "linked-dir": "symlink to a folder (folders are not followed through links)",
        "broken.pdf": "broken symlink", "pipe": "not a regular file"}


def test_discover_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not found"):
        discover([str(tmp_path / "missing")], NO_S3)
    with pytest.raises(ConfigError, match="unsupported"):
        discover(["gs://bucket/x"], NO_S3)
    with pytest.raises(ConfigError):
        discover([], NO_S3)


def test_fetch_local_reads_a_private_copy(tmp_path: Path) -> None:
    """The pipeline reads a copy made through one checked descriptor (issue 58), so a
    later swap of the source's name changes nothing it reads."""
    (tmp_path / "x.pdf").write_bytes(b"%PDF")
    (ref,) = discover([str(tmp_path / "x.pdf")], NO_S3)
    (tmp_path / "work").mkdir()
    local = fetch(ref, tmp_path / "work", NO_S3)
    assert local.parent == tmp_path / "work" and local.name.endswith("-x.pdf")
    assert local.read_bytes() == b"%PDF" and local.stat().st_mode & 0o777 == 0o600


def test_discover_and_fetch_s3(s3_server: S3Server, s3_bucket: str, tmp_path: Path) -> None:
    client = s3_server.client
    for key in ["in/b.pdf", "in/a.PDF", "in/sub/c.pdf", "in/notes.txt", "inbox/x.pdf", "y.pdf",
                "in/sub/"]:  # the last a folder marker: no entry
        s3io.put_bytes(client, s3_bucket, key, b"%PDF " + key.encode())
    refs = discover([f"s3://{s3_bucket}/in"], s3_server.settings)
    assert [r.uri for r in refs] == [
        f"s3://{s3_bucket}/in/a.PDF",
        f"s3://{s3_bucket}/in/b.pdf",
        f"s3://{s3_bucket}/in/notes.txt",
        f"s3://{s3_bucket}/in/sub/c.pdf",
    ]
    assert all(r.etag and r.is_s3 for r in refs)
    everything = discover([f"s3://{s3_bucket}"], s3_server.settings)
    assert len(everything) == 6
    scoped = discover_entries([f"s3://{s3_bucket}/in/"], s3_server.settings,
                              SourceSettings(exclude=["sub/*", "*.txt"]))
    assert [r.name for r in scoped.refs] == ["a.PDF", "b.pdf"] and scoped.excluded == 2
    exact = discover([f"s3://{s3_bucket}/y.pdf"], s3_server.settings)
    assert [r.name for r in exact] == ["y.pdf"]

    local = fetch(refs[0], tmp_path / "work", s3_server.settings)
    assert local.parent == tmp_path / "work" and local.read_bytes() == b"%PDF in/a.PDF"


def test_fetch_s3_names_never_collide(s3_server: S3Server, s3_bucket: str, tmp_path: Path) -> None:
    for key in ["a?b.pdf", "a*b.pdf", "../evil.pdf"]:
        s3io.put_bytes(s3_server.client, s3_bucket, key, key.encode())
    refs = discover([f"s3://{s3_bucket}/"], s3_server.settings)
    paths = [fetch(r, tmp_path / "w", s3_server.settings) for r in refs]
    assert len(set(paths)) == 3
    assert all(p.parent == tmp_path / "w" for p in paths)


def test_discover_missing_bucket(s3_server: S3Server) -> None:
    with pytest.raises(ConfigError, match="bucket does not exist"):
        discover(["s3://no-such-bucket-here/in/"], s3_server.settings)


# --- sinks --------------------------------------------------------------------------------


@pytest.fixture(params=["local", "s3"])
def sink(request: pytest.FixtureRequest, tmp_path: Path) -> Sink:
    if request.param == "local":
        return open_sink(str(tmp_path / "out"), NO_S3)
    server: S3Server = request.getfixturevalue("s3_server")
    bucket = server.create_bucket()
    return open_sink(f"s3://{bucket}/runs/one/", server.settings)


def test_sink_roundtrip(sink: Sink) -> None:
    assert sink.read_text("d/x.md") is None and not sink.exists("d/x.md")
    uri = sink.write_text("d/x.md", "héllo")
    assert uri == sink.uri("d/x.md")
    assert sink.read_text("d/x.md") == "héllo" and sink.exists("d/x.md")
    sink.write_bytes("d/x.md", b"replaced")
    assert sink.read_text("d/x.md") == "replaced"


def test_sink_write_if_absent(sink: Sink) -> None:
    assert sink.write_if_absent("claims/a.json", b"first") is True
    assert sink.write_if_absent("claims/a.json", b"second") is False
    assert sink.read_text("claims/a.json") == "first"


def test_sink_delete_prefix(sink: Sink) -> None:
    for rel in ["d/a", "d/b/c", "d/b/e", "d2/a", "dx"]:
        sink.write_text(rel, "x")
    assert sink.delete_prefix("d") == 3
    assert not sink.exists("d/a") and sink.exists("d2/a") and sink.exists("dx")
    assert sink.delete_prefix("dx") == 1
    assert sink.delete_prefix("nothing") == 0


def test_sink_rejects_unsafe_paths(sink: Sink) -> None:
    for bad in ["../x", "/abs", "a/../../b", ""]:
        with pytest.raises(ValueError):
            sink.write_text(bad, "x")


def test_uris(s3_server: S3Server, tmp_path: Path) -> None:
    s3_sink = open_sink("s3://bkt/pre/fix", s3_server.settings)
    assert isinstance(s3_sink, S3Sink)
    assert s3_sink.uri("a/b.md") == "s3://bkt/pre/fix/a/b.md"
    local = open_sink(str(tmp_path), NO_S3)
    assert isinstance(local, LocalSink)
    assert local.uri("a/b.md") == str(tmp_path / "a" / "b.md")
    assert open_sink(f"file://{tmp_path}", NO_S3).uri("a") == str(tmp_path / "a")


def test_open_sink_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError):
        open_sink("gs://bucket/x", NO_S3)
    (tmp_path / "file").write_text("x")
    with pytest.raises(ConfigError):
        open_sink(str(tmp_path / "file"), NO_S3)


def test_local_write_is_atomic_no_temp_left(tmp_path: Path) -> None:
    sink = LocalSink(tmp_path)
    sink.write_text("d/x.json", "{}")
    sink.write_if_absent("d/y.json", b"{}")
    sink.write_if_absent("d/y.json", b"{}")
    assert sorted(p.name for p in (tmp_path / "d").iterdir()) == ["x.json", "y.json"]


def test_has_documents_checks_every_source_and_stops_at_the_first_pdf(tmp_path: Path) -> None:
    from folio.io.sources import has_documents

    (tmp_path / "empty").mkdir()
    (tmp_path / "some").mkdir()
    (tmp_path / "some" / "a.pdf").write_bytes(b"%PDF-1.4\n")
    assert not has_documents([str(tmp_path / "empty")], S3Settings())
    assert has_documents([str(tmp_path / "empty"), str(tmp_path / "some")], S3Settings())
    with pytest.raises(ConfigError, match="input not found"):
        has_documents([str(tmp_path / "some"), str(tmp_path / "missing")], S3Settings())


@pytest.mark.parametrize("umask", [0o022, 0o077])
def test_local_outputs_get_the_permissions_of_the_umask(tmp_path: Path, umask: int) -> None:
    """mkstemp makes its file 0600; renamed into place, document.md and the rest were
    unreadable to the service that serves them. A file folio writes has the mode any
    other new file would: 0666 less the umask (0644 under the usual 022)."""
    sink = LocalSink(tmp_path)
    old = os.umask(umask)
    try:
        sink.write_text("doc/document.md", "# hi")
        assert sink.write_if_absent("_index/a.json", b"{}")
    finally:
        os.umask(old)
    for rel in ("doc/document.md", "_index/a.json"):
        assert (tmp_path / rel).stat().st_mode & 0o777 == 0o666 & ~umask, rel


def test_the_runs_own_output_and_work_folders_are_not_inputs(tmp_path: Path) -> None:
    """``folio ingest . --out out`` from a documents folder: out/ and .folio/work hold
    folio's own files, never entries of the source."""
    (tmp_path / "a.pdf").write_bytes(b"%PDF")
    for own in ("out/_index/x.json", "out/a/document.md", ".folio/work/1/compressed.pdf"):
        (tmp_path / own).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / own).write_text("folio's own")
    found = discover_entries([str(tmp_path)], NO_S3, None,
                             own=[str(tmp_path / "out"), str(tmp_path / ".folio/work")])
    assert [r.name for r in found.refs] == ["a.pdf"] and found.excluded == 0
    assert len(discover([str(tmp_path)], NO_S3)) == 4  # without them: every file is an entry


def test_own_outputs_under_a_swept_s3_prefix_are_not_inputs(
        s3_server: S3Server, s3_bucket: str) -> None:
    for key in ["in/a.pdf", "in/folio/_index/x.json", "in/folio/a/document.md"]:
        s3io.put_bytes(s3_server.client, s3_bucket, key, b"x")
    found = discover_entries([f"s3://{s3_bucket}/in"], s3_server.settings, None,
                             own=[f"s3://{s3_bucket}/in/folio"])
    assert [r.name for r in found.refs] == ["a.pdf"]


def test_outputs_written_into_the_source_itself_are_not_inputs(
        s3_server: S3Server, s3_bucket: str) -> None:
    """--out equal to the source prefix (a sweep of s3://b/in into s3://b/in): folio's
    record folders and document folders' files are left out, the documents listed."""
    keys = ["in/a.pdf", "in/notes/x.txt", "in/_index/abc.json", "in/_claims/k.json",
            "in/a-0123456789ab/document.md", "in/a-0123456789ab/pages.jsonl",
            "in/a-0123456789ab/mine.pdf"]  # a file folio never writes stays an entry
    for key in keys:
        s3io.put_bytes(s3_server.client, s3_bucket, key, b"x")
    found = discover_entries([f"s3://{s3_bucket}/in"], s3_server.settings, None,
                             own=[f"s3://{s3_bucket}/in"])
    assert [r.uri.split("/in/")[1] for r in found.refs] == [
        "a-0123456789ab/mine.pdf", "a.pdf", "notes/x.txt"]
