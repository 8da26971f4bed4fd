"""Systematic errors: where the low and the high scan frequencies disagree.

The noise and misfit errors (fit.errors, fit.robust) describe the scatter of an
estimate whose model is right. A model error that acts on the frequencies in a
structured way (scan-window leakage of a lattice, aliasing of an undersampled scan,
the detector's pixel integration, dynamical scattering in a thick crystal) biases the
estimate instead. What shows it is that estimates which should agree do not: the
fit's frequencies split into two bands (the two halves of the C10 information, by
|ν|: ``physics.objective.frequency_bands``), and each band is on its own an estimate
with half the information, θ_b = θ̂ − 2H⁻¹ g_b (g_b the band's gradient at the joint
optimum θ̂, g_0 + g_1 = 0; the joint Hessian H, because a band alone can lack a
minimum in depth or tilt). Where the model holds they agree within their noise:
d = θ_1 − θ_0 has variance v = 4 σ_N² (κ_0 + κ_1) / (2κ) per parameter, σ_N the noise
error, κ_b each band's profiled-object factor (fit.errors' κ with the band's own
explained energy and share of the eliminated objects: the high band of a weak object
has less signal per frequency and more noise than the joint κ says). Then

* d²/v ≤ χ²₁(p = 0.001) = 10.83: the bands agree, no systematic part (measured on the
  simulator: 1 of 120 thin and 0 of 115 thick realisations fire);
* else the systematic error is the spread of the two estimates beyond their noise,
  s = √((d² − v)/2) (the between-estimate τ of DerSimonian and Laird for two), not
  reduced by √2 (the bands' biases are not independent: the truth can lie beyond
  both).

``fit.errors`` = √(max(noise, misfit)² + s²), s in ``fit.errors_systematic``. On the
abTEM matrix (docs/bias-matrix.md) the truth then lies within ±2 errors on ≥ 90 % of
the cases for every parameter. What the bands cannot see is a bias both share (an
undersampled scan's aliasing, a binned detector's pixel integration).

**Depth and tilt not determined.** The thick model assumes one projected structure
through the depth. Where that fails (an amorphous slab: every depth a different
structure; a strongly dynamical crystal) the bands read different depths. When they
disagree significantly and by more than ``DEPTH_DISAGREEMENT`` of the depth, depth
and tilt are listed as not determined, with the reason in the warnings. The bands miss
a failure common to all frequencies (a 156 Å SrTiO3 crystal: bands 9 % apart); what shows
it is the misfit the thick model leaves: where it exceeds the counting noise
(``MISFIT_DOMINANT``) and what depth and tilt explain (the thin model's loss minus the
thick one's) is less than that misfit, their values fit something else than a depth
(``depth_not_described``). Measured (docs/bias-matrix.md §7): the weak tilted slabs
explain 3.8–9.3× the misfit they leave, the 156 Å crystal 0.12×, the amorphous slab
0.04×, noise-free one-cell crystals where the thick model was kept 0.0001–0.016× (depth
7–21 Å for 3.9); on the simulator's thick calibration the misfit never reaches the noise
(σ²/σ²_Poisson ≤ 1.015 over 115 realisations).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..physics.objective import MisfitTerms, frequency_bands, radial_order
from .errors import FLAT_CURVATURE_REL, NoiseLevel, profile_inflation
from .model_choice import ModelChoice
from .transpose_choice import ORIENTATION_NOT_DETERMINED

SIGNIFICANCE = 10.83  # χ²₁ at p = 0.001: the bands disagree beyond their noise
DEPTH_DISAGREEMENT = 0.10  # of the depth: beyond the thick model's own leakage bias (≤ 6 %)
DEPTH_NOT_DETERMINED = "depth and tilt not determined"  # how both rules' reasons begin
MISFIT_DOMINANT = 2.0  # σ²/σ²_Poisson: the misfit beyond the counting noise exceeds the noise
DEPTH_EXPLAINED_MIN = 1.0  # of that misfit: what depth and tilt must explain to be a depth
TILTS = ("tilt_row_mrad", "tilt_col_mrad")


@dataclass(frozen=True)
class BandComparison:
    """The two bands' estimates and what they say, free parameters."""

    low: dict[str, float] = field(default_factory=dict)  # θ_0
    high: dict[str, float] = field(default_factory=dict)  # θ_1
    statistic: dict[str, float] = field(default_factory=dict)  # d²/v
    systematic: dict[str, float] = field(default_factory=dict)  # s (0 where they agree)
    reason: str = ""  # why no comparison was formed ("" when it was)

    def to_dict(self) -> dict[str, Any]:
        return {"low": dict(self.low), "high": dict(self.high),
                "statistic": dict(self.statistic), "systematic": dict(self.systematic),
                "significance": SIGNIFICANCE, "reason": self.reason}


def _joint_inverse(hessian: np.ndarray, widths: np.ndarray) -> np.ndarray | None:
    """H⁻¹ in the parameters' units, or None where H has a flat or negative direction on
    the box's scale (no comparison: the noise errors already say "undetermined")."""
    H = 0.5 * (hessian + hessian.T) * np.outer(widths, widths)
    evals, evecs = np.linalg.eigh(H)
    top = float(np.max(np.abs(evals))) if evals.size else 0.0
    if not top > 0 or np.any(evals <= FLAT_CURVATURE_REL * top):
        return None
    return np.asarray((evecs / evals) @ evecs.T * np.outer(widths, widths))


@dataclass(frozen=True)
class BandSums:
    """The low and the high band's gradients (2, P), explained energies and frequencies
    with signal (2,)."""

    gradients: np.ndarray
    explained: np.ndarray
    entries: np.ndarray


def band_sums(terms: MisfitTerms, shape: tuple[int, int], step_A: tuple[float, float],
              ) -> BandSums:
    """Each band's sums of the engine's per-frequency terms (on the host: the terms come
    down for the misfit error anyway)."""
    radius, order = radial_order((int(shape[0]), int(shape[1])),
                                 (float(step_A[0]), float(step_A[1])))
    high = frequency_bands(radius, order, terms.curvature).astype(np.float64)
    # one product per quantity (BLAS) instead of boolean gathers of the (P, M) terms
    grad_high = terms.per_nu @ high
    grads = np.stack([terms.per_nu.sum(axis=1) - grad_high, grad_high])
    explained_high = float(terms.explained @ high)
    signal = (terms.explained > 0).astype(np.float64)
    entries_high = float(signal @ high)
    return BandSums(gradients=grads,
                    explained=np.array([terms.explained.sum() - explained_high,
                                        explained_high]),
                    entries=np.array([signal.sum() - entries_high, entries_high]))


def band_kappa_ratio(explained: np.ndarray, entries: np.ndarray, noise: NoiseLevel) -> float:
    """(κ_low + κ_high) / (2κ): the bands' own profiled-object factors (fit.errors' κ with
    each band's explained energy and its share of the eliminated objects) against the
    joint one. The high band of a weak object carries little signal per frequency: its
    κ, and so its noise, is larger than the joint κ says."""
    total = float(np.sum(entries))
    if not total > 0:
        return 1.0
    # profile_inflation(L, E, ...) reads the explained energy as E(1 − L): here L = 0
    kappas = [profile_inflation(0.0, float(x), noise.sigma2, noise.n_object * float(e) / total)
              for x, e in zip(explained, entries, strict=True)]
    return float(np.mean(kappas)) / noise.kappa


def disagreement(d: float, v: float, width: float) -> tuple[float, float]:
    """(d²/v, the systematic part) of two estimates that should agree, ``d`` apart with
    noise variance ``v`` of the difference: √((d² − v)/2) where d²/v is above
    ``SIGNIFICANCE``, else 0; capped at the box ``width`` (the box bounds it beyond)."""
    stat = d * d / v if v > 0 else math.inf
    part = math.sqrt(max(d * d - v, 0.0) / 2.0) if stat > SIGNIFICANCE else 0.0
    return stat, min(part, width)


def compare_bands(
    band_gradients: np.ndarray, hessian: np.ndarray, params: Mapping[str, float],
    free: Sequence[str], noise_errors: Mapping[str, float], kappa_ratio: float,
    box: Mapping[str, tuple[float, float]],
) -> BandComparison:
    """The bands' estimates, test statistics and systematic errors (module docstring);
    gradients (2, P) and the joint Hessian (P, P) in ``free`` order; ``noise_errors``
    the joint estimate's noise errors, ``kappa_ratio`` from ``band_kappa_ratio``."""
    if not free:
        return BandComparison(reason="no free parameters")
    widths = np.array([max(box[n][1] - box[n][0], 1e-300) for n in free])
    g = np.asarray(band_gradients, dtype=np.float64)
    inv = _joint_inverse(np.asarray(hessian, dtype=np.float64), widths)
    if inv is None:
        return BandComparison(reason="the Hessian has a flat direction")
    steps = [-2.0 * inv @ g[0], -2.0 * inv @ g[1]]  # each band's half of the information
    low, high, stat, sys = {}, {}, {}, {}
    for i, n in enumerate(free):
        d = float(steps[1][i] - steps[0][i])
        # two half-information estimates, each with its band's κ: 2σ²·κ_b/κ each
        v = 4.0 * noise_errors[n] ** 2 * kappa_ratio
        low[n], high[n] = params[n] + float(steps[0][i]), params[n] + float(steps[1][i])
        stat[n], sys[n] = disagreement(d, v, float(widths[i]))
    return BandComparison(low=low, high=high, statistic=stat, systematic=sys)


def combined_errors(statistical: Mapping[str, float], systematic: Mapping[str, float],
                    box: Mapping[str, tuple[float, float]]) -> dict[str, float]:
    """√(statistical² + systematic²) per free parameter, capped at its box width."""
    return {n: min(math.hypot(e, systematic.get(n, 0.0)), box[n][1] - box[n][0])
            for n, e in statistical.items()}


def depth_not_determined(bands: BandComparison, params: Mapping[str, float]) -> str:
    """The reason depth and tilt are not determined, or "" (module docstring)."""
    if "depth" not in bands.low or params.get("depth", 0.0) <= 0:
        return ""
    low, high = bands.low["depth"], bands.high["depth"]
    depth = params["depth"]
    if (bands.statistic["depth"] > SIGNIFICANCE
            and abs(high - low) > DEPTH_DISAGREEMENT * depth):
        return (f"{DEPTH_NOT_DETERMINED}: the low and the high scan frequencies read "
                f"depth {low:.0f} and {high:.0f} Å (fit {depth:.0f} Å, "
                f"{math.sqrt(bands.statistic['depth']):.0f} noise errors apart): the specimen "
                "is not one projected structure through its depth (amorphous, or strongly "
                "dynamical), which the thick model assumes")
    return ""


def depth_not_described(choice: ModelChoice | None, noise: NoiseLevel) -> str:
    """The reason depth and tilt are not determined by the misfit the thick model leaves,
    or "" (module docstring); ``noise`` is the kept thick fit's."""
    if (choice is None or choice.kept != "thick" or not math.isfinite(noise.excess)
            or noise.excess <= MISFIT_DOMINANT):
        return ""
    explained = choice.loss_thin - choice.loss_thick
    left = choice.loss_thick * (1.0 - 1.0 / noise.excess)  # beyond the counting noise
    if explained >= DEPTH_EXPLAINED_MIN * left:
        return ""
    return (f"{DEPTH_NOT_DETERMINED}: they explain {explained:.2%} of the sideband "
            f"energy, the thick model leaves {left:.1%} beyond the counting noise "
            f"({noise.excess:.3g}× its level): the specimen is not one projected structure "
            "through its depth (amorphous, or strongly dynamical), which the thick model "
            "assumes")


def why_not_determined(warnings: Sequence[str]) -> list[str]:
    """The warnings that say why parameters are listed as not determined (depth and tilt,
    or the detector orientation: fit.transpose_choice), which the CLI and the widget show
    beside the values."""
    return [w for w in warnings
            if w.startswith((DEPTH_NOT_DETERMINED, ORIENTATION_NOT_DETERMINED))]
