"""The README's blocks marked ``<!-- readme-test: runs ... -->`` run as written, in a
fresh folder holding what the marker names (an index in ./results) and the checkout's
``.venv``: a command or an example that drifts from the code fails here, not for a user.

Blocks that need a server, a bucket or a GPU stay unmarked; a marked block is run whole
(``bash -e`` for ``sh``, the checkout's Python for ``python``)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from folio.settings.config import StoreSettings
from tests.test_retrieval import write_index

REPO = Path(__file__).resolve().parent.parent
MARKER = "<!-- readme-test: runs"
BLOCK = re.compile(r"^" + re.escape(MARKER) + r"[^\n]*-->\n```(\w+)\n(.*?)\n```", re.M | re.S)


def marked_blocks(text: str) -> list[tuple[str, str]]:
    """(language, body) of each block right under a marker."""
    return [(m.group(1), m.group(2)) for m in BLOCK.finditer(text)]


def test_every_marker_has_its_block() -> None:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    assert text.count(MARKER) == len(marked_blocks(text)) >= 2


@pytest.mark.parametrize("number", range(len(marked_blocks(
    (REPO / "README.md").read_text(encoding="utf-8")))))
def test_a_marked_readme_block_runs_as_written(number: int, tmp_path: Path) -> None:
    language, body = marked_blocks((REPO / "README.md").read_text(encoding="utf-8"))[number]
    (tmp_path / ".venv").symlink_to(REPO / ".venv")
    write_index(StoreSettings(), str(tmp_path / "results"))
    command = {"sh": ["bash", "-e", "-c", body],
               "python": [str(REPO / ".venv" / "bin" / "python"), "-c", body]}[language]
    proc = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"README block {number}:\n{body}\n{proc.stderr[-3000:]}"
    assert "/in/" in proc.stdout  # the index's sources: every block searches it
