"""Crystal mode's last stage: the thin object's every term (physics.thin_object; issue 20,
docs/bias-matrix.md §17).

The lattice model's first-order objects leave out the strong object's second-order terms
(pairs of diffracted beams that meet on a BF pixel), which read C10 low on the inner BF
pixels and high on the outer ones. Here the beams T (one complex number per lattice point
and the zero beam) and the aberrations are fitted together on the same window's lattice
transforms by L-BFGS with the loss's exact gradient, from the first-order fit (T(g) =
O₋(g)/T(0), T(0) from the counts' level). The thin model holds for a thin crystal: where
the fit keeps the thick model (depth free) the stage is left out, and says why.

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

from ..params import PERIODS, on_circle
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
from .systematic import disagreement

THIN_ITERATIONS = 2000
# L-BFGS stops when an iteration lowers the loss by less than this fraction of it
THIN_FTOL = 1e-13
# each parameter's step unit in the optimiser's coordinates (Å, Å, rad)
THIN_SCALES = {"C10": 1.0, "C12": 1.0, "phi12": 0.01}
LEVEL_PERCENTILE = 90  # T(0)² from this percentile of the BF pixels' mean counts


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
        return [], "the thick model is kept (depth fitted): the thin object's terms hold " \
                   "for thin crystals"
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
    gradient scaled by the window's energy, T by |T(0)|, the parameters by THIN_SCALES,
    non-periodic ones held in ``box``."""
    n_b = int(T.shape[0])
    t_scale = abs(complex(T[0])) or 1.0
    scales = np.array([THIN_SCALES[n] for n in names])
    origin = np.array([params[n] for n in names], dtype=np.float64)
    energy = max(data.energy, 1e-300)
    T_host = to_host(T) / t_scale
    terms = beam_terms(geo, grid, xp)

    def unpack(v: np.ndarray) -> tuple[Any, dict[str, float]]:
        beams = xp.asarray((v[:n_b] + 1j * v[n_b:2 * n_b]) * t_scale)
        moved = origin + v[2 * n_b:] * scales
        return beams, {**params, **dict(zip(names, map(float, moved), strict=True))}

    def at(v: np.ndarray) -> tuple[float, np.ndarray]:
        beams, p = unpack(v)
        out = thin_object_loss(data, geo, grid, beams, p, xp, terms)
        by_T = out.by_T
        by_p = np.array([out.by_params[THIN_OBJECT_PARAMS.index(n)] for n in names])
        grad = np.concatenate([by_T.real * t_scale, by_T.imag * t_scale, by_p * scales])
        return out.loss / energy, grad / energy

    bounds = [(None, None)] * (2 * n_b) + [
        (None, None) if n in PERIODS else ((box[n][0] - origin[i]) / scales[i],
                                           (box[n][1] - origin[i]) / scales[i])
        for i, n in enumerate(names)]
    v0 = np.concatenate([T_host.real, T_host.imag, np.zeros(len(names))])
    best = minimize(at, v0, jac=True, method="L-BFGS-B", bounds=bounds,
                    options={"maxiter": THIN_ITERATIONS, "ftol": THIN_FTOL, "gtol": 1e-12,
                             "maxcor": 30})
    beams, p = unpack(best.x)
    for n in names:  # a periodic angle back into its box
        if n in PERIODS:
            lo = box[n][0]
            p[n] = lo + (p[n] - lo) % PERIODS[n]
    return ThinObjectFit(params=p, T=beams, loss=float(best.fun) * energy,
                         iterations=int(best.nit), names=list(names))


def on_pixels(data: LatticeData, geo: LatticeGeometry, rows: Any
              ) -> tuple[LatticeData, LatticeGeometry]:
    """The problem on the BF pixels ``rows`` (indices) alone: the loss sums over pixels."""
    return replace(data, H=data.H[:, rows], dH=None), replace(geo, k=geo.k[rows])


def thin_object_stage(data: LatticeData, geo: LatticeGeometry, basis: np.ndarray,
                      counts: Any, objects: Any, params: Mapping[str, float],
                      free: Sequence[str], box: Mapping[str, tuple[float, float]],
                      noise_rings: Sequence[Mapping[str, float]], xp: Any,
                      kept: str | None = None
                      ) -> tuple[ThinObjectFit | None, dict[str, Any]]:
    """The thin object's fit from the first-order one (``objects``: its lobes' objects at
    ``params``) and its record: the fit's parameters, the inner and the outer BF pixels'
    fits and the systematic part from their disagreement (``noise_rings``: each ring's
    noise errors, the first-order model's). (None, {"reason": …}) where it does not apply."""
    names, why = thin_names(free, kept)
    if why is not None:
        return None, {"reason": why}
    grid = beam_grid(data.g, basis)
    T = start_beams(counts, objects, len(data.g), xp)
    joint = fit_thin_object(data, geo, grid, params, names, T, box, xp)
    radius = np.hypot(*to_host(geo.k).T)
    inner = radius <= np.median(radius)
    rings = []
    for rows in (np.nonzero(inner)[0], np.nonzero(~inner)[0]):
        part_data, part_geo = on_pixels(data, geo, xp.asarray(rows))
        rings.append(fit_thin_object(part_data, part_geo, grid, joint.params, names,
                                     joint.T, box, xp))
    systematic = {}
    for n in names:
        v = noise_rings[0][n] ** 2 + noise_rings[1][n] ** 2
        d = on_circle(n, rings[0].params[n] - rings[1].params[n])
        systematic[n] = disagreement(d, v, box[n][1] - box[n][0])[1]
    record = {
        "params": {n: joint.params[n] for n in names},
        "iterations": joint.iterations,
        "explained_fraction": float(-joint.loss / data.energy),
        "beams": int(T.shape[0]),
        "rings": [{n: r.params[n] for n in names} for r in rings],
        "errors_rings": systematic,
    }
    return joint, record
