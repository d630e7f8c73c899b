"""``folio search`` imports lancedb without the REST namespace client's API classes
(over half of lancedb's import time, never used for folders and S3), and loses nothing:
a table still opens and answers, and the client's names still resolve when asked for."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

PROBE = """
import sys
{how}
db = lancedb.connect(sys.argv[1])
table = db.create_table("t", data=[{{"id": "a", "vector": [1.0, 0.0]}},
                                  {{"id": "b", "vector": [0.0, 1.0]}}])
assert table.search([0.9, 0.1]).limit(1).to_list()[0]["id"] == "a"
print("api" if "lance_namespace_urllib3_client.api" in sys.modules else "no-api")
import lance_namespace_urllib3_client as client
print(client.ApiClient.__name__, client.TableApi.__name__)
"""


def _probe(how: str, folder: Path) -> list[str]:
    proc = subprocess.run([sys.executable, "-c", PROBE.format(how=how), str(folder)],
                          capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout.split()


@pytest.mark.slow  # a process of its own (about 10 s)
def test_lancedb_without_the_rest_client(tmp_path: Path) -> None:
    plain = _probe("import lancedb", tmp_path / "plain")
    assert plain[0] == "api"  # what a plain import costs: the REST client's API classes
    deferred = _probe("from folio.stores.lance_import import import_lancedb\n"
                      "lancedb = import_lancedb()", tmp_path / "deferred")
    assert deferred == ["no-api", "ApiClient", "TableApi"]
