"""Precise steering controls and restore in a real JupyterLab + Chromium (issue 21 items
5 and 7), on the demo notebook fitted once (module fixture), checks in order:

* each fitted parameter's slider is centred on the fit with its span (slice_span, or 5σ);
  a mouse drag moves C10 by under 1 Å per pixel, a Shift drag a tenth of that, Shift+→
  one hundredth of an Å;
* a value typed outside the range widens it; "reset to fit" restores the fit's range;
* number boxes apply on Enter, not while typing (parameters and the contrast limits);
* the loss shown changes when C30 is set, equals the kernel's loss of those parameters,
  and its tooltip says what it is;
* a widget restored from the saved calibration lists the saved trials.

Screenshots go to test-artifacts/precise-*.png.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest

pytestmark = [pytest.mark.browser, pytest.mark.slow]

from lab import (  # noqa: E402
    canvas_pixels_digest,
    fitted_demo,
    label,
    preview_state,
    require_lab_stack,
    run_code,
    run_json,
    wait_preview,
    wait_status,
    widget_shot,
)

if TYPE_CHECKING:
    from lab import Lab
    from playwright.sync_api import Locator, Page

require_lab_stack()

JOINT = ("C10", "C12", "phi12", "tilt_row_mrad", "tilt_col_mrad", "depth")
ERROR_SPANS = 5  # js/steerrange.ts


@pytest.fixture(scope="module")
def ui(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Page, Lab, Locator]]:
    root_dir = tmp_path_factory.mktemp("precise-controls") / "lab"
    with fitted_demo(root_dir, "precise-controls") as ui:
        yield ui


def bounds(slider: Locator) -> tuple[float, float]:
    return float(slider.get_attribute("min") or "nan"), float(slider.get_attribute("max") or "nan")


def shot(page: Page, root: Locator, name: str) -> None:
    widget_shot(page, root, f"precise-{name}")


def fit_of(page: Page) -> dict[str, Any]:
    return dict(run_json(page, "{'params': w.full_fit['params'], 'errors': w.full_fit['errors'],"
                               " 'table': w.param_table}"))


def test_sliders_are_centred_on_the_fit_with_their_span(ui: tuple[Page, Lab, Locator]) -> None:
    page, _lab, root = ui
    fit = fit_of(page)
    rows = {r["name"]: r for r in fit["table"]}
    for name in JOINT:
        row, v, err = rows[name], fit["params"][name], fit["errors"].get(name, 0.0)
        half = min(max(row["slice_span"], ERROR_SPANS * err), (row["box"][1] - row["box"][0]) / 2)
        lo, hi = bounds(label(root, f"{name} slider"))
        step = 10 ** -row["digits"]
        assert hi == pytest.approx(v + half, abs=step), name
        want_lo = max(0.0, v - half) if row["non_negative"] else v - half
        assert lo == pytest.approx(want_lo, abs=step), name
    lo, hi = bounds(label(root, "C10 slider"))
    assert hi - lo < 0.2 * (rows["C10"]["box"][1] - rows["C10"]["box"][0])  # not ±500 Å
    shot(page, root, "01-centred")


def _drag(page: Page, root: Locator, dx: float, shift: bool) -> tuple[float, float]:
    """C10 in the value box after pressing on the slider's middle, and after moving dx px."""
    slider = label(root, "C10 slider")
    slider.scroll_into_view_if_needed()
    box = slider.bounding_box()
    assert box is not None
    x, y = box["x"] + box["width"] / 2, box["y"] + box["height"] / 2
    value = label(root, "C10 value")
    if shift:
        page.keyboard.down("Shift")
    page.mouse.move(x, y)
    page.mouse.down()
    start = float(value.input_value())
    page.mouse.move(x + dx, y, steps=10)
    end = float(value.input_value())
    page.mouse.up()
    if shift:
        page.keyboard.up("Shift")
    return start, end


def test_drag_and_fine_steps(ui: tuple[Page, Lab, Locator]) -> None:
    page, _lab, root = ui
    slider = label(root, "C10 slider")
    lo, hi = bounds(slider)
    width = slider.bounding_box()["width"]  # type: ignore[index]
    a_per_px = (hi - lo) / width
    print(f"C10 slider: {hi - lo:.1f} Å over {width:.0f} px = {a_per_px:.3f} Å/px")
    assert a_per_px < 1.0  # was 6.3 Å/px over the ±500 Å box
    # A third of the slider: the plain drag from the middle stays inside the range, and so
    # does the fine one from where the plain one left the value (the thumb then sits
    # right of the middle, where the second press lands).
    dx = round(width / 3)
    start, end = _drag(page, root, dx, shift=False)
    plain = end - start
    # Near the range over the width (the thumb travels the width less its own, and the
    # pointer's last step may lag under load: measured 0.97-1.13x); far below 6.3 Å/px.
    assert 0.8 * dx * a_per_px <= plain <= 1.4 * dx * a_per_px, (start, end)
    state = wait_preview(root, 0, params={"C10": end})
    start, end = _drag(page, root, dx, shift=True)
    fine = end - start
    assert start == pytest.approx(state["params"]["C10"], abs=0.01)  # no jump to the pointer
    assert fine == pytest.approx(plain / 10, rel=0.2), (plain, fine)
    state = wait_preview(root, state["frame"] + 1, params={"C10": end})
    slider.focus()
    page.keyboard.press("Shift+ArrowRight")
    state = wait_preview(root, state["frame"] + 1, params={"C10": round(end + 0.01, 2)})
    page.keyboard.press("ArrowLeft")
    wait_preview(root, state["frame"] + 1, params={"C10": round(end + 0.01 - 0.1, 2)})
    label(root, "reset to fit").click()
    wait_preview(root, 0, params={"C10": fit_of(page)["params"]["C10"]})


def test_typed_value_widens_until_reset_to_fit(ui: tuple[Page, Lab, Locator]) -> None:
    page, _lab, root = ui
    slider = label(root, "C10 slider")
    home = bounds(slider)
    state = preview_state(root)
    label(root, "C10 value").fill("-5000")
    label(root, "C10 value").press("Enter")
    wait_preview(root, state["frame"] + 1, params={"C10": -5000.0})
    assert bounds(slider) == (-5000.0, home[1])
    assert float(slider.input_value()) == -5000.0
    shot(page, root, "02-widened")
    label(root, "reset to fit").click()
    fit = fit_of(page)["params"]
    wait_preview(root, 0, params={"C10": fit["C10"]})
    assert bounds(slider) == home
    assert float(slider.get_attribute("data-home-min") or "nan") == home[0]
    shot(page, root, "03-reset")


def test_number_boxes_apply_on_enter(ui: tuple[Page, Lab, Locator]) -> None:
    page, _lab, root = ui
    state = preview_state(root)
    box = label(root, "C12 value")
    box.fill("4.5")  # typing alone applies nothing
    page.wait_for_timeout(800)
    assert preview_state(root)["frame"] == state["frame"]
    assert run_json(page, "w.full_fit['params']['C12']") != 4.5
    box.press("Enter")
    state = wait_preview(root, state["frame"] + 1, params={"C12": 4.5})
    # the contrast limits too: Enter repaints with the typed maximum
    before = canvas_pixels_digest(root, "scan image")
    lo = float(label(root, "contrast min").input_value())
    hi = float(label(root, "contrast max").input_value())
    label(root, "contrast max").fill(f"{lo + 0.4 * (hi - lo):.4f}")
    page.wait_for_timeout(300)
    assert canvas_pixels_digest(root, "scan image") == before
    label(root, "contrast max").press("Enter")
    page.evaluate("() => new Promise((r) => requestAnimationFrame(() => setTimeout(r, 0)))")
    assert canvas_pixels_digest(root, "scan image") != before
    shot(page, root, "04-enter-applied")
    label(root, "auto contrast").click()
    label(root, "reset to fit").click()
    wait_preview(root, 0, params={"C12": run_json(page, "w.full_fit['params']['C12']")})


def test_loss_shown_follows_higher_orders(ui: tuple[Page, Lab, Locator]) -> None:
    page, _lab, root = ui
    state = preview_state(root)
    loss_el = label(root, "preview loss")
    assert "fraction of the measured sideband energy" in (loss_el.get_attribute("title") or "")
    before_text = loss_el.inner_text()
    label(root, "higher orders").click()
    label(root, "C30 value").fill("200000")
    label(root, "C30 value").press("Enter")
    state = wait_preview(root, state["frame"] + 1, params={"C30": 200000.0})
    assert loss_el.inner_text() != before_text, before_text
    kernel = run_json(page, "__import__('livessb.preview', fromlist=['x']).params_loss("
                            f"w.session, {state['params']!r})")
    assert state["loss"] == pytest.approx(kernel, rel=1e-9)
    assert state["loss"] > float(before_text.split()[1]) + 1e-3  # 20 µm of C30: worse
    shot(page, root, "05-c30-loss")
    label(root, "C30 value").fill("0")
    label(root, "C30 value").press("Enter")
    label(root, "higher orders").click()
    label(root, "reset to fit").click()
    wait_preview(root, 0, params={"C30": 0.0})


def test_restored_widget_lists_the_saved_trials(ui: tuple[Page, Lab, Locator]) -> None:
    page, lab, _root = ui
    listed = run_json(page, "[t['n'] for t in w.trials_full]")
    assert listed
    run_code(page, "w.save_calibration('restore.json')\n"
                   "w2 = livessb.SSBWidget(ds, calibration='restore.json', fit=False)\n"
                   "display(w2)")
    assert (lab.root / "restore.json").is_file()
    root2 = page.locator(".livessb").last
    wait_status(root2, "done", timeout_ms=120_000)
    trials = label(root2, "trials")
    trials.locator("li").nth(len(listed) - 1).wait_for(timeout=60_000)
    assert trials.locator("li").count() == len(listed)
    caption = root2.locator(".livessb-trials-box .livessb-caption").inner_text()
    assert f"best {len(listed)} trials" in caption, caption
    assert label(root2, f"trial {listed[0]}").count() == 1
    assert run_json(page, "w2.session.evaluations") == 0  # restored, not refitted
    root2.scroll_into_view_if_needed()
    shot(page, root2, "06-restored-trials")
