"""Images as documents: folio.formats.images (decoding, guards, orientation, resolution)
and folio.formats.image_pages (the page worker child's pages of an image file), on files
Pillow writes here."""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from folio.errors import BadImageError, PageTooLargeError
from folio.formats.image_pages import model_image_px, page_plan
from folio.formats.images import frame_count, load_frame, open_image, resolution
from folio.pdf.model_image import chandra_fit
from folio.pdf.page_worker import WorkerJob, prepare_pages, probe
from folio.settings.config import RenderSettings, RouteSettings

CAP = 180_000_000


def test_resolution_from_plausible_tags_else_estimated_from_the_pixels() -> None:
    assert resolution(2480, 3508, (300.0, 300.0))[0] == (300.0, 300.0)
    assert resolution(1728, 1078, (204.0, 98.0))[0] == (204.0, 98.0)  # a fax's tags
    (dx, dy), why = resolution(1700, 2200, None)
    assert dx == dy == pytest.approx(200.0) and "estimated" in why
    (dx, _), why = resolution(4032, 3024, (72.0, 72.0))  # a camera's default tag
    assert dx == pytest.approx(4032 / 11) and "default" in why
    assert resolution(300, 200, None)[0] == (72.0, 72.0)  # a thumbnail is no stamp


def test_the_plan_keeps_the_images_own_pixels_and_never_upsamples_a_scan() -> None:
    own = RenderSettings(longest_side_px=2200)
    width_pt, height_pt, plan = page_plan(1700, 2200, (200.0, 200.0), own)
    assert (width_pt, height_pt) == (612.0, 792.0)  # pixels x 72 / dpi
    assert (plan.width_px, plan.height_px, plan.dpi) == (1700, 2200, 200.0)
    budget = page_plan(1700, 2200, (200.0, 200.0), RenderSettings())[2]
    assert (budget.width_px, budget.height_px) == (1236, 1600)  # as for a PDF scan page
    big = page_plan(1700, 2200, (200.0, 200.0), RenderSettings(longest_side_px=4000))[2]
    assert (big.width_px, big.height_px) == (1700, 2200) and "no upsampling" in big.reason


def test_gpu_presets_get_their_reference_size_from_the_image_pixels() -> None:
    assert model_image_px("olmocr", 1700, 2200) == (996, 1288)
    assert model_image_px("olmocr", 3000, 1000) == (1288, 430)
    assert model_image_px("chandra2", 1700, 2200) == chandra_fit(1700, 2200, 2)
    plan = page_plan(1700, 2200, (200.0, 200.0), RenderSettings(model_sizing="olmocr"))[2]
    assert (plan.width_px, plan.height_px) == (996, 1288)
    tiny = page_plan(400, 300, (72.0, 72.0), RenderSettings(model_sizing="chandra1"))[2]
    assert (tiny.width_px, tiny.height_px) == (400, 300)  # Chandra 1 leaves it as it is


def test_exif_orientation_is_applied_before_anything_reads_the_pixels(tmp_path: Path) -> None:
    stored = Image.new("L", (60, 40), 255)
    stored.paste(0, (0, 0, 30, 40))  # the left half dark, as stored
    exif = Image.Exif()
    exif[0x0112] = 6  # "turn 90 degrees clockwise to view"
    path = tmp_path / "photo.jpg"
    stored.save(path, "JPEG", quality=95, exif=exif, dpi=(300, 150))
    with open_image(path, CAP) as image:
        frame, dpi = load_frame(image, 0, CAP)
    assert frame.size == (40, 60)
    pixels = np.asarray(frame)
    assert pixels[:30].mean() < 40 and pixels[30:].mean() > 215  # the dark half is on top
    assert dpi == (150.0, 300.0)  # the axes' tags turned with it


def test_every_tiff_page_is_a_page_and_a_gif_gives_its_first_frame(tmp_path: Path) -> None:
    pages = [Image.new("1", (200 + 10 * i, 300), 1) for i in range(3)]
    tiff = tmp_path / "scan.tif"
    pages[0].save(tiff, save_all=True, append_images=pages[1:], compression="group4",
                  dpi=(200, 200))
    with open_image(tiff, CAP) as image:
        assert frame_count(image) == 3
        frame, dpi = load_frame(image, 2, CAP)
        assert frame.size == (220, 300) and frame.mode == "L" and dpi == (200.0, 200.0)
    gif = tmp_path / "anim.gif"
    frames = [Image.new("P", (20, 20), i) for i in range(3)]
    frames[0].save(gif, save_all=True, append_images=frames[1:])
    with open_image(gif, CAP) as image:
        assert frame_count(image) == 1


@pytest.mark.parametrize("mode", ["1", "I;16", "P", "RGBA", "LA", "CMYK", "RGB"])
def test_every_mode_becomes_eight_bit_grey_or_rgb(tmp_path: Path, mode: str) -> None:
    fmt = "TIFF" if mode in ("CMYK", "I;16") else "PNG"
    image = Image.new(mode, (16, 16))
    if mode == "I;16":
        image = Image.fromarray(np.full((16, 16), 32768, dtype=np.uint16))
    path = tmp_path / f"x.{fmt.lower()}"
    image.save(path, fmt)
    with open_image(path, CAP) as opened:
        frame, _ = load_frame(opened, 0, CAP)
    assert frame.mode in ("L", "RGB")
    if mode == "I;16":  # mid-grey stays mid-grey (Pillow's own conversion clips to white)
        assert 120 <= np.asarray(frame).mean() <= 135
    if mode in ("RGBA", "LA"):  # transparent is laid on white paper
        assert np.asarray(frame).min() == 255


def _png_header_only(path: Path, width: int, height: int) -> Path:
    """A PNG whose header claims ``width`` x ``height`` with almost no data: a bomb's
    shape, cheap to write."""
    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(
            ">I", zlib.crc32(kind + body) & 0xFFFFFFFF)
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr)
                     + chunk(b"IDAT", zlib.compress(b"\x00" * 64)) + chunk(b"IEND", b""))
    return path


def test_bombs_and_absurd_sizes_are_refused_before_decoding(tmp_path: Path) -> None:
    bomb = _png_header_only(tmp_path / "bomb.png", 100_000, 100_000)
    with pytest.raises(PageTooLargeError, match="pixel limit"), open_image(bomb, CAP):
        pass
    small = tmp_path / "small.png"
    Image.new("L", (100, 100)).save(small)
    with pytest.raises(PageTooLargeError), open_image(small, 5_000):
        pass
    with open_image(small, 20_000) as image:  # within folio's cap: read
        assert image.size == (100, 100)


def test_truncated_and_corrupt_files_are_typed(tmp_path: Path) -> None:
    noise = np.random.default_rng(3).integers(0, 255, (300, 300, 3), dtype=np.uint8)
    whole = tmp_path / "whole.jpg"
    Image.fromarray(noise).save(whole, "JPEG")
    cut = tmp_path / "cut.jpg"
    cut.write_bytes(whole.read_bytes()[: whole.stat().st_size // 2])
    with open_image(cut, CAP) as image, pytest.raises(BadImageError, match="truncated"):
        load_frame(image, 0, CAP)
    corrupt = tmp_path / "corrupt.png"
    corrupt.write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4)
    with pytest.raises(BadImageError), open_image(corrupt, CAP):
        pass


def _job(path: Path, out_dir: Path, pages: list[int], **render: object) -> WorkerJob:
    return WorkerJob(pdf=path, kind="image", pages=pages, out_dir=out_dir,
                     render_settings=RenderSettings.model_validate(render),
                     route_settings=RouteSettings(), timeout_s=60, memory_mb=1024)


def test_the_page_worker_child_prepares_an_image_files_pages(tmp_path: Path) -> None:
    """Each TIFF page a PagePrep: sized in points from its pixels and DPI, its own pixels
    saved for the engine (the plan is the image's size), no text layer, blank judged."""
    ink = Image.new("L", (400, 500), 255)
    ink.paste(0, (50, 50, 350, 80))
    pages = [ink, Image.new("L", (400, 500), 255)]
    tiff = tmp_path / "two.tif"
    pages[0].save(tiff, save_all=True, append_images=pages[1:], compression="tiff_lzw",
                  dpi=(100, 100))
    info = probe(tiff, None, 60, 1024, kind="image")
    assert info.page_count == 2 and info.max_page_pt == pytest.approx(360.0)
    preps = list(prepare_pages(_job(tiff, tmp_path / "out", [0, 1], longest_side_px=600)))
    assert [p.index for p in preps] == [0, 1] and not any(p.error for p in preps)
    first = preps[0]
    assert (first.width_pt, first.height_pt) == (288.0, 360.0)
    assert first.plan is not None and (first.plan.width_px, first.plan.height_px) == (400, 500)
    assert first.image_path is not None
    with Image.open(first.image_path) as saved:
        assert saved.size == (400, 500)
        assert np.array_equal(np.asarray(saved.convert("L")), np.asarray(ink))  # lossless
    assert first.text_layer is not None and not first.text_layer.trusted
    assert not first.blank and preps[1].blank


def test_the_child_types_what_it_cannot_read(tmp_path: Path) -> None:
    bomb = _png_header_only(tmp_path / "bomb.png", 100_000, 100_000)
    with pytest.raises(PageTooLargeError):
        probe(bomb, None, 60, 1024, kind="image")
    noise = np.random.default_rng(5).integers(0, 255, (400, 400), dtype=np.uint8)
    whole = tmp_path / "whole.png"
    Image.fromarray(noise).save(whole)
    cut = tmp_path / "cut.png"
    cut.write_bytes(whole.read_bytes()[: whole.stat().st_size // 2])
    (page,) = prepare_pages(_job(cut, tmp_path / "out", [0]))
    assert page.error is not None and page.error.startswith("bad-image:")
    garbage = tmp_path / "garbage.png"
    garbage.write_bytes(b"\x89PNG\r\n\x1a\n" + b"\x00" * 64)
    with pytest.raises(BadImageError):
        probe(garbage, None, 60, 1024, kind="image")
