"""A warm ``folio`` command's child reads Prefect's settings once, when its command has
set its own Prefect variables, not also at the fork (issue 57: each reading cost a
one-page ``folio ingest`` 0.1-0.2 s); a flow run's child and a helper read them at the
fork as before."""

from __future__ import annotations

import os
from collections.abc import Sequence

import pytest

from folio.warm import client
from folio_prefect.deployments import warm_start


def test_the_launcher_marks_its_request_and_only_its_request(
        monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[str | None] = []

    def run_command(kind: str, target: str, preload: Sequence[str],
                    argv: Sequence[str] | None = None) -> int | None:
        seen.append(os.environ.get(warm_start.SETTINGS_LATER_ENV))  # what the request carries
        return None  # as when no warm server can be used: the command runs here

    monkeypatch.setattr(client, "run_command", run_command)
    monkeypatch.delenv(warm_start.SETTINGS_LATER_ENV, raising=False)
    assert warm_start.command(["folio", "ingest", "x.pdf", "--out", "o"]) is None
    assert seen == ["1"]
    # run here instead, the command and its children see no mark
    assert warm_start.SETTINGS_LATER_ENV not in os.environ
    assert warm_start.command(["folio", "--help"]) is None and seen == ["1"]  # not warm


def test_a_marked_child_leaves_the_reading_to_its_command(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from folio_prefect.deployments import warm_preload

    reads: list[str] = []
    monkeypatch.setattr(warm_preload, "reread_prefect_settings", lambda: reads.append("read"))
    monkeypatch.setattr(client, "IN_CHILD", False)

    monkeypatch.setenv(warm_start.SETTINGS_LATER_ENV, "1")  # a folio command's child
    warm_preload.after_fork()
    assert reads == [] and client.IN_CHILD
    assert warm_start.SETTINGS_LATER_ENV not in os.environ  # its own helpers read theirs

    warm_preload.after_fork()  # a flow run's child, or a helper
    assert reads == ["read"]
