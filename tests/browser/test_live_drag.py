"""A live region drag in a real JupyterLab + Chromium: the crop follows the pointer.

With live regions on (the toolbar's checkbox), a region of the CPU demo is dragged
with the mouse for about 3 s. Every crop the browser paints is recorded from the crop
`img`'s `data-generation` / `data-behind` (a MutationObserver): crops of at least two
edits are painted during or right after the drag, never an older edit's after a
newer one, and the last one painted is the fit of the last edit, not behind.
Screenshots: test-artifacts/live-drag-during.png (the button held, a crop painted
mid-drag, if one was by half time) and live-drag.png (after the release).
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest

pytestmark = [pytest.mark.browser, pytest.mark.slow]

from lab import (  # noqa: E402
    drag_scan,
    fitted_demo,
    require_lab_stack,
    run_code,
    run_json,
    scan_to_page,
    screenshot,
    show_canvas,
    wait_crop,
    wait_status,
)

if TYPE_CHECKING:
    from lab import Lab
    from playwright.sync_api import Locator, Page

require_lab_stack()

REGION_TRIALS = 20  # region fits of well under a second on the CPU: several per drag
DRAG_S = 3.0
SHAPE = (96, 96)  # the demo's scan


@pytest.fixture(scope="module")
def ui(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Page, Lab, Locator]]:
    root_dir = tmp_path_factory.mktemp("live-drag") / "lab"
    with fitted_demo(root_dir, "live-drag") as ui:
        yield ui


def watch_crop(root: Locator, rid: str) -> None:
    """Record every crop painted for ``rid`` in ``window.__crops``: [generation, behind, t]."""
    root.evaluate(
        """(root, rid) => {
            const img = root.querySelector(`img[aria-label="region crop ${rid}"]`);
            window.__crops = [];
            const note = () => window.__crops.push(
                [Number(img.dataset.generation), Number(img.dataset.behind), performance.now()]);
            new MutationObserver(note).observe(
                img, {attributes: true, attributeFilter: ['data-generation']});
        }""", rid)


def painted(page: Page) -> list[list[float]]:
    out: list[list[float]] = page.evaluate("() => window.__crops")
    return out


def drag_for(page: Page, root: Locator, start: tuple[float, float], seconds: float,
             amplitude: float) -> float:
    """Hold the left button at ``start`` (scan px) and move up and down by ``amplitude``
    rows for ``seconds``, one pointer move per display frame; returns performance.now()
    at the release."""
    show_canvas(root)
    page.mouse.move(*scan_to_page(root, *start, SHAPE))
    page.mouse.down()
    t0 = time.monotonic()
    shot = False
    while (t := time.monotonic() - t0) < seconds:
        row = start[0] + amplitude * math.sin(2 * math.pi * t / seconds)
        page.mouse.move(*scan_to_page(root, row, start[1], SHAPE))
        page.wait_for_timeout(16)
        if not shot and painted(page) and t > seconds / 2:  # a crop painted mid-drag
            screenshot(page, "live-drag-during")
            shot = True
    page.mouse.move(*scan_to_page(root, start[0] - amplitude / 2, start[1], SHAPE))
    released: float = page.evaluate("() => performance.now()")
    page.mouse.up()
    return released


def test_live_drag_paints_crops_while_dragging(ui: tuple[Page, Lab, Locator]) -> None:
    page, _lab, root = ui
    run_code(page, f"w.trials = {REGION_TRIALS}")
    live = root.get_by_label("live regions", exact=True)
    live.check()
    assert run_json(page, "(w.wait(60), w.live_regions)[1]") is True

    r0, r1, c0, c1 = 30, 54, 36, 60  # a 24 px square in the middle of the scan
    drag_scan(page, root, (r0 + 0.2, c0 + 0.2), (r1 - 0.2, c1 - 0.2), SHAPE)
    wait_crop(root, "r1", 1)
    wait_status(root, "done")
    first = run_json(page, "w.region_results['r1']['generation']")

    watch_crop(root, "r1")
    started: float = page.evaluate("() => performance.now()")
    released = drag_for(page, root, ((r0 + r1) / 2, (c0 + c1) / 2), DRAG_S, amplitude=12)
    during = [c for c in painted(page) if c[2] <= released]
    final = run_json(page, "(w.wait(300), w._scheduler.generation('r1'))[1]")
    wait_crop(root, "r1", final)
    wait_status(root, "done")
    crops = painted(page)
    show_canvas(root)
    screenshot(page, "live-drag")

    gens = [int(g) for g, _, _ in crops]
    assert final > first + 2, (first, final)  # the drag made edits
    # crops of several edits, not only the last: overtaken fits are painted (before the
    # fix only the final edit's crop ever was)
    assert len(set(gens)) >= 2, crops
    assert gens == sorted(gens), crops  # never an older edit's crop after a newer one
    assert all(b >= 0 for _, b, _ in crops), crops
    assert gens[-1] == final and crops[-1][1] == 0, (crops, final)
    img = root.get_by_label("region crop r1", exact=True)
    assert img.get_attribute("data-generation") == str(final)
    assert img.get_attribute("data-behind") == "0"
    rec: dict[str, Any] = run_json(page, "w.region_results['r1']")
    assert rec["status"] == "done" and rec["generation"] == final and rec["behind"] == 0
    print(f"live drag: {len(crops)} crops painted ({len(during)} during the drag, "
          f"{len(during) / ((released - started) / 1000):.1f}/s), generations {gens}, "
          f"behind {[int(b) for _, b, _ in crops]}")
