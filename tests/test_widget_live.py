"""Live region drags without a browser: crops are painted while the pointer moves on.

The widget's region edit path is driven as the front end drives it with live regions
on (one ``regions`` edit per pointer move) on the CPU demo. ``Session.fit_region`` is
wrapped so that each fit, once started, waits until the test has made the next edits:
every fit is overtaken while it runs, as in a real drag (issue 19), deterministically.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest

from helpers import importable, require
from widget_messages import Sent, region

require(importable("anywidget"), "pip install anywidget")

import livessb  # noqa: E402
from livessb import widget as widget_mod  # noqa: E402

if TYPE_CHECKING:
    from livessb.results import Bounds, RegionResult

TRIALS = 20
TIMEOUT = 300
SIDE = 16  # region side (scan px)

require((widget_mod.bundle._STATIC / "widget.js").is_file(),
        "front end not built (scripts/build-frontend.sh)")


@pytest.fixture(scope="module")
def session() -> Iterator[livessb.Session]:
    """The CPU demo with its full-field fit, shared (each widget leaves it open)."""
    s = livessb.Session(livessb.simulate.demo_dataset(), device="cpu")
    s.fit(trials=TRIALS, seed=42)
    yield s
    s.close()


class Overtaken:
    """Stands in for ``Session.fit_region``: each fit, once started, waits for ``go``
    (the test edits the region meanwhile), then runs the real fit."""

    def __init__(self, real: Any) -> None:
        self._real = real
        self.started: queue.Queue[tuple[int, ...]] = queue.Queue()  # bounds, as fits start
        self._go = threading.Semaphore(0)

    def __call__(self, bounds: Bounds, **kw: Any) -> RegionResult:
        self.started.put(tuple(bounds))
        if not self._go.acquire(timeout=TIMEOUT):
            raise TimeoutError("the test never let the fit finish")
        result: RegionResult = self._real(bounds, **kw)
        return result

    def wait_started(self) -> tuple[int, ...]:
        return self.started.get(timeout=TIMEOUT)

    def go(self) -> None:
        self._go.release()


def make_widget(session: livessb.Session, live: bool, monkeypatch: pytest.MonkeyPatch,
                ) -> tuple[livessb.SSBWidget, Sent, Overtaken]:
    for rid in list(session.regions):  # a fresh start: no region of an earlier test
        session.remove_region(rid)
    w = livessb.SSBWidget(session, trials=TRIALS, live_regions=live)
    w.wait(TIMEOUT)
    assert w.status == "done", w.message
    fits = Overtaken(session.fit_region)
    monkeypatch.setattr(session, "fit_region", fits)
    return w, Sent(w), fits


def at(pos: int) -> dict[str, Any]:
    """The dragged region, moved ``pos`` scan px down from its first place."""
    return region("r1", 8 + pos, 8 + pos + SIDE, 20, 20 + SIDE)


def drag(w: livessb.SSBWidget, fits: Overtaken, steps: int, edits_per_fit: int,
         seen: list[dict[str, Any]] | None = None) -> int:
    """Press at place 0, then ``steps`` times: while a fit runs, move ``edits_per_fit``
    px on; returns the last place. The fit of the last place is left waiting to start."""
    pos = 0
    w.regions = [at(pos)]
    for _ in range(steps):
        fits.wait_started()  # the previous fit is published (or dropped) by now
        if seen is not None:
            seen.append({"record": dict(w.region_results["r1"]), "status": w.status})
        for _ in range(edits_per_fit):
            pos += 1
            w.regions = [at(pos)]
        fits.go()
    return pos


def crop_stamps(sent: Sent) -> list[tuple[int, int]]:
    return [(int(c["generation"]), int(c["behind"])) for c, _ in sent.crops("r1")]


def test_crops_painted_during_a_live_drag(session: livessb.Session,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    w, sent, fits = make_widget(session, True, monkeypatch)
    try:
        steps, per = 4, 2
        seen: list[dict[str, Any]] = []
        pos = drag(w, fits, steps, per, seen)
        fits.wait_started()  # the last place's fit: every earlier one has been published
        during = crop_stamps(sent)
        assert len(during) == steps, during  # one crop per overtaken fit, before the release
        gens = [g for g, _ in during]
        assert gens == sorted(set(gens)), during  # strictly increasing
        assert all(b == per for _, b in during), during  # each trailed the pointer by `per`
        # mid-drag, after each crop: still fitting, and the record says how far the
        # params (of the crop painted) trail the latest edit
        for s, (painted, _) in zip(seen[1:], during, strict=False):
            rec = s["record"]
            assert s["status"] == "fitting" and rec["status"] == "fitting"
            assert rec["behind"] == per and rec["generation"] - rec["behind"] == painted
        fits.go()
        w.wait(TIMEOUT)
        final = w._scheduler.generation("r1")
        stamps = crop_stamps(sent)
        assert stamps[-1] == (final, 0)  # the final edit's fit arrives, and last
        assert [g for g, _ in stamps] == sorted(set(g for g, _ in stamps))
        rec = w.region_results["r1"]
        assert rec["status"] == "done" and rec["generation"] == final and rec["behind"] == 0
        assert rec["bounds"] == [at(pos)[k] for k in ("row_start", "row_stop",
                                                      "col_start", "col_stop")]
        assert w.status == "done"
        # a result older than the crop painted is never sent after it
        n = len(sent.crops("r1"))
        w._regions.publish("r1", gens[0], session.regions["r1"], b"png", 0.0)
        assert len(sent.crops("r1")) == n
        assert w.crop_png("r1") == sent.crops("r1")[-1][1]
    finally:
        w.close()


def test_removed_region_never_gets_a_crop(session: livessb.Session,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    w, sent, fits = make_widget(session, True, monkeypatch)
    try:
        drag(w, fits, 2, 2)
        fits.wait_started()  # a fit runs …
        assert len(sent.crops("r1")) == 2  # (crops were painted while dragging)
        w.regions = [at(9)]  # … an edit queues the next one …
        w.regions = []  # … and the region is removed
        n = len(sent.crops("r1"))
        fits.go()
        w.wait(TIMEOUT)
        assert len(sent.crops("r1")) == n  # neither the running nor the queued fit arrived
        assert fits.started.empty()  # the queued fit never started
        assert "r1" not in w.region_results and w.crop_png("r1") is None
        assert "r1" not in session.regions
        assert w.status == "done"
        # a new region of the same id is fitted and painted again
        w.regions = [at(0)]
        fits.wait_started()
        fits.go()
        w.wait(TIMEOUT)
        gen, behind = crop_stamps(sent)[-1]
        assert gen == w._scheduler.generation("r1") and behind == 0
        assert w.region_results["r1"]["status"] == "done"
    finally:
        w.close()


def test_without_live_regions_the_final_edit_is_painted_last(
        session: livessb.Session, monkeypatch: pytest.MonkeyPatch) -> None:
    """Live regions off: edits come on release; an overtaken fit is dropped, the last
    edit's crop is the last one painted."""
    w, sent, fits = make_widget(session, False, monkeypatch)
    try:
        drag(w, fits, 2, 1)
        fits.wait_started()
        fits.go()
        w.wait(TIMEOUT)
        final = w._scheduler.generation("r1")
        stamps = crop_stamps(sent)
        assert stamps and stamps[-1] == (final, 0), stamps
        assert [g for g, _ in stamps] == sorted(set(g for g, _ in stamps))
        assert w.region_results["r1"]["status"] == "done"
        assert w.region_results["r1"]["behind"] == 0
    finally:
        w.close()
