"""``--sync`` deletes only what folio itself wrote (issue 58, finding 2): a live record
planted by whoever can write inside the output folder is reported, never obeyed, and
nothing is removed through a link.

The local attack is played by a real second user (``nobody``, as in
tests/test_security_local_user.py) in a shared output folder; the S3 one by another
uploader of the bucket whose prefix is both the sources and the outputs (a documented
layout), against moto's real server.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from folio.index.live import LiveRecord, live_path, read_live, write_live
from folio.index.retire import use_folder
from folio.index.sync import now, sync_roots
from folio.io.keys import doc_slug
from folio.io.sinks import LocalSink, S3Sink
from folio.settings.config import PipelineConfig
from folio.stores.base import NullStore
from tests.s3_server import S3Server
from tests.test_security_local_user import (  # noqa: F401  (shared_tmp: a fixture)
    SYSTEM_PYTHON,
    needs_second_user,
    shared_tmp,
)

pytestmark = pytest.mark.timeout(60)

#: the attacker: a link inside the shared output folder to the victim's home-like folder,
#: and a record naming a gone source whose "folder" passes through that link
PLANT = r"""
import json, os, sys
out, record_path, target, record = sys.argv[1:5]
os.symlink(target, os.path.join(out, "x"))
path = os.path.join(out, record_path)
os.makedirs(os.path.dirname(path), exist_ok=True)
with open(path, "w") as fh:
    fh.write(record)
"""


@needs_second_user
def test_a_planted_record_and_link_remove_nothing_outside_the_outputs(shared_tmp: Path) -> None:  # noqa: F811
    root, out = shared_tmp / "in", shared_tmp / "out"
    root.mkdir()
    out.mkdir(mode=0o777)
    out.chmod(0o1777)  # a shared output folder: others may create files in it
    (root / "here.pdf").write_bytes(b"%PDF-1.4 present")
    victim = shared_tmp / "victim-home"
    (victim / "docs-0123456789ab").mkdir(parents=True)
    precious = victim / "docs-0123456789ab" / "thesis.tex"
    precious.write_text("years of work")
    gone = str(root / "gone.pdf")
    record = LiveRecord(source=gone, sha256="0" * 64, config_hash="c", doc_id="0" * 32,
                        folder="x/docs-0123456789ab")
    subprocess.run([SYSTEM_PYTHON, "-c", PLANT, str(out), live_path(gone), str(victim),
                    record.model_dump_json()], user="nobody", check=True, cwd="/")

    sink = LocalSink(out)
    result = sync_roots(sink, NullStore, [str(root)], [str(root / "here.pdf")], apply=True,
                        dry_run=False, started=now(), s3=PipelineConfig().s3)
    assert precious.read_text() == "years of work", "nothing outside the outputs is removed"
    assert result.removed == [] and len(result.refused) == 1
    assert "folder 'x/docs-0123456789ab' is not the one folio makes" in result.refused[0]
    assert (out / live_path(gone)).is_file(), "a record folio did not write is left alone"


def test_removal_never_follows_a_link_on_the_way(tmp_path: Path) -> None:
    """A record folio wrote, whose folder another writer swapped for a link (or whose
    parents became one), removes nothing through it."""
    out, outside = tmp_path / "out", tmp_path / "outside"
    (outside / "keep").mkdir(parents=True)
    (outside / "keep" / "file").write_text("mine")
    sink = LocalSink(out)
    sink.write_text("a/b.txt", "x")
    (out / "a" / "b.txt").unlink()
    (out / "a").rmdir()
    (out / "a").symlink_to(outside)
    with pytest.raises(Exception, match="symbolic link"):
        sink.delete_prefix("a/keep")
    with pytest.raises(Exception, match="symbolic link"):
        sink.delete("a/keep/file")
    assert sink.delete_prefix("a") == 1 and not (out / "a").exists()  # the link, not its target
    assert (outside / "keep" / "file").read_text() == "mine"


def test_an_uploaders_record_on_s3_deletes_no_source_object(
        s3_server: S3Server, s3_bucket: str) -> None:
    """Outputs under the sources' own prefix: another uploader's record naming a source
    object as its folder, or its source as another's, is refused; the objects stay."""
    client = s3_server.client
    prefix = f"s3://{s3_bucket}/in"
    for key in ("in/here.pdf", "in/theirs.pdf"):
        client.put_object(Bucket=s3_bucket, Key=key, Body=b"%PDF-1.4")
    sink = S3Sink(s3_bucket, "in", client)
    gone, gone2 = f"{prefix}/gone.pdf", f"{prefix}/gone2.pdf"
    for source, folder in ((gone, "theirs.pdf"), (gone2, "")):
        sink.write_text(live_path(source), LiveRecord(
            source=source if folder else f"{prefix}/theirs.pdf", sha256="0" * 64,
            config_hash="c", doc_id="0" * 32, folder=folder).model_dump_json())
    # one folio wrote: its folder goes, and only that
    mine = f"{prefix}/old.pdf"
    folder = doc_slug(mine, "1" * 32)
    use_folder(sink, folder, mine)
    sink.write_text(f"{folder}/document.md", "# old")
    write_live(sink, LiveRecord(source=mine, sha256="1" * 64, config_hash="c",
                                doc_id="1" * 32, folder=folder))

    present = [f"{prefix}/here.pdf", f"{prefix}/theirs.pdf"]
    result = sync_roots(sink, NullStore, [prefix + "/"], present, apply=True, dry_run=False,
                        started=now(), s3=s3_server.settings)
    keys = {o["Key"] for o in client.list_objects_v2(Bucket=s3_bucket).get("Contents", [])}
    assert {"in/here.pdf", "in/theirs.pdf"} <= keys, "no source object is deleted"
    assert result.removed == [mine] and f"in/{folder}/document.md" not in keys
    assert sorted(r.split(":")[0] for r in result.refused) == sorted(
        [live_path(gone), live_path(gone2)])
    assert read_live(sink, mine) is None
    assert json.loads(sink.read_text(live_path(gone)) or "{}")["folder"] == "theirs.pdf"


def test_a_folio_folder_swapped_for_a_link_loses_only_the_link(tmp_path: Path) -> None:
    """A record folio wrote, whose folder another writer replaced by a link to a folder
    of the user's: the sync removes the link, never what it points to."""
    root, out = tmp_path / "in", tmp_path / "out"
    root.mkdir()
    (root / "here.pdf").write_bytes(b"%PDF-1.4")
    sink = LocalSink(out)
    gone = str(root / "gone.pdf")
    folder = doc_slug(gone, "2" * 32)
    use_folder(sink, folder, gone)
    write_live(sink, LiveRecord(source=gone, sha256="2" * 64, config_hash="c",
                                doc_id="2" * 32, folder=folder))
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep")
    (out / folder).symlink_to(mine)
    result = sync_roots(sink, NullStore, [str(root)], [str(root / "here.pdf")], apply=True,
                        dry_run=False, started=now(), s3=PipelineConfig().s3)
    assert result.removed == [gone] and not (out / folder).is_symlink()
    assert (mine / "notes.txt").read_text() == "keep"


def test_a_planted_record_of_a_present_source_releases_no_folder(tmp_path: Path) -> None:
    """A new version releases the old record's folder: a planted record naming another
    folder is ignored (the source is published as new), so that folder stays."""
    from folio.index.publish import begin, publish
    from folio.models import DocumentResult

    sink = LocalSink(tmp_path / "out")
    source = str(tmp_path / "in" / "a.pdf")
    sink.write_text("other-0123456789ab/document.md", "someone's outputs")
    sink.write_text(live_path(source), LiveRecord(
        source=source, sha256="3" * 64, config_hash="c", doc_id="3" * 32,
        folder="other-0123456789ab").model_dump_json())
    doc = DocumentResult(source=source, doc_id="4" * 32, sha256="4" * 64, config_hash="c")
    publish(sink, doc, begin(sink, doc))
    assert sink.read_text("other-0123456789ab/document.md") == "someone's outputs"
    record = read_live(sink, source)
    assert record is not None and record.folder == doc_slug(source, "4" * 32)


def test_a_link_at_a_records_lock_name_is_not_followed(tmp_path: Path) -> None:
    """A compare-and-swap locks a file beside the record: a link planted at its name
    (which ``open(..., "a")`` followed, creating the target) ends in a storage error."""
    from folio.errors import StorageError

    sink = LocalSink(tmp_path / "out")
    etag = sink.create("_claims/a.json", b"{}")
    assert etag is not None
    target = tmp_path / "created-by-folio"
    (tmp_path / "out" / "_claims" / ".a.json.lock").symlink_to(target)
    with pytest.raises(StorageError):
        sink.replace("_claims/a.json", b"{1}", etag)
    assert not target.exists()
