"""bench/layout_models.py: the survey's reading of a package, on distributions made here.

Why tested: the issue's choice rests on "which packages ship layout weights under a
fitting license"; a model hub's cache lock mistaken for a model, or an AGPL license read
as fitting, would put a candidate in the table that cannot be used.
"""

from __future__ import annotations

import io
import tarfile
import zipfile
from pathlib import Path

import pytest

from bench.layout_models import (
    MIN_WEIGHTS_BYTES,
    distinct_models,
    headline,
    inspect_distribution,
    license_fits,
    side_by_side,
)

METADATA = "Metadata-Version: 2.1\nName: demo\nVersion: 1.0\nLicense: Apache-2.0\n\nbody\n"


def _wheel(path: Path, metadata: str = METADATA) -> Path:
    with zipfile.ZipFile(path, "w") as wheel:
        wheel.writestr("demo/models/layout.onnx", b"\0" * MIN_WEIGHTS_BYTES)
        wheel.writestr("demo/.cache/download/layout.onnx.lock", b"")
        wheel.writestr("demo/tiny.onnx", b"\0" * 10)  # a test fixture, not a model
        wheel.writestr("demo/__init__.py", "")
        wheel.writestr("demo-1.0.dist-info/METADATA", metadata)
    return path


def test_a_wheel_lists_its_weights_and_license(tmp_path: Path) -> None:
    found = inspect_distribution(_wheel(tmp_path / "demo-1.0-py3-none-any.whl"))
    assert found["license"] == "Apache-2.0"
    assert [w["file"] for w in found["weights"]] == ["demo/models/layout.onnx"]
    assert found["weights"][0]["bytes"] == MIN_WEIGHTS_BYTES
    assert len(found["weights"][0]["sha256"]) == 64


def test_an_sdist_is_read_the_same_way(tmp_path: Path) -> None:
    path = tmp_path / "demo-1.0.tar.gz"
    with tarfile.open(path, "w:gz") as sdist:
        for name, data in (("demo-1.0/PKG-INFO", METADATA.encode()),
                           ("demo-1.0/demo/models/layout.onnx", b"\1" * MIN_WEIGHTS_BYTES)):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            sdist.addfile(info, io.BytesIO(data))
    found = inspect_distribution(path)
    assert found["license"] == "Apache-2.0"
    assert [w["file"] for w in found["weights"]] == ["demo-1.0/demo/models/layout.onnx"]


def test_the_license_classifier_stands_in_for_an_empty_field(tmp_path: Path) -> None:
    metadata = ("Metadata-Version: 2.1\nName: demo\nVersion: 1.0\n"
                "Classifier: License :: OSI Approved :: MIT License\n\n")
    found = inspect_distribution(_wheel(tmp_path / "demo-1.0-py3-none-any.whl", metadata))
    assert found["license"] == "MIT License"


@pytest.mark.parametrize(("text", "fits"), [
    ("Apache-2.0", True), ("MIT License", True), ("BSD-3-Clause", True),
    ("AGPL-3.0", False), ("GPL-3.0-or-later", False),
    ("Dual Licensed - GNU AFFERO GPL 3.0 or Artifex Commercial License", False),
    ("modified AI Pubs Open Rail-M (commercial use limited)", False),
    ("LicenseRef-MinerU-Open-Source-License", False), ("", False),
])
def test_license_fits(text: str, fits: bool) -> None:
    assert license_fits(text) is fits


def test_releases_shipping_one_file_are_one_model() -> None:
    model = {"file": "pkg/models/layout_cdla.onnx", "bytes": 1, "sha256": "ab" * 32}
    other = {"file": "pkg/models/layout_cdla.onnx", "bytes": 1, "sha256": "cd" * 32}
    rows = [
        {"package": "p", "version": "1", "usable": True, "layout_model": model},
        {"package": "p", "version": "2", "usable": True, "layout_model": model},
        {"package": "q", "version": "1", "usable": True, "layout_model": other},
        {"package": "r", "version": "1", "usable": False, "layout_model": other},
    ]
    assert distinct_models(rows) == {
        "layout_cdla.onnx sha256:" + "ab" * 8: ["p==1", "p==2"],
        "layout_cdla.onnx sha256:" + "cd" * 8: ["q==1"],
    }


def test_headline_counts_documents_per_label() -> None:
    run = {"commit": "abc", "olmocr_tests_pass_rate": 0.8,
           "configuration": {"layout": False},
           "olmocr_by_type": {"table": {"tests": 2, "pass_rate": 0.5}},
           "table_structure": {"detected_rate": 1.0, "cell_position_agreement": 0.9,
                               "gt_cells": 10},
           "per_document": [{"labels": ["Table", "Text"]}, {"labels": ["Text"]}]}
    figures = headline(run)
    assert figures["layout"] is False and figures["olmocr_tests_pass_rate"] == 0.8
    assert figures["olmocr_by_type"] == {"table": 0.5}
    assert figures["documents_with_label"] == {"Table": 1, "Text": 2}


def test_side_by_side_reads_each_figure_across_the_runs() -> None:
    runs = {"cdla": {"olmocr_tests_pass_rate": 0.8, "layout": True, "commit": "a",
                     "cpu_seconds_per_page": {"median": 1.0, "measure": "text"}},
            "none": {"olmocr_tests_pass_rate": 0.4, "layout": False, "commit": "a",
                     "cpu_seconds_per_page": {"median": 0.5, "measure": "text"}}}
    assert side_by_side(runs) == {
        "olmocr_tests_pass_rate": {"cdla": 0.8, "none": 0.4},
        "cpu_seconds_per_page.median": {"cdla": 1.0, "none": 0.5},
    }
