"""The browser's own rules, without a kernel: the built widget rendered in Chromium
against a scripted model (mock_host.html). Frames can be delivered out of order
here, which the real session never does: a stale frame must still not be painted.
"""

from __future__ import annotations

import contextlib
import functools
import http.server
import math
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from helpers import importable, require

pytestmark = [pytest.mark.browser]
require(importable("playwright"), "pip install playwright (the dev extra)")

from lab import STATIC, chromium, stack_problem  # noqa: E402

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Locator, Page

require(not stack_problem(), stack_problem())


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        pass


@contextlib.contextmanager
def _serve(directory: Path) -> Iterator[str]:
    handler = functools.partial(_Quiet, directory=str(directory))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with chromium() as b:
        yield b


@pytest.fixture
def page(browser: Browser, tmp_path: Path) -> Iterator[Page]:
    for name in ("widget.js", "widget.css"):
        shutil.copyfile(STATIC.parent / name, tmp_path / name)
    shutil.copyfile(Path(__file__).parent / "mock_host.html", tmp_path / "index.html")
    errors: list[str] = []
    with _serve(tmp_path) as url:
        p = browser.new_page(viewport={"width": 1400, "height": 1000})
        p.on("pageerror", lambda e: errors.append(str(e)))
        p.goto(f"{url}/index.html")
        p.wait_for_function("() => window.ready === true")
        yield p
        p.close()
    assert not errors, errors


def previews(page: Page) -> list[dict[str, Any]]:
    return page.evaluate("window.sent.filter((m) => m.type === 'preview')")


def label(page: Page, name: str) -> Locator:
    return page.get_by_label(name, exact=True)


def test_latest_wins_one_request_in_flight_then_the_newest(page: Page) -> None:
    slider = label(page, "C10 slider")
    for v in (-30, -20, -10, 0, 10):
        slider.fill(str(v))
    sent = previews(page)
    assert [m["params"]["C10"] for m in sent] == [-30]  # the rest wait: no backlog
    page.evaluate("([seq, p]) => window.frame(seq, p)", [sent[0]["seq"], sent[0]["params"]])
    sent = previews(page)
    assert [m["params"]["C10"] for m in sent] == [-30, 10]  # only the newest of the waiting
    assert sent[1]["seq"] > sent[0]["seq"]


def test_a_stale_frame_is_never_painted_after_a_newer_one(page: Page) -> None:
    root = page.locator(".livessb")
    page.evaluate("() => { window.frame(10, {C10: 1}, 0.2); window.frame(12, {C10: 3}, 0.9); }")
    assert root.get_attribute("data-preview-frame") == "2"
    page.evaluate("() => window.frame(11, {C10: 2}, 0.5)")  # late and old: dropped
    assert root.get_attribute("data-preview-frame") == "2"
    assert root.get_attribute("data-preview-params") == '{"C10":3}'
    page.evaluate("() => window.frame(12, {C10: 4}, 0.4)")  # same seq: Python's own frame
    assert root.get_attribute("data-preview-params") == '{"C10":4}'


def test_a_malformed_frame_shows_a_notice_and_paints_nothing(page: Page) -> None:
    root = page.locator(".livessb")
    page.evaluate("""() => window.emitMsg({type: 'frame', seq: 5, params: {C10: 1},
                                           shape: [8, 8], range: [0, 1]}, 10)""")
    assert root.get_attribute("data-preview-frame") == "0"
    notice = label(page, "notice")
    assert "10 bytes, expected 128" in notice.inner_text()


def test_live_region_edits_are_throttled_and_latest_wins(page: Page) -> None:
    page.evaluate("() => window.setTrait('live_regions', true)")
    assert label(page, "live regions").is_checked()
    box = label(page, "scan image").bounding_box()
    assert box is not None
    x, y = box["x"] + 20, box["y"] + 20
    page.mouse.move(x, y)
    page.mouse.down()
    for i in range(1, 31):  # a 30-step drag, as fast as the browser takes it
        page.mouse.move(x + 5 * i, y + 4 * i)
    page.mouse.up()
    sets = [v for k, v in page.evaluate("window.sets") if k == "regions"]
    assert 1 <= len(sets) < 30  # throttled during the drag, never one per move
    final = sets[-1][0]  # the last edit is the drag's end: pixels from floor(start) to ceil(end)
    scale = box["width"] / 96  # CSS px per scan px
    first = math.floor(20 / scale)
    assert (final["col_start"], final["col_stop"]) == (first, math.ceil(170 / scale))
    assert (final["row_start"], final["row_stop"]) == (first, math.ceil(140 / scale))


def test_live_regions_off_sends_only_on_release(page: Page) -> None:
    assert not label(page, "live regions").is_checked()
    box = label(page, "scan image").bounding_box()
    assert box is not None
    x, y = box["x"] + 20, box["y"] + 20
    page.mouse.move(x, y)
    page.mouse.down()
    for i in range(1, 21):
        page.mouse.move(x + 6 * i, y + 6 * i)
    assert [k for k, _ in page.evaluate("window.sets")] == []
    page.mouse.up()
    assert [k for k, _ in page.evaluate("window.sets")] == ["regions"]


def test_small_draw_is_refused_in_the_browser(page: Page) -> None:
    box = label(page, "scan image").bounding_box()
    assert box is not None
    scale = box["width"] / 96
    x, y = box["x"] + 100, box["y"] + 100
    page.mouse.move(x, y)
    page.mouse.down()
    page.mouse.move(x + 5 * scale, y + 5 * scale, steps=4)  # 5×5 scan px < 8
    page.mouse.up()
    assert page.evaluate("window.sets") == []
    notice = label(page, "notice")
    assert notice.is_visible() and "8×8" in notice.inner_text()
    page.keyboard.press("Escape")
    assert not notice.is_visible()


def test_refine_sends_the_locked_parameters(page: Page) -> None:
    label(page, "depth value").fill("25")
    label(page, "depth value").press("Enter")  # a number box applies on Enter
    label(page, "depth lock").check()
    label(page, "C12 lock").check()
    label(page, "refine from here").click()
    refine = [m for m in page.evaluate("window.sent") if m["type"] == "refine"]
    assert len(refine) == 1
    assert sorted(refine[0]["locked"]) == ["C12", "depth"]
    assert refine[0]["params"]["depth"] == 25
    assert refine[0]["params"]["C10"] == -40  # the fit's values elsewhere


def test_six_fitted_parameters_in_front_higher_orders_in_their_panel(page: Page) -> None:
    front = page.locator(".livessb-steering > .livessb-sliders > [data-param]")
    assert [n for n in front.evaluate_all("els => els.map(e => e.dataset.param)")] == [
        "C10", "C12", "phi12", "tilt_row_mrad", "tilt_col_mrad", "depth", "rotation"]
    higher = page.locator(".livessb-higher [data-param]")
    assert higher.evaluate_all("els => els.map(e => e.dataset.param)") == ["C30", "C32"]
    assert not label(page, "C32 slider").is_visible()
    page.get_by_label("higher orders", exact=True).click()
    assert label(page, "C32 slider").is_visible()
    assert label(page, "C32 lock").count() == 0  # never fitted: nothing to lock
    readout = page.locator(".livessb-readout [data-param]")
    shown = readout.evaluate_all("els => els.map(e => e.dataset.param)")
    assert "C32" not in shown and "C10" in shown
