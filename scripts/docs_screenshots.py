"""Take the user guide's screenshots (docs/images/*.png) in real JupyterLab + Chromium.

One JupyterLab session at a 1600×1000 window, the demo notebook run once, then each
control driven as the browser tests drive it; each shot is one part of the widget
(the whole widget, a column, the image) scrolled to the top of the notebook, or the
whole window, quantised to a 256-colour PNG to stay small. ``--out DIR`` also copies
them there (CI: test-artifacts/docs-images). About three minutes on 2 CPU cores.

    npm run build   # the bundle the kernel serves
    PYTHONPATH=$PWD/python python scripts/docs_screenshots.py [--out DIR]
"""

from __future__ import annotations

import argparse
import shutil
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
    label,
    open_notebook,
    preview_state,
    run_code,
    run_json,
    scan_to_page,
    stack_problem,
    wait_crop,
    wait_preview,
    wait_status,
    widget_root,
)

IMAGES = REPO / "docs" / "images"
WINDOW = {"width": 1600, "height": 1000}
CELL_PX = 900  # the narrow shot: the widget in a cell this wide
REGIONS = {"r1": (20, 76, 4, 30), "r2": (20, 76, 66, 92), "r3": (40, 70, 35, 60)}
MAP_TILE, MAP_TRIALS = 32, 40  # the demo's 96² scan: 3×3 tiles, fewer trials (CPU)


def to_top(root: Any) -> None:
    """The widget's top at the top of the notebook panel, as a user scrolls to it."""
    root.evaluate("el => el.scrollIntoView({block: 'start'})")
    root.page.wait_for_timeout(250)


def quantise(path: Path) -> None:
    from PIL import Image

    with Image.open(path) as im:
        small = im.convert("RGB").quantize(colors=256, method=Image.Quantize.MEDIANCUT)
    small.save(path, optimize=True)
    print(f"{path.relative_to(REPO)}: {im.size[0]}×{im.size[1]}, {path.stat().st_size // 1024} KB")


def save(root: Any, name: str, *parts: Any, pad: float = 4.0) -> None:
    """Screenshot the union of ``parts`` (locators; none: the whole widget) with the
    widget scrolled to the top of the notebook."""
    to_top(root)
    boxes = [p.bounding_box() for p in (parts or (root,))]
    x0 = min(b["x"] for b in boxes) - pad
    y0 = min(b["y"] for b in boxes) - pad
    x1 = max(b["x"] + b["width"] for b in boxes) + pad
    y1 = max(b["y"] + b["height"] for b in boxes) + pad
    path = IMAGES / f"{name}.png"
    root.page.screenshot(path=str(path), clip={"x": max(x0, 0), "y": max(y0, 0),
                                               "width": x1 - max(x0, 0), "height": y1 - max(y0, 0)})
    quantise(path)


def save_window(page: Any, name: str) -> None:
    path = IMAGES / f"{name}.png"
    page.screenshot(path=str(path))
    quantise(path)


def part(root: Any, css: str) -> Any:
    return root.locator(css).first


def shots(page: Any, root: Any) -> None:
    """Drive the widget through its controls, one shot each."""
    bar = root.get_by_role("progressbar", name="fit progress", exact=True)
    bar.wait_for(state="visible", timeout=300_000)
    page.wait_for_function(  # half-way through the first search
        "(b) => b.dataset.stage === 'search' && Number(b.getAttribute('aria-valuenow')) >= 100",
        arg=bar.element_handle(), timeout=300_000)
    save(root, "progress")
    wait_status(root, "done", timeout_ms=600_000)
    bar.wait_for(state="hidden", timeout=60_000)
    wait_preview(root, 1, timeout_ms=120_000)
    save(root, "fitted")
    to_top(root)
    save_window(page, "window")
    fit = run_json(page, "w.full_fit['params']")

    # steering: a slider and a typed value
    state = preview_state(root)
    target = round(state["params"]["C10"] + 25.0, 1)
    label(root, "C10 slider").fill(str(target))
    state = wait_preview(root, state["frame"] + 1, params={"C10": target})
    label(root, "C12 value").fill("4.5")
    label(root, "C12 value").press("Enter")
    wait_preview(root, state["frame"] + 1, params={"C12": 4.5})
    save(root, "steered", part(root, ".livessb-imagerow"), part(root, ".livessb-steering"))
    label(root, "reset to fit").click()
    wait_preview(root, 0, params={"C10": fit["C10"]})

    # colormap and manual contrast over the histogram, the colour bar beside the image
    label(root, "colormap").select_option("viridis")
    lo = float(label(root, "contrast min").input_value())
    hi = float(label(root, "contrast max").input_value())
    label(root, "contrast max").fill(f"{lo + 0.6 * (hi - lo):.3f}")
    label(root, "contrast max").press("Tab")
    save(root, "colormap-contrast", part(root, ".livessb-main"))
    label(root, "auto contrast").click()
    label(root, "colormap").select_option("gray")

    # wheel zoom (scale bar follows)
    to_top(root)
    box = label(root, "scan image").bounding_box()
    page.mouse.move(box["x"] + box["width"] * 0.4, box["y"] + box["height"] * 0.5)
    page.mouse.wheel(0, -400)
    page.wait_for_function("(el) => Number(el.dataset.zoom) > 1", arg=root.element_handle())
    page.wait_for_timeout(300)
    save(root, "zoomed", part(root, ".livessb-stage"), pad=0)
    label(root, "reset view").click()

    # measurement: the FFT with a clicked peak and a line profile across the lattice
    click_fft_brightest(page, root)
    page.wait_for_timeout(200)
    print("d-spacing:", label(root, "d-spacing").inner_text())
    label(root, "line profile").click()
    shape = tuple(run_json(page, "list(w.scan_shape)"))
    to_top(root)
    page.mouse.move(*scan_to_page(root, 12.5, 8.5, shape))
    page.mouse.down()
    page.mouse.move(*scan_to_page(root, 12.5, 60.5, shape), steps=6)
    page.mouse.up()
    page.wait_for_timeout(300)
    print("profile length:", label(root, "profile length").inner_text())
    save(root, "measure", part(root, ".livessb-main"))
    label(root, "line profile").click()
    label(root, "FFT view").click()

    # trials list
    trials = run_json(page, "w.trials_full[:2]")
    state = preview_state(root)
    label(root, f"trial {trials[0]['n']}").click()
    wait_preview(root, state["frame"] + 1, params={"C10": trials[0]["params"]["C10"]})
    save(root, "trial")
    label(root, "reset to fit").click()
    wait_preview(root, 0, params={"C10": fit["C10"]})

    # the diffraction panel: the pattern under the pointer, a quarter of the BF pixels
    to_top(root)
    page.mouse.move(*scan_to_page(root, 30.5, 60.5, shape), steps=3)
    root.locator("xpath=self::*[@data-pattern-position='30,60']").wait_for(timeout=30_000)
    bf = label(root, "BF pixels")
    quarter = int(bf.get_attribute("max") or 4) // 4
    bf.fill(str(quarter))
    root.locator(f"xpath=self::*[@data-preview-bf-pixels='{quarter}']").wait_for(
        timeout=120_000)
    save(root, "diffraction", part(root, ".livessb-diffraction"))
    bf.fill(bf.get_attribute("max") or "0")
    root.locator("xpath=self::*[@data-preview-bf-pixels='0']").wait_for(timeout=120_000)

    # pins and export (into a folder that exists, relative to the notebook's)
    run_code(page, "import os; os.makedirs('exports', exist_ok=True)")
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
    save(root, "pins-export", part(root, ".livessb-lists"))
    label(root, "reset to fit").click()
    wait_preview(root, 0, params={"C10": fit["C10"]})

    # a map of 3×3 tiles: C10 over the scan follows the demo's defocus gradient
    run_code(page, f"w.trials = {MAP_TRIALS}")
    label(root, "map tile").fill(str(MAP_TILE))
    label(root, "map tile").press("Enter")  # Enter in the tile box fits the map (a click too
    # would queue a second map: the screenshot then caught its bar at 0/9 after the first)
    bar.wait_for(state="visible", timeout=60_000)
    wait_status(root, "done", timeout_ms=600_000)
    root.locator(".livessb-map").locator("xpath=self::*[@data-parameter='C10']").wait_for(
        timeout=60_000)
    page.wait_for_timeout(300)
    save(root, "map", part(root, ".livessb-imagerow"), part(root, ".livessb-state"))
    label(root, "map parameter").select_option("none")

    # three regions, each fitted: the newest large in the gallery, the others thumbnails
    for rid, (a, b, c, d) in REGIONS.items():
        drag_scan(page, root, (a + 0.2, c + 0.2), (b - 0.2, d - 0.2), shape)
        wait_crop(root, rid, 1)
    wait_status(root, "done")
    page.wait_for_timeout(300)
    save(root, "regions")
    label(root, "region panel r1").click()  # its thumbnail: r1 large
    page.mouse.move(0, 0)  # no hover outline on the thumbnail now under the pointer
    page.wait_for_timeout(300)
    save(root, "region-crops", part(root, ".livessb-gallery"))

    # the same widget in a 900 px wide cell (a taller window: the whole widget in view)
    output = root.evaluate(
        "el => el.closest('.jp-OutputArea-output').getBoundingClientRect().width")
    page.set_viewport_size({"width": int(WINDOW["width"] - output + CELL_PX), "height": 1500})
    page.wait_for_timeout(400)
    save(root, "narrow")
    page.set_viewport_size(WINDOW)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, help="also copy the PNGs into this folder")
    args = parser.parse_args(argv)
    problem = stack_problem()
    if problem:
        print(problem, file=sys.stderr)
        return 1
    IMAGES.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp, jupyterlab(Path(tmp) / "lab") as lab, \
            chromium() as browser:
        page = browser.new_page(viewport=WINDOW)
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        open_notebook(page, lab, DEMO_NOTEBOOK.name)
        page.evaluate("() => window.jupyterapp.commands.execute('notebook:run-all-cells')")
        root = widget_root(page)
        label(root, "scan image").wait_for(timeout=120_000)
        shots(page, root)
        page.evaluate("() => window.jupyterapp.shell.currentWidget.sessionContext.shutdown()")
        if errors:
            print("page errors:", *errors, sep="\n  ", file=sys.stderr)
            return 1
    total = sum(p.stat().st_size for p in IMAGES.glob("*.png"))
    print(f"docs/images: {total // 1024} KB in all")
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        for png in IMAGES.glob("*.png"):
            shutil.copyfile(png, args.out / png.name)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
