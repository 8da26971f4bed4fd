"""The systematic errors (fit.systematic): the low and high frequency bands' estimates,
their disagreement beyond noise, and depth / tilt flagged where the bands read
different depths. Synthetic band sums with a known answer; the fits' end-to-end
coverage is in tests/test_errors_calibration.py (simulator) and docs/bias-matrix.md
(abTEM)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from livessb.fit.errors import NoiseLevel
from livessb.fit.model_choice import ModelChoice
from livessb.fit.systematic import (
    SIGNIFICANCE,
    band_kappa_ratio,
    combined_errors,
    compare_bands,
    depth_not_described,
    depth_not_determined,
)
from livessb.physics.objective import frequency_bands, radial_order

NAMES = ("C10", "C12", "depth")
BOX = {"C10": (-200.0, 200.0), "C12": (0.0, 50.0), "depth": (0.0, 400.0)}
PARAMS = {"C10": -50.0, "C12": 5.0, "depth": 100.0}


def _bands(curvature: np.ndarray, offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Band gradients whose estimates are θ̂ ± offsets (low −, high +) and the joint
    Hessian diag(curvature); g_low = −g_high (an optimum)."""
    joint = np.diag(curvature)
    g_high = -joint @ offsets / 2  # θ_high = θ̂ − 2 H⁻¹ g_high = θ̂ + offsets
    return np.stack([-g_high, g_high]), joint


CURVATURE = np.array([4.0, 9.0, 0.25])
NOISE_ERRORS = {"C10": 0.3, "C12": 0.1, "depth": 2.0}


def test_bands_that_agree_within_the_statistical_errors_add_nothing() -> None:
    sd_d = np.array([2 * NOISE_ERRORS[n] for n in NAMES])  # two half-information estimates
    grads, joint = _bands(CURVATURE, 0.5 * sd_d)  # d = sd_d: 1 sigma apart
    bands = compare_bands(grads, joint, PARAMS, NAMES, NOISE_ERRORS, 1.0, BOX)
    assert bands.reason == ""
    for i, n in enumerate(NAMES):
        assert bands.statistic[n] == pytest.approx(1.0, rel=1e-9)
        assert bands.systematic[n] == 0.0
        assert bands.low[n] == pytest.approx(PARAMS[n] - 0.5 * sd_d[i])
        assert bands.high[n] == pytest.approx(PARAMS[n] + 0.5 * sd_d[i])
    assert depth_not_determined(bands, PARAMS) == ""


def test_a_disagreement_beyond_the_errors_is_the_spread_of_the_two_estimates() -> None:
    offsets = np.array([2.0, 0.1, 3.0])  # d = 4 Å (6.7 σ_d), 0.2 Å (1 σ_d), 6 Å (1.5 σ_d)
    grads, joint = _bands(CURVATURE, offsets)
    bands = compare_bands(grads, joint, PARAMS, NAMES, NOISE_ERRORS, 1.0, BOX)
    d = 2 * offsets
    for i, n in enumerate(NAMES):
        v = 4 * NOISE_ERRORS[n] ** 2
        assert bands.statistic[n] == pytest.approx(d[i] ** 2 / v, rel=1e-9)
        expected = math.sqrt((d[i] ** 2 - v) / 2) if d[i] ** 2 / v > SIGNIFICANCE else 0.0
        assert bands.systematic[n] == pytest.approx(expected, rel=1e-9)
    assert bands.systematic["C10"] == pytest.approx(math.sqrt((16 - 0.36) / 2))
    assert bands.systematic["C12"] == 0.0 and bands.systematic["depth"] == 0.0
    total = combined_errors(NOISE_ERRORS, bands.systematic, BOX)
    assert total["C10"] == pytest.approx(math.hypot(0.3, bands.systematic["C10"]))
    assert total["C12"] == 0.1
    assert depth_not_determined(bands, PARAMS) == ""  # depth: not significant


def test_depth_and_tilt_are_not_determined_where_the_bands_read_different_depths() -> None:
    grads, joint = _bands(CURVATURE, np.array([0.0, 0.0, 25.0]))  # 75 and 125 Å
    bands = compare_bands(grads, joint, PARAMS, NAMES, NOISE_ERRORS, 1.0, BOX)
    reason = depth_not_determined(bands, PARAMS)
    assert "depth 75 and 125 Å" in reason and "not one projected structure" in reason
    assert bands.to_dict()["high"]["depth"] == pytest.approx(125.0)
    # significant but within 10 % of the depth (96 and 104 Å, 0.2 Å errors): determined
    # (the nearly noiseless abTEM weak slab: 149 and 141 Å, tests/test_abtem_fits.py)
    precise = {**NOISE_ERRORS, "depth": 0.2}
    grads, joint = _bands(CURVATURE, np.array([0.0, 0.0, 4.0]))
    close = compare_bands(grads, joint, PARAMS, NAMES, precise, 1.0, BOX)
    assert close.systematic["depth"] > 0 and depth_not_determined(close, PARAMS) == ""


def _thick(loss_thin: float, loss_thick: float) -> ModelChoice:
    return ModelChoice(kept="thick", reason="", loss_thin=loss_thin, loss_thick=loss_thick,
                       statistic=1e4, threshold=16.266, explained_fraction=1.0,
                       floor="residual")


def _noise(excess: float) -> NoiseLevel:
    return NoiseLevel(sigma2=excess, sigma2_residual=excess, sigma2_poisson=1.0,
                      n_observations=1e5, n_object=1e3, n_parameters=6)


def test_depth_is_not_a_depth_where_it_explains_less_than_the_misfit_it_leaves() -> None:
    # The 156 Å SrTiO3 crystal of the bias matrix (its numbers): depth and tilt explain
    # 4.1 % of the energy, 33.8 % is left beyond the noise (137x its level).
    reason = depth_not_described(_thick(0.3820, 0.3406), _noise(137.45))
    assert "explain 4.14%" in reason and "leaves 33.8%" in reason
    assert "not one projected structure" in reason
    # The weak tilted slab at the same dose: the misfit is the noise (excess 1.005).
    assert depth_not_described(_thick(0.9360, 0.9188), _noise(1.005)) == ""
    # Noise-free, where the misfit is far beyond the noise: a slab's depth explains 5.9x
    # what it leaves (kept); a one-cell crystal's spurious 21 Å explains 1.6 % of it.
    assert depth_not_described(_thick(0.2635, 0.0382), _noise(166.6)) == ""
    assert depth_not_described(_thick(0.0600, 0.0594), _noise(5408.0)) != ""
    # Only where the misfit exceeds the noise (simulator calibration: ≤ 1.015), only a
    # thick fit, and not without a Poisson level.
    assert depth_not_described(_thick(0.50, 0.499), _noise(1.9)) == ""
    thin = ModelChoice(kept="thin", reason="", loss_thin=0.5, loss_thick=0.499,
                       statistic=1.0, threshold=16.266, explained_fraction=0.0, floor="poisson")
    assert depth_not_described(thin, _noise(137.0)) == ""
    assert depth_not_described(None, _noise(137.0)) == ""
    no_poisson = NoiseLevel(sigma2=1.0, sigma2_residual=1.0, sigma2_poisson=0.0,
                            n_observations=1e5, n_object=1e3, n_parameters=6)
    assert depth_not_described(_thick(0.50, 0.499), no_poisson) == ""


def test_systematic_errors_stop_at_the_box_width() -> None:
    grads, joint = _bands(CURVATURE, np.array([900.0, 0.0, 0.0]))
    bands = compare_bands(grads, joint, PARAMS, NAMES, NOISE_ERRORS, 1.0, BOX)
    assert bands.systematic["C10"] == 400.0
    assert combined_errors({"C10": 399.0}, bands.systematic, BOX)["C10"] == 400.0


def test_no_comparison_without_a_curved_hessian() -> None:
    grads, joint = _bands(CURVATURE, np.array([1.0, 0.0, 0.0]))
    joint[2, 2] = 0.0
    bands = compare_bands(grads, joint, PARAMS, NAMES, NOISE_ERRORS, 1.0, BOX)
    assert bands.systematic == {} and "flat direction" in bands.reason
    assert compare_bands(grads, joint, PARAMS, (), {}, 1.0, BOX).reason == "no free parameters"


def test_frequency_bands_halve_the_information_by_radius() -> None:
    radius, order = radial_order((24, 30), (0.5, 0.4))
    assert radius.shape == order.shape == (24 * 16,)
    assert np.all(np.diff(radius[order]) >= 0)
    info = np.random.default_rng(3).normal(size=radius.size)
    high = frequency_bands(radius, order, info)
    assert high.dtype == bool
    assert radius[high].min() > radius[~high].max()  # a radius, not a scatter
    weight = np.abs(info)
    assert weight[~high].sum() >= 0.5 * weight.sum()  # the cut's radius is in the low band
    edge = radius == radius[~high].max()
    assert weight[~high].sum() - weight[edge].sum() < 0.5 * weight.sum()


def test_the_bands_noise_carries_each_bands_own_profiled_object_factor() -> None:
    # κ = 1 + σ² n_object / (S − σ² n_object) per band, n_object split by entries: equal
    # bands give the joint κ; a high band with a tenth of the signal a larger one.
    joint_kappa = 1 + 100 / (1000 - 100)
    noise = NoiseLevel(sigma2=1.0, sigma2_residual=1.0, sigma2_poisson=1.0,
                       n_observations=1e4, n_object=100.0, n_parameters=3, kappa=joint_kappa)
    equal = band_kappa_ratio(np.array([500.0, 500.0]), np.array([40.0, 40.0]), noise)
    assert equal == pytest.approx(1.0, rel=1e-12)
    weak_high = band_kappa_ratio(np.array([900.0, 100.0]), np.array([40.0, 40.0]), noise)
    assert weak_high == pytest.approx((1 + 50 / 850 + 1 + 50 / 50) / 2 / joint_kappa)
    # the test statistic scales with 1 / ratio: a disagreement the noisier band explains
    grads, joint = _bands(CURVATURE, np.array([2.0, 0.0, 0.0]))
    plain = compare_bands(grads, joint, PARAMS, NAMES, NOISE_ERRORS, 1.0, BOX)
    noisy = compare_bands(grads, joint, PARAMS, NAMES, NOISE_ERRORS, weak_high, BOX)
    assert noisy.statistic["C10"] == pytest.approx(plain.statistic["C10"] / weak_high)
