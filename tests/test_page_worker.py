"""The page worker protocol with real child processes: streaming, crashes, timeouts."""

from __future__ import annotations

import csv
import logging
import os
import re
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from PIL import Image
from pydantic import SecretStr

from folio import samples
from folio.errors import (
    EncryptedPdfError,
    FolioError,
    MalformedPdfError,
    NotAPdfError,
    TimeoutExpired,
)
from folio.models import PagePrep
from folio.pdf import page_worker, zygote
from folio.pdf.page_worker import WorkerJob, prepare_pages, probe
from folio.settings.config import RenderSettings, RouteSettings

SMALL = RenderSettings(longest_side_px=300, min_dpi=20, min_text_px=4)
PASSWORD = "open sesame"


@pytest.fixture(scope="module")
def pdfs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("worker")
    report = samples.write_text_pdf(root / "report.pdf", samples.report_pages(seed=1, n=2))
    return {
        "report": report,
        "six": samples.write_long_pdf(root / "six.pdf", 6),
        "blank": samples.write_blank_pdf(root / "blank.pdf", n=2),
        "scan": samples.write_scanned_pdf(root / "scan.pdf", report, dpi=100),
        "encrypted": samples.write_encrypted_pdf(root / "enc.pdf", PASSWORD),
        "malformed": samples.write_malformed_pdf(root / "bad.pdf", report),
        "not_pdf": samples.write_not_pdf(root / "not.pdf"),
    }


@pytest.fixture(params=["fork", "exec"])
def worker_start(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Children forked by the zygote (the default) and started as new interpreters."""
    monkeypatch.setenv(zygote.MODE_ENV, request.param)
    return str(request.param)


def _job(pdf: Path, out_dir: Path, pages: list[int], **overrides: object) -> WorkerJob:
    fields: dict[str, object] = {
        "pdf": pdf,
        "pages": pages,
        "out_dir": out_dir,
        "render_settings": SMALL,
        "route_settings": RouteSettings(),
        "timeout_s": 60,
        "memory_mb": 1024,
    }
    fields.update(overrides)
    return WorkerJob.model_validate(fields)


def _indexes(preps: list[PagePrep]) -> list[int]:
    return [prep.index for prep in preps]


def test_streams_every_requested_page_once_in_order(
    tmp_path: Path, pdfs: dict[str, Path], worker_start: str
) -> None:
    preps = list(prepare_pages(_job(pdfs["six"], tmp_path, [4, 0, 2, 9])))
    assert _indexes(preps) == [4, 0, 2, 9]
    assert preps[3].error == "bad-input: no page 9 in 6 pages"
    for prep in preps[:3]:
        assert prep.error is None
        assert (prep.width_pt, prep.height_pt, prep.rotation) == (612, 792, 0)
        assert prep.text_layer is not None and prep.text_layer.trusted
        assert prep.plan is not None and prep.image_path is not None
        path = Path(prep.image_path)
        assert path == tmp_path / f"p{prep.index:05d}.png"
        with Image.open(path) as image:
            assert image.size == (prep.plan.width_px, prep.plan.height_px)
            assert max(image.size) == 300
    assert not list(tmp_path.glob(".*.partial"))


def test_untrusted_mode_skips_rendering_trusted_pages(
    tmp_path: Path, pdfs: dict[str, Path]
) -> None:
    text = list(prepare_pages(_job(pdfs["report"], tmp_path / "a", [0, 1], render="untrusted")))
    assert all(p.image_path is None and p.plan is not None for p in text)
    scan = list(prepare_pages(_job(pdfs["scan"], tmp_path / "b", [0], render="untrusted")))
    assert scan[0].image_path is not None  # no text layer: must be rendered for OCR
    assert scan[0].image_dpi_native == pytest.approx(100, rel=0.01)
    assert scan[0].plan is not None and scan[0].plan.dpi <= 100.5  # no upsampling


def test_text_layer_comes_from_the_original_beside_a_copy(
    tmp_path: Path, pdfs: dict[str, Path]
) -> None:
    """A compressed copy is rendered, but its text layer is read from the original (a
    copy whose rewrite lost the text stands in here as an image-only scan of it)."""
    job = _job(pdfs["scan"], tmp_path, [0, 1], text_pdf=pdfs["report"], render="all")
    preps = list(prepare_pages(job))
    assert all(p.text_layer is not None and p.text_layer.trusted for p in preps)
    first = preps[0].text_layer
    assert first is not None and "Quarterly" in " ".join(b.content for b in first.blocks)
    assert all(p.image_path for p in preps)
    alone = list(prepare_pages(_job(pdfs["scan"], tmp_path / "alone", [0])))
    assert alone[0].text_layer is None or not alone[0].text_layer.trusted
    mismatched = _job(pdfs["scan"], tmp_path / "m", [0], text_pdf=pdfs["six"])  # 6 pages vs 2
    assert not list(prepare_pages(mismatched))[0].text_layer.trusted  # type: ignore[union-attr]


def test_two_hundred_pages(tmp_path: Path) -> None:
    pdf = samples.write_long_pdf(tmp_path / "long.pdf", 200)
    assert probe(pdf, None, timeout_s=60, memory_mb=1024).page_count == 200
    job = _job(pdf, tmp_path / "img", list(range(200)), render="untrusted")
    seen = []
    for prep in prepare_pages(job):
        assert prep.error is None and prep.text_layer is not None
        assert prep.text_layer.text.startswith(f"Page {prep.index + 1}")
        seen.append(prep.index)
    assert seen == list(range(200))


def test_blank_pages_are_detected(tmp_path: Path, pdfs: dict[str, Path]) -> None:
    preps = list(prepare_pages(_job(pdfs["blank"], tmp_path, [0, 1])))
    assert [p.blank for p in preps] == [True, True]
    assert all(p.text_layer is not None and p.text_layer.chars == 0 for p in preps)
    text = list(prepare_pages(_job(pdfs["report"], tmp_path, [0])))
    assert text[0].blank is False


def test_probe_reports_the_document(pdfs: dict[str, Path]) -> None:
    info = probe(pdfs["report"], None, timeout_s=60, memory_mb=1024)
    assert info.page_count == 2
    assert info.encrypted is False
    assert info.pdf_version is not None and re.fullmatch(r"1\.\d", info.pdf_version)
    assert info.producer is not None and "Ghostscript" in info.producer
    assert info.max_page_pt == 792


def test_encrypted_needs_the_password(tmp_path: Path, pdfs: dict[str, Path]) -> None:
    with pytest.raises(EncryptedPdfError, match="password required"):
        probe(pdfs["encrypted"], None, timeout_s=60, memory_mb=1024)
    with pytest.raises(EncryptedPdfError, match="wrong password"):
        list(prepare_pages(_job(pdfs["encrypted"], tmp_path, [0], password="nope")))
    secret = SecretStr(PASSWORD)
    info = probe(pdfs["encrypted"], secret, timeout_s=60, memory_mb=1024)
    assert info.encrypted and info.page_count == 1
    job = _job(pdfs["encrypted"], tmp_path, [0], password=secret)
    assert PASSWORD not in job.model_dump_json()  # masked everywhere but the child's stdin
    preps = list(prepare_pages(job))
    assert preps[0].error is None and preps[0].text_layer is not None
    assert preps[0].text_layer.trusted


@pytest.mark.parametrize(
    ("name", "error"), [("malformed", MalformedPdfError), ("not_pdf", NotAPdfError)]
)
def test_unreadable_documents_raise_typed_errors(
    tmp_path: Path, pdfs: dict[str, Path], name: str, error: type[FolioError]
) -> None:
    with pytest.raises(error):
        probe(pdfs[name], None, timeout_s=60, memory_mb=1024)
    with pytest.raises(error):
        list(prepare_pages(_job(pdfs[name], tmp_path, [0])))


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        probe(tmp_path / "nope.pdf", None, timeout_s=60, memory_mb=1024)


def test_crashing_child_is_replaced_and_the_page_isolated(
    tmp_path: Path, pdfs: dict[str, Path], monkeypatch: pytest.MonkeyPatch, worker_start: str
) -> None:
    monkeypatch.setenv("FOLIO_TEST_CRASH_ON_PAGE", "3")
    preps = list(prepare_pages(_job(pdfs["six"], tmp_path, list(range(6)))))
    assert _indexes(preps) == list(range(6))
    assert preps[3].error == "worker-crashed: page 3 killed the page worker (signal SIGABRT)"
    assert [p.error for i, p in enumerate(preps) if i != 3] == [None] * 5
    assert preps[4].text_layer is not None and preps[4].text_layer.text.startswith("Page 5")


def test_restarts_are_bounded(
    tmp_path: Path, pdfs: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FOLIO_TEST_CRASH_ON_PAGE", "1")
    monkeypatch.setattr(page_worker, "MAX_RESTARTS", 0)
    preps = list(prepare_pages(_job(pdfs["six"], tmp_path, list(range(4)))))
    assert _indexes(preps) == [0, 1, 2, 3]
    assert preps[0].error is None
    assert preps[1].error is not None and preps[1].error.startswith("worker-crashed: page 1")
    assert [p.error for p in preps[2:]] == [
        "worker-crashed: not attempted after 1 page worker crashes"
    ] * 2


def test_timeout_kills_the_child(
    tmp_path: Path,
    pdfs: dict[str, Path],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    worker_start: str,
) -> None:
    monkeypatch.setenv("FOLIO_TEST_HANG_ON_PAGE", "1")
    started = time.monotonic()
    with caplog.at_level(logging.DEBUG, logger="folio.pdf.page_worker"):
        preps = list(prepare_pages(_job(pdfs["six"], tmp_path, [0, 1, 2], timeout_s=4)))
    assert time.monotonic() - started < 20
    assert _indexes(preps) == [0, 1, 2]
    assert preps[0].error is None
    assert [p.error for p in preps[1:]] == ["timeout: page worker exceeded 4s"] * 2
    pids = [int(pid) for pid in re.findall(r"page worker pid (\d+) started", caplog.text)]
    assert len(pids) == 1
    with pytest.raises(ProcessLookupError):
        os.kill(pids[0], 0)


def test_probe_timeout(pdfs: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FOLIO_TEST_HANG_ON_PAGE", "probe")
    started = time.monotonic()
    with pytest.raises(TimeoutExpired):
        probe(pdfs["report"], None, timeout_s=1.0, memory_mb=1024)
    assert time.monotonic() - started < 10


def test_memory_limit_fails_the_page_not_the_document(
    tmp_path: Path, pdfs: dict[str, Path], worker_start: str
) -> None:
    greedy = RenderSettings(longest_side_px=9000, max_dpi=1200, max_pixels=10**9)  # ~180 MB
    job = _job(pdfs["report"], tmp_path, [0, 1], render_settings=greedy, memory_mb=160)
    preps = list(prepare_pages(job))
    assert _indexes(preps) == [0, 1]
    for prep in preps:
        assert prep.error is not None and prep.error.startswith("page-too-large: out of memory")


def test_consumer_stopping_early_kills_the_child(
    tmp_path: Path, pdfs: dict[str, Path], caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.DEBUG, logger="folio.pdf.page_worker"):
        stream = prepare_pages(_job(pdfs["six"], tmp_path, list(range(6))))
        assert next(stream).index == 0
        stream.close()
    pid = int(re.findall(r"page worker pid (\d+) started", caplog.text)[0])
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


# --- the shared robustness corpus ---------------------------------------------------------


def _corpus_dir() -> Path:
    default = Path(__file__).resolve().parents[1] / ".." / "shared" / "corpus"
    return Path(os.environ.get("FOLIO_CORPUS_DIR", default)).resolve()


def _corpus_rows() -> list[dict[str, str]]:
    manifest = _corpus_dir() / "MANIFEST.tsv"
    if not manifest.is_file():
        return []
    with manifest.open(newline="") as handle:
        return list(csv.DictReader(handle, delimiter="\t"))


def _corpus_password(row: dict[str, str]) -> SecretStr | None:
    """The manifest notes passwords as "user password 'X'" or "(opened with password X)"."""
    notes = f"{row['pdfium_probe']} {row['notes']}"
    found = re.search(r"password '([^']+)'", notes) or re.search(r"with password (\S+?)\)", notes)
    return SecretStr(found.group(1)) if found else None


def _corpus_document(row: dict[str, str], out_dir: Path) -> str:
    """Probe and prepare the first pages of one corpus file; typed errors are outcomes."""
    pdf = _corpus_dir() / row["local_path"]
    password = _corpus_password(row)
    try:
        info = probe(pdf, password, timeout_s=60, memory_mb=2048)
    except FolioError as exc:
        return f"unreadable: {exc.reason}"
    pages = list(range(min(info.page_count, 3)))
    tiny = RenderSettings(longest_side_px=400, min_dpi=20, min_text_px=4)
    job = _job(pdf, out_dir, pages, password=password, render_settings=tiny, memory_mb=2048)
    preps = list(prepare_pages(job))
    assert _indexes(preps) == pages, pdf
    return "; ".join(p.error or "ok" for p in preps)


@pytest.mark.corpus
def test_corpus_every_page_accounted_for(tmp_path: Path) -> None:
    """Every corpus PDF: nothing but typed errors, each page once, and pdfium's verdict
    (the manifest's ``pdfium_probe`` column) matches whether :func:`probe` opens it."""
    rows = _corpus_rows()
    if not rows:
        pytest.skip(f"no corpus at {_corpus_dir()} (set FOLIO_CORPUS_DIR)")
    with ThreadPoolExecutor(max_workers=2) as pool:  # child start-up dominates: overlap it
        outcomes = list(
            pool.map(lambda item: _corpus_document(item[1], tmp_path / str(item[0])),
                     enumerate(rows))
        )  # fmt: skip
    for row, outcome in zip(rows, outcomes, strict=True):
        pdfium_failed = row["pdfium_probe"].startswith("error")
        expected_unreadable = pdfium_failed and _corpus_password(row) is None
        assert outcome.startswith("unreadable") == expected_unreadable, (row["local_path"], outcome)
