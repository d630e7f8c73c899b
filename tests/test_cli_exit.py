"""The CLI's own process: its flow run sends no heartbeats unless asked, and its fast
exit keeps main's exit code and everything it printed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from folio import cli
from folio_prefect.flows import cli as folio_command


def test_the_cli_flow_run_sends_no_heartbeats_unless_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    from prefect.settings import get_current_settings

    monkeypatch.delenv("PREFECT_FLOWS_HEARTBEAT_FREQUENCY", raising=False)
    before = get_current_settings().flows.heartbeat_frequency
    with folio_command._no_heartbeats():
        assert get_current_settings().flows.heartbeat_frequency is None
    assert get_current_settings().flows.heartbeat_frequency == before
    monkeypatch.setenv("PREFECT_FLOWS_HEARTBEAT_FREQUENCY", "30")
    with folio_command._no_heartbeats():  # the user asked for them: left alone
        assert get_current_settings().flows.heartbeat_frequency == before


def test_the_fast_exit_keeps_the_exit_code_and_the_output(tmp_path: Path) -> None:
    """Usage errors (argparse's SystemExit), 'nothing to do' and help written to a pipe
    all come out as main() left them."""
    def folio(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "folio_prefect.flows.cli", *args], capture_output=True,
                              text=True, timeout=120, cwd=tmp_path)

    usage = folio("ingest")
    assert usage.returncode == 2 and "usage:" in usage.stderr
    (tmp_path / "empty").mkdir()
    empty = folio("ingest", str(tmp_path / "empty"), "--out", str(tmp_path / "out"))
    assert empty.returncode == cli.EXIT_NOTHING and empty.stderr.startswith("folio: ")
    # docs/index-sync.md: --sync over nothing at all is "nothing to do" too, and removes nothing
    synced = folio("ingest", str(tmp_path / "empty"), "--out", str(tmp_path / "out"), "--sync")
    assert synced.returncode == cli.EXIT_NOTHING and synced.stderr.startswith("folio: ")
    helped = folio("ingest", "--help")  # printed to a pipe (buffered), then the fast exit
    assert helped.returncode == 0 and "--out" in helped.stdout
    assert helped.stdout.endswith("\n")
