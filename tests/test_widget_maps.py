"""The widget's trust readouts and map overlay without a browser (CPU, small data):
errors / undetermined / on_box_edge / model in ``full_fit`` and ``region_results``,
the ``fit_map`` message (progress stage "map", the ``map_overlays`` trait), a map
restored from a calibration, bad input shown in the widget, and "not determined" in
the matplotlib titles."""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from helpers import importable, require
from widget_messages import fit_with_region

require(importable("anywidget"), "pip install anywidget (the widget extra)")

import livessb  # noqa: E402
from livessb.plots import fitted_text, plot_loss_slices, plot_trials  # noqa: E402
from livessb.simulate import simulate_4dstem  # noqa: E402

if TYPE_CHECKING:
    from livessb import Dataset4D, SSBWidget

    # the fitted, mapped and saved widget; its progress stages; the saved calibration
    Mapped = tuple[SSBWidget, list[dict[str, Any]], Path]

TRIALS = 24
TIMEOUT = 300
C10_TRUE = -40.0
TILTS = ("tilt_row_mrad", "tilt_col_mrad")


@pytest.fixture(scope="module")
def ds() -> Dataset4D:
    # untilted, zero depth: the thin model describes it, tilt and depth are not determined
    data, _truth = simulate_4dstem(
        scan_shape=(24, 24), detector_shape=(32, 32),
        aberrations={"C10": C10_TRUE, "C12": 10.0, "phi12": 0.3}, dose=5e4, seed=7)
    return data


@pytest.fixture(scope="module")
def mapped(ds: Dataset4D, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Mapped]:
    """A fitted widget, one region, a 2×2 map of 12² tiles, saved; progress recorded."""
    w = livessb.SSBWidget(ds, trials=TRIALS)
    stages: list[dict] = []
    try:
        fit_with_region(w, TIMEOUT)
        w.observe(lambda ch: stages.append(dict(ch["new"])), names="progress")
        w._messages.handle({"type": "fit_map", "tile": 12})
        assert w.status == "fitting"
        w.wait(TIMEOUT)
        assert w.status == "done", w.message
        stages.append({"stage": "message", "text": w.message})
        path = w.save_calibration(tmp_path_factory.mktemp("cal") / "calibration.json")
        yield w, stages, Path(path)
    finally:
        w.close()


def test_full_fit_trait_carries_errors_undetermined_and_model(mapped: Mapped) -> None:
    w, _stages, _path = mapped
    rec, fit = w.full_fit, w.session.full_fit
    assert fit is not None
    assert rec["model"] == "thin"  # the simulator's truth is untilted and thin
    assert set(TILTS) <= set(rec["undetermined"]) and "depth" in rec["undetermined"]
    assert "C10" not in rec["undetermined"]
    assert rec["errors"] == pytest.approx(fit.errors) and rec["on_box_edge"] == fit.on_box_edge
    # calibrated error bar: the truth within a few sigma (one realisation: generous)
    assert abs(rec["params"]["C10"] - C10_TRUE) < 5 * rec["errors"]["C10"] + 1.0


def test_region_record_carries_the_same_fields(mapped: Mapped) -> None:
    w, _stages, _path = mapped
    rec, fit = w.region_results["r1"], w.session.regions["r1"].fit
    assert rec["errors"] == pytest.approx(fit.errors) and rec["errors"]["C10"] > 0
    assert rec["undetermined"] == fit.undetermined and rec["on_box_edge"] == fit.on_box_edge
    assert rec["model"] == fit.provenance["model_choice"]["kept"]


def test_fit_map_message_publishes_overlays_with_map_progress(mapped: Mapped) -> None:
    w, stages, _path = mapped
    m = w.map_overlays
    assert m["grid_shape"] == [2, 2] and m["tile"] == [12, 12]
    assert m["parameters"][:6] == list(livessb.params.JOINT)
    c10 = m["overlays"]["C10"]
    assert c10["unit"] == "Å" and np.array(c10["bounds"]).shape == (2, 2, 4)
    values = np.array(c10["values"], dtype=float)
    assert np.abs(values - C10_TRUE).max() < 3.0  # every tile near the truth (1.86 Å off)
    tilt = m["overlays"]["tilt_row_mrad"]
    assert np.array(tilt["undetermined"]).all()  # thin everywhere: tilt never determined
    maps = [p for p in stages if p.get("stage") == "map"]
    assert maps and maps[-1]["done"] == maps[-1]["total"] == 4, stages
    assert w.progress["stage"] == "" and "map: 2×2 tiles" in stages[-1]["text"]


def test_restored_map_shows_without_refit(
        ds: Dataset4D, mapped: Mapped, monkeypatch: pytest.MonkeyPatch) -> None:
    w, _stages, path = mapped

    def no_refit(*_a: object, **_k: object) -> NoReturn:
        raise AssertionError("a restored map must not be refitted")

    monkeypatch.setattr(livessb.Session, "fit_map", no_refit)
    w2 = livessb.SSBWidget(ds, calibration=path, fit=False)
    try:
        w2.wait(TIMEOUT)
        assert w2.status == "done", w2.message
        assert w2.map_overlays == w.map_overlays and len(w2.session.maps) == 1
    finally:
        w2.close()


@pytest.mark.parametrize(("tile", "why"), [(0, "tile must be a positive"),
                                           ("big", "tile must be a positive"),
                                           (500, "tile")])
def test_bad_map_requests_show_in_widget(mapped: Mapped, tile: object, why: str) -> None:
    w, _stages, _path = mapped
    before = w.map_overlays
    w._messages.handle({"type": "fit_map", "tile": tile})
    w.wait(TIMEOUT)
    assert w.status == "error" and why in w.message, w.message
    assert w.map_overlays == before and w.progress["stage"] == ""
    w._set_error("")


def test_map_before_full_fit_names_the_fix(ds: Dataset4D) -> None:
    w = livessb.SSBWidget(ds, fit=False)
    try:
        w.wait(TIMEOUT)
        w._messages.handle({"type": "fit_map", "tile": 12})
        w.wait(TIMEOUT)
        assert w.status == "error" and "fit" in w.message.lower(), w.message
        assert w.map_overlays == {}
    finally:
        w.close()


def test_plots_say_not_determined(mapped: Mapped) -> None:
    w, _stages, _path = mapped
    fit = w.session.full_fit
    assert fit is not None
    assert fitted_text(fit, "tilt_row_mrad").endswith("not determined")
    c10 = fitted_text(fit, "C10")
    assert "±" in c10 and c10.endswith("Å")
    fig = plot_loss_slices(fit, lambda batch: np.sum(batch ** 2, axis=1))
    titles = [ax.get_title() for ax in fig.axes]
    assert sum(t.endswith("not determined") for t in titles) >= 3  # both tilts and depth
    assert "not determined" in plot_trials(fit).axes[0].get_title()
    map_titles = [ax.get_title() for ax in w.session.maps[-1].plot(["C10", "depth"]).axes]
    assert any("depth" in t and "not determined" in t for t in map_titles), map_titles
    assert not any("C10" in t and "not determined" in t for t in map_titles), map_titles


def test_the_same_map_asked_twice_is_fitted_once(mapped: Mapped,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """A double click (or Enter and a click) on "fit map" while that map runs starts no
    second one (the old code queued it behind the running one); another tile size does."""
    w, _stages, _path = mapped
    session = w.session
    asked: list[object] = []
    started, release = threading.Event(), threading.Event()
    real = session.fit_map

    def held(*args: Any, **kwargs: Any) -> Any:
        asked.append(kwargs.get("tile"))
        started.set()
        assert release.wait(TIMEOUT)  # the map "runs" until the test lets it go
        return real(*args, **kwargs)

    monkeypatch.setattr(session, "fit_map", held)
    before = w.map_overlays
    w._messages.handle({"type": "fit_map", "tile": 12})
    assert started.wait(TIMEOUT)  # running now, no longer queued
    w._messages.handle({"type": "fit_map", "tile": 12})  # the second click
    w._messages.handle({"type": "fit_map", "tile": 12})
    release.set()
    w.wait(TIMEOUT)
    assert asked == [(12, 12)] and w.status == "done", (asked, w.message)
    assert w.map_overlays == before  # the same seed: the same map
    w._messages.handle({"type": "fit_map", "tile": 12})  # none in flight: fitted again
    w.wait(TIMEOUT)
    w._messages.handle({"type": "fit_map", "tile": 8})  # another map
    w.wait(TIMEOUT)
    assert asked == [(12, 12), (12, 12), (8, 8)], asked
    assert w.map_overlays["tile"] == [8, 8]
