"""What the widget draws, read back in a real JupyterLab + Chromium at a 1600×1000 window.

The demo notebook is opened and fitted ONCE (module fixture). First the pixels: the
scan canvas read back (getImageData) is the kernel's frame of the parameters on
screen drawn through matplotlib's colormap table under the contrast limits the test
sets (gray: black where the phase is lowest, white where highest; viridis and
twilight through their own tables; the colour bar with the same ends, the highest at
the top); a lower maximum whitens exactly the pixels whose phase reaches it. Then
the layout, with three regions drawn: with the widget scrolled to the top of the
notebook, the scan image, every parameter's slider and value, the status, the fit
progress bar (while the fit runs), the cancel button and the selected region's crop
lie inside the visible notebook area; the colour bar stands beside the image; the
regions are a gallery (the selected one large, the others thumbnails that select
theirs on a click); nothing overlaps. Then in a 900 px wide cell nothing overflows the widget
horizontally and its parts still do not overlap. Screenshots: test-artifacts/layout-*.png.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest

pytestmark = [pytest.mark.browser, pytest.mark.slow]

from lab import (  # noqa: E402
    ARTIFACTS,
    canvas_pixels_digest,
    click_fft_brightest,
    drag_scan,
    fitted_demo,
    label,
    preview_state,
    require_lab_stack,
    run_json,
    show_canvas,
    wait_crop,
    wait_status,
)
from pixels import (  # noqa: E402
    GRAY_ENDS,
    VIRIDIS_ENDS,
    at_frame_pixels,
    box_in_viewport,
    canvas_rgb,
    colormap_table,
    frame_truth,
    index_error,
    lut_index,
    overflowing,
    overlapping,
)

if TYPE_CHECKING:
    from lab import Lab
    from playwright.sync_api import Locator, Page

require_lab_stack()

WINDOW = (1600, 1000)
CELL_PX = 900
FIT_PARAMETERS = ("C10", "C12", "phi12", "tilt_row_mrad", "tilt_col_mrad", "depth")
REGIONS = {"r1": (20, 76, 4, 30), "r2": (20, 76, 66, 92), "r3": (40, 70, 35, 60)}
SEEN: dict[str, Any] = {}  # the progress bar as seen while the fit ran
PARTS = ".livessb-layout > *"  # the grid's items: image column, lists, side, gallery
ROWS = ".livessb-main > *, .livessb-side > *, .livessb-state > *, .livessb-gallery > *"


def to_top(root: Locator) -> None:
    """The widget's top at the top of the notebook panel, as a user scrolls to it."""
    root.evaluate("el => el.scrollIntoView({block: 'start'})")
    root.page.wait_for_timeout(200)


def visible_bottom(page: Page) -> float:
    """The bottom of the notebook's scrolled area (JupyterLab's status bar is below it)."""
    bottom: float = page.evaluate(
        "() => window.jupyterapp.shell.currentWidget.content.node.getBoundingClientRect().bottom")
    return bottom


def _while_fitting(root: Locator) -> None:
    bar = root.get_by_role("progressbar", name="fit progress", exact=True)
    bar.wait_for(state="visible", timeout=300_000)
    to_top(root)
    SEEN["bar"] = bar.bounding_box()
    SEEN["cancel"] = label(root, "cancel").bounding_box()
    SEEN["bottom"] = visible_bottom(root.page)


@pytest.fixture(scope="module")
def ui(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Page, Lab, Locator]]:
    root_dir = tmp_path_factory.mktemp("widget-drawn") / "lab"
    with fitted_demo(root_dir, "widget-drawn", while_fitting=_while_fitting,
                     viewport=WINDOW) as ui:
        yield ui


@pytest.fixture(scope="module")
def regions(ui: tuple[Page, Lab, Locator]) -> tuple[Page, Locator]:
    """The widget with three regions drawn and fitted (r3, the last, selected)."""
    page, _lab, root = ui
    shape = tuple(run_json(page, "list(w.scan_shape)"))
    for rid, (a, b, c, d) in REGIONS.items():
        drag_scan(page, root, (a + 0.2, c + 0.2), (b - 0.2, d - 0.2), shape)
        wait_crop(root, rid, 1)
    wait_status(root, "done")
    return page, root


# ------------------------------------------------------------------------- pixels

def drawn_check(page: Page, lab: Lab, root: Locator, colormap: str, lo: float, hi: float
                ) -> tuple[np.ndarray, np.ndarray]:
    """The scan canvas at each frame pixel and the kernel's frame values of the params on
    screen; asserts that the canvas is that frame drawn through ``colormap`` under
    [lo, hi] (each pixel the colour of its value, within the uint16 transport's rounding)."""
    truth = frame_truth(page, lab.root, preview_state(root)["params"], "frame-truth")
    drawn = at_frame_pixels(canvas_rgb(label(root, "scan image")), *truth.shape)
    off = index_error(drawn, colormap_table(colormap), lut_index(truth, lo, hi),
                      cyclic=colormap == "twilight")
    assert (off == 0).mean() > 0.98 and off.max() <= 2, np.bincount(off.ravel())
    return drawn, truth


def set_limits(root: Locator, lo: float, hi: float) -> None:
    label(root, "contrast min").fill(str(lo))
    label(root, "contrast max").fill(str(hi))
    label(root, "contrast max").press("Tab")  # change event


def limits_5_95(page: Page, lab: Lab, root: Locator) -> tuple[float, float]:
    """The 5th and 95th percentiles of the frame on screen (rad, 4 decimals)."""
    truth = frame_truth(page, lab.root, preview_state(root)["params"], "frame-truth")
    lo, hi = np.percentile(truth, [5, 95])
    return round(float(lo), 4), round(float(hi), 4)


def test_canvas_draws_the_frame_values(ui: tuple[Page, Lab, Locator]) -> None:
    """Gray under limits the test sets: black where the phase is lowest, white where it
    is highest, every pixel the gray level of its value."""
    page, lab, root = ui
    lo, hi = limits_5_95(page, lab, root)
    set_limits(root, lo, hi)
    drawn, truth = drawn_check(page, lab, root, "gray", lo, hi)
    darkest = np.unravel_index(np.argmin(truth), truth.shape)
    brightest = np.unravel_index(np.argmax(truth), truth.shape)
    assert tuple(drawn[darkest]) == GRAY_ENDS[0] and tuple(drawn[brightest]) == GRAY_ENDS[1]
    assert (drawn[truth <= lo] == 0).all() and (drawn[truth >= hi] == 255).all()
    label(root, "auto contrast").click()


def test_colormap_repaints(ui: tuple[Page, Lab, Locator]) -> None:
    """Each colormap draws the frame through its own table (matplotlib's): viridis from
    its dark violet to its yellow, gray from black to white, twilight's ends alike; the
    colour bar beside the image shows the same ends (its highest at the top)."""
    page, lab, root = ui
    before = canvas_pixels_digest(root, "scan image")
    lo, hi = limits_5_95(page, lab, root)
    set_limits(root, lo, hi)
    label(root, "colormap").select_option("viridis")  # repainted in the browser, no round trip
    drawn, truth = drawn_check(page, lab, root, "viridis", lo, hi)
    assert {tuple(c) for c in drawn[truth <= lo]} == {VIRIDIS_ENDS[0]}
    assert {tuple(c) for c in drawn[truth >= hi]} == {VIRIDIS_ENDS[1]}
    bar = canvas_rgb(label(root, "colour bar").locator("canvas"))
    assert tuple(bar[0, 0]) == VIRIDIS_ENDS[1] and tuple(bar[-1, 0]) == VIRIDIS_ENDS[0]
    show_canvas(root)
    root.screenshot(path=str(ARTIFACTS / "12-viridis-widget.png"))
    label(root, "colormap").select_option("twilight")
    drawn, truth = drawn_check(page, lab, root, "twilight", lo, hi)
    low, high = drawn[truth <= lo].astype(int), drawn[truth >= hi].astype(int)
    assert np.abs(low.mean(0) - high.mean(0)).max() < 40  # a cyclic map: its ends meet
    label(root, "colormap").select_option("gray")
    bar = canvas_rgb(label(root, "colour bar").locator("canvas"))
    assert tuple(bar[0, 0]) == GRAY_ENDS[1] and tuple(bar[-1, 0]) == GRAY_ENDS[0]
    label(root, "auto contrast").click()
    assert canvas_pixels_digest(root, "scan image") == before


def test_manual_contrast_over_the_histogram(ui: tuple[Page, Lab, Locator]) -> None:
    """A lower maximum whitens exactly the pixels whose phase reaches it."""
    page, lab, root = ui
    auto = canvas_pixels_digest(root, "scan image")
    assert label(root, "histogram").is_visible()
    hist = canvas_pixels_digest(root, "histogram")
    lo, hi = limits_5_95(page, lab, root)
    mid = round(lo + 0.5 * (hi - lo), 4)
    set_limits(root, lo, mid)
    drawn, truth = drawn_check(page, lab, root, "gray", lo, mid)
    white = (drawn == 255).all(-1)
    assert white.mean() == pytest.approx((truth >= mid).mean(), abs=0.005)
    assert white.mean() > 0.05  # the limit moved into the values: many pixels saturate
    assert canvas_pixels_digest(root, "histogram") != hist  # the limit markers moved
    label(root, "auto contrast").click()
    assert canvas_pixels_digest(root, "scan image") == auto


# ------------------------------------------------------------------------- layout

def test_everything_needed_is_visible_without_scrolling(regions: tuple[Page, Locator]) -> None:
    page, root = regions
    to_top(root)
    viewport = page.viewport_size
    assert viewport is not None
    bottom = visible_bottom(page)
    page.screenshot(path=str(ARTIFACTS / "layout-1600x1000.png"))
    must_see = ["scan image", "colour bar", "widget status", "full-field fit", "cancel",
                "reset to fit", "colormap", "histogram", "region crop r3"]
    must_see += [f"{p} slider" for p in FIT_PARAMETERS] + [f"{p} value" for p in FIT_PARAMETERS]
    hidden = {name: label(root, name).bounding_box() for name in must_see
              if not box_in_viewport(label(root, name).bounding_box(), viewport, bottom)}
    assert not hidden, (hidden, bottom)
    # the progress bar and cancel as they were while the fit ran
    assert box_in_viewport(SEEN["bar"], viewport, SEEN["bottom"]), SEEN
    assert box_in_viewport(SEEN["cancel"], viewport, SEEN["bottom"]), SEEN
    assert not overlapping(root, PARTS) and not overlapping(root, ROWS)
    widget = root.bounding_box()
    assert widget is not None and widget["x"] + widget["width"] <= viewport["width"]


def test_colour_bar_stands_beside_the_image(regions: tuple[Page, Locator]) -> None:
    _page, root = regions
    image, bar = label(root, "scan image").bounding_box(), label(root, "colour bar").bounding_box()
    assert image is not None and bar is not None
    gap = bar["x"] - (image["x"] + image["width"])
    assert 0 <= gap <= 16, (image, bar)  # to its right
    assert bar["y"] >= image["y"] - 1
    assert bar["y"] + bar["height"] <= image["y"] + image["height"] + 20
    assert bar["height"] >= 0.9 * image["height"], (image, bar)  # as tall as the image


def test_regions_are_a_gallery_selected_large(regions: tuple[Page, Locator]) -> None:
    page, root = regions
    to_top(root)

    def width(rid: str) -> float:
        box = label(root, f"region crop {rid}").bounding_box()
        assert box is not None
        return box["width"]

    assert width("r3") > 2 * max(width("r1"), width("r2"))  # the newest, selected, large
    label(root, "region panel r1").click()  # its thumbnail
    page.wait_for_function(
        "(root) => root.querySelector('[data-region-id=\"r1\"]').classList.contains('featured')",
        arg=root.element_handle())
    assert "selected" in (label(root, "region panel r1").get_attribute("class") or "")
    assert width("r1") > 2 * max(width("r2"), width("r3"))
    viewport = page.viewport_size
    assert viewport is not None
    for rid in REGIONS:  # the large crop and every thumbnail on screen
        assert box_in_viewport(label(root, f"region crop {rid}").bounding_box(), viewport,
                               visible_bottom(page)), rid
    page.screenshot(path=str(ARTIFACTS / "layout-1600x1000-r1.png"))


def test_fft_and_its_read_out_fit_too(regions: tuple[Page, Locator]) -> None:
    page, root = regions
    click_fft_brightest(page, root)
    to_top(root)
    viewport = page.viewport_size
    assert viewport is not None
    bottom = visible_bottom(page)
    for name in ("FFT image", "d-spacing", "scan image", "C10 slider"):
        assert box_in_viewport(label(root, name).bounding_box(), viewport, bottom), name
    assert not overlapping(root, PARTS)
    page.screenshot(path=str(ARTIFACTS / "layout-1600x1000-fft.png"))
    label(root, "FFT view").click()


def test_a_900px_cell_has_nothing_off_screen_or_overlapping(regions: tuple[Page, Locator]) -> None:
    page, root = regions
    viewport = page.viewport_size
    assert viewport is not None
    output = root.evaluate(
        "el => el.closest('.jp-OutputArea-output').getBoundingClientRect().width")
    page.set_viewport_size({"width": int(viewport["width"] - output + CELL_PX),
                            "height": viewport["height"]})
    try:
        page.wait_for_timeout(300)
        widget = root.bounding_box()
        assert widget is not None and abs(widget["width"] - CELL_PX) <= 2, widget
        to_top(root)
        page.screenshot(path=str(ARTIFACTS / "layout-900px-cell.png"))
        report = overflowing(root)
        assert not report["out"], report
        assert report["scrollWidth"] <= report["clientWidth"], report
        assert not overlapping(root, PARTS) and not overlapping(root, ROWS)
        for name in ("scan image", "colour bar", "C10 slider", "region crop r1"):
            box = label(root, name).bounding_box()
            right = widget["x"] + widget["width"]
            assert box is not None and box["x"] + box["width"] <= right, name
    finally:
        page.set_viewport_size(viewport)
