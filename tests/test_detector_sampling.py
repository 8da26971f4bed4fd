"""Opt-in joint fit of the detector sampling (fit.sampling), against the simulator's truth,
and its record in the calibration file."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import livessb
from livessb.cli import main
from livessb.dataset import DatasetError
from livessb.detector_sampling import with_detector_sampling
from livessb.fit.sampling import SamplingFit, marginal_errors, parabola_vertex, sampling_error
from livessb.simulate import simulate_4dstem

TRUTH = {"C10": -50.0, "C12": 10.0, "phi12": 0.4}


def test_parabola_vertex_and_the_error_rules() -> None:
    grid = 1.7 * (1 + np.linspace(-0.03, 0.03, 7))
    values = 3.0 * (grid - 1.71) ** 2 + 5.0
    vertex, a, on_edge, se = parabola_vertex(grid, values)
    assert vertex == pytest.approx(1.71) and a == pytest.approx(3.0) and not on_edge
    assert se == pytest.approx(0.0, abs=1e-9)
    # No minimum inside: clipped to the best end, flagged.
    vertex, _, on_edge, _ = parabola_vertex(grid, -values)
    assert on_edge and vertex in (pytest.approx(grid[0]), pytest.approx(grid[-1]))
    record = SamplingFit(mrad=1.71, error_mrad=0.0, start_mrad=1.7, derived_start=True,
                         curvature=4.0, vertex_error_mrad=1e-4, grid_error_mrad=2e-3)
    # var(s) = κσ²/a = 2·0.5/4 → 0.5; capped at the grid's half span (3 % of the start).
    assert sampling_error(record, 2.0, 0.5) == pytest.approx(0.03 * 1.7)
    record.curvature = 1e6
    assert sampling_error(record, 2.0, 0.5) == pytest.approx(2e-3)  # the grid dependence
    errs = marginal_errors({"C10": 0.3, "depth": 0.0}, {"C10": 40.0}, 0.01)
    assert errs["C10"] == pytest.approx(0.5) and errs["depth"] == 0.0


def test_a_dataset_at_another_sampling_keeps_its_counts_and_semiangle() -> None:
    ds, truth = simulate_4dstem(scan_shape=(8, 8), detector_shape=(32, 32), seed=1)
    view = with_detector_sampling(ds, 1.01 * ds.detector_sampling_mrad)
    assert view.counts is ds.counts and view.semiangle_mrad == ds.semiangle_mrad
    assert view.detector_pixel_inv_A == pytest.approx(1.01 * ds.detector_pixel_inv_A)
    assert not view.detector_sampling_derived
    assert ds.detector_sampling_mrad == truth.detector_sampling_mrad  # untouched
    with pytest.raises(DatasetError, match="positive"):
        with_detector_sampling(ds, -1.0)
    with pytest.raises(DatasetError, match="does not fit"):
        with_detector_sampling(ds, 0.3 * ds.detector_sampling_mrad)


def test_fit_detector_sampling_needs_the_vp_objective() -> None:
    ds, _ = simulate_4dstem(scan_shape=(12, 12), detector_shape=(32, 32), seed=1)
    with livessb.Session(ds, device="cpu") as s, pytest.raises(ValueError, match="'vp'"):
        s.fit(trials=8, progress=False, objective="coherence", fit_detector_sampling=True)


def test_joint_fit_recovers_a_sampling_given_2_percent_off_and_the_file_keeps_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # An integer BF centre: the simulator renders a sub-pixel centre by bilinear
    # interpolation, a blur of the aperture edge that the fit reads ≈ 1 % large
    # (docs/uncertainty.md). Measured: -0.05 % ± 0.07 %; C10 -49.15 → -49.64.
    ds, truth = simulate_4dstem(scan_shape=(32, 32), detector_shape=(48, 48), dose=1e6,
                                phase_peak_rad=0.2, seed=1, aberrations=TRUTH,
                                detector_center_offset_px=(0.0, 0.0))
    s_true = truth.detector_sampling_mrad
    off = livessb.Dataset4D(ds.counts, voltage_kV=200, semiangle_mrad=20,
                            scan_step_A=ds.scan_step_A, detector_sampling_mrad=1.02 * s_true)
    with livessb.Session(off, device="cpu") as s:
        plain = s.fit(trials=100, progress=False)
    with livessb.Session(off, device="cpu") as s:
        fit = s.fit(trials=100, progress=False, fit_detector_sampling=True)
        record = fit.provenance["detector_sampling"]
        assert record["fitted"] and record["start_mrad"] == pytest.approx(1.02 * s_true)
        assert s.dataset.detector_sampling_mrad == record["mrad"]  # the session moved
        assert off.detector_sampling_mrad == pytest.approx(1.02 * s_true)  # the input did not
        assert abs(record["mrad"] / s_true - 1) < 0.005
        assert abs(record["mrad"] - s_true) <= 2 * record["error_mrad"]
        assert 0 < record["error_mrad"] < 0.005 * s_true
        assert abs(fit.params["C10"] - TRUTH["C10"]) < abs(plain.params["C10"] - TRUTH["C10"])
        # The errors carry the sampling's uncertainty (C10 moves ≈ 15 Å per mrad/px).
        noise_only = fit.provenance["errors_components"]
        assert fit.errors["C10"] >= max(noise_only["noise"]["C10"],
                                        noise_only["misfit"]["C10"])
        path = s.save_calibration(tmp_path / "cal.json")
        phase = s.reconstruct(fit.params).phase
    with livessb.Session(off, device="cpu", calibration=path) as restored:
        assert restored.dataset.detector_sampling_mrad == record["mrad"]
        np.testing.assert_array_equal(restored.reconstruct(fit.params).phase, phase)
    # The CLI takes the same flag; its summary names the fitted sampling.
    np.save(tmp_path / "scan.npy", ds.counts)
    assert main(["fit", str(tmp_path / "scan.npy"), "--voltage-kV", "200",
                 "--semiangle-mrad", "20", "--scan-step-A", str(ds.scan_step_A[0]),
                 "--detector-sampling-mrad", str(1.02 * s_true), "--device", "cpu",
                 "--trials", "64", "--fit-detector-sampling",
                 "--json", str(tmp_path / "fit.json")]) == 0
    doc = json.loads((tmp_path / "fit.json").read_text())
    cli_record = doc["full_field"]["provenance"]["detector_sampling"]
    assert abs(cli_record["mrad"] / s_true - 1) < 0.005
    assert "detector sampling fitted" in capsys.readouterr().out
