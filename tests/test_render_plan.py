"""plan_page: pixel budget, small text, native scan resolution and the hard caps."""

from __future__ import annotations

import math

import pytest

from folio.errors import PageTooLargeError
from folio.models import RenderPlan
from folio.pdf.render_plan import MAX_SIDE_PX, plan_page
from folio.settings.config import RenderSettings

LETTER = (612.0, 792.0)


def plan(
    width: float,
    height: float,
    *,
    font: float | None = None,
    native: float | None = None,
    **settings: float,
) -> RenderPlan:
    return plan_page(
        width, height, min_font_pt=font, native_dpi=native, settings=RenderSettings(**settings)
    )


def test_budget_sets_longest_side() -> None:
    result = plan(*LETTER)
    assert result.height_px == 1600
    assert result.width_px == math.floor(612 * 1600 / 792)
    assert result.dpi == pytest.approx(1600 * 72 / 792)
    assert result.reason.startswith("budget 1600px")


def test_landscape_budget_applies_to_width() -> None:
    result = plan(792, 612, longest_side_px=1288)
    assert (result.width_px, result.height_px) == (1288, math.floor(612 * 1288 / 792))


def test_small_text_raises_dpi() -> None:
    # 6pt text at the 145dpi budget is 12px; asking for 16px needs 192dpi
    result = plan(*LETTER, font=6.0, min_text_px=16)
    assert result.dpi == pytest.approx(16 * 72 / 6)
    assert "small text 6.0pt" in result.reason
    assert result.height_px > 1600


def test_small_text_stops_at_max_dpi() -> None:
    result = plan(*LETTER, font=1.0, min_text_px=20, max_dpi=300, max_pixels=10**8)
    assert result.dpi == pytest.approx(300)
    assert "clamped" not in result.reason  # the text rule itself respects max_dpi


def test_large_text_does_not_lower_budget() -> None:
    assert plan(*LETTER, font=40.0).dpi == pytest.approx(plan(*LETTER).dpi)


def test_native_scan_dpi_caps_upsampling() -> None:
    result = plan(*LETTER, native=100.0)
    assert result.dpi == pytest.approx(100.0)
    assert "scan native 100dpi" in result.reason
    # the cap also wins over the small-text rule: the scan has no finer detail
    assert plan(*LETTER, font=5.0, native=100.0).dpi == pytest.approx(100.0)


def test_native_dpi_above_budget_changes_nothing() -> None:
    assert plan(*LETTER, native=600.0).dpi == pytest.approx(plan(*LETTER).dpi)


def test_low_native_dpi_still_reaches_min_dpi() -> None:
    result = plan(*LETTER, native=40.0, min_dpi=72.0)
    assert result.dpi == pytest.approx(72.0)


def test_tiny_page_is_clamped_to_max_dpi_and_has_pixels() -> None:
    result = plan(3.84, 3.84)  # the CCITT sample page in the corpus
    assert result.dpi == pytest.approx(300.0)
    assert "clamped" in result.reason
    assert result.width_px == result.height_px == 16


def test_huge_page_pixel_cap_wins_over_min_dpi() -> None:
    result = plan(8400, 8400, max_pixels=3072 * 2048)  # hugemono.pdf's page
    assert result.pixels <= 3072 * 2048
    assert result.dpi < 72.0
    assert "pixel cap" in result.reason


def test_extreme_aspect_ratio_hits_side_cap() -> None:
    result = plan(14400, 10, max_pixels=10**9, min_dpi=72)
    assert result.width_px == MAX_SIDE_PX
    assert result.height_px >= 1
    assert "side cap" in result.reason


@pytest.mark.parametrize("size", [(612, 792), (595.28, 841.89), (1, 14400), (7777.7, 3.3)])
@pytest.mark.parametrize("max_pixels", [1, 1000, 999_983, 3072 * 2048])
def test_pixel_cap_is_never_exceeded(size: tuple[float, float], max_pixels: int) -> None:
    result = plan(*size, font=2.0, max_pixels=max_pixels)
    assert result.pixels <= max(max_pixels, 1)
    assert result.width_px >= 1 and result.height_px >= 1
    assert max(result.width_px, result.height_px) <= MAX_SIDE_PX


@pytest.mark.parametrize(
    "size", [(612, 2.1e9), (0, 792), (-5, 792), (612, math.inf), (math.nan, 792), (14401, 10)]
)
def test_absurd_pages_are_rejected(size: tuple[float, float]) -> None:
    with pytest.raises(PageTooLargeError, match="outside"):
        plan(*size)


def test_page_at_the_size_limit_is_accepted() -> None:
    result = plan(14400, 14400)
    assert result.pixels <= RenderSettings().max_pixels


@pytest.mark.parametrize(("grid", "longest"), [(28, 1288), (32, 1600), (28, 2048)])
@pytest.mark.parametrize("page", [LETTER, (792.0, 612.0), (595.0, 842.0), (300.0, 2000.0)])
def test_on_a_model_grid_both_sides_are_whole_cells_within_the_caps(
    grid: int, longest: int, page: tuple[float, float]
) -> None:
    """The render is the size the model's processor would resize it to: whole grid cells,
    within a cell of the plain plan on each side, never over the pixel cap."""
    cap = longest * longest
    plain = plan(*page, longest_side_px=longest, max_pixels=cap)
    snapped = plan(*page, longest_side_px=longest, max_pixels=cap, grid_px=grid)
    assert snapped.width_px % grid == 0 and snapped.height_px % grid == 0
    assert abs(snapped.width_px - plain.width_px) <= grid
    assert abs(snapped.height_px - plain.height_px) <= grid
    assert snapped.width_px * snapped.height_px <= cap
    assert "grid" in snapped.reason and snapped.dpi == plain.dpi


def test_a_tiny_page_still_gets_one_grid_cell() -> None:
    result = plan(2.0, 2.0, longest_side_px=10, min_dpi=1, grid_px=28)
    assert (result.width_px, result.height_px) == (28, 28)


def test_a_preset_keeps_the_grid_the_user_set() -> None:
    from folio.settings.presets import get_preset

    settings = get_preset("generic").render_settings(RenderSettings(grid_px=28))
    assert settings.grid_px == 28 and settings.longest_side_px == 1600
    snapped = plan_page(*LETTER, min_font_pt=None, native_dpi=None, settings=settings)
    # letter at 1600 px is 1236 px wide; the processor's nearest multiple of 28 is 1232
    assert (snapped.width_px, snapped.height_px) == (1232, 1596)


def test_a_preset_with_a_reference_pipeline_gets_its_size_whatever_the_page() -> None:
    """olmOCR 2 saw every page at 1288 px on its longest side, Chandra 2 at 192 DPI or
    more fitted to its grid: small text and a coarse scan change nothing (they would in
    the adaptive plan), a user's grid neither; only the memory caps can shrink it."""
    from folio.settings.presets import get_preset

    olm = get_preset("olmocr2").render_settings(RenderSettings(grid_px=28))
    for font, native in ((None, None), (4.0, None), (None, 100.0)):
        plan = plan_page(*LETTER, min_font_pt=font, native_dpi=native, settings=olm)
        assert (plan.width_px, plan.height_px) == (996, 1288), plan.reason
    chandra = get_preset("chandra2").render_settings()
    plan = plan_page(*LETTER, min_font_pt=None, native_dpi=100.0, settings=chandra)
    assert (plan.width_px, plan.height_px) == (1624, 2100)  # a 100-DPI scan is upsampled
    tabloid = plan_page(792, 1224, min_font_pt=None, native_dpi=None, settings=chandra)
    assert tabloid.width_px * tabloid.height_px <= 3072 * 2048 and tabloid.width_px % 28 == 0
    capped = plan_page(*LETTER, min_font_pt=None, native_dpi=None,
                       settings=chandra.model_copy(update={"max_pixels": 1_000_000}))
    assert capped.width_px * capped.height_px <= 1_000_000 and "pixel caps" in capped.reason
