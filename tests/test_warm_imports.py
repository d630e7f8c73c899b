"""What the two sides of a warm ``folio`` command import (issue 57).

What the warm server imports once (deployments/warm_preload.py) is all a run imports:
a module a one-page ingest imports only on first use was imported again by every forked
child (issue 57: FastAPI's encoder for Prefect's parameters, anyio's backend, folio's
page and embedding modules, 0.3-0.5 s of a one-page ``folio ingest``). The launcher,
the process a user starts, imports only what it needs to hand the command to the server:
pydantic (for folio.progress) cost it 0.1 s of every command's 0.15 s of imports."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from folio.samples import report_pages, write_text_pdf

#: imported in each child on purpose: onnxruntime starts a thread on import, and the
#: server must stay single-threaded to fork safely (folio.warm.server)
CHILD_ONLY = ("onnxruntime", "tokenizers")

#: the preload as the server runs it, then a one-page ingest in the same process, as a
#: forked child runs it; prints what the ingest imported that the preload had not
SCRIPT = """
import json, sys, threading
import folio_prefect.deployments.warm_preload
threads = sorted(t.name for t in threading.enumerate())
runtime = [m for m in sys.modules if m.split(".")[0] in {child_only!r}]
before = set(sys.modules)
from folio_prefect.flows.cli import main
code = main(["ingest", sys.argv[1], "--out", sys.argv[2], "--quiet"])
late = sorted(m for m in set(sys.modules) - before if m.split(".")[0] not in {child_only!r})
print(json.dumps({{"code": code, "late": late, "threads": threads, "runtime": runtime}}))
"""


@pytest.mark.usefixtures("prefect_api")
def test_a_one_page_ingest_imports_nothing_the_server_did_not(tmp_path: Path) -> None:
    from prefect.settings import PREFECT_API_URL

    pdf = write_text_pdf(tmp_path / "one.pdf", report_pages(seed=4, n=1))
    env = {**os.environ, "FOLIO_WARM": "0", "PREFECT_API_URL": str(PREFECT_API_URL.value())}
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT.format(child_only=CHILD_ONLY), str(pdf),
         str(tmp_path / "out")],
        capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    facts = json.loads(proc.stdout.strip().splitlines()[-1])
    assert facts["code"] == 0
    assert facts["late"] == [], "imported by the run, not preloaded by the warm server"
    # the preload itself starts no thread but LanceDB's (which LanceDB restarts after a
    # fork) and leaves onnxruntime to the child
    assert set(facts["threads"]) <= {"MainThread", "LanceDBBackgroundEventLoop"}
    assert facts["runtime"] == []


def test_the_launcher_imports_neither_prefect_nor_pydantic() -> None:
    probe = ("import sys, folio_prefect.flows.cli; "
             "print(sorted({m.split('.')[0] for m in sys.modules} & {'prefect', 'pydantic'}))")
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          timeout=60, check=True)
    assert proc.stdout.strip() == "[]"
