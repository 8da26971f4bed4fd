"""The widget's diffraction panel without a browser (widget/diffractionview.py, patterns.py):
``pattern`` requests against the counts, the mean, the overlays' record, the
``bf_pixels`` trait against Session.reconstruct (the browser test: tests/browser/
test_diffraction_browser.py)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest

from helpers import importable, require, with_counts
from widget_messages import Sent

require(importable("anywidget"), "pip install anywidget")

import livessb  # noqa: E402
from livessb import Preprocessing  # noqa: E402
from livessb import widget as widget_mod  # noqa: E402
from livessb.preview import dequantise  # noqa: E402
from livessb.simulate import simulate_4dstem  # noqa: E402
from livessb.widget.patterns import bin_factor, binned, pattern_at  # noqa: E402

if TYPE_CHECKING:
    from livessb import Dataset4D
    from livessb.simulate import SimulationTruth

require((widget_mod.bundle._STATIC / "widget.js").is_file(),
        "front end not built (scripts/build-frontend.sh)")

HOT = (3, 27)  # a hot detector pixel in the dark field


@pytest.fixture(scope="module")
def sim() -> tuple[Dataset4D, SimulationTruth]:
    ds, truth = simulate_4dstem(scan_shape=(24, 24), detector_shape=(32, 32), dose=5e4,
                                seed=7, aberrations={"C10": -40.0, "C12": 10.0, "phi12": 0.3},
                                descan_px_per_px=(0.02, 0.05, -0.04, 0.03), rotation_deg=10.0)
    counts = ds.counts.copy()
    counts[:, :, HOT[0], HOT[1]] = 4000
    return with_counts(ds, counts), truth


@pytest.fixture(scope="module")
def steered(sim: tuple[Dataset4D, SimulationTruth]) -> Iterator[tuple[Any, Sent]]:
    """A widget (no fit) on a session at the simulator's rotation, capturing messages."""
    ds, truth = sim
    s = livessb.Session(ds, device="cpu", preprocessing=Preprocessing(descan="plane"))
    s.rotation_deg, s.transpose = truth.rotation_deg, truth.transpose
    w = livessb.SSBWidget(s, fit=False)
    w.wait(60)
    sent = Sent(w)
    yield w, sent
    w.close()
    s.close()


def _pattern(w: Any, sent: Sent, **request: Any) -> tuple[dict[str, Any], np.ndarray]:
    n = len(sent.of("pattern"))
    w._on_custom_msg(w, {"type": "pattern", "seq": 7, **request}, [])
    content, buffers = sent.of("pattern")[n]
    shape = tuple(content["shape"])
    return content, dequantise(buffers[0], shape, tuple(content["range"]))  # type: ignore[arg-type]


def test_pattern_is_the_counts_at_the_position(steered: tuple[Any, Sent],
                                                sim: tuple[Dataset4D, SimulationTruth]) -> None:
    w, sent = steered
    ds, _ = sim
    for row, col in ((3, 17), (20, 2)):
        content, image = _pattern(w, sent, row=row, col=col)
        assert content["kind"] == "frame" and content["position"] == [row, col]
        assert content["seq"] == 7 and content["bin"] == 1 and content["shape"] == [32, 32]
        frame = ds.counts[row, col].astype(np.float64)
        step = (content["range"][1] - content["range"][0]) / 65535
        good = ~w.session.preprocessing.bad_pixels
        assert not good[HOT] and good.sum() == good.size - 1  # the hot pixel found, only it
        np.testing.assert_allclose(image[good], frame[good], atol=step)  # uint16 codes
        assert content["range"][1] == frame[good].max()  # a hot pixel does not set the scale
        assert image[HOT] == content["range"][1] < frame[HOT]  # it saturates (and is marked)
        assert content["total"] == pytest.approx(frame.sum(), rel=1e-6)
        bf = ds.bright_field
        rr, cc = np.meshgrid(np.arange(32) - bf.center_row, np.arange(32) - bf.center_col,
                             indexing="ij")
        r = np.hypot(rr, cc)
        assert image[r < 0.7 * bf.radius_px].mean() > 20 * np.median(image[r > 1.3 * bf.radius_px])
        centre = content["descan_centre_px"]  # the fitted disk centre moves with the scan
        assert centre is not None and abs(centre[0] - bf.center_row) < 2
    a, _ = _pattern(w, sent, row=3, col=17)
    b, _ = _pattern(w, sent, row=20, col=2)
    assert a["descan_centre_px"] != b["descan_centre_px"]


def test_mean_pattern_and_bad_requests(steered: tuple[Any, Sent],
                                       sim: tuple[Dataset4D, SimulationTruth]) -> None:
    w, sent = steered
    ds, _ = sim
    content, image = _pattern(w, sent, mean=True)
    assert content["kind"] == "mean" and content["position"] is None
    step = (content["range"][1] - content["range"][0]) / 65535
    np.testing.assert_allclose(np.delete(image.ravel(), HOT[0] * 32 + HOT[1]),
                               np.delete(ds.mean_pattern.ravel(), HOT[0] * 32 + HOT[1]), atol=step)
    n = len(sent.of("pattern"))
    for bad in ({"row": 24, "col": 0}, {"row": -1, "col": 3}, {"row": 1.5, "col": 2},
                {"row": "a", "col": 2}, {"col": 2}):
        w._on_custom_msg(w, {"type": "pattern", "seq": 1, **bad}, [])
        assert w.status == "error" and "pattern" in w.message, bad
    assert len(sent.of("pattern")) == n  # refused: nothing sent
    w._on_custom_msg(w, {"type": "pattern", "row": 24, "col": 0}, [])
    assert "outside the 24×24 scan" in w.message
    w._set_error("")


def test_info_has_the_disk_its_pixels_repaired_pixels_and_descan(
        steered: tuple[Any, Sent]) -> None:
    w, _ = steered
    s = w.session
    info = w.diffraction_info
    assert info["detector_shape"] == [32, 32] and info["bin"] == 1
    n = s.diagnostics.engine.n_bf
    assert info["bf_pixels_total"] == n
    radii = np.frombuffer(info["bf_radii"], dtype="<u2") * 0.01
    assert radii.size == n and np.all(np.diff(radii) >= 0)
    assert radii[-1] <= info["bf"]["pixels_radius_px"] + 0.01
    assert list(HOT) in info["repaired"] and info["repaired_count"] == int(
        s.preprocessing.bad_pixels.sum())
    descan = info["descan"]
    assert descan is not None and descan["significant"] and descan["applied"]
    shifts = np.array(descan["shift_px"]).reshape(len(descan["rows_px"]),
                                                  len(descan["cols_px"]), 2)
    # the simulated plane: d(row)/d(col) = 0.05 px per scan column, as the shift grid says
    slope = (shifts[:, -1, 0] - shifts[:, 0, 0]).mean() / (descan["cols_px"][-1]
                                                          - descan["cols_px"][0])
    assert slope == pytest.approx(0.05, abs=0.01)


def test_bf_pixels_rerenders_the_frame_on_screen(steered: tuple[Any, Sent],
                                                 sim: tuple[Dataset4D, SimulationTruth]) -> None:
    w, sent = steered
    _, truth = sim
    params = dict(truth.params)
    w._on_custom_msg(w, {"type": "preview", "seq": 1, "params": params}, [])
    w.wait(120)
    first, first_buf = sent.of("frame")[-1]
    assert first["bf_pixels"] is None
    n = w.session.diagnostics.engine.n_bf
    w.bf_pixels = n // 3
    w.wait(120)
    fewer, fewer_buf = sent.of("frame")[-1]
    assert fewer["bf_pixels"] == n // 3 and fewer["params"] == first["params"]
    assert fewer["loss"] == first["loss"]  # the fit's objective: every pixel
    assert fewer_buf != first_buf
    shape = tuple(fewer["shape"])
    rec = w.session.reconstruct(params, upsample=shape[0] // 24, bf_pixels=n // 3)
    image = dequantise(fewer_buf[0], shape, tuple(fewer["range"]))  # type: ignore[arg-type]
    assert np.abs(image - rec.phase).max() <= (fewer["range"][1] - fewer["range"][0]) / 65535
    w.bf_pixels = 0  # all again: the first frame's bits
    w.wait(120)
    again, again_buf = sent.of("frame")[-1]
    assert again["bf_pixels"] is None and again_buf == first_buf
    w.bf_pixels = n + 5
    assert w.status == "error" and "BF pixels" in w.message
    w.bf_pixels = 0


def test_binning_keeps_the_wire_small_and_the_means_exact() -> None:
    counts = np.random.default_rng(3).poisson(5.0, (2, 3, 300, 260)).astype(np.uint16)
    assert bin_factor((300, 260)) == 3 and bin_factor((128, 64)) == 1
    image = pattern_at(counts, 1, 2, 3)
    assert image.shape == (100, 87) and image.dtype == np.float32
    frame = counts[1, 2].astype(np.float64)
    np.testing.assert_allclose(image[10, 20], frame[30:33, 60:63].mean(), rtol=1e-6)
    np.testing.assert_allclose(image[-1, -1], frame[297:300, 258:260].mean(), rtol=1e-6)
    np.testing.assert_allclose(binned(np, frame, 1), frame)
