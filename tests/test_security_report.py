"""``--report`` never writes through a link another user planted (issue 58, finding 7):
its temporary file was ``.{name}.{pid}.tmp`` beside it, opened following links, without
exclusive create; planted in a folder another user can write, it overwrote a 0600 file of
the user's with the report. The attacker is a real second user (``nobody``), as in
tests/test_security_local_user.py."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from folio.process_files import write_atomic
from tests.test_security_local_user import (  # noqa: F401  (shared_tmp: a fixture)
    SYSTEM_PYTHON,
    needs_second_user,
    shared_tmp,
)

pytestmark = pytest.mark.timeout(60)

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
