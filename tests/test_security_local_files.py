"""What folio writes on a shared host goes where it means to (issue 58): the work folder is
checked on every use (finding 4: another local user who made ``.folio/work`` first in a
shared folder, or who may write to a folder above it, could swap a document's scratch
folder for one of theirs and copy the renders of a password-protected PDF), and
``--report`` never writes through a link planted beside it (finding 7: its temporary
file was ``.{name}.{pid}.tmp``, opened following links, without exclusive create; it
overwrote a 0600 file of the user's). The attacker is a real second user (``nobody``),
as in tests/test_security_local_user.py."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from folio.checks.run_checks import check_work_dir
from folio.process_files import write_atomic
from folio.security import work_dirs
from folio.security.private_dir import InsecureLocationError
from folio.settings.config import PipelineConfig
from tests.test_security_local_user import (  # noqa: F401  (shared_tmp: a fixture)
    SYSTEM_PYTHON,
    needs_second_user,
    shared_tmp,
)

pytestmark = pytest.mark.timeout(60)

#: the attacker makes the work folder (and the folder above it) first, open to all
PRECREATE = r"""
import os, sys
for path in sys.argv[1:]:
    os.makedirs(path, exist_ok=True)
    os.chmod(path, 0o777)
"""

#: the attacker swaps the victim's scratch folder for one of theirs
SWAP = r"""
import os, sys
scratch = sys.argv[1]
os.rename(scratch, scratch + ".victims")
os.mkdir(scratch)
os.chmod(scratch, 0o777)
"""


@needs_second_user
@pytest.mark.parametrize("made", ["work", "parent"])
def test_a_work_folder_another_user_made_is_refused(shared_tmp: Path, made: str) -> None:  # noqa: F811
    """Before: the scratch folder was made 0700 inside the attacker's 0777 ``work`` (or
    ``.folio``), who then renamed it away and put theirs in its place: the renders went
    there. Now the work folder is refused before a scratch folder is made, in the
    pre-run checks (exit 2) and at every use."""
    dot_folio = shared_tmp / "project" / ".folio"
    root = dot_folio / "work"
    (shared_tmp / "project").mkdir(mode=0o777)
    os.chmod(shared_tmp / "project", 0o1777)  # a shared folder, as /tmp is
    planted = [str(dot_folio), str(root)] if made == "work" else [str(dot_folio)]
    subprocess.run([SYSTEM_PYTHON, "-c", PRECREATE, *planted], user="nobody", check=True,
                   cwd="/")
    with pytest.raises(InsecureLocationError, match="belongs to user id"):
        check_work_dir(PipelineConfig(work_dir=root))
    try:
        scratch = work_dirs.make(root)
    except InsecureLocationError as refused:
        assert "belongs to user id" in str(refused)
        return
    # the old behaviour, played to its end: the attacker swaps the folder, the render lands
    subprocess.run([SYSTEM_PYTHON, "-c", SWAP, str(scratch)], user="nobody", check=True, cwd="/")
    (scratch / "page-1.png").write_bytes(b"render of a password-protected page")
    pytest.fail("a scratch folder was made in a folder another user controls, who took "
                f"{scratch / 'page-1.png'}")


def test_the_work_folder_is_checked_on_every_use(tmp_path: Path) -> None:
    """Made 0700; one folio made before (0755) is closed; one opened to others since, or
    a link put in its place, is refused at the next use, not only at the first."""
    root = tmp_path / "w" / "work"
    first = work_dirs.make(root)
    assert root.stat().st_mode & 0o777 == 0o700 and first.stat().st_mode & 0o777 == 0o700
    os.chmod(root, 0o755)
    work_dirs.make(root)
    assert root.stat().st_mode & 0o777 == 0o700
    os.chmod(root, 0o777)
    with pytest.raises(InsecureLocationError, match="mode 0777"):
        work_dirs.make(root)
    with pytest.raises(InsecureLocationError):
        check_work_dir(PipelineConfig(work_dir=root))
    os.chmod(root, 0o700)
    os.chmod(tmp_path / "w", 0o777)  # a folder above it open to others
    with pytest.raises(InsecureLocationError, match="above"):
        work_dirs.make(root)
    os.chmod(tmp_path / "w", 0o755)
    moved = tmp_path / "elsewhere"
    root.rename(moved)
    root.symlink_to(moved)
    with pytest.raises(InsecureLocationError, match="not a folder"):
        work_dirs.make(root)
    with pytest.raises(InsecureLocationError):
        work_dirs.sweep(root)


#: the attacker plants, under every name the old code could pick, a link to the victim's file
PLANT = r"""
import os, sys
folder, name, target, first, last = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
for pid in range(first, last):
    os.symlink(target, os.path.join(folder, f".{name}.{pid}.tmp"))
"""


@needs_second_user
def test_a_link_planted_beside_the_report_overwrites_nothing(shared_tmp: Path) -> None:  # noqa: F811
    from folio_prefect.flows.ingest import write_report

    private = shared_tmp / "victim"
    private.mkdir(mode=0o700)
    secret = private / "id_ed25519"
    secret.write_text("PRIVATE KEY")
    secret.chmod(0o600)
    reports = shared_tmp / "reports"
    reports.mkdir()
    reports.chmod(0o777)  # a team's folder (not sticky: links there are followed)
    pid = os.getpid()
    subprocess.run([SYSTEM_PYTHON, "-c", PLANT, str(reports), "run.json", str(secret),
                    str(pid - 5), str(pid + 5)], user="nobody", check=True, cwd="/")
    write_report({"documents": [], "totals": {"documents": 0}}, str(reports / "run.json"))
    assert secret.read_text() == "PRIVATE KEY", "the victim's file is untouched"
    assert json.loads((reports / "run.json").read_text())["documents"] == []
    assert not (reports / "run.json").is_symlink()
    planted = [p for p in reports.iterdir() if p.name != "run.json"]
    assert len(planted) == 10 and all(p.is_symlink() for p in planted), "nothing of ours left"


def test_state_files_are_written_through_exclusive_random_names(tmp_path: Path) -> None:
    """The same helper writes the servers' state files and secrets: a link at any
    temporary name is never opened, and a failed write leaves no temporary file."""
    target = tmp_path / "elsewhere"
    target.write_text("keep")
    path = tmp_path / "state.json"
    for pid in range(os.getpid() - 2, os.getpid() + 2):
        (tmp_path / f".state.json.{pid}.tmp").symlink_to(target)
    write_atomic(path, "{}", mode=0o600)
    assert target.read_text() == "keep" and path.read_text() == "{}"
    assert path.stat().st_mode & 0o777 == 0o600
    with pytest.raises(TypeError):
        write_atomic(path, 1)  # type: ignore[arg-type]
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")) == sorted(
        f".state.json.{pid}.tmp" for pid in range(os.getpid() - 2, os.getpid() + 2))
