"""Cancel (issue 21 item 3) without a browser, on the CPU demo: ``w.cancel()`` (and the
browser's ``cancel`` message) stops a full fit, a refinement or a map within one
progress report, keeps every earlier result and region, returns ``status`` to what it
was before the job, names the job in ``cancelled``, and leaves the session ready for
the next fit; ``Session.fit/refine/fit_map`` stop when their progress callback raises
``livessb.fit.progress.Cancelled``."""

from __future__ import annotations

import math
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from helpers import importable, require
from widget_messages import region

require(importable("anywidget"), "pip install anywidget (the widget extra)")

import livessb  # noqa: E402
from livessb.fit.progress import Cancelled  # noqa: E402

if TYPE_CHECKING:
    from livessb import Dataset4D, Session, SSBWidget

TIMEOUT = 600
MAP_TILE = 32  # 3×3 tiles on the 96² demo


class Published:
    """The widget's ``progress`` publications. ``cancel_at`` cancels from inside the first
    report of that stage (the worker's thread), which makes "no further report" exact;
    otherwise the test waits (``until``) and cancels from its own thread."""

    def __init__(self, w: SSBWidget, cancel_at: str | None = None) -> None:
        self.w, self.cancel_at = w, cancel_at
        self.items: list[dict[str, Any]] = []
        self.cancel_index: int | None = None
        self._cond = threading.Condition()
        w.observe(self._on, names="progress")

    def _on(self, change: dict[str, Any]) -> None:
        p = dict(change["new"])
        with self._cond:
            self.items.append(p)
            self._cond.notify_all()
            if self.cancel_at == p["stage"] and self.cancel_index is None:
                self.cancel_index = len(self.items)
                self.w.cancel()

    def until(self, stage: str, done: int = 0) -> None:
        """Wait for a report of ``stage`` with at least ``done`` done."""
        with self._cond:
            ok = self._cond.wait_for(lambda: any(
                p["stage"] == stage and p["done"] >= done for p in self.items), TIMEOUT)
        assert ok, f"no {stage!r} progress reported"

    def mark(self) -> None:
        with self._cond:
            self.cancel_index = len(self.items)

    def after_cancel(self) -> list[dict[str, Any]]:
        assert self.cancel_index is not None
        return [p for p in self.items[self.cancel_index:] if p["stage"]]

    def close(self) -> None:
        self.w.unobserve(self._on, names="progress")


def cancel_during(w: SSBWidget, name: str, start: Callable[[], None], stage: str,
                  done: int = 0) -> Published:
    """Start the job ``name``, cancel it from this thread once it reported ``stage`` with
    ``done`` done, wait."""
    seen = Published(w)
    try:
        start()
        assert w.cancellable == name and w.status == "fitting"
        seen.until(stage, done)
        seen.mark()
        assert w.cancel() == name
        w.wait(TIMEOUT)
    finally:
        seen.close()
    return seen


def state_of(w: SSBWidget) -> dict[str, Any]:
    """What a cancel must leave untouched (the session's records by identity)."""
    s = w.session
    return {"full_fit": dict(w.full_fit), "trials_full": list(w.trials_full),
            "region_results": dict(w.region_results), "map_overlays": dict(w.map_overlays),
            "regions": list(w.regions), "crops": {r: w.crop_png(r) for r in w.region_results},
            "session_full_fit": s.full_fit, "rotation": (s.rotation_deg, s.transpose),
            "session_regions": dict(s.regions), "maps": list(s.maps)}


def assert_kept(w: SSBWidget, before: dict[str, Any]) -> None:
    after = state_of(w)
    for key in before:
        assert after[key] == before[key], key
    assert after["session_full_fit"] is before["session_full_fit"]
    if w.session.rotation_deg is not None:
        assert_at_kept_rotation(w.session)


def assert_at_kept_rotation(s: Session) -> None:
    """The resident full field is back at the session's rotation (the search moved it)."""
    assert s.rotation_deg is not None
    assert s.diagnostics.full_spectra.rotation == (math.radians(s.rotation_deg), s.transpose)


@pytest.fixture(scope="module")
def first(demo_with_truth: tuple[Dataset4D, Any]) -> Iterator[tuple[SSBWidget, Published]]:
    """A widget whose first fit is cancelled during its search, then fitted for real,
    with one region."""
    ds, _ = demo_with_truth
    w = livessb.SSBWidget(ds, fit=False, device="cpu")
    try:
        w.wait(TIMEOUT)
        assert w.status == "idle" and w.cancellable == ""
        seen = cancel_during(w, "fit", w.fit, "search")
        yield w, seen
    finally:
        w.close()


@pytest.fixture(scope="module")
def fitted(first: tuple[SSBWidget, Published]) -> SSBWidget:
    w, _ = first
    w.fit(wait=True)
    assert w.status == "done", w.message
    w.regions = [region("r1", 0, 40, 0, 40)]
    w.wait(TIMEOUT)
    assert w.region_results["r1"]["status"] == "done"
    return w


def test_first_fit_cancelled_during_the_search(first: tuple[SSBWidget, Published]) -> None:
    w, seen = first
    after = seen.after_cancel()
    assert len(after) <= 1 and all(p["stage"] == "search" for p in after), after  # one batch
    assert w.progress["stage"] == ""
    assert w.status == "idle" and w.cancelled == "fit" and w.cancellable == ""
    assert w.message == "fit cancelled: the earlier results are kept"
    assert w.full_fit == {} and w.session.full_fit is None and w.session.rotation_deg is None


def test_fit_after_a_cancel_works(fitted: SSBWidget) -> None:
    w = fitted
    assert w.full_fit["params"]["C10"] == pytest.approx(-50.0, abs=3.0)
    assert w.cancelled == ""  # cleared by the next job
    assert w.session.rotation_deg == pytest.approx(w.full_fit["rotation_deg"])


def test_cancel_a_refit_keeps_the_previous_fit_and_regions(fitted: SSBWidget) -> None:
    w = fitted
    before = state_of(w)
    seen = cancel_during(w, "fit", w.fit, "search")
    assert len(seen.after_cancel()) <= 1
    assert_kept(w, before)
    assert w.status == "done" and w.cancelled == "fit" and w.cancellable == ""


def test_cancel_refine_at_its_first_newton_report(fitted: SSBWidget) -> None:
    w = fitted
    before = state_of(w)
    start = {**w.full_fit["params"], "C10": w.full_fit["params"]["C10"] + 20.0}
    seen = Published(w, cancel_at="newton")
    try:
        w._messages.handle({"type": "refine", "params": start, "locked": []})
        assert w.cancellable == "refine" and w.status == "fitting"
        w.wait(TIMEOUT)
    finally:
        seen.close()
    assert seen.after_cancel() == []  # the next Newton iteration's report raised
    assert_kept(w, before)
    assert w.status == "done" and w.cancelled == "refine"
    assert w.message == "refine cancelled: the earlier results are kept"


def test_cancel_a_map_after_its_first_tile(fitted: SSBWidget) -> None:
    w = fitted
    before = state_of(w)
    seen = cancel_during(
        w, "map", lambda: w._messages.handle({"type": "fit_map", "tile": MAP_TILE}), "map", 1)
    after = seen.after_cancel()
    assert len(after) <= 1 and all(p["stage"] == "map" for p in after), after  # one tile
    assert_kept(w, before)
    assert w.map_overlays == {} and w.session.maps == []
    assert w.status == "done" and w.cancelled == "map"
    assert w.message == "map cancelled: the earlier results are kept"
    # the session fits the next map as usual
    w._messages.handle({"type": "fit_map", "tile": 48, "trials": 30})
    w.wait(TIMEOUT)
    assert w.status == "done", w.message
    assert w.map_overlays["grid_shape"] == [2, 2] and len(w.session.maps) == 1


def test_a_region_fit_runs_on_through_a_cancel(fitted: SSBWidget) -> None:
    w = fitted
    overlays = dict(w.map_overlays)
    w.regions = [*w.regions, region("r2", 50, 90, 50, 90)]  # queued first
    w._messages.handle({"type": "fit_map", "tile": MAP_TILE})  # then the map
    w._messages.handle({"type": "cancel"})  # the browser's cancel: stops the map
    w.wait(TIMEOUT)
    assert w.region_results["r2"]["status"] == "done" and w.crop_png("r2")
    assert w.map_overlays == overlays and w.cancelled == "map"
    assert w.status == "done"


def test_cancel_with_nothing_running(fitted: SSBWidget) -> None:
    assert fitted.cancel() is None
    assert fitted.cancellable == ""


# -- Session: a progress callback that raises Cancelled --------------------------------
def raise_at(stage: str, done: int = 0) -> Callable[[str, int, int], None]:
    def report(s: str, d: int, _total: int) -> None:
        if s == stage and d >= done:
            raise Cancelled(f"stopped at {s} {d}")
    return report


def test_session_fit_stopped_by_its_callback(fitted: SSBWidget) -> None:
    s: Session = fitted.session
    full, rotation, evaluations = s.full_fit, (s.rotation_deg, s.transpose), s.evaluations
    with pytest.raises(Cancelled):
        s.fit(trials=200, seed=7, progress=raise_at("search", 1))
    assert s.full_fit is full and (s.rotation_deg, s.transpose) == rotation
    assert_at_kept_rotation(s)
    assert s.evaluations - evaluations <= 200  # stopped after its first batch


def test_session_refine_and_map_stopped_by_their_callback(fitted: SSBWidget) -> None:
    s: Session = fitted.session
    full, maps, regions = s.full_fit, list(s.maps), dict(s.regions)
    assert full is not None
    spectra = len(s.diagnostics.prepared_spectra)
    with pytest.raises(Cancelled):
        s.refine(full.params, bounds=(0, 40, 0, 40), progress=raise_at("newton", 1))
    with pytest.raises(Cancelled):
        s.fit_map(tile=MAP_TILE, trials=30, progress=raise_at("map", 1))
    assert s.full_fit is full and s.maps == maps and s.regions == regions
    assert len(s.diagnostics.prepared_spectra) == spectra  # the windows' spectra released
