"""Preprocessing (descan, dose normalisation, bad pixels) against the simulator's truth."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest

import livessb.simulate as sim
from helpers import with_counts
from livessb import Dataset4D, Preprocessing, Session
from livessb.calibration import CalibrationError
from livessb.preprocess import CorrectedCounts, prepare_corrections
from livessb.preprocess import corrections as corrections_module
from livessb.preprocess.pixels import find_bad_pixels

if TYPE_CHECKING:
    from livessb.simulate import SimulationTruth

SMALL: dict[str, Any] = {"scan_shape": (24, 24), "detector_shape": (32, 32), "scan_step_A": 0.6,
         "aberrations": {"C10": -30.0}, "dose": 2e4, "seed": 5}


# -- the simulator's descan and beam current --------------------------------------------


def test_simulated_descan_moves_the_disk_by_the_truth() -> None:
    a = (0.01, 0.03, -0.02, 0.015)
    ds, truth = sim.simulate_4dstem(scan_shape=(9, 9), detector_shape=(32, 32), dose=None,
                                    phase_peak_rad=1e-4, descan_px_per_px=a,
                                    descan_offset_px=(0.1, -0.2))
    ds0, _ = sim.simulate_4dstem(scan_shape=(9, 9), detector_shape=(32, 32), dose=None,
                                 phase_peak_rad=1e-4)
    d = truth.descan_map()
    assert np.allclose(d[8, 8] - d[0, 0], [8 * (a[0] + a[1]), 8 * (a[2] + a[3])])

    def com(frames: np.ndarray) -> np.ndarray:  # independent of livessb.preprocess
        r, c = np.meshgrid(np.arange(32), np.arange(32), indexing="ij")
        tot = frames.sum(axis=(-2, -1))
        return np.stack([(frames * r).sum(axis=(-2, -1)) / tot,
                         (frames * c).sum(axis=(-2, -1)) / tot], axis=-1)

    moved = com(ds.counts.astype(np.float64)) - com(ds0.counts.astype(np.float64))
    assert np.abs(moved - d).max() < 0.02  # the disk moved by the truth at every position


def test_beam_current_fluctuation_scales_the_dose_per_position() -> None:
    ds, truth = sim.simulate_4dstem(**{**SMALL, "beam_current_fluctuation": 0.2})
    current = np.asarray(truth.extra["beam_current"]).reshape(24, 24)
    assert 0.8 <= current.min() and current.max() <= 1.2 and current.std() > 0.08
    totals = ds.counts.sum(axis=(2, 3), dtype=np.float64)
    assert np.corrcoef(totals.ravel(), current.ravel())[0, 1] > 0.99
    plain, plain_truth = sim.simulate_4dstem(**SMALL)
    assert "beam_current" not in plain_truth.extra
    assert not np.array_equal(plain.counts, ds.counts)


# -- measurement ---------------------------------------------------------------------------


@pytest.mark.parametrize("model", ["plane", "smooth"])
def test_descan_fit_recovers_the_simulated_plane(model: str) -> None:
    a = (0.02, 0.05, -0.04, 0.03)
    ds, truth = sim.simulate_4dstem(**{**SMALL, "descan_px_per_px": a})
    corr = prepare_corrections(ds, Preprocessing(descan=model))
    fit = corr.descan
    assert fit is not None and fit.significant and corr.active
    truth_var = truth.descan_map() - truth.descan_map()[12, 12]
    fitted = fit.centre_map(variation_only=True)
    # on a scan spanning about 1.6 px; the cubic also follows some of the object's own
    # centre-of-mass signal on this small scan
    tol = 0.05 if model == "plane" else 0.1
    assert np.abs((fitted - fitted[12, 12]) - truth_var).max() < tol
    if model == "plane":
        assert np.allclose(fit.px_per_px, a, atol=0.003)


def test_descan_measurement_at_low_dose_bins_blocks() -> None:
    a = (0.0, 0.06, -0.06, 0.0)
    ds, _ = sim.simulate_4dstem(**{**SMALL, "dose": 800.0, "descan_px_per_px": a})
    fit = prepare_corrections(ds).descan
    assert fit is not None and fit.block > 1 and fit.significant
    assert np.allclose(fit.px_per_px, a, atol=0.01)


def test_no_descan_is_insignificant_and_leaves_the_counts_untouched(
        demo_with_truth: tuple[Dataset4D, SimulationTruth]) -> None:
    ds, _ = demo_with_truth
    corr = prepare_corrections(ds)
    assert corr.descan is not None and not corr.descan.significant
    assert corr.descan.span_px < corr.descan.threshold_px
    assert not corr.bad_pixels.any() and not corr.active
    assert corr.dataset_for_engine(ds) is ds  # the engines gather the raw counts


def test_corrected_counts_shift_frames_back_bilinearly() -> None:
    ds, _ = sim.simulate_4dstem(**{**SMALL, "descan_px_per_px": (0.0, 0.1, 0.0, 0.0)})
    corr = prepare_corrections(ds, Preprocessing(find_bad_pixels=False))
    view = CorrectedCounts(ds.counts, corr)
    assert view.shift is not None
    s = view.shift[3, 7]
    frame = view[3][7]
    raw = ds.counts[3, 7].astype(np.float64)
    r0, c0 = 14, 15
    fr, fc = s[0] - math.floor(s[0]), s[1] - math.floor(s[1])
    br, bc = r0 + math.floor(s[0]), c0 + math.floor(s[1])
    expect = ((1 - fr) * (1 - fc) * raw[br, bc] + (1 - fr) * fc * raw[br, bc + 1]
              + fr * (1 - fc) * raw[br + 1, bc] + fr * fc * raw[br + 1, bc + 1])
    assert frame[r0, c0] == pytest.approx(expect, rel=1e-5)


# -- bad pixels ----------------------------------------------------------------------------


def test_descan_is_measured_past_an_unmasked_hot_pixel() -> None:
    """Bad-pixel search off (``--no-auto-mask``): a pixel ~500× the disk level must not
    hide a real descan plane from the measurement."""
    a = (0.02, 0.05, -0.04, 0.03)
    ds, _truth = sim.simulate_4dstem(**{**SMALL, "descan_px_per_px": a})
    counts = ds.counts.copy()
    counts[:, :, 2, 29] = np.iinfo(counts.dtype).max if counts.dtype.kind == "u" else 6e4
    hot = with_counts(ds, counts)
    corr = prepare_corrections(hot, Preprocessing(descan="plane", find_bad_pixels=False))
    fit = corr.descan
    assert fit is not None and fit.significant
    assert np.allclose(fit.px_per_px, a, atol=0.005)



def test_hot_pixel_and_dead_column_are_found_and_nothing_else(
        demo_with_truth: tuple[Dataset4D, SimulationTruth]) -> None:
    ds, _ = demo_with_truth
    assert not find_bad_pixels(ds.mean_pattern, 96 * 96).any()
    counts = ds.counts.copy()
    counts[:, :, 20, 26] = 5000  # hot, inside the disk
    counts[:, :, 3, 40] = 40  # hot, in the dark field
    counts[:, :, :, 30] = 0  # a dead column through the disk
    bad = find_bad_pixels(counts.mean(axis=(0, 1), dtype=np.float64), 96 * 96)
    expect = np.zeros((48, 48), dtype=bool)
    expect[20, 26] = expect[3, 40] = True
    bf = ds.mean_pattern[:, 30] * 96 * 96 >= 30  # dead where counts were expected
    expect[:, 30] = bf
    assert np.array_equal(bad, expect)


def test_user_detector_mask_is_applied_and_checked() -> None:
    ds, _ = sim.simulate_4dstem(**SMALL)
    mask = np.ones((32, 32), dtype=bool)
    mask[16, 16] = False
    corr = prepare_corrections(ds, Preprocessing(detector_mask=mask))
    assert corr.bad_pixels[16, 16] and corr.bad_pixels.sum() == 1 and corr.active
    frame = CorrectedCounts(ds.counts, corr)[2][5]
    raw = ds.counts[2, 5].astype(np.float64)
    assert frame[16, 16] == pytest.approx(
        (raw[15:18, 15:18].sum() - raw[16, 16]) / 8, rel=1e-5)
    with pytest.raises(ValueError, match="detector_mask has shape"):
        prepare_corrections(ds, Preprocessing(detector_mask=np.ones((8, 8), dtype=bool)))
    with pytest.raises(ValueError, match="2-D bool"):
        Preprocessing(detector_mask=np.ones((32, 32)))
    with pytest.raises(ValueError, match="descan must be"):
        Preprocessing(descan="cubic")
    with pytest.raises(TypeError, match=r"livessb\.Preprocessing"):
        Session(ds, device="cpu", preprocessing={"descan": None})  # type: ignore[arg-type]


def test_dose_normalisation_equalises_frame_totals() -> None:
    ds, _ = sim.simulate_4dstem(**{**SMALL, "beam_current_fluctuation": 0.2})
    corr = prepare_corrections(ds, Preprocessing(dose_normalise=True))
    assert corr.dose_factors is not None
    bf = ds.bright_field
    rows, cols = np.nonzero(np.hypot(*np.meshgrid(np.arange(32) - bf.center_row,
                                                  np.arange(32) - bf.center_col,
                                                  indexing="ij")) < 5)
    view = CorrectedCounts(ds.counts, corr)
    raw = ds.counts[:, :, rows, cols].sum(axis=2, dtype=np.float64)
    fixed = np.stack([view.bf_row(np, r, rows, cols).sum(axis=1) for r in range(24)])
    # The central disk's counts follow the beam current; normalised, only Poisson noise.
    assert fixed.std() / fixed.mean() < 0.3 * raw.std() / raw.mean()


# -- calibration ----------------------------------------------------------------------------


def test_calibration_records_and_restore_reuses_the_descan(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ds, _ = sim.simulate_4dstem(**{**SMALL, "descan_px_per_px": (0.0, 0.05, -0.05, 0.0)})
    with Session(ds, device="cpu") as s:
        s.fit(trials=24, progress=False)
        fit = s.descan
        assert fit is not None and fit.significant
        path = s.save_calibration(tmp_path / "cal.json")
    doc = json.loads(path.read_text())
    assert doc["preprocessing"]["descan"]["coefficients"] == fit.to_dict()["coefficients"]

    def no_measuring(*args: object, **kw: object) -> None:
        raise AssertionError("restore re-measured the descan")

    monkeypatch.setattr(corrections_module, "_measure", no_measuring)
    with Session(ds, device="cpu", calibration=path) as s2:
        assert s2.descan is not None and s2.preprocessing.descan_applied
        assert np.array_equal(s2.descan.coefficients, fit.coefficients)
        assert s2.evaluations == 0
    old = dict(doc)
    del old["preprocessing"]  # a file written before the entry existed
    (tmp_path / "old.json").write_text(json.dumps(old))
    with Session(ds, device="cpu", calibration=tmp_path / "old.json") as s3:
        assert s3.descan is None and not s3.preprocessing.active
    bad = dict(doc)
    bad["preprocessing"] = {**doc["preprocessing"],
                            "descan": {**doc["preprocessing"]["descan"], "degree": 3}}
    (tmp_path / "bad.json").write_text(json.dumps(bad))
    with pytest.raises(CalibrationError, match="preprocessing entry"):
        Session(ds, device="cpu", calibration=tmp_path / "bad.json")


def test_cuda_layout_gather_matches_the_host_gather() -> None:
    """The CUDA engine's corrected upload (memory.upload_bf_counts) runs array ops only:
    with NumPy as the array module it must give the host gather in (B, Rr, Rc) layout."""
    from livessb.engine.cuda.memory import upload_bf_counts
    from livessb.engine.records import DatasetGeometry
    from livessb.engine.reference import host_bf_counts

    ds, _ = sim.simulate_4dstem(**{**SMALL, "descan_px_per_px": (0.0, 0.05, -0.05, 0.0),
                                   "beam_current_fluctuation": 0.1})
    counts = ds.counts.copy()
    counts[:, :, 10, 12] = 3000
    ds = with_counts(ds, counts)
    corr = prepare_corrections(ds, Preprocessing(dose_normalise=True))
    assert corr.descan_applied and corr.bad_pixels[10, 12] and corr.dose_factors is not None
    view = CorrectedCounts(ds.counts, corr)
    bf = DatasetGeometry.of(ds).bf
    host = host_bf_counts(view, bf)
    assert host.dtype == np.float32 and host.shape == (24, 24, bf.count)
    cuda_layout = upload_bf_counts(np, view, bf)
    assert np.array_equal(cuda_layout, np.moveaxis(host, 2, 0))


def test_plot_descan_shows_measured_fit_and_residual() -> None:
    import matplotlib

    matplotlib.use("Agg")
    from livessb.plots import plot_descan
    from livessb.preprocess import DescanFit

    ds, _ = sim.simulate_4dstem(**{**SMALL, "descan_px_per_px": (0.0, 0.05, -0.05, 0.0)})
    fit = prepare_corrections(ds).descan
    assert fit is not None and fit.measured is not None
    fig = plot_descan(fit)
    assert len(fig.axes) == 6 + 6  # six panels and their colour bars
    assert "applied" in fig.get_suptitle()
    restored = DescanFit.from_dict(fit.to_dict())
    assert restored.measured is None and np.array_equal(restored.coefficients, fit.coefficients)
    assert len(plot_descan(restored).axes) == 6 + 2  # only the fitted panels have data
