"""Figures of image inputs (issue 55): a page photographed or scanned to PNG has its
figures cropped from the image's own pixels, at its own resolution, linked from
document.md, counted in the report and pointed at by their chunks, on a local folder and
on S3 (moto's standalone server)."""

from __future__ import annotations

import re
from pathlib import Path

import pypdfium2 as pdfium
import pytest
from PIL import Image, ImageChops

from folio.figures.crops import CropSpec
from folio.formats.image_crops import crop_box_px
from folio.models import BBox, DocumentResult
from folio.output.chunking import chunk_document
from folio.settings.config import ChunkSettings
from tests.s3_server import S3Server
from tests.test_figures_pipeline import _config, _pictures, _run

_LINK = re.compile(r"!\[([^\n]*?)\]\(([^)]*)\)")
DPI = 200


def _page_png(corpus: Path, folder: Path) -> Path:
    """picture_classification.pdf's first page as a 200-dpi PNG (tagged), as a scan."""
    pdf = pdfium.PdfDocument(corpus / "docling" / "picture_classification.pdf")
    try:
        image = pdf[0].render(scale=DPI / 72).to_pil().convert("RGB")
    finally:
        pdf.close()
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "scan.png"
    image.save(path, dpi=(DPI, DPI))
    return path


def test_crop_box_maps_points_to_the_frame_s_pixels() -> None:
    spec = CropSpec(page=0, bbox=BBox(x0=72, y0=36, x1=144, y1=900), stem="p0001-1")
    assert crop_box_px(spec, (1700, 2200), (200.0, 200.0)) == (200, 100, 400, 2200)
    off = CropSpec(page=0, bbox=BBox(x0=900, y0=0, x1=950, y1=10), stem="x")
    assert crop_box_px(off, (1700, 2200), (200.0, 200.0)) is None


def _check_crop(doc: DocumentResult, scan: Path, crop: Path) -> None:
    (_, block), = _pictures(doc)
    assert block.bbox is not None
    with Image.open(crop) as got, Image.open(scan) as page:
        box = crop_box_px(CropSpec(page=0, bbox=block.bbox, stem="x"), page.size,
                          (float(DPI), float(DPI)))
        assert box is not None and got.size == (box[2] - box[0], box[3] - box[1])
        if crop.suffix == ".png":  # lossless: the image's own pixels, untouched
            diff = ImageChops.difference(got.convert("RGB"), page.crop(box).convert("RGB"))
            assert diff.getbbox() is None


@pytest.mark.corpus
def test_an_image_input_s_figure_is_cropped_linked_counted_and_chunked(
        corpus: Path, layout_model: Path, tmp_path: Path) -> None:
    scan = _page_png(corpus, tmp_path / "in")
    (doc,) = _run(_config(tmp_path), [str(scan)], str(tmp_path / "out")).values()
    (_, block), = _pictures(doc)
    assert block.image is not None and block.image.startswith("figures/p0001-1.")
    assert doc.figures == 1 and doc.figure_bytes > 0
    markdown = Path(doc.outputs["markdown"])
    links = _LINK.findall(markdown.read_text())
    assert [target for _, target in links] == [block.image]
    _check_crop(doc, scan, markdown.parent / block.image)
    figure_chunks = [c for c in chunk_document(doc, ChunkSettings()) if c.kind == "figure"]
    assert [c.image_uri for c in figure_chunks] == [f"{doc.folder_uri}/{block.image}"]


@pytest.mark.corpus
def test_an_image_input_s_figure_crops_go_to_s3(
        corpus: Path, layout_model: Path, tmp_path: Path, s3_server: S3Server,
        s3_bucket: str) -> None:
    scan = _page_png(corpus, tmp_path / "in")
    s3 = s3_server.client
    s3.upload_file(str(scan), s3_bucket, "in/scan.png")
    config = _config(tmp_path, s3={
        "endpoint_url": s3_server.endpoint_url, "region": "us-east-1",
        "access_key_id": "test", "secret_access_key": "test"})
    (doc,) = _run(config, [f"s3://{s3_bucket}/in/scan.png"], f"s3://{s3_bucket}/out").values()
    folder = doc.outputs["markdown"].removeprefix(f"s3://{s3_bucket}/").rsplit("/", 1)[0]
    body = s3.get_object(Bucket=s3_bucket, Key=f"{folder}/document.md")["Body"].read().decode()
    (_, target), = _LINK.findall(body)
    data = s3.get_object(Bucket=s3_bucket, Key=f"{folder}/{target}")["Body"].read()
    local = tmp_path / Path(target).name
    local.write_bytes(data)
    _check_crop(doc, scan, local)
    assert doc.figures == 1 and doc.folder_uri == f"s3://{s3_bucket}/{folder}"
    (chunk,) = [c for c in chunk_document(doc, ChunkSettings()) if c.kind == "figure"]
    assert chunk.image_uri == f"s3://{s3_bucket}/{folder}/{target}"
