"""End to end: the demo notebook in a real JupyterLab, driven with Chromium (Playwright).

Draw two regions, move and resize the second, check the first region and the
full-field fit are untouched and each C10 is near the local truth; save the
calibration with the button; restart the kernel and restore without fitting.
Screenshots go to test-artifacts/.
"""

from __future__ import annotations

import json
import shutil
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

pytestmark = [pytest.mark.browser, pytest.mark.slow]

from lab import (  # noqa: E402
    DEMO_NOTEBOOK,
    canvas_box,
    chromium,
    drag_scan,
    full_readout,
    jupyterlab,
    open_notebook,
    panel_state,
    require_lab_stack,
    restart_kernel,
    run_all_cells,
    run_code,
    run_json,
    screenshot,
    show_canvas,
    wait_crop,
    wait_status,
    widget_root,
)

from helpers import check_installed_location  # noqa: E402

if TYPE_CHECKING:
    from lab import Lab
    from playwright.sync_api import Page

    from livessb.simulate import SimulationTruth

require_lab_stack()

FIT_PARAMETERS = ("C10", "C12", "phi12", "tilt_row_mrad", "tilt_col_mrad", "depth")
C10_TOLERANCE_A = 5.0  # demo gradient is 0.8 Å per scan column


@pytest.fixture(scope="module")
def truth() -> tuple[tuple[int, int], SimulationTruth]:
    import livessb.simulate

    ds, t = livessb.simulate.demo_dataset(with_truth=True)
    return ds.scan_shape, t


def test_demo_notebook_regions_calibration_restore(
        tmp_path: Path, truth: tuple[tuple[int, int], SimulationTruth]) -> None:
    shape, t = truth
    t_start = time.monotonic()
    console: list[str] = []
    with jupyterlab(tmp_path / "lab") as lab, chromium() as browser:
        page = browser.new_page(viewport={"width": 1500, "height": 1100})
        page.on("console", lambda m: console.append(f"{m.type}: {m.text}"))
        page.on("pageerror", lambda e: console.append(f"pageerror: {e}"))
        try:
            _scenario(page, lab, shape, t)
        except BaseException:
            screenshot(page, "browser-failure")
            (Path("test-artifacts") / "browser-console.log").write_text("\n".join(console))
            shutil.copyfile(lab.log, Path("test-artifacts") / "jupyterlab.log")
            raise
        finally:
            Path("test-artifacts").mkdir(exist_ok=True)
            (Path("test-artifacts") / "browser-console.log").write_text("\n".join(console))
    print(f"browser test took {time.monotonic() - t_start:.1f} s")


def _scenario(page: Page, lab: Lab, shape: tuple[int, int], t: SimulationTruth) -> None:
    open_notebook(page, lab, DEMO_NOTEBOOK.name)
    run_all_cells(page)
    root = widget_root(page)
    root.get_by_label("scan image").wait_for(timeout=120_000)
    wait_status(root, "done", timeout_ms=400_000)  # full-field fit (defaults) on the CPU
    page.wait_for_timeout(300)
    screenshot(page, "01-full-field-fit")
    full_before = full_readout(root)
    assert full_before.get("rotation_deg") and full_before.get("C10")
    check_installed_location(run_json(page, "__import__('livessb').__file__"))  # the kernel's

    # --- draw two regions: left third and right third of the scan
    r1 = (20, 76, 4, 30)   # (row_start, row_stop, col_start, col_stop) intended
    r2 = (20, 76, 66, 92)
    for rid, (a, b, c, d) in (("r1", r1), ("r2", r2)):
        drag_scan(page, root, (a + 0.2, c + 0.2), (b - 0.2, d - 0.2), shape)
        wait_crop(root, rid, 1)
    wait_status(root, "done")
    show_canvas(root)
    screenshot(page, "02-two-regions")
    first = panel_state(root, "r1")
    second = panel_state(root, "r2")
    assert first["visible"] and second["visible"], (first, second)
    for rid in ("r1", "r2"):  # every crop carries a scale bar: a round length and its unit
        bar = root.locator(f'[data-region-id="{rid}"]').get_by_label("scale bar", exact=True)
        number, unit = bar.inner_text().split()
        assert float(number) > 0 and unit in ("Å", "nm"), bar.inner_text()
    root.get_by_label("region crops", exact=True).screenshot(
        path=str(Path("test-artifacts") / "02-crops-with-scale-bars.png"))
    assert first["status"] == "done" and second["status"] == "done"
    regions = run_json(page, "w.regions")
    bounds = {r["id"]: (r["row_start"], r["row_stop"], r["col_start"], r["col_stop"])
              for r in regions}
    assert bounds == {"r1": r1, "r2": r2}, bounds

    # --- move the second region (drag its interior up by 10 rows, left by 4 columns)
    a, b, c, d = r2
    mid_r, mid_c = (a + b) / 2, (c + d) / 2
    drag_scan(page, root, (mid_r, mid_c), (mid_r - 10, mid_c - 4), shape)
    wait_crop(root, "r2", 2)
    moved = (a - 10, b - 10, c - 4, d - 4)
    # --- resize it: drag the south-east handle 6 rows down, 2 columns left
    a, b, c, d = moved
    drag_scan(page, root, (b, d), (b + 6, d - 2), shape)
    wait_crop(root, "r2", 3)
    resized = (a, b + 6, c, d - 2)
    wait_status(root, "done")
    page.wait_for_timeout(300)
    show_canvas(root)
    screenshot(page, "03-moved-resized")
    regions = run_json(page, "w.regions")
    bounds = {r["id"]: (r["row_start"], r["row_stop"], r["col_start"], r["col_stop"])
              for r in regions}
    assert bounds == {"r1": r1, "r2": resized}, bounds

    # first region and full field untouched by the edits of the second
    first_after = panel_state(root, "r1")
    for key in ("params", "loss", "src", "sha", "generation"):
        assert first_after[key] == first[key], key
    assert full_readout(root) == full_before
    second_after = panel_state(root, "r2")
    assert second_after["generation"] == 3 and second_after["sha"] != second["sha"]
    f = run_json(page, "w.upsample")
    assert second_after["natural"] == [(resized[1] - resized[0]) * f,
                                       (resized[3] - resized[2]) * f]

    # fitted C10 near the local truth
    for rid, bb, state in (("r1", r1, first_after), ("r2", resized, second_after)):
        want = t.local_C10(bb)
        got = state["params"]["C10"]
        assert abs(got - want) < C10_TOLERANCE_A, (rid, got, want)
    # the kernel agrees with what the browser shows
    kernel_params = run_json(page, "{k: r['params'] for k, r in w.region_results.items()}")
    for rid, state in (("r1", first_after), ("r2", second_after)):
        shown = {k: kernel_params[rid][k] for k in state["params"]}
        assert shown == state["params"], rid
        assert set(state["params"]) == set(FIT_PARAMETERS)

    # --- save calibration with the button
    root.get_by_label("calibration path").fill("calibration.json")
    root.get_by_label("save calibration").click()
    root.locator(".livessb-message", has_text="saved").wait_for(timeout=60_000)
    cal = lab.root / "calibration.json"
    assert cal.is_file()
    doc = json.loads(cal.read_text())
    assert [r["id"] for r in doc["regions"]] == ["r1", "r2"]
    params_before = {"r1": first_after["params"], "r2": second_after["params"]}

    # --- delete the selected region (r2) with the button: panel and kernel region go
    root.get_by_label("delete region").click()
    root.locator('[data-region-id="r2"]').wait_for(state="detached", timeout=30_000)
    assert [r["id"] for r in run_json(page, "w.regions")] == ["r1"]
    assert run_json(page, "(w.wait(60), sorted(w.session.regions))[1]") == ["r1"]
    assert panel_state(root, "r1")["sha"] == first["sha"]

    # --- Python edits the regions, the view follows; an invalid edit shows an error
    run_code(page, "w.regions = w.regions + [dict(id='r3', row_start=60, row_stop=90, "
                   "col_start=40, col_stop=70)]")
    wait_crop(root, "r3", 1)
    assert panel_state(root, "r3")["visible"]
    run_code(page, "w.regions = [dict(id='r1', row_start=0, row_stop=500, col_start=0, "
                   "col_stop=5)]")
    wait_status(root, "error", timeout_ms=30_000)
    root.locator(".livessb-message", has_text="rejected").wait_for(timeout=30_000)
    assert [r["id"] for r in run_json(page, "w.regions")] == ["r1", "r3"]
    show_canvas(root)
    screenshot(page, "05-python-edit-and-rejected-edit")

    # --- restart the kernel, restore without fitting
    restart_kernel(page)
    run_code(page, "import livessb\n"
                   "ds = livessb.simulate.demo_dataset()\n"
                   "w2 = livessb.SSBWidget(ds, calibration='calibration.json', fit=False)\n"
                   "display(w2)")
    root2 = page.locator(".livessb").last
    wait_status(root2, "done", timeout_ms=120_000)
    for rid in ("r1", "r2"):
        wait_crop(root2, rid, 1)
    page.wait_for_timeout(300)
    show_canvas(root2)
    screenshot(page, "04-restored")
    info = run_json(page, "{'evaluations': w2.session.evaluations, "
                          "'params': {k: r['params'] for k, r in w2.region_results.items()}, "
                          "'regions': w2.regions}")
    assert info["evaluations"] == 0
    for rid in ("r1", "r2"):
        state = panel_state(root2, rid)
        assert state["visible"]
        assert state["params"] == params_before[rid]
        assert {k: info["params"][rid][k] for k in FIT_PARAMETERS} == params_before[rid]
    assert {r["id"]: (r["row_start"], r["row_stop"], r["col_start"], r["col_stop"])
            for r in info["regions"]} == {"r1": r1, "r2": resized}
    out = run_code(page, "print('evaluations', w2.session.evaluations)")
    assert "evaluations 0" in out
    assert canvas_box(root2)["width"] > 100


if __name__ == "__main__":  # pragma: no cover
    sys.exit(pytest.main([__file__, "-v", "-s", *sys.argv[1:]]))
