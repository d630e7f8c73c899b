"""A source file swapped after discovery is never followed (issue 58, finding 3): the owner
of a source folder (a real second user, ``nobody``, as in
tests/test_security_local_user.py) replaces a listed PDF by a link to a private file of
the user's, or by a FIFO, between discovery and the read."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from folio.io.sources import SourceRef, discover
from folio.models import DocumentOutcome, DocumentResult
from folio.pipeline import process_documents
from folio.pipeline.services import Services
from folio.samples import SamplePage, write_text_pdf
from folio.settings.config import PipelineConfig
from tests.test_security_local_user import SYSTEM_PYTHON, needs_second_user
from tests.test_security_local_user import shared_tmp as shared_tmp  # the fixture

pytestmark = pytest.mark.timeout(120)

SECRET = "Confidential salary ledger of the victim"


def _inbox(shared_tmp: Path) -> tuple[Path, Path]:
    """The attacker's source folder with one harmless PDF, both owned by nobody."""
    inbox = shared_tmp / "inbox"
    inbox.mkdir()
    doc = write_text_pdf(inbox / "report.pdf", [SamplePage(title="A harmless report",
                                                           paragraphs=["Nothing to see."])])
    nobody = int(subprocess.check_output(["id", "-u", "nobody"]))
    for path in (inbox, doc):
        os.chown(path, nobody, -1)
    return inbox, doc


def _as_nobody(code: str, *args: str) -> None:
    subprocess.run([SYSTEM_PYTHON, "-c", code, *args], user="nobody", check=True, cwd="/")


def _run(tmp_path: Path, ref: SourceRef) -> DocumentResult:
    config = PipelineConfig.model_validate({
        "work_dir": str(tmp_path / "w"), "validation": {"enabled": False},
        "store": {"kind": "none"}, "compress": False})
    services = Services(config, str(tmp_path / "out"))
    try:
        (doc,) = process_documents([ref], services)
    finally:
        services.close()
    return doc


def _outputs(tmp_path: Path) -> str:
    out = tmp_path / "out"
    return "".join(p.read_text(errors="replace") for p in out.rglob("*") if p.is_file())


@needs_second_user
def test_a_link_swapped_in_after_discovery_is_not_read(shared_tmp: Path, tmp_path: Path) -> None:
    """Before: discovery saw a regular file, then every later step opened the path again
    and followed the link: the private PDF's text was indexed into the outputs."""
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    secret = write_text_pdf(private / "secret.pdf", [SamplePage(title=SECRET)])
    inbox, doc = _inbox(shared_tmp)
    (ref,) = discover([str(inbox)], PipelineConfig().s3)
    assert ref.skip is None
    _as_nobody("import os, sys; os.symlink(sys.argv[1], sys.argv[2] + '.new'); "
               "os.replace(sys.argv[2] + '.new', sys.argv[2])", str(secret), str(doc))
    result = _run(tmp_path, ref)
    assert result.outcome is DocumentOutcome.QUARANTINED, result
    assert result.reason.startswith("source-changed") and "symlink" in result.reason
    assert "salary" not in _outputs(tmp_path)


@needs_second_user
def test_a_fifo_swapped_in_ends_typed_not_in_a_hang(shared_tmp: Path, tmp_path: Path) -> None:
    """Before: ``open`` of a FIFO without a writer blocked the run for good (the test's
    timeout ended it)."""
    inbox, doc = _inbox(shared_tmp)
    (ref,) = discover([str(inbox)], PipelineConfig().s3)
    _as_nobody("import os, sys; os.unlink(sys.argv[1]); os.mkfifo(sys.argv[1], 0o666)", str(doc))
    result = _run(tmp_path, ref)
    assert result.outcome is DocumentOutcome.QUARANTINED, result
    assert result.reason.startswith("source-changed") and "regular file" in result.reason


@needs_second_user
def test_another_file_renamed_over_the_listed_one_is_not_read(
    shared_tmp: Path, tmp_path: Path,
) -> None:
    """A regular file, but not the one listed (another inode): refused too; the file
    as listed is read whatever happens to its name afterwards."""
    inbox, doc = _inbox(shared_tmp)
    (ref,) = discover([str(inbox)], PipelineConfig().s3)
    _as_nobody("import shutil, os, sys; shutil.copy(sys.argv[1], sys.argv[1] + '.new'); "
               "os.replace(sys.argv[1] + '.new', sys.argv[1])", str(doc))
    result = _run(tmp_path, ref)
    assert result.outcome is DocumentOutcome.QUARANTINED
    assert "another file than the one listed" in result.reason
    again = _run(tmp_path / "again", discover([str(inbox)], PipelineConfig().s3)[0])
    assert again.outcome is DocumentOutcome.OK, again.reason
