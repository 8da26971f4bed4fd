"""The widget's controls in a real JupyterLab + Chromium, one check per control.

The demo notebook is opened and fitted ONCE (module fixture); the checks then
run in order on that widget: steering sliders and value inputs drive the
frame, wheel zoom + reset view, FFT d-spacing of the
simulated SrTiO3-like lattice, trials list, pins + PNG/JSON/TIFF exports,
latest wins under a burst of slider steps, the minimum region refusal, and a
frames-per-second measurement of a 3 s slider drag (written as JSON when
LIVESSB_FPS_JSON names a file). What the colormaps and the contrast draw is read
back from the canvas in test_drawn.py. Screenshots go to test-artifacts/.
"""

from __future__ import annotations

import json
import math
import os
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

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
    run_code,
    run_json,
    show_canvas,
    wait_preview,
    wait_status,
    widget_shot,
)

if TYPE_CHECKING:
    from lab import Lab
    from playwright.sync_api import Locator, Page

require_lab_stack()

LATTICE_A = 3.905  # the demo's SrTiO3-like square lattice (simulate.demo_dataset)
PROGRESS: dict[str, str | None] = {}  # the progress bar as seen while the fit ran
TRUE_SPACINGS = sorted({LATTICE_A / math.hypot(h, k) for h in range(4) for k in range(4) if h or k})


def _watch_progress(root: Locator) -> None:
    bar = root.get_by_role("progressbar", name="fit progress", exact=True)
    bar.wait_for(state="visible", timeout=300_000)  # while the full-field fit runs
    PROGRESS["valuemax"] = bar.get_attribute("aria-valuemax")
    PROGRESS["text"] = bar.inner_text()
    root.screenshot(path=str(ARTIFACTS / "09-fit-progress-widget.png"))
    wait_status(root, "done", timeout_ms=600_000)
    bar.wait_for(state="hidden", timeout=60_000)


@pytest.fixture(scope="module")
def ui(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Page, Lab, Locator]]:
    """JupyterLab + Chromium with the demo notebook run and its full-field fit done."""
    root_dir = tmp_path_factory.mktemp("widget-controls") / "lab"
    with fitted_demo(root_dir, "widget-controls", while_fitting=_watch_progress) as ui:
        yield ui


def number_attribute(locator: Locator, name: str) -> float:
    """A numeric attribute of an element (Playwright's is str | None: a missing one fails)."""
    value = locator.get_attribute(name)
    assert value is not None, f"no {name} attribute"
    return float(value)


def next_frame(page: Page) -> None:
    """After the next animation frame (the scan view repaints in one)."""
    page.evaluate("() => new Promise((r) => requestAnimationFrame(() => setTimeout(r, 0)))")


def test_fit_progress_then_timings(ui: tuple[Page, Lab, Locator]) -> None:
    _page, _lab, root = ui
    assert int(PROGRESS["valuemax"] or 0) > 0, PROGRESS
    assert " s" in (PROGRESS["text"] or ""), PROGRESS
    assert "timings" in label(root, "stage timings").inner_text()


def test_fit_frame_and_scale_bar(ui: tuple[Page, Lab, Locator]) -> None:
    page, _lab, root = ui
    show_canvas(root)
    state = preview_state(root)
    fit = run_json(page, "w.full_fit['params']")
    assert state["params"]["C10"] == pytest.approx(fit["C10"], abs=1e-9)
    bar = label(root, "scale bar").first.inner_text()
    assert bar.endswith((" Å", " nm")) and float(bar.split()[0]) > 0, bar
    loss = root.get_by_label("preview loss", exact=True).get_attribute("data-value")
    assert loss and math.isfinite(float(loss))
    widget_shot(page, root, "10-fit-frame")


def test_slider_and_value_drive_the_frame(ui: tuple[Page, Lab, Locator]) -> None:
    page, _lab, root = ui
    state = preview_state(root)
    before = state["frame"]
    target = round(state["params"]["C10"] + 25.0, 1)
    label(root, "C10 slider").fill(str(target))
    state = wait_preview(root, before + 1, params={"C10": target})
    assert state["params"]["C10"] == pytest.approx(target, abs=1e-9)
    # the loss shown is the session's VP loss of those parameters
    kernel_loss = run_json(
        page, "float(w.session.loss_evaluator()(__import__('livessb.params', fromlist=['x'])"
              f".to_vector({json.dumps(state['params'])}, default=0.0)[None])[0])")
    assert state["loss"] == pytest.approx(kernel_loss, rel=1e-6)
    typed = round(target - 7.5, 1)
    label(root, "C12 value").fill("4.5")
    label(root, "C12 value").press("Enter")  # a number box applies on Enter
    state = wait_preview(root, state["frame"] + 1, params={"C12": 4.5})
    label(root, "C10 value").fill(str(typed))
    label(root, "C10 value").press("Enter")  # a number box applies on Enter
    state = wait_preview(root, state["frame"] + 1, params={"C10": typed, "C12": 4.5})
    assert label(root, "C10 slider").input_value() == str(typed)
    widget_shot(page, root, "11-steered")
    label(root, "reset to fit").click()
    fit = run_json(page, "w.full_fit['params']")
    wait_preview(root, state["frame"] + 1, params={"C10": fit["C10"], "C12": fit["C12"]})


def test_amplitude_view_and_back(ui: tuple[Page, Lab, Locator]) -> None:
    _page, _lab, root = ui
    state = preview_state(root)
    label(root, "view").select_option("amplitude")
    root.locator("xpath=self::*[@data-preview-view='amplitude']").wait_for(timeout=120_000)
    assert preview_state(root)["frame"] > state["frame"]
    label(root, "view").select_option("phase")
    root.locator("xpath=self::*[@data-preview-view='phase']").wait_for(timeout=120_000)


def test_controls_come_from_the_parameter_table(ui: tuple[Page, Lab, Locator]) -> None:
    page, _lab, root = ui
    table = run_json(page, "w.param_table")
    for row in table:
        assert label(root, f"{row['name']} slider").count() == 1, row["name"]
        assert label(root, f"{row['name']} value").count() == 1, row["name"]
        slider = label(root, f"{row['name']} slider")
        if row["slice_span"] is None:  # no span: the default box (spans: test_precise_controls)
            assert number_attribute(slider, "min") <= row["box"][0]
            assert number_attribute(slider, "max") >= row["box"][1]
    joint = [r for r in table if r.get("fittable", True) and r["opt_in"] is None]
    assert [r["name"] for r in joint] == ["C10", "C12", "phi12", "tilt_row_mrad",
                                          "tilt_col_mrad", "depth"]
    for row in joint:  # in front, each with a lock
        assert label(root, f"{row['name']} slider").is_visible()
        assert label(root, f"{row['name']} lock").count() == 1
    higher = [r for r in table if r not in joint]
    for row in higher:  # folded away until the panel opens
        assert not label(root, f"{row['name']} slider").is_visible(), row["name"]
    if higher:  # a higher order, steered from the collapsible panel
        root.get_by_label("higher orders", exact=True).click()
        row = next((r for r in reversed(higher) if r["unit"] == "Å"), higher[-1])
        name = row["name"]
        value = round(0.25 * (row["box"][0] + row["box"][1]) + 1.0, 0)
        state = preview_state(root)
        label(root, f"{name} value").fill(str(value))
        label(root, f"{name} value").press("Enter")  # a number box applies on Enter
        wait_preview(root, state["frame"] + 1, params={name: value})
        label(root, f"{name} value").fill("0")
        label(root, f"{name} value").press("Enter")  # a number box applies on Enter
        root.get_by_label("higher orders", exact=True).click()
        label(root, "reset to fit").click()


def test_wheel_zoom_and_reset_view(ui: tuple[Page, Lab, Locator]) -> None:
    page, _lab, root = ui
    regions = run_json(page, "w.regions")  # (running a cell scrolls the notebook: first)
    show_canvas(root)
    box = label(root, "scan image").bounding_box()
    assert box is not None
    page.mouse.move(box["x"] + box["width"] * 0.3, box["y"] + box["height"] * 0.6)
    page.mouse.wheel(0, -400)
    page.wait_for_function("(el) => Number(el.dataset.zoom) > 1", arg=root.element_handle())
    assert number_attribute(root, "data-zoom") > 1
    widget_shot(page, root, "13-zoomed")
    # pan: middle button, then space + left button; neither draws a region
    cx, cy = box["x"] + box["width"] / 2, box["y"] + box["height"] / 2
    before = canvas_pixels_digest(root, "scan image")
    page.mouse.move(cx, cy)
    page.mouse.down(button="middle")
    page.mouse.move(cx + 60, cy + 40, steps=5)
    page.mouse.up(button="middle")
    next_frame(page)
    panned = canvas_pixels_digest(root, "scan image")
    assert panned != before
    label(root, "scan image").focus()
    page.keyboard.down(" ")
    page.mouse.move(cx, cy)
    page.mouse.down()
    page.mouse.move(cx - 80, cy - 30, steps=5)
    page.mouse.up()
    page.keyboard.up(" ")
    next_frame(page)
    assert canvas_pixels_digest(root, "scan image") != panned
    label(root, "reset view").click()
    page.wait_for_function("(el) => Number(el.dataset.zoom) === 1", arg=root.element_handle())
    page.mouse.move(box["x"] + box["width"] * 0.5, box["y"] + box["height"] * 0.5)
    page.mouse.wheel(0, -200)
    page.wait_for_function("(el) => Number(el.dataset.zoom) > 1", arg=root.element_handle())
    label(root, "scan image").focus()
    page.keyboard.press("r")
    page.wait_for_function("(el) => Number(el.dataset.zoom) === 1", arg=root.element_handle())
    assert run_json(page, "w.regions") == regions


def test_fft_d_spacing_of_the_lattice(ui: tuple[Page, Lab, Locator]) -> None:
    page, _lab, root = ui
    click_fft_brightest(page, root)
    text = label(root, "d-spacing").inner_text()
    assert "Å" in text, text
    d = number_attribute(label(root, "d-spacing"), "data-d-a")
    nearest = min(TRUE_SPACINGS, key=lambda s: abs(s - d))
    assert abs(d - nearest) / nearest < 0.02, (d, nearest, text)
    widget_shot(page, root, "14-fft-d-spacing")
    label(root, "FFT view").click()


def test_trials_list_is_clickable(ui: tuple[Page, Lab, Locator]) -> None:
    page, _lab, root = ui
    trials = run_json(page, "w.trials_full[:3]")
    assert trials, "the fit recorded no trials"
    state = preview_state(root)
    first = label(root, f"trial {trials[0]['n']}")
    first.click()
    state = wait_preview(root, state["frame"] + 1, params={"C10": trials[0]["params"]["C10"]})
    if len(trials) > 1:
        first.focus()
        page.keyboard.press("ArrowRight")
        wait_preview(root, state["frame"] + 1, params={"C10": trials[1]["params"]["C10"]})
    widget_shot(page, root, "15-trial")
    label(root, "reset to fit").click()
    wait_preview(root, 0, params={"C10": run_json(page, "w.full_fit['params']['C10']")})


def test_pins_and_exports_write_files_that_open(ui: tuple[Page, Lab, Locator]) -> None:
    page, lab, root = ui
    from PIL import Image

    out = lab.root / "exports"
    out.mkdir()  # an existing folder: livessb creates none (the folder rule)
    label(root, "export folder").fill(str(out))
    # a pin records the params on screen: wait until the frame shown is the fit's
    # (an earlier test may have left a trial's frame in flight)
    state = wait_preview(root, 0, params={"C10": run_json(page, "w.full_fit['params']['C10']")})
    label(root, "pin").click()
    label(root, "C10 slider").fill(str(round(state["params"]["C10"] - 10.0, 1)))
    wait_preview(root, state["frame"] + 1)
    label(root, "scan image").focus()
    page.keyboard.press("p")
    assert label(root, "pins").locator("li").count() == 2
    label(root, "export pins").click()
    result = label(root, "export result")
    result.locator("xpath=self::*[contains(., 'exported') or contains(., 'failed')]").wait_for(
        timeout=300_000)
    assert "failed" not in result.inner_text(), result.inner_text()
    manifest = json.loads((out / "pins.json").read_text())
    assert [p["name"] for p in manifest["pins"]] == ["pin1", "pin2"]
    for pin in manifest["pins"]:
        with Image.open(out / pin["file"]) as im:
            im.load()
            assert im.size[0] > 50 and im.size[1] > 50
    assert manifest["pins"][0]["params"]["C10"] == pytest.approx(state["params"]["C10"])
    label(root, "export TIFF").click()
    result.locator("xpath=self::*[contains(., 'exported') and contains(., '.tif')]").wait_for(
        timeout=300_000)
    import tifffile

    with tifffile.TiffFile(out / "reconstruction.tif") as tif:
        page0 = tif.pages[0]
        assert isinstance(page0, tifffile.TiffPage)  # the first page is never a TiffFrame
        assert page0.dtype is not None and page0.dtype.name == "float32"
        ij = tif.imagej_metadata  # ImageJ's pixel width: 1/XResolution in its unit
        assert ij is not None and ij["unit"] == "nm", ij
        xres, yres = page0.tags["XResolution"].value, page0.tags["YResolution"].value
    sampling = run_json(page, "list(w.sampling_A)")
    assert 10 * xres[1] / xres[0] == pytest.approx(sampling[1], rel=1e-4)  # Å, columns
    assert 10 * yres[1] / yres[0] == pytest.approx(sampling[0], rel=1e-4)  # Å, rows
    widget_shot(page, root, "16-pins-exported")


def test_no_stale_frame_after_a_burst(ui: tuple[Page, Lab, Locator]) -> None:
    page, _lab, root = ui
    last = root.evaluate(
        """async (root) => {
            const slider = root.querySelector('[aria-label="C10 slider"]');
            window.__seqs = [];
            new MutationObserver(() => window.__seqs.push(Number(root.dataset.previewSeq)))
                .observe(root, {attributes: true, attributeFilter: ['data-preview-seq']});
            let v = 0;
            for (let i = 0; i < 60; i++) {
                v = -100 + i * 1.5;
                slider.value = String(v);
                slider.dispatchEvent(new Event('input', {bubbles: true}));
                await new Promise((r) => setTimeout(r, 5));
            }
            return Number(slider.value);
        }""")
    state = wait_preview(root, 0, params={"C10": last}, timeout_ms=120_000)
    page.wait_for_timeout(1500)  # nothing older may arrive after it
    seqs = page.evaluate("window.__seqs")
    assert seqs == sorted(seqs), seqs
    assert preview_state(root)["params"]["C10"] == pytest.approx(last)
    assert state["seq"] == max(seqs)


def test_small_region_is_refused_with_a_message(ui: tuple[Page, Lab, Locator]) -> None:
    page, _lab, root = ui
    shape = tuple(run_json(page, "list(w.scan_shape)"))
    minimum = run_json(page, "w.min_region_px")
    n_before = len(run_json(page, "w.regions"))
    drag_scan(page, root, (40.2, 40.2), (40.2 + minimum / 2, 40.2 + minimum / 2), shape)
    notice = label(root, "notice")
    notice.wait_for(state="visible")
    assert f"{minimum}×{minimum}" in notice.inner_text()
    assert len(run_json(page, "w.regions")) == n_before
    show_canvas(root)
    widget_shot(page, root, "17-small-region-refused")
    # a large enough one is kept; Delete (key) removes it, Esc deselects
    side = minimum + 4
    drag_scan(page, root, (40.2, 40.2), (40.2 + side, 40.2 + side), shape)
    notice.wait_for(state="hidden")
    page.wait_for_function("(el) => el.querySelectorAll('[data-region-id]').length > 0",
                           arg=root.element_handle())
    assert len(run_json(page, "w.regions")) == n_before + 1
    label(root, "scan image").focus()
    page.keyboard.press("Delete")
    page.wait_for_function("(el) => el.querySelectorAll('[data-region-id]').length === 0",
                           arg=root.element_handle())
    assert len(run_json(page, "w.regions")) == n_before


def test_live_regions_checkbox_syncs(ui: tuple[Page, Lab, Locator]) -> None:
    page, _lab, root = ui
    box = label(root, "live regions")
    start = run_json(page, "w.live_regions")
    assert box.is_checked() == start
    box.click()
    assert run_json(page, "w.live_regions") == (not start)
    box.click()
    assert run_json(page, "w.live_regions") == start


def test_crystal_mode_box_fits_the_regions_with_the_lattice(
        ui: tuple[Page, Lab, Locator]) -> None:
    # A 16² region of the demo crystal (2.5 lattice periods), then the "crystal mode" box:
    # the region is fitted again with the lattice model and its panel says what it found.
    page, _lab, root = ui
    shape = tuple(run_json(page, "list(w.scan_shape)"))
    box = label(root, "crystal mode")
    assert not box.is_checked() and run_json(page, "w.object_model") == "per_bin"
    drag_scan(page, root, (40.2, 40.2), (55.8, 55.8), shape)
    rid = run_json(page, "(w.wait(300), w.regions[-1]['id'])[1]")
    wait_status(root, "done")
    per_bin = run_json(page, f"w.region_results[{rid!r}]")
    # the per-bin fit of 2.5 periods advises the box, in the panel's crystal row
    assert per_bin["crystal"].startswith("few lattice periods: this 16×16 window"), \
        per_bin["crystal"]
    advice = root.locator(f'[data-region-id="{rid}"] [data-param="crystal"]').first
    advice.wait_for(state="visible", timeout=60_000)
    assert advice.inner_text() == per_bin["crystal"]
    widget_shot(page, root, "19-crystal-mode-advised")
    box.click()
    # while it fits, the panel's status line says which of crystal mode's steps runs
    status = root.locator(f'[data-region-id="{rid}"] [role="status"]').first
    status.filter(has_text="crystal mode").wait_for(timeout=300_000)
    # (the per-bin crop stays on screen, one edit behind, until the new one comes)
    assert re.fullmatch(r"fitting \(crystal mode [0-5]/5(, crop 1 edit behind)?\)",
                        status.inner_text()), status.inner_text()
    widget_shot(page, root, "19-crystal-mode-fitting")
    assert run_json(page, "(w.wait(600), w.object_model)[1]") == "lattice"
    wait_status(root, "done")
    assert "crystal mode" not in status.inner_text()
    record = run_json(page, f"w.region_results[{rid!r}]")
    assert record["crystal"].startswith("lattice model, periods"), record
    assert record["params"]["C10"] != per_bin["params"]["C10"]
    # (the row already showed the per-bin fit's advice: wait until it shows crystal mode's)
    texts = "([el, rid]) => [...el.querySelectorAll(`[data-region-id=\"${rid}\"] " \
        "[data-param=\"crystal\"]`)].map((e) => e.textContent)"
    try:
        page.wait_for_function(f"(a) => ({texts})(a).includes(a[2])",
                               arg=[root.element_handle(), rid, record["crystal"]],
                               timeout=60_000)
    except Exception:
        raise AssertionError(page.evaluate(texts, [root.element_handle(), rid])) from None
    show_canvas(root)
    widget_shot(page, root, "19-crystal-mode")
    box.click()  # back to per bin, the region removed: the widget as the next checks expect
    assert run_json(page, "(w.wait(600), w.object_model)[1]") == "per_bin"
    run_code(page, "w.regions = []")
    page.wait_for_function("(el) => el.querySelectorAll('[data-region-id]').length === 0",
                           arg=root.element_handle())


def test_fft_by_keyboard(ui: tuple[Page, Lab, Locator]) -> None:
    page, _lab, root = ui
    label(root, "FFT view").focus()
    page.keyboard.press("Enter")  # the button toggles the FFT
    fft = label(root, "FFT image")
    fft.wait_for(state="visible")
    fft.focus()
    label(root, "d-spacing").evaluate("el => { delete el.dataset.dA; }")
    page.keyboard.press("Enter")  # measures the strongest peak
    d = number_attribute(label(root, "d-spacing"), "data-d-a")
    nearest = min(TRUE_SPACINGS, key=lambda s: abs(s - d))
    assert abs(d - nearest) / nearest < 0.02, (d, nearest)
    label(root, "FFT view").click()


def test_refine_from_here_holds_locked_parameters(ui: tuple[Page, Lab, Locator]) -> None:
    page, _lab, root = ui
    fit = run_json(page, "w.full_fit['params']")
    state = preview_state(root)
    label(root, "C10 value").fill(str(round(fit["C10"] + 6.0, 1)))
    label(root, "C10 value").press("Enter")  # a number box applies on Enter
    label(root, "depth value").fill("20")
    label(root, "depth value").press("Enter")  # a number box applies on Enter
    state = wait_preview(root, state["frame"] + 1, params={"depth": 20.0})
    start_loss = state["loss"]
    label(root, "depth lock").check()
    label(root, "refine from here").click()
    page.wait_for_function(
        "([el, c10]) => { const p = JSON.parse(el.dataset.previewParams || '{}');"
        " return el.dataset.status === 'done' && Math.abs(p.depth - 20) < 1e-9 &&"
        " Math.abs(p.C10 - c10) > 1e-6; }",
        arg=[root.element_handle(), state["params"]["C10"]], timeout=300_000)
    refined = run_json(page, "w.full_fit")
    assert refined["params"]["depth"] == pytest.approx(20.0, abs=1e-9)  # held fixed
    assert refined["loss"] <= start_loss + 1e-12
    shown = preview_state(root)
    assert shown["params"]["C10"] == pytest.approx(refined["params"]["C10"], abs=1e-9)
    assert label(root, "C10 value").input_value() != str(state["params"]["C10"])
    label(root, "depth lock").uncheck()
    widget_shot(page, root, "18-refined")


def test_frames_per_second_of_a_slider_drag(ui: tuple[Page, Lab, Locator]) -> None:
    """A 3 s drag of the C10 slider thumb with the mouse; frames painted per second."""
    page, _lab, root = ui
    slider = label(root, "C10 slider")
    slider.scroll_into_view_if_needed()
    box = slider.bounding_box()
    assert box is not None
    y = box["y"] + box["height"] / 2
    x0, x1 = box["x"] + box["width"] * 0.35, box["x"] + box["width"] * 0.65
    start = preview_state(root)["frame"]
    full_shape = root.get_attribute("data-preview-shape")
    page.mouse.move(x0, y)
    page.mouse.down()
    t0 = time.monotonic()
    i = 0
    during: set[tuple[str | None, str | None]] = set()  # (draft flag, shape) seen painted
    while time.monotonic() - t0 < 3.0:
        i += 1
        page.mouse.move(x0 + (x1 - x0) * (0.5 - 0.5 * math.cos(i / 15)), y)
        page.wait_for_timeout(16)
        during.add((root.get_attribute("data-preview-draft"),
                    root.get_attribute("data-preview-shape")))
    elapsed = time.monotonic() - t0
    painted = preview_state(root)["frame"] - start
    page.mouse.up()
    fps = painted / elapsed
    assert painted > 0
    # Drafts while dragging (the scan's own sampling), the full frame after the release.
    rows, cols = run_json(page, "list(w.session.dataset.scan_shape)")
    assert ("1", f"{rows}x{cols}") in during, during
    expect_attr = f"[data-preview-draft='0'][data-preview-shape='{full_shape}']"
    page.wait_for_selector(f".livessb{expect_attr}", timeout=60_000)
    import datetime
    import platform
    import subprocess

    commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                            cwd=Path(__file__).parent).stdout.strip()
    record = {"benchmark": "widget: frames painted per second in Chromium during a 3 s "
                           "mouse drag of the C10 slider (demo dataset, JupyterLab)",
              "device": run_json(page, "w.session.device"),
              "cpu": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores",
              "frame_shape": root.get_attribute("data-preview-shape"),
              "frames_painted": painted, "drag_s": round(elapsed, 3),
              "frames_per_s": round(fps, 2), "pointer_moves": i,
              "browser_ms_last_frame": float(root.get_attribute("data-paint-ms") or "nan"),
              "load_average_1min": round(os.getloadavg()[0], 2),
              "commit": commit, "date": datetime.date.today().isoformat()}
    (ARTIFACTS / "widget-fps.json").write_text(json.dumps(record, indent=2))
    target = os.environ.get("LIVESSB_FPS_JSON")
    if target:  # runs accumulate: the shared 2-core host's load varies from run to run
        path = Path(target)
        doc = json.loads(path.read_text()) if path.is_file() else {}
        runs = doc.get("runs", [doc] if doc else [])
        path.write_text(json.dumps({"benchmark": record["benchmark"], "runs": [*runs, record]},
                                   indent=2) + "\n")
    print(f"frames per second during a 3 s slider drag: {fps:.1f}")
