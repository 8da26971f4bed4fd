"""The diffraction panel in a real JupyterLab + Chromium (issue 21, item 2).

The demo notebook is opened and fitted once (module fixture). Hovering the scan image
at two positions shows each position's pattern: the root's ``data-pattern-position``
follows the pointer and the canvas pixels are the counts there on the log scale
(compared pixel by pixel with the kernel's counts; the BF disk bright, the dark field
dark); the mean toggle paints the mean pattern and back; the BF-pixel slider re-renders
the scan image (its pixels change; all pixels again: the first image's pixels), the
fit's parameters unchanged. Screenshots go to test-artifacts/diffraction-*.png.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest

pytestmark = [pytest.mark.browser, pytest.mark.slow]

from lab import (  # noqa: E402
    ARTIFACTS,
    canvas_pixels_digest,
    fitted_demo,
    label,
    require_lab_stack,
    run_code,
    run_json,
    scan_to_page,
    screenshot,
    show_canvas,
)

if TYPE_CHECKING:
    from lab import Lab
    from playwright.sync_api import Locator, Page

require_lab_stack()

SCAN = (96, 96)  # simulate.demo_dataset
LEVELS = """
import numpy as _np
from livessb.preview import quantise as _quantise
def _levels(img):
    data, _ = _quantise(_np.asarray(img, dtype=_np.float32))
    codes = _np.frombuffer(data, '<u2').reshape(img.shape).astype(_np.float64)
    return _np.round(255 * _np.log1p(1000 * codes / 65535) / _np.log1p(1000)).astype(int)
_bf = w.session.dataset.bright_field
"""


@pytest.fixture(scope="module")
def ui(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Page, Lab, Locator]]:
    root_dir = tmp_path_factory.mktemp("diffraction") / "lab"
    with fitted_demo(root_dir, "diffraction") as ui:
        run_code(ui[0], LEVELS)
        yield ui


def shot(page: Page, root: Locator, name: str) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    root.screenshot(path=str(ARTIFACTS / f"{name}-widget.png"))
    label(root, "diffraction pattern").screenshot(path=str(ARTIFACTS / f"{name}-pattern.png"))
    root.locator(".livessb-diffraction").screenshot(path=str(ARTIFACTS / f"{name}-panel.png"))
    screenshot(page, name)


def canvas_levels(root: Locator, rows: int, cols: int) -> list[list[int | None]]:
    """Grey level at the centre of each pattern pixel of the pattern canvas (None where an
    overlay's colour is drawn: not grey)."""
    out: list[list[int | None]] = root.evaluate(
        """(root, [rows, cols]) => {
            const c = root.querySelector('canvas[aria-label="diffraction pattern"]');
            const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
            const sx = c.width / cols, sy = c.height / rows, out = [];
            for (let i = 0; i < rows; i++) {
                const row = [];
                for (let j = 0; j < cols; j++) {
                    const x = Math.floor((j + 0.5) * sx), y = Math.floor((i + 0.5) * sy);
                    const k = 4 * (y * c.width + x);
                    row.push(d[k] === d[k + 1] && d[k + 1] === d[k + 2] ? d[k] : null);
                }
                out.push(row);
            }
            return out;
        }""", [rows, cols])
    return out


def assert_shows(root: Locator, page: Page, expected: list[list[int]], what: str) -> None:
    rows, cols = len(expected), len(expected[0])
    got = canvas_levels(root, rows, cols)
    grey = [(g, e) for gr, er in zip(got, expected, strict=True)
            for g, e in zip(gr, er, strict=True) if g is not None]
    assert len(grey) > 0.85 * rows * cols, f"{what}: overlays cover too much"
    off = [(g, e) for g, e in grey if abs(g - e) > 1]
    assert len(off) <= 0.01 * len(grey), f"{what}: {len(off)} pixels differ, e.g. {off[:5]}"


def disk_contrast(root: Locator, bf: dict[str, float], rows: int) -> tuple[float, float]:
    """Mean grey level inside 0.6 R of the BF centre and outside 1.4 R, from the canvas."""
    levels = canvas_levels(root, rows, rows)
    inside, outside = [], []
    for i, row in enumerate(levels):
        for j, g in enumerate(row):
            if g is None:
                continue
            r = ((i - bf["r"]) ** 2 + (j - bf["c"]) ** 2) ** 0.5
            if r < 0.6 * bf["R"]:
                inside.append(g)
            elif r > 1.4 * bf["R"]:
                outside.append(g)
    return sum(inside) / len(inside), sum(outside) / len(outside)


def hover(page: Page, root: Locator, row: int, col: int) -> None:
    show_canvas(root)
    page.mouse.move(*scan_to_page(root, row + 0.5, col + 0.5, SCAN), steps=4)
    root.locator(f"xpath=self::*[@data-pattern-position='{row},{col}']").wait_for(timeout=20_000)
    page.wait_for_timeout(100)  # the overlays are painted in the same task; let it settle


def test_hover_shows_the_pattern_under_the_pointer(ui: tuple[Page, Lab, Locator]) -> None:
    page, _, root = ui
    label(root, "diffraction pattern").wait_for(state="visible")
    bf: dict[str, Any] = run_json(page, "{'r': _bf.center_row, 'c': _bf.center_col, "
                                        "'R': _bf.radius_px}")
    seen = []
    for row, col in ((20, 30), (70, 61)):
        hover(page, root, row, col)
        expected = run_json(page, f"_levels(w.session.dataset.counts[{row}, {col}]).tolist()")
        assert_shows(root, page, expected, f"pattern at {row},{col}")
        inside, outside = disk_contrast(root, bf, len(expected))
        assert inside > 200 and outside < 0.7 * inside, (inside, outside)
        text = label(root, "pattern position").inner_text()
        assert text.startswith(f"scan row {row}, col {col} (") and "counts" in text, text
        seen.append(canvas_pixels_digest(root, "diffraction pattern"))
        shot(page, root, f"diffraction-hover-{row}-{col}")
    assert seen[0] != seen[1]
    outside_scan = scan_to_page(root, -5, 10, SCAN)  # off the image: the last pattern stays
    page.mouse.move(*outside_scan)
    assert root.get_attribute("data-pattern-position") == "70,61"


def test_mean_toggle_paints_the_mean_pattern(ui: tuple[Page, Lab, Locator]) -> None:
    page, _, root = ui
    hover(page, root, 40, 41)
    before = canvas_pixels_digest(root, "diffraction pattern")
    toggle = label(root, "mean pattern")
    toggle.click()
    root.locator("xpath=self::*[@data-pattern='mean']").wait_for(timeout=20_000)
    page.wait_for_timeout(100)
    assert toggle.get_attribute("aria-pressed") == "true"
    assert root.get_attribute("data-pattern-position") is None
    assert canvas_pixels_digest(root, "diffraction pattern") != before
    assert_shows(root, page, run_json(page, "_levels(w.session.dataset.mean_pattern).tolist()"),
                 "mean pattern")
    assert label(root, "pattern position").inner_text().startswith("mean of 96×96 patterns")
    shot(page, root, "diffraction-mean")
    hover_target = scan_to_page(root, 10.5, 10.5, SCAN)
    page.mouse.move(*hover_target)  # the mean stays while it is on
    page.wait_for_timeout(300)
    assert root.get_attribute("data-pattern") == "mean"
    toggle.click()  # off: the pattern under the pointer again
    root.locator("xpath=self::*[@data-pattern-position='10,10']").wait_for(timeout=20_000)
    assert toggle.get_attribute("aria-pressed") == "false"


def test_bf_pixels_slider_rerenders_the_image(ui: tuple[Page, Lab, Locator]) -> None:
    page, _, root = ui
    slider = label(root, "BF pixels")
    total = int(slider.get_attribute("max") or 0)
    assert total == run_json(page, "w.session.diagnostics.engine.n_bf") > 100
    assert slider.input_value() == str(total)
    fit_params = run_json(page, "w.full_fit['params']")
    frames = int(root.get_attribute("data-preview-frame") or 0)
    before = canvas_pixels_digest(root, "scan image")
    n = total // 4
    slider.scroll_into_view_if_needed()
    slider.fill(str(n))
    root.locator(f"xpath=self::*[@data-preview-bf-pixels='{n}']").wait_for(timeout=120_000)
    page.wait_for_timeout(200)
    assert int(root.get_attribute("data-preview-frame") or 0) > frames
    assert canvas_pixels_digest(root, "scan image") != before
    count = label(root, "BF pixels count").inner_text()
    assert count.startswith(f"{n} of {total} BF pixels (r ≤ "), count
    state = run_json(page, "{'bf': w._frames.last['bf_pixels'], 'trait': w.bf_pixels, "
                           "'params': w.full_fit['params']}")
    assert state["bf"] == n and state["trait"] == n and state["params"] == fit_params
    shot(page, root, "diffraction-bf-pixels")
    slider.fill(str(total))  # all again: the default reconstruction, the same pixels
    root.locator("xpath=self::*[@data-preview-bf-pixels='0']").wait_for(timeout=120_000)
    page.wait_for_timeout(200)
    assert run_json(page, "w.bf_pixels") == 0
    assert canvas_pixels_digest(root, "scan image") == before
