"""Crystal mode's last stage: the thin object's every term (physics.thin_object; issue 20,
docs/bias-matrix.md §17).

The lattice model's first-order objects leave out the strong object's second-order terms
(pairs of diffracted beams that meet on a BF pixel), which read C10 low on the inner BF
pixels and high on the outer ones. Here the beams T (one complex number per lattice point
and the zero beam) and the aberrations are fitted together on the same window's lattice
transforms by L-BFGS with the loss's exact gradient, from the first-order fit (T(g) =
O₋(g)/T(0), T(0) from the counts' level). The thin model holds for a thin crystal: where
the fit keeps the thick model (depth free) the stage is left out, and where the energy
the second-order terms add is within the noise (a χ²₁ test: a weak crystal at a low dose)
the first-order fit is kept; the record says why.

Its errors (fit.lattice): the noise part is the first-order fit's (the same data and, up to
the Friedel pairing of its lobes, the same objects: the profile curvature by C12 measured
2 % apart; its residual σ² holds the second-order misfit); the systematic part adds the
inner and the outer BF pixels' thin fits (``thin_object_stage``) to the first-order pairs.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from scipy.optimize import minimize

from ..params import PERIODS
from ..physics.lattice import LatticeData
from ..physics.lattice_columns import LatticeGeometry
from ..physics.thin_object import (
    THIN_OBJECT_PARAMS,
    BeamGrid,
    beam_grid,
    beam_terms,
    thin_object_loss,
)
from ..xp import to_host
from .lattice_errors import inner_pixels, pair_part

THIN_ITERATIONS = 2000
# L-BFGS stops when an iteration lowers the loss by less than this fraction of it: on
# counts the model makes, from C10 3 Å off, 1.2·10⁻⁷ Å from the truth (10⁻¹³: 1.8·10⁻³ Å)
THIN_FTOL = 1e-15
# each parameter's step unit in the optimiser's coordinates (Å, Å, rad)
THIN_SCALES = {"C10": 1.0, "C12": 1.0, "phi12": 0.01}
LEVEL_PERCENTILE = 90  # T(0)² from this percentile of the BF pixels' mean counts
# T(0) over its start from the counts' level, at most and at least: beyond 10 the
# second-order terms are below 1 % of their start (the first-order model, where L-BFGS
# would otherwise crawl on where the data do not see them)
LEVEL_RANGE = (0.1, 10.0)
SECOND_ORDER_SIGNIFICANCE = 10.83  # χ²₁ at p = 0.001: the one number the thin model adds
# L-BFGS's memory (pairs of steps kept): on seven thin fits of the demo's crystal regions
# (three joint fits, four BF-ring fits of ~250 free numbers) 30 took 90–528 iterations, 100
# took 76–153 to the same minimum (losses equal or lower by ≤ 6·10⁻¹³, C10 within 2·10⁻⁵
# Å): 2.6× less time in all; 150 saved 4 % more (benchmarks/README.md, twentieth session)
THIN_MEMORY = 100


@dataclass
class ThinObjectFit:
    """The thin object's fit: the parameters (every one, the fitted ``names`` moved), the
    beams ``T`` (n_b,: the zero beam first), the loss and L-BFGS's iterations."""

    params: dict[str, float]
    T: Any
    loss: float
    iterations: int
    names: list[str]


def thin_names(free: Sequence[str], kept: str | None = None
               ) -> tuple[list[str], str | None]:
    """(the thin stage's parameters, None) or ([], why it does not apply): ``kept`` the
    per-bin fit's model choice ("thick" where depth and tilt were kept, even if found not
    determined)."""
    if "depth" in free or kept == "thick":
        return [], "the thick model is kept (a depth fitted or held): the thin object's " \
                   "terms hold for thin crystals"
    beyond = [n for n in free if n not in THIN_OBJECT_PARAMS
              and n not in ("tilt_row_mrad", "tilt_col_mrad")]
    if beyond:
        return [], f"the fit also frees {', '.join(beyond)}, which the thin object's " \
                   "terms do not hold"
    names = [n for n in THIN_OBJECT_PARAMS if n in free]
    return (names, None) if names else ([], "no aberration is free")


def start_beams(counts: Any, objects: Any, n_g: int, xp: Any) -> Any:
    """T from the first-order fit's k−g lobes' objects O₋(g) = T(g)T*(0), T(0) real from
    the counts' level (|T(0)|² ≈ the unscattered BF pixels' mean counts)."""
    level = xp.mean(counts.astype(np.float64), axis=(0, 1))
    t0 = math.sqrt(max(float(xp.percentile(level, LEVEL_PERCENTILE)), 1e-300))
    T = xp.zeros(n_g + 1, dtype=complex)
    T[0] = t0
    T[1:] = objects[:n_g] / t0
    return T


def fit_thin_object(data: LatticeData, geo: LatticeGeometry, grid: BeamGrid,
                    params: Mapping[str, float], names: Sequence[str], T: Any,
                    box: Mapping[str, tuple[float, float]], xp: Any) -> ThinObjectFit:
    """L-BFGS over the beams and ``names`` from (``T``, ``params``): the loss and its
    gradient scaled by the window's energy, the parameters by THIN_SCALES, non-periodic
    ones held in ``box``.

    The beams are parametrised as the first-order products O(g) = T(g)T(0) and a real
    T(0): the lobes' objects then do not move with T(0), which only scales the
    second-order terms (as O(g)O*(g′)/T(0)²). With T itself the free numbers, scaling T(0)
    up and every T(g) down leaves the first order unchanged, a valley L-BFGS crawled
    along for thousands of iterations where the second-order terms are weak."""
    n_g = int(T.shape[0]) - 1
    t0_start = abs(complex(T[0])) or 1.0
    level = t0_start * t0_start
    scales = np.array([THIN_SCALES[n] for n in names])
    origin = np.array([params[n] for n in names], dtype=np.float64)
    energy = max(data.energy, 1e-300)
    terms = beam_terms(geo, grid, xp)
    # Each object's step unit: 1/√ of its first-order curvature (the lobes' overlap with
    # the zero beam times the window's K(g, g)), so that L-BFGS sees a Hessian of ones on
    # its diagonal (beams that barely meet the BF disc have a curvature 10⁴× below the
    # strong ones'; unscaled, L-BFGS took ~1300 iterations on a weak crystal's region)
    overlap = to_host(xp.sum((terms.amplitude[1:] * terms.amplitude[0:1]) ** 2, axis=1)
                      * xp.real(xp.diagonal(data.K)))
    unit = np.ones(n_g)
    seen = overlap > 1e-12 * max(float(overlap.max()), 1e-300)
    unit[seen] = np.sqrt(np.median(overlap[seen]) / overlap[seen])
    first = to_host(T[1:]) * t0_start / level / unit  # O(g) / T(0)² at the start

    def unpack(v: np.ndarray) -> tuple[np.ndarray, dict[str, float]]:
        t0 = v[2 * n_g] * t0_start
        x = (v[:n_g] + 1j * v[n_g:2 * n_g]) * unit
        beams = np.concatenate([[t0], x * (level / t0)])
        moved = origin + v[2 * n_g + 1:] * scales
        return beams, {**params, **dict(zip(names, map(float, moved), strict=True))}

    def at(v: np.ndarray) -> tuple[float, np.ndarray]:
        beams, p = unpack(v)
        out = thin_object_loss(data, geo, grid, xp.asarray(beams), p, xp, terms)
        grad_T = out.by_T  # ∂/∂Re T + i ∂/∂Im T
        y = v[2 * n_g]
        by_o = grad_T[1:] * (unit * t0_start / y)  # T(g) = x(g)·T(0)_start/y
        by_y = t0_start * grad_T[0].real - float(np.sum(
            (np.conj(grad_T[1:]) * beams[1:]).real)) / y
        by_p = np.array([out.by_params[THIN_OBJECT_PARAMS.index(n)] for n in names])
        grad = np.concatenate([by_o.real, by_o.imag, [by_y], by_p * scales])
        return out.loss / energy, grad / energy

    bounds = [(None, None)] * (2 * n_g) + [LEVEL_RANGE] + [
        (None, None) if n in PERIODS else ((box[n][0] - origin[i]) / scales[i],
                                           (box[n][1] - origin[i]) / scales[i])
        for i, n in enumerate(names)]
    v0 = np.concatenate([first.real, first.imag, [1.0], np.zeros(len(names))])
    best = minimize(at, v0, jac=True, method="L-BFGS-B", bounds=bounds,
                    options={"maxiter": THIN_ITERATIONS, "ftol": THIN_FTOL, "gtol": 1e-12,
                             "maxcor": THIN_MEMORY})
    beams, p = unpack(best.x)
    for n in names:  # a periodic angle back into its box
        if n in PERIODS:
            lo = box[n][0]
            p[n] = lo + (p[n] - lo) % PERIODS[n]
    return ThinObjectFit(params=p, T=xp.asarray(beams), loss=float(best.fun) * energy,
                         iterations=int(best.nit), names=list(names))


def on_pixels(data: LatticeData, geo: LatticeGeometry, rows: Any
              ) -> tuple[LatticeData, LatticeGeometry]:
    """The problem on the BF pixels ``rows`` (indices) alone: the loss sums over pixels."""
    return replace(data, H=data.H[:, rows], dH=None), replace(geo, k=geo.k[rows])


@dataclass(frozen=True)
class FirstOrder:
    """What the thin stage needs of the first-order lattice fit: its parameters, its lobes'
    objects there, its loss, the residual's σ² and κ (fit.lattice_errors.noise_errors) and
    each BF ring's noise errors."""

    params: Mapping[str, float]
    objects: Any
    loss: float
    sigma2: float
    kappa: float
    noise_rings: Sequence[Mapping[str, float]]


def thin_object_stage(data: LatticeData, geo: LatticeGeometry, basis: np.ndarray,
                      counts: Any, first: FirstOrder, free: Sequence[str],
                      box: Mapping[str, tuple[float, float]], xp: Any,
                      kept: str | None = None
                      ) -> tuple[ThinObjectFit | None, dict[str, Any]]:
    """The thin object's fit from the first-order one and its record: the fit's
    parameters, the test that the data see its second-order terms, the inner and the
    outer BF pixels' fits and the systematic part from their disagreement (each ring's
    noise errors the first-order model's). (None, {"reason": …}) where it does not apply
    or the data do not see the terms.

    The thin model holds the first-order one (its lobes' objects are the products
    T(g)T(0)) and one more real number, T(0), which scales the second-order terms; their
    energy ΔR beyond the first order's must pass ΔR/(κσ²) > χ²₁(p = 0.001), as the thick
    model's must to be kept (fit.model_choice): on a weak crystal at a low dose the terms
    would otherwise fit noise."""
    names, why = thin_names(free, kept)
    if why is not None:
        return None, {"reason": why}
    grid = beam_grid(data.g, basis)
    T = start_beams(counts, first.objects, len(data.g), xp)
    joint = fit_thin_object(data, geo, grid, first.params, names, T, box, xp)
    gain = first.loss - joint.loss
    scale = first.kappa * first.sigma2
    statistic = gain / scale if scale > 0 and math.isfinite(scale) else 0.0
    record: dict[str, Any] = {
        "params": {n: joint.params[n] for n in names},
        "iterations": joint.iterations,
        "explained_fraction": float(-joint.loss / data.energy),
        "beams": int(T.shape[0]),
        "statistic": float(statistic),
        "threshold": SECOND_ORDER_SIGNIFICANCE,
    }
    if not statistic > SECOND_ORDER_SIGNIFICANCE:
        record["reason"] = (
            f"the second-order terms are not seen: they explain {statistic:.1f}x the "
            f"noise, below {SECOND_ORDER_SIGNIFICANCE:g} (χ²₁, p = 0.001); the first-order "
            "fit is kept")
        return None, record
    inner = to_host(inner_pixels(geo.k, xp))
    rings = []
    for rows in (np.nonzero(inner)[0], np.nonzero(~inner)[0]):
        part_data, part_geo = on_pixels(data, geo, xp.asarray(rows))
        rings.append(fit_thin_object(part_data, part_geo, grid, joint.params, names,
                                     joint.T, box, xp))
    record["rings"] = [{n: r.params[n] for n in names} for r in rings]
    inner_fit, outer_fit = record["rings"]
    record["errors_rings"] = pair_part(inner_fit, outer_fit, first.noise_rings[0],
                                       first.noise_rings[1], False, names, box)
    return joint, record
