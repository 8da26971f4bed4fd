"""Measurement tools in a real JupyterLab + Chromium (issue 21, item 6).

The demo notebook is opened and fitted once (module fixture). FFT: a click a
few pixels off a lattice peak snaps to it and reads ``d = … Å, |g| = … Å⁻¹,
angle = …°`` with d one of the simulated SrTiO3-like lattice's spacings and the
angle that of the peak's position; a click on empty background reads ``no peak
near``. Line profile: with the tool on, a drag on the scan draws a line (no
region), plots the phase along it and gives its length in Å, at zoom 1 and
zoomed in; off again, a drag draws a region. Screenshots go to test-artifacts/.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

pytestmark = [pytest.mark.browser, pytest.mark.slow]

from lab import (  # noqa: E402
    drag_scan,
    fft_brightest,
    fitted_demo,
    label,
    require_lab_stack,
    run_json,
    show_canvas,
    widget_shot,
)

if TYPE_CHECKING:
    from lab import Lab
    from playwright.sync_api import Locator, Page

require_lab_stack()

LATTICE_A = 3.905  # simulate.demo_dataset's square lattice
TRUE_SPACINGS = sorted({LATTICE_A / math.hypot(h, k) for h in range(5) for k in range(5) if h or k})
PEAK_TEXT = re.compile(r"^d = (\d+\.\d+) Å, \|g\| = (\d+\.\d+) Å⁻¹, angle = (-?\d+\.\d)°$")
LENGTH_TEXT = re.compile(r"^(\d+(?:\.\d+)?) Å$")
SNAP_PX = 8  # js/fftview.ts: a click snaps to a peak at most this far (CSS px)


@pytest.fixture(scope="module")
def ui(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Page, Lab, Locator]]:
    root_dir = tmp_path_factory.mktemp("measure") / "lab"
    with fitted_demo(root_dir, "measure") as ui:
        yield ui


def open_fft(root: Locator) -> Locator:
    if label(root, "FFT view").get_attribute("aria-pressed") != "true":
        label(root, "FFT view").click()
    fft = label(root, "FFT image")
    fft.wait_for(state="visible")
    fft.scroll_into_view_if_needed()
    return fft


def click_fft(page: Page, root: Locator, fft: Locator, row: float, col: float) -> str:
    """Click the FFT canvas at the centre of pixel (row, col); the d-spacing text."""
    box = fft.bounding_box()
    assert box is not None
    size = fft.evaluate("c => [c.height, c.width]")
    page.mouse.click(box["x"] + (col + 0.5) * box["width"] / size[1],
                     box["y"] + (row + 0.5) * box["height"] / size[0])
    return label(root, "d-spacing").inner_text()


def emptiest_spot(fft: Locator, radius: float) -> tuple[int, int]:
    """The canvas pixel, among the lattice's bright inner peaks (15–60 px from zero
    frequency), whose disc of ``radius`` px is darkest at its brightest."""
    r, c = fft.evaluate(
        """(c, rad) => {
            const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
            const v = (r, k) => d[4 * (r * c.width + k)];
            let best = Infinity, at = [0, 0];
            for (let r = 0; r < c.height; r += 2) for (let k = 0; k < c.width; k += 2) {
                const f = Math.hypot(r - c.height / 2, k - c.width / 2);
                if (f < 15 || f > 60) continue;
                let top = 0;
                for (let i = -rad; i <= rad; i++) for (let j = -rad; j <= rad; j++) {
                    if (i * i + j * j > rad * rad) continue;
                    const y = r + i, x = k + j;
                    if (y >= 0 && y < c.height && x >= 0 && x < c.width)
                        top = Math.max(top, v(y, x));
                }
                if (top < best) { best = top; at = [r, k]; }
            }
            return at;
        }""", radius)
    return int(r), int(c)


def test_fft_click_near_a_peak_snaps_to_it(ui: tuple[Page, Lab, Locator]) -> None:
    page, _lab, root = ui
    fft = open_fft(root)
    row, col, height, width = fft_brightest(fft, 5)
    text = click_fft(page, root, fft, row + 3, col - 2)  # 3.6 px off the peak
    m = PEAK_TEXT.match(text)
    assert m, text
    d, g, angle = (float(x) for x in m.groups())
    nearest = min(TRUE_SPACINGS, key=lambda s: abs(s - d))
    assert abs(d - nearest) / nearest < 0.02, (d, nearest, text)
    assert abs(g * d - 1) < 2e-3, text
    # degrees from the column axis, counter-clockwise on screen: that of the bright pixel
    expect = math.degrees(math.atan2(-(row - height / 2), col - width / 2))
    assert abs((angle - expect + 180) % 360 - 180) < 3, (angle, expect, text)
    assert -180 < angle <= 180
    readout = label(root, "d-spacing")
    assert abs(float(readout.get_attribute("data-d-a") or "nan") - d) < 1e-3
    widget_shot(page, root, "measure-fft-peak")


def test_fft_click_on_background_finds_no_peak(ui: tuple[Page, Lab, Locator]) -> None:
    page, _lab, root = ui
    fft = open_fft(root)
    height = fft.evaluate("c => c.height")
    row, col = emptiest_spot(fft, (SNAP_PX + 2) * height / 256)
    assert click_fft(page, root, fft, row, col) == "no peak near"
    assert label(root, "d-spacing").get_attribute("data-d-a") is None
    widget_shot(page, root, "measure-fft-no-peak")
    label(root, "FFT view").click()


def profile_length(root: Locator) -> float:
    text = label(root, "profile length").inner_text()
    m = LENGTH_TEXT.match(text)
    assert m, text
    return float(m.group(1))


def test_line_profile_of_a_drag(ui: tuple[Page, Lab, Locator]) -> None:
    page, _lab, root = ui
    shape = tuple(run_json(page, "list(w.scan_shape)"))
    step = run_json(page, "list(map(float, ds.scan_step_A))")  # Å per scan px (row, col)
    regions = run_json(page, "w.regions")
    tool = label(root, "line profile")
    tool.click()
    assert tool.get_attribute("aria-pressed") == "true"
    start, end = (20.0, 15.0), (70.0, 80.0)
    drag_scan(page, root, start, end, shape)
    plot = label(root, "profile")
    plot.wait_for(state="visible")
    want = math.hypot((end[0] - start[0]) * step[0], (end[1] - start[1]) * step[1])
    got = profile_length(root)
    assert abs(got - want) / want < 0.03, (got, want)
    assert plot.get_attribute("data-unit") == "rad"
    assert int(plot.get_attribute("data-samples") or 0) > 50  # ~ one per frame px along the line
    lit = plot.evaluate(
        """c => { const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
                  let n = 0; for (let i = 0; i < d.length; i += 4)
                      if (d[i] > 200 && d[i + 1] > 150 && d[i + 2] < 120) n++;
                  return n; }""")
    assert lit > 100, lit  # the yellow curve is drawn
    assert run_json(page, "w.regions") == regions  # the drag drew no region
    widget_shot(page, root, "measure-profile")

    # zoomed in: the line stays on the scan, a new drag of 100 screen px measures 1/zoom
    box = label(root, "scan image").bounding_box()
    assert box is not None
    page.mouse.move(box["x"] + box["width"] * 0.5, box["y"] + box["height"] * 0.5)
    page.mouse.wheel(0, -300)
    page.wait_for_function("(el) => Number(el.dataset.zoom) > 1.5", arg=root.element_handle())
    assert profile_length(root) == got
    zoom = float(root.get_attribute("data-zoom") or "nan")
    show_canvas(root)
    box = label(root, "scan image").bounding_box()
    assert box is not None
    y, x0 = box["y"] + box["height"] * 0.4, box["x"] + box["width"] * 0.3
    page.mouse.move(x0, y)
    page.mouse.down()
    page.mouse.move(x0 + 100, y, steps=8)
    page.mouse.up()
    scan_px = 100 * shape[1] / box["width"] / zoom  # the widget maps the box (border too), as here
    want = scan_px * step[1]
    assert abs(profile_length(root) - want) / want < 0.03, (profile_length(root), want, zoom)
    widget_shot(page, root, "measure-profile-zoomed")
    label(root, "reset view").click()

    # off: the plot goes and a drag draws a region again
    tool.click()
    assert tool.get_attribute("aria-pressed") == "false"
    assert label(root, "profile").is_hidden()
    drag_scan(page, root, (30.0, 30.0), (60.0, 60.0), shape)
    root.locator("[data-region-id]").nth(len(regions)).wait_for()  # its crop panel
    assert len(run_json(page, "w.regions")) == len(regions) + 1
