"""bench/fidelity.py's ``--set``: two bench runs differ in the named settings alone.

Why tested: the layout model evaluation (bench/results/layout_models.json) compares runs
that differ by ``--set layout.enabled=false``; a value read as the string "false" would
be truthy and leave layout on, so the comparison would measure nothing.
"""

from __future__ import annotations

import pytest

from bench.fidelity import _merged, overrides
from folio.settings.config import PipelineConfig


def test_values_are_json_when_they_parse() -> None:
    assert overrides(["layout.enabled=false", "layout.score_threshold=0.4",
                      "ocr.engine=tesseract"]) == {
        "layout": {"enabled": False, "score_threshold": 0.4},
        "ocr": {"engine": "tesseract"},
    }


def test_merged_keeps_the_bench_settings_beside_the_overrides() -> None:
    base = {"store": {"kind": "none"}, "work_dir": "/tmp/w"}
    merged = _merged(base, overrides(["layout.enabled=false", "store.uri=x"]))
    assert merged == {"store": {"kind": "none", "uri": "x"}, "work_dir": "/tmp/w",
                      "layout": {"enabled": False}}
    config = PipelineConfig.model_validate(merged)
    assert config.active_layout() is None and config.store.kind == "none"


@pytest.mark.parametrize("bad", ["layout.enabled", "=1", "layout=1 layout.enabled=1"])
def test_malformed_pairs_stop_the_run(bad: str) -> None:
    with pytest.raises(SystemExit):
        overrides(bad.split(" "))
