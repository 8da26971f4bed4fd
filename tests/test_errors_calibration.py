"""Calibrated errors: over independent Poisson realisations of data the model describes,
the simulator's truth lies within ±2 errors in at least 90 % of cases, for every
parameter the fit determines.

Thin: the full-field fit, the whole pipeline (rotation from the COM, search, Newton,
model choice, errors). Thick tilted slab: the whole scan fitted as a region with the
rotation held at the truth: at this weak phase the COM rotation of a thick slab on a
24² scan is off by up to 10° in some realisations, and the refinement (±3°) cannot
reach the global optimum from there; the rotation's own uncertainty is not in the
errors (docs/uncertainty.md), so what is tested is the error of the rest.

The objects are weak (0.04-0.05 rad peak phase) and |C10| small, so the weak-phase and
detector-discretisation C10 bias of SSB (|C10| 0.6-1.5 % low at 0.2 rad; a few % on
this 32² detector) stays well below the noise error. The thick model reads this
non-periodic 24² scan of a 150 Å slab ≈ 9 Å shallow even without noise (scan-window
leakage and the simulator's bilinear detector, docs/uncertainty.md): about one error
at this dose, which the misfit (sandwich) error, the larger of the two per
parameter, covers (with the noise error alone tilt_col covered 0.89). Small data
(24² scan × 32² detector); 64 trials in a ±box around the truth are enough for the
search to land in the global basin every time.

Power. A coverage count over n realisations is binomial. With 20 and "≥ 90 %" (18 of
20) a true coverage of 75 % still passed with P = 9 %. Now 120 realisations per model;
the coverage is counted over those that keep the model (≥ 108 of them: the model-choice
assertion) and must reach k(n) = the smallest k with P(X ≥ k | n, 75 %) < 1 %, for
which P(X < k | n, 90 %) < 5 % holds for every n ≥ 106 (asserted in _threshold):
n = 108 → k = 92, P(pass | 75 %) = 0.74 %, P(fail | 90 %) = 4.0 %; n = 120 → k = 102
(85 %), 0.56 % and 3.0 %. At the ideal ±2σ coverage of 95.4 % a parameter fails with
P < 1e-5. (n = 60 cannot meet both: its best k = 53 leaves P(fail | 90 %) = 25 %.)
Measured at 6a44b95 (these 120 seeds), coverage at ±2 errors: thin (120 of 120 kept
thin, k = 102) C10 0.925, C12 0.933, phi12 0.967 (C10's mean z -0.38, the bias above);
thick (113 of 120 kept thick, k = 96) C10 0.965, C12 0.982, phi12 0.982, tilt 0.973 /
0.965, depth 0.991 (mean z -0.50). Time on a 2-core CPU: ≈ 0.4 s per thin and 1.5 s
per thick realisation.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from scipy.stats import binom

import livessb
from livessb.simulate import simulate_4dstem

pytestmark = pytest.mark.slow

REALISATIONS = 120
COVERAGE = 0.9  # the claim: the truth within ±2 errors in at least 90 % of cases
UNCALIBRATED = 0.75  # a coverage the test must reject (errors ≈ 1.7x too small)
THIN = {"aberrations": {"C10": -15.0, "C12": 10.0, "phi12": 0.4}, "dose": 2e5,
        "phase_peak_rad": 0.04, "rotation_deg": 12.0}
THICK = {"aberrations": {"C10": 30.0, "C12": 8.0, "phi12": 0.3}, "depth_A": 150.0,
         "phase_peak_rad": 0.05, "tilt_mrad": (6.0, -3.0), "dose": 1e5}
BOX = {"C10": (-150.0, 150.0), "C12": (0.0, 40.0)}


def _realisations(settings: dict[str, Any], full_field: bool, alias_pixels: str = "kept",
                  scan_window: str = "none") -> list[tuple[Any, dict[str, float]]]:
    out = []
    for seed in range(REALISATIONS):
        ds, truth = simulate_4dstem(scan_shape=(24, 24), detector_shape=(32, 32),
                                    seed=100 + seed, **settings)
        with livessb.Session(ds, device="cpu", alias_pixels=alias_pixels,
                             scan_window=scan_window) as s:
            if full_field:
                fit = s.fit(trials=64, seed=seed, box=BOX, progress=False)
            else:  # the whole scan as a region, the rotation held at the truth
                s.rotation_deg, s.transpose = truth.rotation_deg, truth.transpose
                fit = s.fit_region((0, 24, 0, 24), trials=100, seed=seed, box=BOX).fit
        out.append((fit, truth.params))
    return out


@pytest.fixture(scope="module")
def thin_fits() -> list[tuple[Any, dict[str, float]]]:
    return _realisations(THIN, full_field=True)


@pytest.fixture(scope="module")
def thick_fits() -> list[tuple[Any, dict[str, float]]]:
    return _realisations(THICK, full_field=False)


@pytest.fixture(scope="module")
def thin_fits_alias_excluded() -> list[tuple[Any, dict[str, float]]]:
    return _realisations(THIN, full_field=True, alias_pixels="excluded")


@pytest.fixture(scope="module")
def thin_fits_hann() -> list[tuple[Any, dict[str, float]]]:
    return _realisations(THIN, full_field=True, scan_window="hann")


def _deviation(name: str, value: float, truth: float) -> float:
    if name == "phi12":  # on its circle of period π
        return (value - truth + np.pi / 2) % np.pi - np.pi / 2
    return value - truth


def _threshold(n: int) -> int:
    """Fewest of n inside ±2 errors that a true coverage of 75 % reaches with P < 1 %."""
    k = next(k for k in range(n + 1) if binom.sf(k - 1, n, UNCALIBRATED) < 0.01)
    assert binom.cdf(k - 1, n, COVERAGE) < 0.05, (n, k)  # and 90 % fails with P < 5 %
    return k


def _assert_covered(fits: list[tuple[Any, dict[str, float]]], names: tuple[str, ...]) -> None:
    inside = {n: 0 for n in names}
    for fit, truth in fits:
        for n in names:
            assert fit.errors[n] > 0 and np.isfinite(fit.errors[n])
            inside[n] += abs(_deviation(n, fit.params[n], truth[n])) <= 2 * fit.errors[n]
    k = _threshold(len(fits))
    assert min(inside.values()) >= k, ({n: c / len(fits) for n, c in inside.items()}, k)


def test_thin_errors_are_calibrated_and_the_thin_model_is_kept(
        thin_fits: list[tuple[Any, dict[str, float]]]) -> None:
    kept = [fit.provenance["model_choice"]["kept"] for fit, _ in thin_fits]
    assert kept.count("thin") >= COVERAGE * REALISATIONS
    thin = [(f, t) for f, t in thin_fits if f.provenance["model_choice"]["kept"] == "thin"]
    for fit, _ in thin:
        assert fit.params["depth"] == 0.0 and fit.errors["depth"] == 0.0
        assert {"depth", "tilt_row_mrad", "tilt_col_mrad"} <= set(fit.undetermined)
        assert set(fit.errors) == set(fit.params)
    _assert_covered(thin, ("C10", "C12", "phi12"))


def test_thin_errors_stay_calibrated_with_the_alias_pixels_left_out(
        thin_fits_alias_excluded: list[tuple[Any, dict[str, float]]]) -> None:
    # The simulator's 0.6 Å steps alias (Nyquist 0.83 < 2k_α 1.59 1/Å): "excluded" keeps
    # about half the pairs, and the errors count only those (physics.aliases.
    # kept_pair_fraction). Measured: 120 of 120 thin, within ±2 errors C10 0.900, C12
    # 0.917, phi12 0.983 (kept: 0.942, 0.933, 0.975); errors / noise errors 1.07 (median).
    fits = thin_fits_alias_excluded
    assert all(f.provenance["alias_pixels"] == "excluded" for f, _ in fits)
    thin = [(f, t) for f, t in fits if f.provenance["model_choice"]["kept"] == "thin"]
    assert len(thin) >= COVERAGE * REALISATIONS
    _assert_covered(thin, ("C10", "C12", "phi12"))


def test_thin_errors_stay_calibrated_on_hann_apodised_spectra(
        thin_fits_hann: list[tuple[Any, dict[str, float]]],
        thin_fits: list[tuple[Any, dict[str, float]]]) -> None:
    # The apodised fit's neighbouring bins share noise; the errors carry the design factor
    # (physics.apodisation: ×1.94 on a 24² window). Measured on 40 of these seeds: 40 of 40
    # thin, within ±2 errors C10 0.975, C12 0.975, phi12 0.975, std(z) 0.80-0.97, misfit /
    # noise errors 0.98-1.03. The errors must not just grow: the apodised C10's scatter
    # over the realisations is itself larger, by the factor the errors claim.
    fits = thin_fits_hann
    assert all(f.provenance["scan_window"] == "hann" for f, _ in fits)
    thin = [(f, t) for f, t in fits if f.provenance["model_choice"]["kept"] == "thin"]
    assert len(thin) >= COVERAGE * REALISATIONS
    _assert_covered(thin, ("C10", "C12", "phi12"))
    for name in ("C10", "C12"):
        spread = {w: float(np.std([_deviation(name, f.params[name], t[name]) for f, t in fs]))
                  for w, fs in (("hann", fits), ("none", thin_fits))}
        errors = {w: float(np.median([f.errors[name] for f, _ in fs]))
                  for w, fs in (("hann", fits), ("none", thin_fits))}
        assert spread["hann"] > 1.2 * spread["none"], (name, spread)
        assert 0.7 < (errors["hann"] / errors["none"]) / (spread["hann"] / spread["none"]) < 1.4


def test_misfit_errors_agree_with_noise_errors_on_data_the_thin_model_describes(
        thin_fits: list[tuple[Any, dict[str, float]]]) -> None:
    # The sandwich estimates the same scatter as the noise error when the residual is
    # counting noise (measured: mean ratio 1.02-1.05), so taking the larger of the two
    # does not inflate calibrated errors.
    for name in ("C10", "C12", "phi12"):
        ratios = [f.provenance["errors_components"]["misfit"][name]
                  / f.provenance["errors_components"]["noise"][name] for f, _ in thin_fits]
        assert 0.85 <= float(np.mean(ratios)) <= 1.2, (name, ratios)


THICK_NAMES = ("C10", "C12", "phi12", "tilt_row_mrad", "tilt_col_mrad", "depth")


def _kept_thick(fits: list[tuple[Any, dict[str, float]]]) -> list[tuple[Any, dict[str, float]]]:
    return [(f, t) for f, t in fits if f.provenance["model_choice"]["kept"] == "thick"]


def test_thick_model_is_kept_and_its_errors_are_calibrated_to_90_percent(
        thick_fits: list[tuple[Any, dict[str, float]]]) -> None:
    # ≥ 90 % kept thick, as the thin test asks of the thin model: with one object per
    # trotter lobe the test has less power, and in 7 of these 120 realisations (seeds
    # 109, 130, 132, 138, 174, 198, 211) the thin model is kept; in seed 109 the thick
    # model removes ΔR = 13 σ² only (T = ΔR/(κσ²) = 6.0, κ = 2.2), below χ²₃(p = 0.001)
    # = 16.3: those data do not show the depth significantly. In 5 (e.g. seed 110, C12 =
    # 4.5 ± 2.8, truth 8) C12 is below 2 errors and phi12 rightly undetermined.
    thick = _kept_thick(thick_fits)
    assert len(thick) >= COVERAGE * REALISATIONS
    # The band comparison (fit.systematic, p = 0.001 per parameter) may call depth not
    # determined by chance: measured 1 of 113 (seed 212: the bands read 102 and 170 Å).
    flagged = [f for f, _ in thick
               if any(w.startswith("depth and tilt not determined") for w in
                      f.provenance["warnings"])]
    assert len(flagged) <= 0.02 * len(thick), len(flagged)
    for fit, _ in thick:  # depth and tilt determined; phi12 while C12 > 2 errors and
        # its own error is within a tenth of its box (π): seeds 125 and 165, C12 ≈ 5.5 ± 1.9,
        # have the former but not the latter (fit.model_choice's rule)
        allowed = {"phi12"} | ({"depth", "tilt_row_mrad", "tilt_col_mrad"}
                               if any(fit is f for f in flagged) else set())
        assert set(fit.undetermined) <= allowed, fit.undetermined
        determined = (fit.params["C12"] >= 2 * fit.errors["C12"]
                      and fit.errors["C12"] <= 0.1 * (BOX["C12"][1] - BOX["C12"][0])
                      and fit.errors["phi12"] <= 0.1 * np.pi)
        assert ("phi12" in fit.undetermined) != determined
    _assert_covered(thick, THICK_NAMES)


def _ratio_summary(fits: list[tuple[Any, dict[str, float]]], names: tuple[str, ...],
                   ) -> dict[str, tuple[float, float]]:
    """Per parameter: (mean, 90th percentile) of errors / noise errors."""
    out = {}
    for n in names:
        ratios = [f.errors[n] / f.provenance["errors_components"]["noise"][n] for f, _ in fits]
        out[n] = (float(np.mean(ratios)), float(np.percentile(ratios, 90)))
    return out


def test_errors_stay_within_1_5x_the_noise_errors_where_the_model_holds(
        thin_fits: list[tuple[Any, dict[str, float]]],
        thick_fits: list[tuple[Any, dict[str, float]]]) -> None:
    # The systematic part (fit.systematic: the low and high frequency bands disagree at
    # p = 0.001) must leave the errors of data the model describes alone: it may fire in
    # a few realisations (measured: 1 of 120 thin, 0 of 115 thick), and the errors stay
    # within 1.5x the noise errors on average (measured 1.06-1.12 thin, 1.12-1.29 thick:
    # the misfit error's share; its 90th percentile reaches 1.62 for tilt_col).
    thin = [(f, t) for f, t in thin_fits if f.provenance["model_choice"]["kept"] == "thin"]
    for fits, names in ((thin, ("C10", "C12", "phi12")), (_kept_thick(thick_fits), THICK_NAMES)):
        fired = [f for f, _ in fits if any(f.errors_systematic[n] > 0 for n in names)]
        summary = _ratio_summary(fits, names)
        print(f"systematic fired in {len(fired)} of {len(fits)}; errors/noise (mean, p90):",
              {n: (round(m, 3), round(p, 3)) for n, (m, p) in summary.items()})
        assert len(fired) <= 0.05 * len(fits), len(fired)
        assert all(m <= 1.5 for m, _ in summary.values()), summary
        for f, _ in fits:  # the bands' record is there, and the rule adds up
            bands = f.provenance["frequency_bands"]
            assert bands["reason"] == "" and set(bands["statistic"]) == set(names)
