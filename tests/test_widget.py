"""SSBWidget model tests without a browser, against the real Session on a small simulation."""

from __future__ import annotations

import io
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, cast

import numpy as np
import pytest

from helpers import importable, require
from widget_messages import Sent, fit_with_region, region

require(importable("anywidget"), "pip install anywidget")

import livessb  # noqa: E402
from livessb import widget as widget_mod  # noqa: E402
from livessb.simulate import simulate_4dstem  # noqa: E402

if TYPE_CHECKING:
    from livessb import Dataset4D
    from livessb.results import Bounds, RegionResult

TRIALS = 24
TIMEOUT = 300

require((widget_mod.bundle._STATIC / "widget.js").is_file(),
        "front end not built (scripts/build-frontend.sh)")


@pytest.fixture(scope="module")
def ds() -> Dataset4D:
    data, _truth = simulate_4dstem(
        scan_shape=(24, 24), detector_shape=(32, 32),
        aberrations={"C10": -40.0, "C12": 10.0, "phi12": 0.3}, dose=5e4, seed=7)
    return data


@pytest.fixture(scope="module")
def calibration(ds: Dataset4D, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real full-field fit (plus one region), saved once for the module."""
    w = livessb.SSBWidget(ds, trials=TRIALS)
    try:
        fit_with_region(w, TIMEOUT)
        assert w.region_results["r1"]["status"] == "done"
        path = w.save_calibration(tmp_path_factory.mktemp("cal") / "calibration.json")
    finally:
        w.close()
    return Path(path)


@pytest.fixture
def fitted(ds: Dataset4D) -> Iterator[tuple[livessb.SSBWidget, Sent]]:
    """A widget after its full-field fit, with captured crop messages."""
    w = livessb.SSBWidget(ds, trials=TRIALS)
    w.wait(TIMEOUT)
    assert w.status == "done", w.message
    sent = Sent(w)
    yield w, sent
    w.close()


def png_shape(png: bytes) -> tuple[int, int]:
    from PIL import Image

    img = Image.open(io.BytesIO(png))
    assert img.format == "PNG"
    return img.size[1], img.size[0]


# --------------------------------------------------------------------------- basics

def test_missing_bundle_raises_clear_error(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, ds: Dataset4D) -> None:
    monkeypatch.setattr(widget_mod.bundle, "_STATIC", tmp_path)
    with pytest.raises(widget_mod.FrontendBuildError, match="build-frontend"):
        livessb.SSBWidget(ds, fit=False)


def test_fit_false_without_calibration_shows_bf_and_asks_for_fit(ds: Dataset4D) -> None:
    w = livessb.SSBWidget(ds, fit=False)
    try:
        w.wait(TIMEOUT)
        assert w.session.evaluations == 0
        assert "fit" in w.message
        assert w.full_fit == {}
        assert w.status == "idle"
        assert png_shape(w.scan_png) == (24, 24)
        assert w.scan_shape == [24, 24]
        # a region before any fit: the worker's error shows in the widget
        w.regions = [region("r1", 0, 12, 0, 12)]
        w.wait(TIMEOUT)
        assert w.region_results["r1"]["status"] == "error"
        assert "FitRequiredError" in w.region_results["r1"]["error"]
        assert w.status == "error"
        assert "r1" in w.message
        # fitting the full field afterwards retries the failed region
        w.fit(wait=True)
        w.wait(TIMEOUT)
        assert w.full_fit and w.region_results["r1"]["status"] == "done"
        assert w.status == "done"
    finally:
        w.close()


def test_full_fit_on_creation(ds: Dataset4D) -> None:
    w = livessb.SSBWidget(ds, trials=TRIALS)
    try:
        assert w.status == "fitting"
        w.wait(TIMEOUT)
        assert w.status == "done", w.message
        assert set(w.full_fit) >= {"params", "loss", "rotation_deg", "transpose", "timings"}
        assert set(w.full_fit) <= {"params", "loss", "errors", "undetermined", "on_box_edge",
                                   "model", "crystal", "rotation_deg", "transpose", "timings"}
        assert set(w.full_fit["params"]) >= set(livessb.params.JOINT)
        assert w.full_fit["timings"]["total_s"] > 0
        f = w.upsample
        assert f == w.session.upsample_factor
        assert w.sampling_A == pytest.approx([s / f for s in ds.scan_step_A])
        frame = w._frames.last  # a frame of the fitted parameters went to the browser
        assert frame is not None and frame["params"] == w.full_fit["params"]
        trials = w.trials_full
        assert 0 < len(trials) <= 50
        assert [t["loss"] for t in trials] == sorted(t["loss"] for t in trials)
        assert w.session.evaluations > 0
    finally:
        w.close()


# ------------------------------------------------------------------------ validation

@pytest.mark.parametrize("bad, why", [
    ([region("r1", 0, 25, 0, 10)], "outside"),
    ([region("r1", -1, 5, 0, 10)], "outside"),
    ([region("r1", 5, 5, 0, 10)], "empty"),
    ([region("r1", 6, 5, 0, 10)], "empty"),
    ([region("r1", 0, 3, 0, 3)], "too small"),
    ([region("r1", 0, 8, 0, 8), region("r1", 8, 16, 8, 16)], "duplicate"),
    ([{"id": "r1", "row_start": 0}], "keys"),
    ([{**region("r1", 0, 8, 0, 8), "id": ""}], "id"),
])
def test_invalid_regions_rejected_previous_kept(
        ds: Dataset4D, bad: list[dict[str, Any]], why: str) -> None:
    w = livessb.SSBWidget(ds, fit=False)
    try:
        w.wait(TIMEOUT)
        good = [region("r1", 0, 8, 0, 8)]
        w._applying = True  # set a valid previous value without queuing a fit
        w.regions = good
        w._applying = False
        w.regions = bad  # from Python: no exception
        assert w.regions == good
        assert w.status == "error"
        assert "rejected" in w.message and why in w.message
        # from the front end (comm): no exception, and the kept value is sent back
        sent: list[dict[str, Any]] = []
        w._send = lambda msg, buffers=None: sent.append(msg)
        w.set_state({"regions": bad})
        assert w.regions == good
        assert any(m.get("method") == "update" and m["state"].get("regions") == good
                   for m in sent), sent
        assert w.region_results == {}
    finally:
        w.close()


# -------------------------------------------------------------------------- pipeline

def test_pipeline_fills_results_and_sends_png_crop(fitted: tuple[livessb.SSBWidget, Sent]) -> None:
    w, sent = fitted
    w.regions = [region("r1", 2, 14, 4, 16)]
    assert w.status == "fitting"
    assert w.region_results["r1"]["status"] == "fitting"
    w.wait(TIMEOUT)
    res = w.region_results["r1"]
    assert res["status"] == "done", res
    assert res["generation"] == w._scheduler.generation("r1")
    assert res["trials"] and res["trials"][0]["loss"] == min(t["loss"] for t in res["trials"])
    assert set(res["params"]) >= set(livessb.params.JOINT)
    assert np.isfinite(res["loss"])
    assert res["bounds"] == [2, 14, 4, 16]
    crops = sent.crops("r1")
    assert len(crops) == 1
    msg, png = crops[0]
    assert msg["generation"] == res["generation"]
    f = w.upsample
    assert png_shape(png) == (12 * f, 12 * f) == tuple(msg["shape"])
    assert w.crop_png("r1") == png
    # the session holds the same result, crop at output sampling
    reg = w.session.regions["r1"]
    assert reg.bounds == (2, 14, 4, 16)
    assert reg.params == pytest.approx(res["params"])
    assert w.status == "done"
    # crops are not part of the synced (notebook) state
    state = w.get_state()
    assert all(len(json.dumps(v, default=str)) < 100_000 for k, v in state.items()
               if k not in ("scan_png", "_esm", "_css"))


def test_request_crops_resends_latest(fitted: tuple[livessb.SSBWidget, Sent]) -> None:
    w, sent = fitted
    w.regions = [region("r1", 0, 12, 0, 12), region("r2", 12, 24, 12, 24)]
    w.wait(TIMEOUT)
    n = len(sent.crops())
    w._on_custom_msg(w, {"type": "request_crops"}, [])
    again = sent.crops()[n:]
    assert sorted(c["id"] for c, _ in again) == ["r1", "r2"]
    assert {c["id"]: b for c, b in again} == {"r1": w.crop_png("r1"), "r2": w.crop_png("r2")}


def test_stale_results_discarded_latest_wins(fitted: tuple[livessb.SSBWidget, Sent]) -> None:
    """An edit arriving while the region's fit runs makes that fit's result stale."""
    w, sent = fitted
    s = w.session
    real_fit_region = s.fit_region
    calls: list[tuple[int, ...]] = []

    def fit_region_with_edit_during_fit(bounds: Bounds, **kw: Any) -> RegionResult:
        calls.append(tuple(bounds))
        if len(calls) == 1:  # the user moves the region while the first fit runs
            w.regions = [region("r1", 6, 18, 6, 18)]
        return real_fit_region(bounds, **kw)

    # an instance attribute over the method (mypy forbids assigning to a method)
    cast(Any, s).fit_region = fit_region_with_edit_during_fit
    w.regions = [region("r1", 0, 12, 0, 12)]
    w.wait(TIMEOUT)
    assert calls == [(0, 12, 0, 12), (6, 18, 6, 18)]
    res = w.region_results["r1"]
    assert res["generation"] == 2 and res["bounds"] == [6, 18, 6, 18]
    assert res["status"] == "done"
    gens = [c["generation"] for c, _ in sent.crops("r1")]
    assert gens == [2]  # the stale generation-1 crop never reached the browser
    assert s.regions["r1"].bounds == (6, 18, 6, 18)


def test_quick_edits_skip_superseded_jobs(fitted: tuple[livessb.SSBWidget, Sent]) -> None:
    w, sent = fitted
    gate = threading.Event()
    w._submit("block", lambda _g: gate.wait(TIMEOUT))  # keep the worker busy
    w.regions = [region("r1", 0, 12, 0, 12)]
    w.regions = [region("r1", 1, 13, 1, 13)]
    w.regions = [region("r1", 2, 14, 2, 14)]
    evals_before = w.session.evaluations
    gate.set()
    w.wait(TIMEOUT)
    res = w.region_results["r1"]
    assert res["generation"] == 3 and res["bounds"] == [2, 14, 2, 14]
    assert [c["generation"] for c, _ in sent.crops("r1")] == [3]
    assert w.session.evaluations > evals_before


def test_editing_one_region_leaves_others_and_full_fit(
        fitted: tuple[livessb.SSBWidget, Sent]) -> None:
    w, sent = fitted
    w.regions = [region("r1", 0, 12, 0, 12), region("r2", 12, 24, 12, 24)]
    w.wait(TIMEOUT)
    r1 = json.dumps(w.region_results["r1"], sort_keys=True)
    r1_png = w.crop_png("r1")
    r1_session = w.session.regions["r1"]
    full = json.dumps(w.full_fit, sort_keys=True)
    scan = w.scan_png
    n_r1 = len(sent.crops("r1"))
    for r2 in (region("r2", 10, 22, 10, 22), region("r2", 10, 22, 10, 23)):  # move, resize
        w.regions = [region("r1", 0, 12, 0, 12), r2]
        w.wait(TIMEOUT)
        assert w.region_results["r2"]["bounds"] == [r2["row_start"], r2["row_stop"],
                                                    r2["col_start"], r2["col_stop"]]
    assert w.region_results["r2"]["generation"] == 3
    assert json.dumps(w.region_results["r1"], sort_keys=True) == r1
    assert w.crop_png("r1") == r1_png
    assert len(sent.crops("r1")) == n_r1
    assert w.session.regions["r1"] is r1_session
    assert json.dumps(w.full_fit, sort_keys=True) == full
    assert w.scan_png == scan
    # removal drops the result (widget and session), others stay
    w.regions = [region("r1", 0, 12, 0, 12)]
    w.wait(TIMEOUT)
    assert list(w.region_results) == ["r1"]
    assert list(w.session.regions) == ["r1"]
    assert w.crop_png("r2") is None


def test_worker_errors_show_in_widget(fitted: tuple[livessb.SSBWidget, Sent]) -> None:
    w, _ = fitted
    w.regions = [region("r1", 0, 12, 0, 12)]
    real_fit_region = w.session.fit_region

    def failing_fit_region(bounds: Bounds, **kw: Any) -> NoReturn:
        raise RuntimeError("device lost")

    cast(Any, w.session).fit_region = failing_fit_region  # an instance attribute
    w.regions = [region("r1", 0, 12, 0, 13)]
    w.wait(TIMEOUT)
    res = w.region_results["r1"]
    assert res["status"] == "error"
    assert "device lost" in res["error"]
    assert w.status == "error"
    assert "r1" in w.message
    cast(Any, w.session).fit_region = real_fit_region
    # the next good edit clears the error
    w.regions = [region("r1", 0, 12, 0, 12)]
    w.wait(TIMEOUT)
    assert w.region_results["r1"]["status"] == "done"
    assert w.status == "done" and w.message == ""


# ----------------------------------------------------------------------- calibration

def test_save_and_restore_without_fitting(
        fitted: tuple[livessb.SSBWidget, Sent], ds: Dataset4D, tmp_path: Path) -> None:
    w, _ = fitted
    w.regions = [region("r1", 0, 12, 0, 12), region("r2", 8, 20, 10, 24)]
    w.wait(TIMEOUT)
    path = w.save_calibration(tmp_path / "cal.json")
    assert path.is_file()
    assert "saved" in w.message
    w2 = livessb.SSBWidget(ds, calibration=path, fit=False)
    sent2 = Sent(w2)
    try:
        w2.wait(TIMEOUT)
        assert w2.session.evaluations == 0
        assert w2.status == "done"
        assert w2.regions == w.regions
        assert w2.full_fit == w.full_fit
        for rid in ("r1", "r2"):
            assert w2.region_results[rid]["params"] == w.region_results[rid]["params"]
            assert w2.region_results[rid]["status"] == "done"
            assert w2.crop_png(rid) is not None
        assert sorted(c["id"] for c, _ in sent2.crops()) == ["r1", "r2"]
        frame = w2._frames.last  # the restored full field went out as a frame
        assert frame is not None and frame["params"] == w2.full_fit["params"]
    finally:
        w2.close()


def test_save_button_message(fitted: tuple[livessb.SSBWidget, Sent], tmp_path: Path) -> None:
    w, _ = fitted
    target = tmp_path / "from-button.json"
    w._on_custom_msg(w, {"type": "save", "path": str(target)}, [])
    w.wait(TIMEOUT)
    assert target.is_file()
    assert "saved" in w.message and w.status == "done"
    # failure is reported in the widget, not raised into the comm
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    w._on_custom_msg(w, {"type": "save", "path": str(blocker / "x.json")}, [])
    w.wait(TIMEOUT)
    assert w.status == "error" and "save failed" in w.message


@pytest.mark.parametrize("content", ["{not json", json.dumps({"version": 999})])
def test_corrupt_calibration_refused_visibly(ds: Dataset4D, tmp_path: Path, content: str) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(content)
    w = livessb.SSBWidget(ds, calibration=bad, fit=False)
    try:
        w.wait(TIMEOUT)
        assert w.status == "error"
        assert "refused" in w.message
        assert w.session.evaluations == 0
    finally:
        w.close()


def test_mismatched_calibration_refused_visibly(calibration: Path, tmp_path: Path) -> None:
    other, _ = simulate_4dstem(scan_shape=(20, 20), detector_shape=(32, 32), dose=5e4, seed=3)
    w = livessb.SSBWidget(other, calibration=calibration, fit=False)
    try:
        w.wait(TIMEOUT)
        assert w.status == "error" and "refused" in w.message
        assert w.regions == []
    finally:
        w.close()


# -------------------------------------------------------------------------- lifetime

def test_close_releases_session_results_stay_valid(fitted: tuple[livessb.SSBWidget, Sent]) -> None:
    w, _ = fitted
    w.regions = [region("r1", 0, 12, 0, 12)]
    w.wait(TIMEOUT)
    s = w.session
    reg = s.regions["r1"]
    phase = reg.phase.copy()
    w.close()
    assert s.closed
    assert w._scheduler.closed
    np.testing.assert_array_equal(reg.phase, phase)  # returned results stay valid
    with pytest.raises(RuntimeError):
        w.save_calibration("x.json")
    w.close()  # idempotent


def test_close_while_fitting(ds: Dataset4D) -> None:
    w = livessb.SSBWidget(ds, trials=TRIALS)
    s = w.session
    w.close()
    assert s.closed
    assert w.status in ("fitting", "idle", "done", "error")


def test_session_passed_in_is_left_open(ds: Dataset4D, calibration: Path) -> None:
    s = livessb.Session(ds, calibration=calibration)
    w = livessb.SSBWidget(s, fit=False)
    try:
        w.wait(TIMEOUT)
        assert s.full_fit is not None
        assert w.full_fit["params"] == pytest.approx(s.full_fit.params)
        assert [r["id"] for r in w.regions] == list(s.regions)
        assert s.evaluations == 0
    finally:
        w.close()
    assert not s.closed
    s.close()


# ------------------------------------------------------------------------ demo launch

def test_launch_demo_notebook_copies_and_starts_jupyterlab(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from livessb import demo_launch

    calls: list[list[str]] = []

    def fake_run(cmd: list[str], cwd: str | Path | None = None) -> int:
        calls.append([*cmd, f"cwd={cwd}"])
        return 0

    monkeypatch.setattr(demo_launch, "run_until_stopped", fake_run)
    rc = demo_launch.launch_demo_notebook(port=8899, open_browser=False, workdir=tmp_path / "d")
    assert rc == 0
    nb = tmp_path / "d" / "demo.ipynb"
    assert json.loads(nb.read_text())["cells"]
    cmd = calls[0]
    assert "jupyterlab" in cmd and "--port=8899" in cmd and "--no-browser" in cmd
    assert cmd[-2] == "demo.ipynb" and cmd[-1] == f"cwd={tmp_path / 'd'}"
    # the copy is the packaged notebook, stored once: notebooks/demo.ipynb links to it
    assert nb.read_text() == demo_launch.demo_notebook_path().read_text()
    repo_nb = Path(__file__).resolve().parents[1] / "notebooks" / "demo.ipynb"
    source_nb = Path(__file__).resolve().parents[1] / "python" / "livessb" / "notebooks"
    assert repo_nb.is_symlink() and repo_nb.resolve() == (source_nb / "demo.ipynb").resolve()
    # the package (editable or the installed wheel) ships that same notebook
    assert demo_launch._PACKAGED.read_text() == repo_nb.read_text()
    for cell in json.loads(demo_launch.demo_notebook_path().read_text())["cells"]:
        assert not cell.get("outputs") and cell.get("execution_count") is None
