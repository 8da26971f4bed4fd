"""The trust readouts and the map overlay in a real JupyterLab + Chromium.

The demo notebook is opened and fitted ONCE (module fixture). The demo is untilted and
of zero depth, so the thin model is kept: the full-field readout shows C10 as
"value ± error" and both tilts and the depth as "not determined". Then "fit map" with
32² tiles (trials reduced through the widget's ``trials``, 2 CPU cores) paints the
chosen parameter's tiles over the scan (read back from the canvas: each tile's colour,
unblended from the image under it, is the viridis entry of its C10, and it grows from
left to right as the demo's defocus gradient does), "none" takes them off again. Screenshots go to
test-artifacts/ (maps-*.png).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import numpy as np
import pytest

pytestmark = [pytest.mark.browser, pytest.mark.slow]

from lab import (  # noqa: E402
    ARTIFACTS,
    canvas_pixels_digest,
    fitted_demo,
    require_lab_stack,
    run_code,
    run_json,
    show_canvas,
    wait_status,
)
from pixels import canvas_rgb, colormap_table, overlay_indices  # noqa: E402

if TYPE_CHECKING:
    from playwright.sync_api import Locator, Page

require_lab_stack()

MAP_TILE = 32  # the demo's 96² scan: 3×3 tiles
MAP_TRIALS = 40
OVERLAY_ALPHA = 0.55  # js/overlay.ts: the tiles over the image
DEMO_C10_GRADIENT_A_PER_COL = 0.8  # livessb.simulate.demo: C10 grows from left to right


@pytest.fixture(scope="module")
def ui(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Page, Locator]]:
    root_dir = tmp_path_factory.mktemp("widget-maps") / "lab"
    with fitted_demo(root_dir, "widget-maps") as (page, _lab, root):
        yield page, root


def readout_text(root: Locator, name: str) -> str:
    return root.locator(f'.livessb-readout [data-param="{name}"]').inner_text()


def test_readout_shows_errors_and_not_determined(ui: tuple[Page, Locator]) -> None:
    _page, root = ui
    c10 = readout_text(root, "C10")
    assert "±" in c10 and c10.endswith("Å"), c10
    for name in ("tilt_row_mrad", "tilt_col_mrad", "depth"):
        assert readout_text(root, name).endswith("not determined"), readout_text(root, name)
    assert readout_text(root, "model") == "thin model"
    root.get_by_label("full-field fit", exact=True).evaluate(
        "el => el.scrollIntoView({block: 'center'})")
    root.screenshot(path=str(ARTIFACTS / "maps-01-readout-widget.png"))


def test_fit_map_paints_overlay_and_none_removes_it(ui: tuple[Page, Locator]) -> None:
    page, root = ui
    show_canvas(root)
    before = canvas_pixels_digest(root, "scan image")
    before_rgb = canvas_rgb(root.get_by_label("scan image", exact=True))
    run_code(page, f"w.trials = {MAP_TRIALS}")
    root.get_by_label("map tile", exact=True).fill(str(MAP_TILE))
    root.get_by_label("fit map", exact=True).click()
    bar = root.get_by_role("progressbar", name="fit progress", exact=True)
    bar.wait_for(state="visible", timeout=60_000)
    wait_status(root, "done", timeout_ms=600_000)
    panel = root.locator(".livessb-map")
    panel.locator("xpath=self::*[@data-parameter='C10']").wait_for(timeout=60_000)
    assert panel.get_attribute("data-tiles") == "9"
    options = root.get_by_label("map parameter", exact=True).locator("option").all_inner_texts()
    assert options[0] == "map: none" and "C10" in options, options
    legend = root.get_by_label("map legend", exact=True).inner_text()
    assert "Å" in legend, legend
    page.evaluate("() => new Promise((r) => requestAnimationFrame(() => setTimeout(r, 50)))")
    painted = canvas_pixels_digest(root, "scan image")
    assert painted != before
    ov = run_json(page, "w.map_overlays['overlays']['C10']")
    values, centres = np.array(ov["values"], dtype=float), np.array(ov["centers_px"], dtype=float)
    shape = tuple(run_json(page, "list(w.scan_shape)"))
    drawn = overlay_indices(before_rgb, canvas_rgb(root.get_by_label("scan image", exact=True)),
                            centres, shape, OVERLAY_ALPHA, colormap_table("viridis"))
    want = np.round(255 * (values - values.min()) / (values.max() - values.min()))
    assert np.abs(drawn - want).max() <= 3, (drawn, want)  # each tile: its value's colour
    assert (np.diff(drawn, axis=1) > 0).all(), drawn  # along the defocus gradient
    step_A = np.diff(values, axis=1) / np.diff(centres[..., 1], axis=1)
    assert step_A == pytest.approx(DEMO_C10_GRADIENT_A_PER_COL, abs=0.1), step_A
    show_canvas(root)
    root.screenshot(path=str(ARTIFACTS / "maps-02-overlay-C10-widget.png"))

    root.get_by_label("map parameter", exact=True).select_option("tilt_row_mrad")
    legend = root.get_by_label("map legend", exact=True).inner_text()
    flags = run_json(page, "w.map_overlays['overlays']['tilt_row_mrad']['undetermined']")
    hatched = sum(v for row in flags for v in row)
    assert hatched > 0, flags  # thin tiles: their tilt is not determined
    assert f"not determined: {hatched}" in legend, legend
    root.screenshot(path=str(ARTIFACTS / "maps-03-overlay-tilt-widget.png"))

    root.get_by_label("map parameter", exact=True).select_option("none")
    page.evaluate("() => new Promise((r) => requestAnimationFrame(() => setTimeout(r, 50)))")
    assert root.get_by_label("map legend", exact=True).is_hidden()
    assert canvas_pixels_digest(root, "scan image") == before
