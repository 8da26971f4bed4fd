"""Cancel in a real JupyterLab + Chromium (issue 21 item 3).

The demo notebook is opened and fitted once, with one region. "fit map" is started
with its button and stopped with `aria-label="cancel"` after its first tile: the root
returns to `data-status="done"` (as before the map), carries `data-cancelled="map"`,
the phase image and the region's crop are as they were and no overlay is drawn. Then
a full refit started from Python is stopped with Esc, the pointer over the widget and
the focus in the notebook: `data-cancelled="fit"`, the fit on screen unchanged.
Screenshots: test-artifacts/cancel-*.png (00: the map running, Cancel enabled).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

pytestmark = [pytest.mark.browser, pytest.mark.slow]

from lab import (  # noqa: E402
    ARTIFACTS,
    canvas_box,
    canvas_pixels_digest,
    fitted_demo,
    full_readout,
    panel_state,
    require_lab_stack,
    run_code,
    run_json,
    show_canvas,
    wait_crop,
    wait_status,
)

if TYPE_CHECKING:
    from playwright.sync_api import Locator, Page

require_lab_stack()

MAP_TILE = 32  # the demo's 96² scan: 3×3 tiles
REGION = "w.regions = [{'id': 'r1', 'row_start': 8, 'row_stop': 48, 'col_start': 8, " \
         "'col_stop': 48}]"


@pytest.fixture(scope="module")
def ui(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Page, Locator]]:
    root_dir = tmp_path_factory.mktemp("widget-cancel") / "lab"
    with fitted_demo(root_dir, "widget-cancel") as (page, _lab, root):
        run_code(page, REGION + "\nw.wait()")
        wait_crop(root, "r1", 1)
        yield page, root


def wait_attr(root: Locator, name: str, value: str, timeout_ms: float = 300_000) -> None:
    root.locator(f"xpath=self::*[@{name}='{value}']").wait_for(timeout=timeout_ms)


def settled(page: Page) -> None:
    page.evaluate("() => new Promise((r) => requestAnimationFrame(() => setTimeout(r, 50)))")


def test_cancel_button_stops_a_map_and_keeps_everything(ui: tuple[Page, Locator]) -> None:
    page, root = ui
    cancel = root.get_by_label("cancel", exact=True)
    assert cancel.is_disabled()  # nothing cancellable runs
    assert root.get_attribute("data-status") == "done"
    show_canvas(root)
    image = canvas_pixels_digest(root, "scan image")
    crop = panel_state(root, "r1")
    fit = full_readout(root)

    root.get_by_label("map tile", exact=True).fill(str(MAP_TILE))
    root.get_by_label("fit map", exact=True).click()
    wait_attr(root, "data-status", "fitting", 60_000)
    bar = root.get_by_role("progressbar", name="fit progress", exact=True)
    bar.locator("xpath=self::*[@data-stage='map' and @aria-valuenow='1']").wait_for(
        timeout=300_000)  # the first tile is done
    assert cancel.is_enabled() and cancel.get_attribute("data-job") == "map"
    fit_map = root.get_by_label("fit map", exact=True)
    assert fit_map.is_disabled()  # no second map while this one runs
    root.screenshot(path=str(ARTIFACTS / "cancel-00-map-running-widget.png"))
    cancel.click()
    wait_attr(root, "data-cancelled", "map", 120_000)
    wait_status(root, "done", timeout_ms=120_000)
    bar.wait_for(state="hidden", timeout=60_000)
    assert cancel.is_disabled() and fit_map.is_enabled()
    message = root.get_by_label("message", exact=True).inner_text()
    assert message == "map cancelled: the earlier results are kept", message
    assert run_json(page, "[w.map_overlays, len(w.session.maps), w.status, w.cancelled]") == [
        {}, 0, "done", "map"]
    settled(page)
    assert canvas_pixels_digest(root, "scan image") == image  # no overlay, same phase
    after = panel_state(root, "r1")
    assert after["sha"] == crop["sha"] and after["status"] == "done" and after["visible"]
    assert full_readout(root) == fit
    show_canvas(root)
    root.screenshot(path=str(ARTIFACTS / "cancel-01-map-cancelled-widget.png"))


def test_esc_with_the_pointer_over_the_widget_stops_a_refit(ui: tuple[Page, Locator]) -> None:
    page, root = ui
    fit = full_readout(root)
    crop = panel_state(root, "r1")
    run_code(page, "w.fit()")  # the focus is in the notebook now, not in the widget
    cancel = root.get_by_label("cancel", exact=True)
    root.locator("xpath=self::*[not(@data-cancelled)]").wait_for(timeout=60_000)
    bar = root.get_by_role("progressbar", name="fit progress", exact=True)
    bar.locator("xpath=self::*[@data-stage='search']").wait_for(timeout=300_000)
    assert cancel.get_attribute("data-job") == "fit"
    show_canvas(root)
    box = canvas_box(root)
    page.mouse.move(box["x"] + box["width"] - 3, box["y"] + 3)  # over the widget
    page.keyboard.press("Escape")
    wait_attr(root, "data-cancelled", "fit", 120_000)
    wait_status(root, "done", timeout_ms=120_000)
    assert full_readout(root) == fit
    assert panel_state(root, "r1")["sha"] == crop["sha"]
    assert run_json(page, "[w.cancelled, w.session.full_fit.params == w.full_fit['params']]") \
        == ["fit", True]
    message = root.get_by_label("message", exact=True).inner_text()
    assert message == "fit cancelled: the earlier results are kept", message
    settled(page)
    root.screenshot(path=str(ARTIFACTS / "cancel-02-fit-cancelled-by-esc-widget.png"))
