"""Pieces of the error estimator and of the model-choice rules (fast; the calibration
against the simulator's truth is tests/test_errors_calibration.py)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from livessb.fit.errors import (
    NoiseLevel,
    covariance,
    noise_level,
    observation_counts,
    pixel_trotter_counts,
    profile_inflation,
    standard_errors,
)
from livessb.fit.model_choice import CHI2_3_P001, choose_model, edge_warnings, undetermined
from livessb.physics.geometry import (
    bright_field_pixels,
    half_plane_weights,
    scan_frame_frequencies,
    scan_frequencies_half,
    trotter_support,
)

K_ALPHA = 0.8  # 1/Å


@pytest.mark.parametrize(("shape", "step", "theta"), [((24, 24), (0.6, 0.6), 0.0),
                                                      ((30, 27), (0.5, 0.7), 0.7)])
def test_trotter_counts_match_the_masks_the_loss_sums_over(
        shape: tuple[int, int], step: tuple[float, float], theta: float) -> None:
    bf = bright_field_pixels((32, 32), (16.3, 15.8), K_ALPHA / 7.5, K_ALPHA)
    k = scan_frame_frequencies(bf.k_det, theta, False)
    nu_r, nu_c = scan_frequencies_half(shape, step)
    R, C = np.meshgrid(nu_r, nu_c, indexing="ij")
    w = np.broadcast_to(half_plane_weights(shape[1]), R.shape).ravel()
    masks = trotter_support(k, R.ravel(), C.ravel(), K_ALPHA)
    exact_per_pixel = (masks * w).sum(axis=1)
    counts = pixel_trotter_counts(k, shape, step, K_ALPHA)
    np.testing.assert_array_equal(counts, exact_per_pixel)
    n_obs, n_object = observation_counts(bf.count, R.ravel(), C.ravel(), w, K_ALPHA)
    assert n_obs == pytest.approx(float(exact_per_pixel.sum()), rel=0.01)
    # One object per trotter lobe (k-ν in the disc, or k+ν): a lobe with a pixel.
    minus = np.hypot(k[:, :1] - R.ravel(), k[:, 1:] - C.ravel()) <= K_ALPHA
    lobes = ((masks & minus).sum(axis=0) > 0).astype(int) + ((masks & ~minus).sum(axis=0) > 0)
    exact_object = float((lobes * w).sum())
    assert n_object == pytest.approx(exact_object, rel=0.02)


def test_linear_least_squares_errors_follow_from_the_hessian() -> None:
    # R(θ) = Σ |y - Aθ|², noise σ² per real value: cov = σ²(AᵀA)⁻¹ = 2σ²(∂²R)⁻¹.
    rng = np.random.default_rng(0)
    A = rng.normal(size=(400, 2))
    sigma2, energy = 0.3, 50.0
    hessian_of_loss = 2 * A.T @ A / energy  # L = R / E
    cov = covariance(hessian_of_loss, sigma2, energy, np.array([100.0, 100.0]))
    np.testing.assert_allclose(cov, sigma2 * np.linalg.inv(A.T @ A), rtol=1e-10)


def test_a_flat_direction_gets_the_box_width_and_held_parameters_zero() -> None:
    names = ("C10", "tilt_row_mrad", "depth")
    hess = np.diag([4.0, 0.0, 1.0])  # tilt does not move the loss at all
    noise = NoiseLevel(sigma2=1.0, sigma2_residual=1.0, sigma2_poisson=1.0,
                       n_observations=1000, n_object=10, n_parameters=2)
    box = {"C10": (-500.0, 500.0), "tilt_row_mrad": (-15.0, 15.0), "depth": (0.0, 500.0)}
    err = standard_errors(hess, names, ("C10", "tilt_row_mrad"), noise, 2.0, box)
    assert err["C10"] == pytest.approx(math.sqrt(2 * 1.0 / 2.0 / 4.0))
    assert err["tilt_row_mrad"] == pytest.approx(30.0)  # capped at its box width
    assert err["depth"] == 0.0  # held


def test_profile_inflation_grows_as_the_signal_per_frequency_falls() -> None:
    # κ = 1 + σ² n_object / S with S = E(1 - L) - σ² n_object.
    assert profile_inflation(0.5, 1000.0, 1.0, 10.0) == pytest.approx(1 + 10 / 490)
    assert profile_inflation(0.98, 1000.0, 1.0, 10.0) == pytest.approx(2.0)
    assert profile_inflation(0.995, 1000.0, 1.0, 10.0) >= 1e5  # no signal above the noise


def _noise(sigma2: float, poisson: float, n_obs: float = 1e5) -> NoiseLevel:
    return NoiseLevel(sigma2=sigma2, sigma2_residual=sigma2, sigma2_poisson=poisson,
                      n_observations=n_obs, n_object=1000, n_parameters=6)


def test_model_choice_needs_a_significant_and_explanatory_improvement() -> None:
    n_obs, dof = 1e5, 1e5 - 1000 - 6
    energy = 1.1 * dof  # σ² = 1 with L_thick = dof/E
    l_thick = dof / energy
    # Thin misfit of 400 σ² beyond the noise, all of it removed by the thick model.
    thick = choose_model(l_thick + 400 / energy, l_thick, energy, _noise(1.0, 1.0, n_obs), 3)
    assert thick.kept == "thick" and thick.statistic == pytest.approx(400)
    # Not significant: 10 σ².
    weak = choose_model(l_thick + 10 / energy, l_thick, energy, _noise(1.0, 1.0, n_obs), 3)
    assert weak.kept == "thin" and weak.statistic < CHI2_3_P001
    # Significant (300 σ²) but a fifth of the thin misfit beyond the noise (≈ 2000 σ²):
    # something else is wrong.
    l_err = 1.02 * dof / energy  # both models 2 % above the Poisson floor
    other = choose_model(l_err + 300 / energy, l_err, energy, _noise(1.02, 1.0, n_obs), 3)
    assert other.kept == "thin" and other.explained_fraction < 0.5
    assert "fit_map" in other.reason
    # Counts not on the Poisson scale (gain 3): only the significance counts.
    l_gain = 3.0 * dof / energy
    gain = choose_model(l_gain + 300 / energy, l_gain, energy, _noise(3.0, 1.0, n_obs), 3)
    assert gain.kept == "thick" and gain.floor == "residual"


def test_undetermined_rules() -> None:
    box = {"C10": (-500.0, 500.0), "C12": (0.0, 100.0), "phi12": (-1.6, 1.6),
           "tilt_row_mrad": (-15.0, 15.0), "tilt_col_mrad": (-15.0, 15.0),
           "depth": (0.0, 500.0)}
    free = list(box)
    params = {"C10": -50.0, "C12": 0.5, "phi12": 0.3, "tilt_row_mrad": 2.0,
              "tilt_col_mrad": -1.0, "depth": 8.0}
    errors = {"C10": 150.0, "C12": 1.0, "phi12": 0.5, "tilt_row_mrad": 3.0,
              "tilt_col_mrad": 2.0, "depth": 10.0}
    # C10: error beyond a tenth of the box; phi12: C12 below 2 errors; tilts: depth
    # below 2 errors.
    assert undetermined(params, errors, box, free) == [
        "C10", "phi12", "tilt_row_mrad", "tilt_col_mrad"]
    sharp = dict.fromkeys(errors, 0.01)
    assert undetermined(params, sharp, box, free, held_by_model=("depth",)) == ["depth"]


def test_box_edge_and_interval_warnings() -> None:
    box = {"C10": (-500.0, 500.0), "depth": (0.0, 500.0), "C12": (0.0, 100.0)}
    params = {"C10": 500.0, "depth": 3.0, "C12": 95.0}
    errors = {"C10": 1.0, "depth": 5.0, "C12": 4.0}
    warns = edge_warnings(params, errors, box, ["C10"])
    assert len(warns) == 2
    assert warns[0].startswith("C10 = 500") and "box edge" in warns[0]
    assert warns[1].startswith("C12 = 95") and "±2σ" in warns[1]  # depth ≥ 0 is physical


def test_fit_result_round_trips_errors_and_loads_files_without_them() -> None:
    from livessb.results import FitResult

    fit = FitResult(params={"C10": -50.0, "depth": 0.0}, loss=0.5, rotation_deg=12.0,
                    transpose=False, errors={"C10": 0.2, "depth": 0.0},
                    undetermined=["depth"])
    back = FitResult.from_dict(fit.to_dict())
    assert back.errors == fit.errors and back.undetermined == ["depth"]
    old = fit.to_dict()
    del old["errors"], old["undetermined"]  # a calibration file written before
    restored = FitResult.from_dict(old)
    assert restored.errors == {} and restored.undetermined == []


def test_no_degrees_of_freedom_give_box_width_errors_not_a_failure() -> None:
    # 119 observations, 119 object degrees of freedom, 6 parameters (a forced unit typo).
    noise = noise_level(0.5, 1000.0, 119.0, 119.0, 6, 1.0)
    assert not noise.determined and noise.estimator == "none"
    assert "no degrees of freedom" in noise.undetermined_reason()
    box = {"C10": (-500.0, 500.0), "C12": (0.0, 100.0)}
    err = standard_errors(np.eye(2), ("C10", "C12"), ("C10", "C12"), noise, 1000.0, box)
    assert err == {"C10": 1000.0, "C12": 100.0}
