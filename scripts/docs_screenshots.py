"""Take the user guide's screenshots (docs/images/*.png) in real JupyterLab + Chromium.

One JupyterLab session, the demo notebook run once, then each control driven as
tests/browser/test_widget_controls.py does; every shot is cropped to the widget
element (or one of its parts) and quantised to a 256-colour PNG to stay small.

    npm run build   # the bundle the kernel serves
    PYTHONPATH=$PWD/python python scripts/docs_screenshots.py
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "browser"))

from lab import (  # noqa: E402
    DEMO_NOTEBOOK,
    chromium,
    click_fft_brightest,
    drag_scan,
    jupyterlab,
    open_notebook,
    preview_state,
    run_json,
    scan_to_page,
    show_canvas,
    stack_problem,
    wait_crop,
    wait_preview,
    wait_status,
    widget_root,
)

IMAGES = REPO / "docs" / "images"
# parts of the widget at this viewport (CSS px from its top-left): the scan view column
# with its controls, the scan image alone, the parameter column
VIEW_COLUMN = (0.0, 0.0, 518.0, 650.0)
SCAN_IMAGE = (0.0, 0.0, 516.0, 516.0)
PARAM_COLUMN = (520.0, 0.0, 915.0, 600.0)


def save(element: Any, name: str, part: tuple[float, float, float, float] | None = None) -> None:
    """Screenshot one element (or ``part`` of it: x0, y0, x1, y1 CSS pixels from its
    top-left corner), quantised to 256 colours."""
    from PIL import Image

    path = IMAGES / f"{name}.png"
    if part is None:
        element.screenshot(path=str(path))
    else:  # the widget's top at the top of the notebook panel, so that the part is on screen
        element.evaluate("el => el.scrollIntoView({block: 'start'})")
        element.page.wait_for_timeout(200)
        box = element.bounding_box()
        x0, y0, x1, y1 = part
        element.page.screenshot(path=str(path), clip={
            "x": box["x"] + x0, "y": box["y"] + y0,
            "width": min(x1, box["width"]) - x0, "height": min(y1, box["height"]) - y0})
    with Image.open(path) as im:
        small = im.convert("RGB").quantize(colors=256, method=Image.Quantize.MEDIANCUT)
    small.save(path, optimize=True)
    print(f"{path.relative_to(REPO)}: {path.stat().st_size // 1024} KB")


def label(root: Any, name: str) -> Any:
    return root.get_by_label(name, exact=True)


def main() -> int:
    problem = stack_problem()
    if problem:
        print(problem, file=sys.stderr)
        return 1
    IMAGES.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp, jupyterlab(Path(tmp) / "lab") as lab, \
            chromium() as browser:
        page = browser.new_page(viewport={"width": 1400, "height": 1300})
        open_notebook(page, lab, DEMO_NOTEBOOK.name)
        page.evaluate("() => window.jupyterapp.commands.execute('notebook:run-all-cells')")
        root = widget_root(page)
        label(root, "scan image").wait_for(timeout=120_000)
        bar = root.get_by_role("progressbar", name="fit progress", exact=True)
        bar.wait_for(state="visible", timeout=300_000)
        page.wait_for_timeout(1500)
        save(root, "progress")
        wait_status(root, "done", timeout_ms=600_000)
        bar.wait_for(state="hidden", timeout=60_000)
        wait_preview(root, 1, timeout_ms=120_000)
        show_canvas(root)
        save(root, "fitted")

        # steering: a slider and a typed value
        state = preview_state(root)
        target = round(state["params"]["C10"] + 25.0, 1)
        label(root, "C10 slider").fill(str(target))
        state = wait_preview(root, state["frame"] + 1, params={"C10": target})
        label(root, "C12 value").fill("4.5")
        label(root, "C12 value").press("Enter")  # a number box applies on Enter
        wait_preview(root, state["frame"] + 1, params={"C12": 4.5})
        save(root, "steered", (0.0, 0.0, 915.0, 540.0))
        label(root, "reset to fit").click()
        fit = run_json(page, "w.full_fit['params']")
        wait_preview(root, 0, params={"C10": fit["C10"]})

        # colormap and manual contrast over the histogram
        label(root, "colormap").select_option("viridis")
        lo = float(label(root, "contrast min").input_value())
        hi = float(label(root, "contrast max").input_value())
        label(root, "contrast max").fill(f"{lo + 0.6 * (hi - lo):.3f}")
        label(root, "contrast max").press("Tab")
        show_canvas(root)
        save(root, "colormap-contrast", VIEW_COLUMN)
        label(root, "auto contrast").click()
        label(root, "colormap").select_option("gray")

        # wheel zoom (scale bar follows)
        show_canvas(root)
        box = label(root, "scan image").bounding_box()
        page.mouse.move(box["x"] + box["width"] * 0.4, box["y"] + box["height"] * 0.5)
        page.mouse.wheel(0, -400)
        page.wait_for_function("(el) => Number(el.dataset.zoom) > 1", arg=root.element_handle())
        page.wait_for_timeout(300)
        save(root, "zoomed", SCAN_IMAGE)
        label(root, "reset view").click()

        # FFT and a d-spacing measurement
        fft = click_fft_brightest(page, root)
        page.wait_for_timeout(200)
        print("d-spacing:", label(root, "d-spacing").inner_text())
        fft_box, root_box = fft.bounding_box(), root.bounding_box()
        y0 = fft_box["y"] - root_box["y"]
        save(root, "fft-d-spacing", (0.0, y0, fft_box["width"] + 4, y0 + fft_box["height"] + 30))
        label(root, "FFT view").click()

        # trials list
        trials = run_json(page, "w.trials_full[:2]")
        state = preview_state(root)
        label(root, f"trial {trials[0]['n']}").click()
        wait_preview(root, state["frame"] + 1, params={"C10": trials[0]["params"]["C10"]})
        save(root, "trial", (520.0, 0.0, 915.0, 400.0))
        label(root, "reset to fit").click()
        wait_preview(root, 0, params={"C10": fit["C10"]})

        # the diffraction panel: the pattern under the pointer, a quarter of the BF pixels
        scan_shape = tuple(run_json(page, "list(w.scan_shape)"))  # (a new cell scrolls)
        show_canvas(root)
        page.mouse.move(*scan_to_page(root, 30.5, 60.5, scan_shape), steps=3)
        root.locator("xpath=self::*[@data-pattern-position='30,60']").wait_for(timeout=30_000)
        bf = label(root, "BF pixels")
        quarter = int(bf.get_attribute("max") or 4) // 4
        bf.fill(str(quarter))
        root.locator(f"xpath=self::*[@data-preview-bf-pixels='{quarter}']").wait_for(
            timeout=120_000)
        save(root.locator(".livessb-diffraction"), "diffraction")
        bf.fill(bf.get_attribute("max") or "0")
        root.locator("xpath=self::*[@data-preview-bf-pixels='0']").wait_for(timeout=120_000)

        # pins and export (a folder relative to the notebook's)
        (lab.root / "exports").mkdir()  # livessb creates no folders (the folder rule)
        label(root, "export folder").fill("exports")
        state = preview_state(root)
        label(root, "pin").click()
        label(root, "C10 slider").fill(str(round(state["params"]["C10"] - 10.0, 1)))
        wait_preview(root, state["frame"] + 1)
        label(root, "pin").click()
        page.wait_for_function("(el) => el.querySelectorAll('li').length === 2",
                               arg=label(root, "pins").element_handle())
        label(root, "export pins").click()
        label(root, "export result").locator(
            "xpath=self::*[contains(., 'exported') or contains(., 'failed')]").wait_for(
            timeout=300_000)
        print("export:", label(root, "export result").inner_text())
        save(root, "pins-export", PARAM_COLUMN)
        label(root, "reset to fit").click()

        # two regions, each fitted, with its crop
        shape = tuple(run_json(page, "list(w.scan_shape)"))
        for rid, (a, b, c, d) in (("r1", (20, 76, 4, 30)), ("r2", (20, 76, 66, 92))):
            drag_scan(page, root, (a + 0.2, c + 0.2), (b - 0.2, d - 0.2), shape)
            wait_crop(root, rid, 1)
        wait_status(root, "done")
        show_canvas(root)
        page.wait_for_timeout(300)
        save(root, "regions", SCAN_IMAGE)
        save(label(root, "region crops"), "region-crops")
        page.evaluate("() => window.jupyterapp.shell.currentWidget.sessionContext.shutdown()")
    total = sum(p.stat().st_size for p in IMAGES.glob("*.png"))
    print(f"docs/images: {total // 1024} KB in all")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
