"""Opt-in joint fit of the detector sampling: an outer 1-D refinement over engines.

The detector sampling s (mrad per pixel) scales every BF frequency, k = (pixel - centre)
·s/λ, and with the semiangle as given sets the aperture's radius in pixels
(semiangle/s), hence which pixels are bright field; each value needs spectra prepared
on its own engine (``engine_at(s)``, through the engine protocol: both engines). Like
the rotation refinement (fit.joint): a grid and a parabola, on the *profile*: at each
s, Newton over the kept model's free parameters from the fit's optimum (rotation
held).

The loss L = R/E cannot be compared across s as it is: the pixel set and the trotter
supports change with s, and a smaller set (a larger s) leaves out the noisiest rim
pixels and reads a lower L on noise alone. The criterion is the residual's excess over
its noise expectation on each set,

    C(s) = R(s) - σ²(s) dof(s),   R = L·E,  dof = n_obs - n_object - P,

σ²(s) the counting-noise level of that window (fit.errors: Σ_R I per BF pixel,
trotter-weighted), times the fit's gain σ²_residual/σ²_Poisson when the counts are not
Poisson-consistent (fit.model_choice.POISSON_CONSISTENT). The vertex of a parabola
through C on a grid of ±SPAN is ŝ (each grid centred on the previous vertex, until it
stays put); its curvature a (C ≈ C_min + a (s - ŝ)²) gives

    var(s) = κ σ² / a      (cov = κ·2σ² (∂²R)⁻¹ with ∂²C/∂s² = 2a),

the marginal variance of s (the other parameters re-optimised at every s), unless the
vertex's standard error from the parabola's residuals or its move between the last two
grids is larger (C steps as pixels enter the disk: piecewise smooth). The other
parameters' errors, conditional on s at the final fit, grow by the slope of their
profile path: err_i² += (dθ̂_i/ds)² var(s). docs/uncertainty.md has the measurements
and the limits (the aperture edge).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import numpy as np

from ..dataset import Dataset4D
from ..detector_sampling import PROVENANCE_KEY, with_detector_sampling
from ..engine.protocol import Engine
from ..results import FitResult
from .fixed import FreeView
from .joint import newton_fit
from .model import ThickSampleModel
from .model_choice import POISSON_CONSISTENT, THICK_ONLY
from .search import Box
from .uncertainty import (
    assess,
    sub_box,
    window_pixel_totals,
    window_statistics,
    with_assessment,
)

SPAN = 0.03  # each grid spans ±3 % of its centre: several steps of the pixel set
GRID = 7
ROUNDS = 4  # grids, each centred on the previous vertex

# (n_obs, n_object, Poisson σ²) of a window at sampling s, from its engine and spectra
WindowCounts = Callable[[float, Engine, Any], tuple[float, float, float]]


@dataclass
class SamplingFit:
    """The fitted sampling and the record behind it (``provenance["detector_sampling"]``)."""

    mrad: float
    error_mrad: float
    start_mrad: float
    derived_start: bool  # the start was derived from the BF radius (not given)
    grid_mrad: list[float] = field(default_factory=list)  # every value evaluated
    losses: list[float] = field(default_factory=list)  # their profile losses L
    criterion: list[float] = field(default_factory=list)  # C(s) (module docstring)
    curvature: float = 0.0  # a of the last grid's parabola of C, per (mrad/px)²
    vertex_error_mrad: float = 0.0  # the parabola fit's own vertex error
    vertices_mrad: list[float] = field(default_factory=list)  # each grid's vertex
    grid_error_mrad: float = 0.0  # |the last two grids' vertices| (docstring)
    slopes: dict[str, float] = field(default_factory=dict)  # dθ̂/ds, per mrad/px
    rounds: int = 1
    fitted: bool = True
    rule: str = ("parabola on C(s) = R - sigma2*dof over a grid of engines; var(s) = "
                 "max(kappa*sigma2/a, vertex fit error^2); err_i^2 += (d theta_i/ds)^2 var(s)")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Profile:
    """Newton at every sampling of a grid: its criterion C and each optimum."""

    grid: np.ndarray
    losses: np.ndarray
    criterion: np.ndarray
    optima: list[dict[str, float]]


def profile(
    engine_at: Callable[[float], Engine], counts: WindowCounts, grid: np.ndarray,
    theta: float, transpose: bool, start: Mapping[str, float], box: Box,
    held: Mapping[str, float], gain: float,
) -> Profile:
    """Newton at every sampling of ``grid`` from ``start`` (rotation held), and C(s) with
    σ²(s) = gain × the window's Poisson level; each engine is closed before the next."""
    losses, values, optima = [], [], []
    for mrad in grid:
        engine = engine_at(float(mrad))
        try:
            model = ThickSampleModel(engine, None, theta, transpose)
            fit = newton_fit(FreeView(model, box, held), start, box, branch="sampling")
            n_obs, n_object, sigma2 = counts(float(mrad), engine, model.spectra)
            energy = float(model.spectra.energy)
        finally:
            engine.close()
        dof = n_obs - n_object - len(box.names)
        losses.append(fit.loss)
        values.append(fit.loss * energy - gain * sigma2 * dof)
        optima.append(fit.params)
    return Profile(np.asarray(grid, dtype=np.float64), np.asarray(losses),
                   np.asarray(values), optima)


def parabola_vertex(grid: np.ndarray, values: np.ndarray,
                    ) -> tuple[float, float, bool, float]:
    """(vertex, curvature a, on the edge, the vertex's standard error from the fit's
    residuals): the least-squares parabola through the grid; a vertex outside the grid
    (or no minimum) is clipped to its best end."""
    centre, half = float(np.mean(grid)), float(np.ptp(grid)) / 2
    x = (np.asarray(grid) - centre) / half
    order = np.argsort(x)
    x, values = x[order], np.asarray(values)[order]
    coef, cov = np.polyfit(x, values, 2, cov="unscaled")
    a, b, _ = coef
    resid = np.asarray(values) - np.polyval(coef, x)
    s2 = float(resid @ resid) / max(len(x) - 3, 1)
    if not (a > 0 and abs(-b / (2 * a)) < 1.0):
        best = centre + float(x[int(np.argmin(values))]) * half
        return best, max(float(a), 0.0) / half**2, True, half
    jac = np.array([b / (2 * a * a), -1.0 / (2 * a)])  # ∂vertex/∂(a, b)
    se = math.sqrt(max(float(jac @ (s2 * cov[:2, :2]) @ jac), 0.0)) * half
    return centre - b / (2 * a) * half, float(a) / half**2, False, se


def refine_sampling(
    engine_at: Callable[[float], Engine], counts: WindowCounts, start_mrad: float,
    theta: float, transpose: bool, params: Mapping[str, float], box: Box,
    held: Mapping[str, float], gain: float,
) -> tuple[dict[str, float], SamplingFit]:
    """(the profile optimum nearest ŝ, the record without its error): grids of ±SPAN,
    each centred on the previous vertex, at least two and until the vertex stays inside
    and moves less than a tenth of the grid spacing (at most ROUNDS)."""
    record = SamplingFit(mrad=start_mrad, error_mrad=0.0, start_mrad=start_mrad,
                         derived_start=False, rounds=0)
    centre, start = float(start_mrad), dict(params)
    step = 2 * SPAN / (GRID - 1)
    while True:
        grid = centre * (1.0 + SPAN * np.linspace(-1.0, 1.0, GRID))
        prof = profile(engine_at, counts, grid, theta, transpose, start, box, held, gain)
        record.grid_mrad += [float(g) for g in grid]
        record.losses += [float(v) for v in prof.losses]
        record.criterion += [float(v) for v in prof.criterion]
        mrad, curvature, on_edge, se = parabola_vertex(grid, prof.criterion)
        record.vertices_mrad.append(float(mrad))
        nearest = int(np.argmin(np.abs(grid - mrad)))
        moved = abs(mrad - centre) / centre
        centre, start = mrad, prof.optima[nearest]
        record.rounds += 1
        if record.rounds == ROUNDS or (record.rounds >= 2 and not on_edge
                                       and moved < 0.1 * step):
            break
    record.mrad, record.curvature, record.vertex_error_mrad = float(mrad), curvature, se
    record.grid_error_mrad = abs(record.vertices_mrad[-1] - record.vertices_mrad[-2])
    record.slopes = {n: float(np.polyfit(grid, [o[n] for o in prof.optima], 1)[0])
                     for n in box.names}
    return prof.optima[nearest], record


def sampling_error(record: SamplingFit, kappa: float, sigma2: float) -> float:
    """max(√(κσ²/a), the vertex fit error, the grid dependence), at most the wide grid's
    half span."""
    cap = SPAN * record.start_mrad
    curv = (math.sqrt(kappa * sigma2 / record.curvature)
            if record.curvature > 0 and sigma2 > 0 else cap)
    return float(min(max(curv, record.vertex_error_mrad, record.grid_error_mrad), cap))


def marginal_errors(errors: Mapping[str, float], slopes: Mapping[str, float],
                    error_mrad: float) -> dict[str, float]:
    """err_i² + (dθ̂_i/ds)² var(s) for every fitted parameter (0 stays 0: held)."""
    return {n: (math.hypot(e, slopes.get(n, 0.0) * error_mrad) if e > 0 else e)
            for n, e in errors.items()}


def check_sampling_request(fit_detector_sampling: bool, objective: str) -> None:
    if fit_detector_sampling and objective != "vp":
        raise ValueError(f"fit_detector_sampling=True needs the 'vp' objective (the refinement "
                         f"compares residuals and has no errors otherwise), got {objective!r}")


def refit_detector_sampling(
    result: FitResult, box: Box, held: Mapping[str, float], dataset: Dataset4D,
    engine_for: Callable[[Dataset4D], Engine],
    rebind: Callable[[Dataset4D], Callable[[float, bool], ThickSampleModel]],
) -> FitResult:
    """A full-field VP fit (errors and model choice included) refined over the detector
    sampling: the profile over engines ``engine_for(dataset at s)`` (the kept model's
    free parameters, rotation held), then ``rebind`` moves the caller to the fitted
    sampling and returns its full-field model factory, where Newton and the errors run
    again; the errors grow by the sampling's (``marginal_errors``)."""
    t0 = time.perf_counter()
    thin = (result.provenance.get("model_choice") or {}).get("kept") == "thin"
    pbox, pheld = box, dict(held)
    if thin and "depth" in box.names:
        pbox = sub_box(box, tuple(n for n in box.names if n not in THICK_ONLY))
        pheld.update({n: 0.0 for n in THICK_ONLY if n in box.names})
    noise = result.provenance.get("noise") or {}
    excess = float(noise.get("excess_over_poisson") or math.inf)
    gain = 1.0 if excess <= POISSON_CONSISTENT else float(noise.get("sigma2", 0.0)) / max(
        float(noise.get("sigma2_poisson", 0.0)), 1e-300)

    def counts(mrad: float, engine: Engine, spectra: Any) -> tuple[float, float, float]:
        at = with_detector_sampling(dataset, mrad)
        _, n_obs, n_object, s2p = window_statistics(
            spectra, at, window_pixel_totals(at, spectra), engine.alias_pixels)
        return n_obs, n_object, s2p

    theta, transpose = math.radians(result.rotation_deg), result.transpose
    nearest, record = refine_sampling(
        lambda mrad: engine_for(with_detector_sampling(dataset, mrad)), counts,
        dataset.detector_sampling_mrad, theta, transpose,
        {n: result.params[n] for n in pbox.names}, pbox, pheld, gain)
    record.derived_start = bool(dataset.detector_sampling_derived)
    fitted = with_detector_sampling(dataset, record.mrad)
    view = FreeView(rebind(fitted)(theta, transpose), box, held)
    fit = newton_fit(view, {**result.params, **nearest}, box, branch="sampling")
    refined = replace(result, params=fit.params, loss=fit.loss,
                      newton=result.newton + fit.newton, on_box_edge=fit.on_box_edge)
    out = with_assessment(refined, assess(view, box, fit.params, fit.loss, fitted,
                                          fit.on_box_edge))
    final = out.provenance["noise"]
    record.error_mrad = sampling_error(record, float(final["kappa"]) * float(
        final.get("design", 1.0)), float(final["sigma2"]))  # design: apodised spectra
    out.errors = marginal_errors(out.errors, record.slopes, record.error_mrad)
    out.provenance[PROVENANCE_KEY] = record.to_dict()
    out.timings["detector_sampling_s"] = time.perf_counter() - t0
    return out
