"""folio.checks.validation with real Great Expectations: failures land on the right page."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from folio.checks.validation import (
    blocks_frame,
    pages_frame,
    run_validation,
    suite_definitions,
    validate_pages,
)
from folio.models import BBox, Block, PageOutcome, PageResult
from folio.samples import sentences
from folio.settings.config import ValidationSettings
from tests.conftest import RecordProperty

SETTINGS = ValidationSettings()


def page(index: int, text: str | None = None, **update: object) -> PageResult:
    body = text if text is not None else sentences(index, 5)
    result = PageResult(
        index=index, width_pt=612, height_pt=792, markdown=f"## Heading {index}\n\n{body}",
        outcome=PageOutcome.OK,
        engine="vllm",
        blocks=[
            Block(label="Section-Header", bbox=BBox(x0=72, y0=60, x1=300, y1=76),
                  content=f"Heading {index}", order=0),
            Block(label="Text", bbox=BBox(x0=72, y0=90, x1=540, y1=300), content=body, order=1),
        ],
    )
    return result.model_copy(update=update)


@pytest.fixture(scope="module", autouse=True)
def gx_imported() -> None:
    """Pay GX's import once, outside the timed tests."""
    started = time.perf_counter()
    import great_expectations  # noqa: F401

    print(f"\ngreat_expectations import: {time.perf_counter() - started:.2f} s")


def test_good_pages_pass(record_property: RecordProperty) -> None:
    pages = [page(i) for i in range(4)]
    pages.append(PageResult(index=4, width_pt=612, height_pt=792, blank=True,
                            outcome=PageOutcome.OK))
    started = time.perf_counter()
    assert validate_pages("doc", pages, SETTINGS) == {}
    record_property("first_validation_s", round(time.perf_counter() - started, 3))


def test_each_failure_is_attributed_to_its_page() -> None:
    pages = [page(i) for i in range(7)]
    pages[1] = page(1, "the same words again " * 60)  # a VLM loop
    pages[2].blocks[1].bbox = BBox(x0=72, y0=90, x1=700, y1=300)  # past the right edge
    pages[3].blocks[0].label = "Banner"  # not in the vocabulary
    pages[4] = page(4, "").model_copy(update={"markdown": "", "blocks": []})  # ink, no text
    pages[5].blocks[1].bbox = BBox(x0=72, y0=-20, x1=540, y1=900)  # above and below
    pages.append(page(6))  # two results for page 6
    failures = validate_pages("doc", pages, SETTINGS)
    assert failures == {
        1: ["repeat-ratio"],
        2: ["bbox-right"],
        3: ["label-known"],
        4: ["text-nonempty"],
        5: ["bbox-top", "bbox-bottom"],
        6: ["page-unique"],
    }


def test_quarantined_and_blank_pages_need_no_text() -> None:
    quarantined = PageResult(index=0, width_pt=612, height_pt=792, reason="timeout: ...")
    blank = PageResult(index=1, width_pt=612, height_pt=792, blank=True, outcome=PageOutcome.OK)
    assert validate_pages("doc", [quarantined, blank, page(2)], SETTINGS) == {}


def test_small_overshoot_and_missing_boxes_pass() -> None:
    p = page(0)
    p.blocks[1].bbox = BBox(x0=-0.5, y0=90, x1=612.5, y1=300)
    p.blocks.append(Block(label="Text", bbox=None, content="no geometry", order=2))
    assert validate_pages("doc", [p], SETTINGS) == {}


def test_inverted_box_fails() -> None:
    p = page(0)
    p.blocks[1].bbox = BBox(x0=540, y0=90, x1=72, y1=300)
    assert validate_pages("doc", [p], SETTINGS) == {0: ["bbox-ordered"]}


def test_threshold_comes_from_settings() -> None:
    looped = page(0, sentences(1, 3) + " and then" * 10)  # repeat ratio 0.32
    assert validate_pages("doc", [looped], SETTINGS) == {}
    strict = ValidationSettings(max_repeat_ratio=0.2)
    assert validate_pages("doc", [looped], strict) == {0: ["repeat-ratio"]}


def test_disabled_or_empty_does_nothing() -> None:
    assert validate_pages("doc", [page(0, "x " * 400)], ValidationSettings(enabled=False)) == {}
    assert validate_pages("doc", [], SETTINGS) == {}


def test_suite_is_data() -> None:
    specs = suite_definitions(ValidationSettings(max_repeat_ratio=0.3))
    names = [s.name for s in specs]
    assert len(names) == len(set(names))
    assert {"text-nonempty", "repeat-ratio", "page-unique", "label-known", "bbox-right"} <= set(names)
    repeat = next(s for s in specs if s.name == "repeat-ratio")
    assert repeat.kwargs == {"column": "repeat_ratio", "max_value": 0.3}
    text = next(s for s in specs if s.name == "text-nonempty")
    assert text.only_where_false == ("blank", "quarantined")


def test_frames() -> None:
    pages = [page(0), page(1)]
    frame = pages_frame("d", pages)
    assert list(frame["page"]) == [0, 1] and list(frame["n_results"]) == [1, 1]
    assert (frame["doc_id"] == "d").all() and (frame["text_chars"] > 10).all()
    blocks = blocks_frame(pages, item=3)
    assert len(blocks) == 4 and (blocks["item"] == 3).all()
    assert list(blocks.columns[:9]) == ["item", "page", "label", "x0", "y0", "x1", "y1", "width",
                                        "height"]


def test_thousand_pages_in_one_pass(record_property: RecordProperty) -> None:
    """A thousand pages validate in one suite run and the one failing block is found on
    its page (the time is recorded, not asserted: speed targets live in bench/)."""
    pages = [page(i) for i in range(1000)]
    pages[500].blocks[0].label = "Banner"
    started = time.perf_counter()
    report = run_validation("big", pages, SETTINGS)
    seconds = time.perf_counter() - started
    record_property("validation_1000_pages_s", round(seconds, 3))
    print(f"\nvalidation of 1000 pages / 2000 blocks: {seconds:.2f} s")
    assert report.failures == {500: ["label-known"]}
    assert report.pages == 1000 and report.blocks == 2000


def test_data_docs(tmp_path: Path) -> None:
    pages = [page(0), page(1, "loop " * 300)]
    report = run_validation("doc-with-docs", pages, SETTINGS, data_docs_dir=tmp_path / "docs")
    assert report.failures == {1: ["repeat-ratio"]}
    assert report.data_docs_index is not None and report.data_docs_index.is_file()
    assert report.data_docs_index.name == "index.html"
    assert tmp_path in report.data_docs_index.parents


def test_repetition_is_judged_only_on_generative_engines() -> None:
    """A document's own text (lorem ipsum, forms) may repeat; only model loops fail."""
    loop = sentences(1, 1) + " the same words again" * 40
    own_text = page(0, loop, engine="text-layer")
    model = page(1, loop, engine="vllm")
    assert validate_pages("doc", [own_text, model], ValidationSettings()) == {1: ["repeat-ratio"]}


def test_many_documents_in_one_run_keep_their_own_failures() -> None:
    """validate_documents: one GX run for a batch, failures mapped back to (document,
    page); the same document twice in a batch is not a duplicate page."""
    from folio.checks.validation import validate_documents

    clean = [page(i) for i in range(3)]
    looping = [page(0), page(1, "the same words again " * 60)]
    twice = [page(0), page(0)]  # two results for one page index
    results = validate_documents(
        [("a", clean), ("b", looping), ("a", clean), ("c", twice), ("d", [])], SETTINGS)
    assert results[0] == {} and results[2] == {} and results[4] == {}
    assert results[1] == {1: ["repeat-ratio"]}
    assert results[3] == {0: ["page-unique"]}
    assert results[1] == validate_pages("b", looping, SETTINGS)


def test_a_page_read_with_low_confidence_fails_and_one_without_confidence_passes() -> None:
    def with_confidence(index: int, confidence: float | None) -> PageResult:
        p = page(index)
        for block in p.blocks:
            block.confidence = confidence
        return p.model_copy(update={"engine": "tesseract"})

    pages = [with_confidence(0, 0.93), with_confidence(1, 0.31), with_confidence(2, None),
             with_confidence(3, 0.2).model_copy(update={"outcome": PageOutcome.QUARANTINED})]
    assert validate_pages("doc", pages, SETTINGS) == {1: ["ocr-confidence"]}
    lenient = ValidationSettings(min_ocr_confidence=0.3)
    assert validate_pages("doc", pages, lenient) == {}


# --- the validation child (folio/checks/validation_child.py) ------------------------------------------


@pytest.mark.slow  # a process of its own (about 10 s)
def test_the_child_process_gives_the_same_verdicts_as_this_one() -> None:
    """GX in the child (a GPU run's default) fails the same pages with the same names as
    GX in the flow's process, for a batch of documents."""
    from folio.checks.validation import validate_documents

    looping = [page(0), page(1, "the same words again " * 60)]
    banner = [page(i) for i in range(4)]
    banner[2].blocks[0].label = "Banner"
    inverted = [page(0)]
    inverted[0].blocks[1].bbox = BBox(x0=540, y0=90, x1=72, y1=300)
    items = [("a", looping), ("b", banner), ("c", inverted), ("d", [])]
    here = validate_documents(items, SETTINGS)
    there = validate_documents(items, SETTINGS, child=True)
    assert there == here
    assert here[0] == {1: ["repeat-ratio"]} and here[1] == {2: ["label-known"]} and here[2]


@pytest.mark.slow  # a process of its own (about 10 s)
def test_a_child_that_dies_is_started_again_and_gx_errors_come_back_typed() -> None:
    """A killed child costs nothing but a restart: the next batch is answered by a new
    one. GX failing on an expectation (a column missing from the frame) is the typed
    validation error it is inline, not a crash or a silent pass."""
    import pandas as pd

    from folio.checks.validation import Table, pages_frame, suite_definitions
    from folio.checks.validation_child import shared_children
    from folio.errors import FolioError

    child = shared_children(1).children[0]  # the one the test before started: GX imported once
    specs = suite_definitions(SETTINGS)
    frames: dict[Table, pd.DataFrame] = {"pages": pages_frame("d", [page(0), page(1)])}
    assert child.failures(frames, specs, "d") == {}
    started = child.starts
    assert child._proc is not None
    child._proc.kill()
    child._proc.wait()
    assert child.failures(frames, specs, "d") == {} and child.starts == started + 1
    broken: dict[Table, pd.DataFrame] = {"pages": frames["pages"].drop(columns=["text_chars"])}
    with pytest.raises(FolioError) as caught:
        child.failures(broken, specs, "d")
    assert caught.value.code == "validation-error", caught.value
    assert child.failures(frames, specs, "d") == {} and child.starts == started + 1
    proc = child._proc
    child.close()  # its stdin closed, it ends by itself
    assert child._proc is None and proc is not None and proc.returncode == 0


@pytest.mark.slow  # two processes of their own
def test_two_children_validate_two_batches_at_once() -> None:
    """The pool's children serve one request each: two batches sent together are
    answered by two processes, with the verdicts of the flow's own GX."""
    import pandas as pd

    from folio.checks.validation import Table, pages_frame, suite_definitions
    from folio.checks.validation_child import shared_children

    pool = shared_children(2)
    pool.start()
    specs = suite_definitions(SETTINGS)
    looping = [page(0), page(1, "the same words again " * 60)]
    frames: dict[Table, pd.DataFrame] = {"pages": pages_frame("d", looping)}
    used: list[int] = []
    real = [c.failures for c in pool.children]

    def spy(n: int) -> Any:
        def failures(*args: Any) -> Any:
            proc = pool.children[n]._proc
            assert proc is not None
            used.append(proc.pid)
            time.sleep(0.5)  # both requests are in flight together
            return real[n](*args)
        return failures

    for n, child in enumerate(pool.children[:2]):
        child.failures = spy(n)  # type: ignore[method-assign]
    try:
        with ThreadPoolExecutor(2) as threads:
            answers = list(threads.map(lambda _: pool.failures(frames, specs, "d"), range(2)))
    finally:
        for n, child in enumerate(pool.children[:2]):
            child.failures = real[n]  # type: ignore[method-assign]
    assert answers == [{(0, 1): ["repeat-ratio"]}] * 2
    assert len(set(used)) == 2


def test_a_gpu_run_validates_in_the_child_unless_told_otherwise() -> None:
    from folio.checks.validation import in_child
    from folio.settings.config import PipelineConfig

    assert in_child(PipelineConfig.model_validate({"ocr": {"engine": "vllm"}}))
    assert not in_child(PipelineConfig.model_validate({"ocr": {"engine": "tesseract"}}))
    assert not in_child(PipelineConfig.model_validate(
        {"ocr": {"engine": "openai"}, "validation": {"child_process": False}}))
    assert in_child(PipelineConfig.model_validate(
        {"ocr": {"engine": "tesseract"}, "validation": {"child_process": True}}))


def test_a_page_whose_text_did_not_reach_the_markdown_or_chunks_fails() -> None:
    """Issue 30: a page that loses its text between its blocks and document.md (or between
    document.md and the chunks) is quarantined with a reason, not reported ok."""
    lost = page(1).model_copy(update={"markdown": ""})  # blocks say it all, markdown nothing
    extra = page(2).model_copy(update={"markdown": page(2).markdown + "\n\n" + sentences(9, 8)})
    heads_only = page(3).model_copy(update={"blocks": [
        Block(label="Page-Header", bbox=BBox(x0=72, y0=20, x1=300, y1=30), content="Journal 4",
              order=0), *page(3).blocks[1:]]})  # a running head owes nothing to the markdown
    failures = validate_pages("doc", [page(0), lost, extra, heads_only], SETTINGS)
    assert failures == {1: ["markdown-keeps-text"], 2: ["chunks-keep-markdown"]}
    frame = pages_frame("doc", [page(0), lost, heads_only])
    assert list(frame["markdown_recall"]) == [1.0, 0.0, 1.0]
