"""Figures end to end: the issue's three faults on real documents (docling's
picture_classification.pdf and amt_handbook_sample.pdf on the CPU path, a Chandra 2
answer through the OpenAI test double), crops on a local folder and on S3 (moto's
server), reruns, and ``figures.mode = none``."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from folio.io.sources import discover
from folio.models import DocumentResult, Label
from folio.pipeline import Services, process_documents
from folio.settings.config import PipelineConfig
from tests.openai_fake import FakeServer
from tests.s3_server import S3Server

DOCS = ("picture_classification.pdf", "amt_handbook_sample.pdf")
_LINK = re.compile(r"!\[([^\n]*?)\]\(([^)]*)\)")


def _config(tmp_path: Path, **extra: Any) -> PipelineConfig:
    return PipelineConfig.model_validate({
        "store": {"kind": "none"}, "work_dir": str(tmp_path / "work"), "compress": False,
        "validation": {"enabled": False}, **extra})


def _run(config: PipelineConfig, sources: list[str], out: str) -> dict[str, DocumentResult]:
    services = Services(config, out)
    try:
        docs = process_documents(discover(sources, config.s3), services)
    finally:
        services.close()
    return {Path(d.source).name: d for d in docs}


def _pictures(doc: DocumentResult) -> list[tuple[int, Any]]:
    return [(p.index, b) for p in doc.pages for b in p.blocks if b.label == "Picture"]


def _files(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes()
            for p in sorted(folder.rglob("figures/*"))}


@pytest.mark.corpus
def test_figures_are_cropped_and_linked_with_their_captions_and_reruns_write_the_same(
        corpus: Path, layout_model: Path, tmp_path: Path) -> None:
    sources = [str(corpus / "docling" / DOCS[0])]
    out = tmp_path / "out"
    docs = _run(_config(tmp_path), sources, str(out))

    # picture_classification.pdf: two figures with captions, which left no trace before
    pc = docs["picture_classification.pdf"]
    pictures = _pictures(pc)
    assert [(i, b.caption) for i, b in pictures] == [
        (0, "Figure 1: This is an example image."), (1, "Figure 2: This is an example image.")]
    assert pc.figures == 2 and pc.figure_bytes > 0
    markdown = Path(pc.outputs["markdown"]).read_text()
    links = _LINK.findall(markdown)
    assert links == [("Figure 1: This is an example image.", "figures/p0001-1.png"),
                     ("Figure 2: This is an example image.", "figures/p0002-1.png")]
    for (_, target), (_, block) in zip(links, pictures, strict=True):
        crop = Path(pc.outputs["markdown"]).parent / target  # resolves from document.md
        with Image.open(crop) as image:  # rendered from the page at 150 dpi
            box = block.bbox
            assert abs(image.width - (box.x1 - box.x0) * 150 / 72) <= 2
            assert abs(image.height - (box.y1 - box.y0) * 150 / 72) <= 2

    first = {name: _files(Path(d.outputs["markdown"]).parent) for name, d in docs.items()}
    again = _run(_config(tmp_path, reprocess=True), sources, str(out))
    assert {name: _files(Path(d.outputs["markdown"]).parent)
            for name, d in again.items()} == first  # same files, same bytes, no more

    bare = _run(_config(tmp_path, figures={"mode": "none"}), sources, str(tmp_path / "bare"))
    for doc in bare.values():
        folder = Path(doc.outputs["markdown"]).parent
        assert not (folder / "figures").exists() and doc.figures == 0
        assert not _LINK.findall((folder / "document.md").read_text())
        assert len(_pictures(doc)) == 2 and all(b.image is None for _, b in _pictures(doc))
        assert "Figure 1: This is an example image." in (folder / "document.md").read_text()


@pytest.mark.corpus
def test_the_words_printed_inside_a_drawing_are_its_picture_s_not_body_text(
        corpus: Path, layout_model: Path, tmp_path: Path) -> None:
    docs = _run(_config(tmp_path), [str(corpus / "docling" / DOCS[1])], str(tmp_path / "out"))
    # the drawings' labels were eleven Figure blocks of a few words, and no image
    amt = docs["amt_handbook_sample.pdf"]
    blocks = [b for p in amt.pages for b in p.blocks]
    assert not [b for b in blocks if b.label == Label.FIGURE.value]
    inner = [b.content for _, b in _pictures(amt)]
    assert len(inner) == 2
    assert "Boots aircraft nut" in inner[0] and "Keyway" in inner[1]
    assert not [b for b in blocks if b.label != "Picture" and "Keyway" in b.content]
    assert len(_LINK.findall(Path(amt.outputs["markdown"]).read_text())) == 2


@pytest.mark.corpus
def test_crops_are_written_to_s3_beside_document_md_and_stale_ones_go(
        corpus: Path, layout_model: Path, tmp_path: Path, s3_server: S3Server,
        s3_bucket: str) -> None:
    s3 = s3_server.client
    config = _config(tmp_path, s3={
        "endpoint_url": s3_server.endpoint_url, "region": "us-east-1",
        "access_key_id": "test", "secret_access_key": "test"})
    source = str(corpus / "docling" / DOCS[0])
    (doc,) = _run(config, [source], f"s3://{s3_bucket}/out").values()
    folder = doc.outputs["markdown"].removeprefix(f"s3://{s3_bucket}/").rsplit("/", 1)[0]
    body = s3.get_object(Bucket=s3_bucket, Key=f"{folder}/document.md")["Body"].read().decode()
    targets = [target for _, target in _LINK.findall(body)]
    assert targets == ["figures/p0001-1.png", "figures/p0002-1.png"]
    for target in targets:  # every link resolves beside document.md, as an image
        head = s3.head_object(Bucket=s3_bucket, Key=f"{folder}/{target}")
        assert head["ContentType"] == "image/png"
        data = s3.get_object(Bucket=s3_bucket, Key=f"{folder}/{target}")["Body"].read()
        Image.open(io.BytesIO(data)).verify()
    assert doc.folder_uri == f"s3://{s3_bucket}/{folder}"  # what figure chunks point into

    stale = f"{folder}/figures/p0009-1.png"  # an earlier run's crop of a figure now gone
    s3.put_object(Bucket=s3_bucket, Key=stale, Body=b"old")
    _run(config.model_copy(update={"reprocess": True}), [source], f"s3://{s3_bucket}/out")
    keys = {o["Key"] for o in s3.list_objects_v2(
        Bucket=s3_bucket, Prefix=f"{folder}/figures/")["Contents"]}
    assert keys == {f"{folder}/{t}" for t in targets}


#: a Chandra 2 answer (boxes 0-1000) with an Image and a Figure div, as Chandra gives them
CHANDRA2_ANSWER = (
    '<div data-bbox="80 40 920 80" data-label="Section-Header"><h2>Figures Example</h2></div>'
    '<div data-bbox="80 90 920 300" data-label="Text"><p>Lorem ipsum dolor sit amet, '
    'consetetur sadipscing elitr, sed diam nonumy eirmod tempor.</p></div>'
    '<div data-bbox="200 380 800 650" data-label="Image"><img alt="A colourful example '
    'picture"/></div>'
    '<div data-bbox="370 665 630 680" data-label="Caption"><p>Figure 1: This is an example '
    'image.</p></div>'
    '<div data-bbox="100 700 500 950" data-label="Figure"><img alt="Bar chart"/></div>'
)


@pytest.mark.corpus
@pytest.mark.parametrize("fake", [{"output": CHANDRA2_ANSWER}], indirect=True)
def test_chandra_s_figure_links_resolve_to_crops_of_its_own_boxes(
        corpus: Path, fake: FakeServer, tmp_path: Path) -> None:
    config = _config(tmp_path, ocr={"engine": "openai", "endpoint": fake.url,
                                    "model": "fake-ocr", "preset": "chandra2"},
                     route={"mode": "ocr"})
    (doc,) = _run(config, [str(corpus / "docling" / DOCS[0])], str(tmp_path / "out")).values()
    document_md = Path(doc.outputs["markdown"])
    markdown = document_md.read_text()
    assert "_img.webp" not in markdown  # Chandra's names, which nothing ever wrote
    links = _LINK.findall(markdown)
    assert [text for text, _ in links] == [
        "Figure 1: This is an example image.", "Bar chart"] * doc.page_count
    pictures = _pictures(doc)
    assert len(pictures) == 2 * doc.page_count
    for (_, target), (index, block) in zip(links, pictures, strict=True):
        page = doc.pages[index]
        box = block.bbox
        # the crop is the answer's box, in page points, rendered at 150 dpi
        answer = (200, 380, 800, 650) if block.alt != "Bar chart" else (100, 700, 500, 950)
        expected = [answer[0] * page.width_pt / 1000, answer[1] * page.height_pt / 1000,
                    answer[2] * page.width_pt / 1000, answer[3] * page.height_pt / 1000]
        assert [box.x0, box.y0, box.x1, box.y1] == pytest.approx(expected)
        with Image.open(document_md.parent / target) as image:
            assert abs(image.width - (box.x1 - box.x0) * 150 / 72) <= 2
            assert abs(image.height - (box.y1 - box.y0) * 150 / 72) <= 2


#: an olmOCR 2 answer: its figure is ``![alt](...)`` with no box of its own
OLMOCR_ANSWER = (
    "---\nprimary_language: en\nis_rotation_valid: True\nrotation_correction: 0\n"
    "is_table: False\nis_diagram: False\n---\n# Figures Example\n\nLorem ipsum dolor sit "
    "amet.\n\n![An example picture](page_1_2.png)\n\nFigure 1: This is an example image.")


@pytest.mark.corpus
@pytest.mark.parametrize("fake", [{"output": OLMOCR_ANSWER}], indirect=True)
def test_olmocr_s_figures_are_placed_by_the_layout_model_and_cropped(
        corpus: Path, layout_model: Path, fake: FakeServer, tmp_path: Path) -> None:
    config = _config(tmp_path, ocr={"engine": "openai", "endpoint": fake.url,
                                    "model": "fake-ocr", "preset": "olmocr2"},
                     route={"mode": "ocr"})
    source = corpus / "docling" / DOCS[0]
    (doc,) = _run(config, [str(source)], str(tmp_path / "out")).values()
    truth = json.loads((corpus / "docling" / "groundtruth" / f"{source.stem}.json").read_text())
    for (index, block), picture in zip(_pictures(doc), truth["pictures"], strict=True):
        box, prov = block.bbox, picture["prov"][0]["bbox"]  # docling's, bottom-left origin
        height = doc.pages[index].height_pt
        assert block.alt == "An example picture" and block.image == f"figures/p000{index + 1}-1.png"
        assert _iou((box.x0, box.y0, box.x1, box.y1),
                    (prov["l"], height - prov["t"], prov["r"], height - prov["b"])) >= 0.5
    markdown = Path(doc.outputs["markdown"]).read_text()
    assert "page_1_2.png" not in markdown
    assert [t for _, t in _LINK.findall(markdown)] == ["figures/p0001-1.png", "figures/p0002-1.png"]


def _iou(a: tuple[float, ...], b: tuple[float, ...]) -> float:
    w, h = min(a[2], b[2]) - max(a[0], b[0]), min(a[3], b[3]) - max(a[1], b[1])
    inter = max(0.0, w) * max(0.0, h)
    return inter / ((a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter)
