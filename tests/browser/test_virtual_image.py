"""An image from the first second: the virtual images in a real JupyterLab + Chromium.

The demo notebook is run ONCE (module fixture) and, while its CPU full-field fit runs
(tens of seconds on 2 cores), the widget must already show the virtual bright field
(root data-image="virtual-bf", a canvas with bright and dark structure), switch to the
virtual ADF and iCoM from the "virtual image" select, show the fit's progress bar over
the image and a colour bar with two ends in the image's unit. When the fit ends the
phase replaces the virtual image; afterwards the select still shows either. Time from
the widget's appearance to its first image is written to
test-artifacts/virtual-image-timing.json; screenshots to test-artifacts/virtual-*.png.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest

pytestmark = [pytest.mark.browser, pytest.mark.slow]

from lab import (  # noqa: E402
    ARTIFACTS,
    canvas_pixels_digest,
    fitted_demo,
    label,
    preview_state,
    require_lab_stack,
    wait_preview,
)
from pixels import GRAY_ENDS, VIRIDIS_ENDS, canvas_rgb  # noqa: E402

if TYPE_CHECKING:
    from playwright.sync_api import Locator, Page

require_lab_stack()

FIRST_IMAGE_S = 5.0  # "within a second" on an idle machine; a loaded 2-core CI box is slower
SEEN: dict[str, Any] = {}  # what the fixture saw while the fit ran

# Times (page clock) of the widget root's appearance and of its first data-image.
TIMING_SCRIPT = """(() => {
  const t = (window.__livessbTimes = {});
  const obs = new MutationObserver(() => {
    const root = document.querySelector('.livessb');
    if (!root) return;
    if (t.root === undefined) t.root = performance.now();
    if (root.dataset.image) {
      t.image = performance.now();
      t.first = root.dataset.image;
      obs.disconnect();
    }
  });
  obs.observe(document, {subtree: true, childList: true, attributes: true,
                          attributeFilter: ['data-image']});
})();"""

# Luminance statistics of the scan canvas (a uniform square has sd 0 and one colour).
CANVAS_STATS = """(c) => {
  const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
  const n = c.width * c.height, lum = new Float64Array(n), colours = new Set();
  let s = 0, s2 = 0;
  for (let i = 0; i < n; i++) {
    const v = (d[4 * i] + d[4 * i + 1] + d[4 * i + 2]) / 3;
    lum[i] = v; s += v; s2 += v * v;
    if (colours.size < 5000) colours.add((d[4 * i] << 16) | (d[4 * i + 1] << 8) | d[4 * i + 2]);
  }
  const mean = s / n, sd = Math.sqrt(Math.max(s2 / n - mean * mean, 0));
  let bright = 0, dark = 0;
  for (const v of lum) { if (v > mean + sd) bright++; if (v < mean - sd) dark++; }
  return {mean, sd, colours: colours.size, bright: bright / n, dark: dark / n};
}"""

END = r"(-?[0-9][0-9.e+-]*) {unit}"


def wait_image(root: Locator, kind: str, timeout_ms: float = 30_000) -> None:
    root.locator(f"xpath=self::*[@data-image='{kind}']").wait_for(timeout=timeout_ms)


def canvas_stats(root: Locator) -> dict[str, float]:
    stats: dict[str, float] = label(root, "scan image").evaluate(CANVAS_STATS)
    return stats


def colour_bar_ends(root: Locator, unit: str) -> tuple[float, float]:
    text = label(root, "colour bar").inner_text()
    found = re.findall(END.format(unit=re.escape(unit)), text)
    assert len(found) == 2, f"colour bar {text!r}: two ends in {unit} expected"
    return float(found[0]), float(found[1])


def _during_fit(root: Locator) -> None:
    page = root.page
    wait_image(root, "virtual-bf", timeout_ms=60_000)
    times = page.evaluate("() => window.__livessbTimes")
    SEEN["first_image_s"] = (times["image"] - times["root"]) / 1000.0
    SEEN["first_kind"] = times["first"]
    SEEN["status_at_first_image"] = root.get_attribute("data-status")
    SEEN["bf_stats"] = canvas_stats(root)
    SEEN["bf_digest"] = canvas_pixels_digest(root, "scan image")
    SEEN["bf_ends"] = colour_bar_ends(root, "counts")
    SEEN["colour_bar_box"] = label(root, "colour bar").bounding_box()
    bar = root.get_by_role("progressbar", name="fit progress", exact=True)
    bar.wait_for(state="visible", timeout=120_000)
    SEEN["bar_box"] = bar.bounding_box()
    SEEN["canvas_box"] = label(root, "scan image").bounding_box()
    SEEN["viewport"] = page.viewport_size
    root.screenshot(path=str(ARTIFACTS / "virtual-01-fitting-bf.png"))

    select = label(root, "virtual image")
    SEEN["phase_option_disabled"] = select.locator("option[value='phase']").is_disabled()
    select.select_option("icom")
    wait_image(root, "icom")
    SEEN["icom_ends"] = colour_bar_ends(root, "rad")
    SEEN["icom_stats"] = canvas_stats(root)
    root.screenshot(path=str(ARTIFACTS / "virtual-02-fitting-icom.png"))
    select.select_option("virtual-adf")
    wait_image(root, "virtual-adf")
    SEEN["adf_digest"] = canvas_pixels_digest(root, "scan image")
    SEEN["adf_stats"] = canvas_stats(root)
    SEEN["adf_ends"] = colour_bar_ends(root, "counts")
    SEEN["status_after_switching"] = root.get_attribute("data-status")
    root.screenshot(path=str(ARTIFACTS / "virtual-03-fitting-adf.png"))


@pytest.fixture(scope="module")
def ui(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Page, Locator]]:
    root_dir = tmp_path_factory.mktemp("virtual-image") / "lab"
    with fitted_demo(root_dir, "virtual-image", while_fitting=_during_fit,
                     init_script=TIMING_SCRIPT) as (page, _lab, root):
        ARTIFACTS.mkdir(exist_ok=True)
        (ARTIFACTS / "virtual-image-timing.json").write_text(json.dumps(
            {k: SEEN[k] for k in ("first_image_s", "first_kind", "status_at_first_image")}))
        yield page, root


def test_virtual_bf_is_there_within_seconds_while_fitting(ui: tuple[Page, Locator]) -> None:
    assert SEEN["first_kind"] == "virtual-bf"
    assert SEEN["status_at_first_image"] == "fitting"
    assert SEEN["first_image_s"] < FIRST_IMAGE_S, SEEN["first_image_s"]
    stats = SEEN["bf_stats"]
    assert stats["colours"] > 20 and stats["sd"] > 10, stats  # not one dark square
    assert stats["bright"] > 0.02 and stats["dark"] > 0.02, stats  # bright and dark structure
    lo, hi = SEEN["bf_ends"]
    assert 0 < lo < hi, SEEN["bf_ends"]  # BF counts: tens of thousands per position
    bar, canvas = SEEN["colour_bar_box"], SEEN["canvas_box"]
    gap = bar["x"] - (canvas["x"] + canvas["width"])
    assert 0 <= gap <= 16 and bar["y"] >= canvas["y"] - 1, (bar, canvas)  # beside it, right


def test_progress_bar_is_over_the_image(ui: tuple[Page, Locator]) -> None:
    bar, canvas, viewport = SEEN["bar_box"], SEEN["canvas_box"], SEEN["viewport"]
    assert canvas["x"] <= bar["x"] and bar["x"] + bar["width"] <= canvas["x"] + canvas["width"]
    assert canvas["y"] <= bar["y"] and bar["y"] + bar["height"] <= canvas["y"] + canvas["height"]
    assert 0 <= bar["y"] and bar["y"] + bar["height"] <= viewport["height"]  # seen unscrolled


def test_select_switches_virtual_images_during_the_fit(ui: tuple[Page, Locator]) -> None:
    assert SEEN["phase_option_disabled"]  # no phase before the fit ends
    assert SEEN["status_after_switching"] == "fitting"
    assert SEEN["adf_digest"] != SEEN["bf_digest"]
    assert SEEN["adf_stats"]["sd"] > 10 and SEEN["icom_stats"]["sd"] > 10
    lo, hi = SEEN["icom_ends"]
    assert lo < 0 < hi  # iCoM: a phase in rad about zero
    assert SEEN["adf_ends"][1] < SEEN["bf_ends"][0]  # a few counts outside the disk


def test_phase_replaces_the_virtual_image_when_the_fit_ends(ui: tuple[Page, Locator]) -> None:
    page, root = ui
    wait_image(root, "phase")
    assert root.get_attribute("data-status") == "done"
    lo, hi = colour_bar_ends(root, "rad")
    assert lo < hi
    assert canvas_pixels_digest(root, "scan image") != SEEN["adf_digest"]
    root.screenshot(path=str(ARTIFACTS / "virtual-04-done-phase.png"))
    page.screenshot(path=str(ARTIFACTS / "virtual-05-done-page.png"))


def test_after_the_fit_the_select_shows_either(ui: tuple[Page, Locator]) -> None:
    _page, root = ui
    select = label(root, "virtual image")
    assert not select.locator("option[value='phase']").is_disabled()
    phase = canvas_pixels_digest(root, "scan image")
    select.select_option("virtual-bf")
    wait_image(root, "virtual-bf")
    assert canvas_pixels_digest(root, "scan image") == SEEN["bf_digest"]  # the same BF
    select.select_option("phase")
    wait_image(root, "phase")
    assert canvas_pixels_digest(root, "scan image") == phase
    select.select_option("dpc")
    wait_image(root, "dpc")
    colour_bar_ends(root, "mrad")
    frames = preview_state(root)["frame"]
    label(root, "reset to fit").click()  # steering the reconstruction goes back to it
    wait_image(root, "phase")
    wait_preview(root, frames + 1)  # its frame painted (before the next test sets limits)


def test_colour_bar_follows_contrast_and_colormap(ui: tuple[Page, Locator]) -> None:
    _page, root = ui
    wait_image(root, "phase")
    bar = label(root, "colour bar")
    gray = canvas_rgb(bar.locator("canvas"))
    assert tuple(gray[0, 0]) == GRAY_ENDS[1] and tuple(gray[-1, 0]) == GRAY_ENDS[0]  # top: high
    label(root, "colormap").select_option("viridis")
    viridis = canvas_rgb(bar.locator("canvas"))
    assert tuple(viridis[0, 0]) == VIRIDIS_ENDS[1] and tuple(viridis[-1, 0]) == VIRIDIS_ENDS[0]
    label(root, "contrast min").fill("-0.05")
    label(root, "contrast max").fill("0.125")
    label(root, "contrast max").dispatch_event("change")
    assert colour_bar_ends(root, "rad") == (-0.05, 0.125)
    root.screenshot(path=str(ARTIFACTS / "virtual-06-viridis-limits.png"))
    label(root, "auto contrast").click()
    label(root, "colormap").select_option("gray")
