"""A fit's uncertainty record: errors, undetermined names, model choice, warnings.

``assess`` is the one hook the full-field and regional fits call after their Newton
refinement: it measures the noise level of the model's window, runs the thin model
(depth and tilt held at 0, Newton from the thick optimum) when the thick one was
free, keeps one by the rule of fit.model_choice, and derives the errors from the
exact Hessian at the kept optimum (fit.errors).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..physics.geometry import (
    BFPixels,
    bright_field_pixels,
    half_plane_weights,
    scan_frame_frequencies,
    scan_frequencies_half,
)
from .errors import (
    NoiseLevel,
    noise_level,
    observation_counts,
    pixel_trotter_counts,
    poisson_sigma2,
    standard_errors,
)
from .joint import box_edges
from .model_choice import THICK_ONLY, ModelChoice, choose_model, edge_warnings, undetermined
from .newton import NewtonOptions, newton_refine
from .search import Box


@dataclass
class Assessment:
    """What ``assess`` adds to a fit; ``params``/``loss`` are the kept model's."""

    params: dict[str, float]
    loss: float
    errors: dict[str, float]
    undetermined: list[str]
    noise: NoiseLevel
    model_choice: ModelChoice | None
    warnings: list[str]
    on_box_edge: list[str]  # the kept model's free parameters on a box edge
    newton: list[dict[str, Any]] = field(default_factory=list)  # the thin model's steps
    timings: dict[str, float] = field(default_factory=dict)  # errors_s, model_choice_s

    def provenance(self) -> dict[str, Any]:
        return {"noise": self.noise.to_dict(),
                "model_choice": None if self.model_choice is None else self.model_choice.to_dict(),
                "warnings": list(self.warnings),
                "errors_rule": "1-sigma from kappa*2*sigma2/E*inv(Hessian of L); 0 for held"}


def _host(a: Any) -> np.ndarray:
    return np.asarray(a.get() if hasattr(a, "get") else a)


def window_pixel_totals(engine: Any, dataset: Any, bounds: tuple[int, int, int, int],
                        ) -> np.ndarray:
    """Σ_R I(R, k_b) over the window's measured positions for every BF pixel: (B,).

    The full field is the mean pattern times the positions; a region sums the engine's
    resident BF counts (CPU: scan rows, scan cols, BF pixels; CUDA: BF pixels first).
    """
    r0, r1, c0, c1 = bounds
    rows, cols = dataset.scan_shape
    bf = _bf_pixels(dataset)
    if (r0, r1, c0, c1) == (0, rows, 0, cols):
        return np.asarray(dataset.mean_pattern[bf.rows, bf.cols] * (rows * cols))
    counts = (engine.resident_bf_counts() if hasattr(engine, "resident_bf_counts")
              else engine._bf_counts)  # pre-protocol engines
    if getattr(engine, "name", "cpu") == "cuda":
        total = counts[:, r0:r1, c0:c1].sum(axis=(1, 2), dtype=np.float64)
    else:
        total = counts[r0:r1, c0:c1].sum(axis=(0, 1), dtype=np.float64)
    return _host(total).astype(np.float64)


def _bf_pixels(dataset: Any) -> BFPixels:
    """The BF pixel set the engines use (same function, same order)."""
    bf = dataset.bright_field
    return bright_field_pixels(dataset.detector_shape, (bf.center_row, bf.center_col),
                               dataset.detector_pixel_inv_A, dataset.k_alpha)


def window_statistics(spectra: Any, dataset: Any, pixel_totals: np.ndarray,
                      ) -> tuple[float, float, float, float]:
    """(energy E, n_obs, n_object, Poisson σ²) of a prepared window at its rotation."""
    if spectra.rotation is None:
        raise RuntimeError("the window has no rotation set: set_rotation() first")
    theta, transpose = spectra.rotation
    step, k_alpha = dataset.scan_step_A, dataset.k_alpha
    nu_r, nu_c = scan_frequencies_half(spectra.shape, step)
    R, C = np.meshgrid(nu_r, nu_c, indexing="ij")
    weights = np.broadcast_to(half_plane_weights(spectra.shape[1]), R.shape)
    _, n_object = observation_counts(spectra.n_bf, R.ravel(), C.ravel(), weights.ravel(),
                                     k_alpha)
    k = scan_frame_frequencies(_bf_pixels(dataset).k_det, theta, transpose)
    counts = pixel_trotter_counts(k, spectra.shape, step, k_alpha)
    s2p = poisson_sigma2(pixel_totals, counts) if len(pixel_totals) == len(counts) else 0.0
    return float(spectra.energy), float(counts.sum()), n_object, s2p


def _held_box(box: Box, held: Mapping[str, float]) -> Box:
    """``box`` with the ``held`` parameters pinned (low = high = value)."""
    low, high = box.low.copy(), box.high.copy()
    for name, value in held.items():
        i = box.names.index(name)
        low[i] = high[i] = float(value)
    return Box(low=low, high=high, names=box.names)


def assess(
    model: Any, box: Box, params: Mapping[str, float], loss: float, dataset: Any,
    fixed: Mapping[str, float] | None = None, hessian: np.ndarray | None = None,
    choose: bool = True,
) -> Assessment:
    """Errors, undetermined names and the thin/thick choice of a refined VP fit.

    ``fixed`` names parameters the user held (error 0, not listed as undetermined);
    ``hessian`` (in ``box.names`` order, at ``params``) saves one derivatives call.
    """
    t0 = time.perf_counter()
    names = box.names
    held = dict(fixed or {})
    totals = window_pixel_totals(model.engine, dataset, model.spectra.bounds)
    energy, n_obs, n_object, s2p = window_statistics(model.spectra, dataset, totals)
    vec = np.array([[params[n] for n in names]])
    if hessian is None:
        _, _, h = model.derivatives(vec, names)
        hessian = h[0]
    free = [n for n in names if n not in held]
    noise = noise_level(loss, energy, n_obs, n_object, len(free), s2p)
    kept_params, kept_loss, kept_hessian, kept_noise = dict(params), float(loss), hessian, noise
    choice: ModelChoice | None = None
    thin_steps: list[dict[str, Any]] = []
    by_model: list[str] = []
    thick_free = [n for n in THICK_ONLY if n in free]
    t1 = time.perf_counter()
    if choose and "depth" in thick_free:
        thin_held = {**held, **{n: 0.0 for n in THICK_ONLY if n in names and n not in held}}
        start = vec.copy()
        for n in THICK_ONLY:
            if n in names:
                start[0, names.index(n)] = thin_held.get(n, 0.0)
        thin_box = _held_box(box, thin_held)
        x, lx, thin_steps = newton_refine(start, lambda c: model.derivatives(c, names),
                                          thin_box, NewtonOptions())
        thin_free = [n for n in free if n not in THICK_ONLY]
        choice = choose_model(float(lx[0]), float(loss), energy, noise, len(thin_free))
        if choice.kept == "thin":
            by_model = thick_free
            kept_params = {n: float(v) for n, v in zip(names, x[0], strict=True)}
            kept_loss = float(lx[0])
            _, _, h = model.derivatives(x[:1], names)
            kept_hessian = h[0]
            free = thin_free
            kept_noise = noise_level(kept_loss, energy, n_obs, n_object, len(free), s2p)
    t2 = time.perf_counter()
    bounds = box.to_dict()
    box_t = {n: (float(v[0]), float(v[1])) for n, v in bounds.items()}
    errors = standard_errors(kept_hessian, names, free, kept_noise, energy, box_t)
    undet = undetermined(kept_params, errors, box_t, free, by_model)
    kept_vec = np.array([kept_params[n] for n in names])
    edges = [n for n in box_edges(kept_vec, box) if n in free]
    warnings = edge_warnings({n: kept_params[n] for n in free}, errors, box_t, edges)
    return Assessment(params=kept_params, loss=kept_loss, errors=errors, undetermined=undet,
                      noise=kept_noise, model_choice=choice, warnings=warnings,
                      on_box_edge=edges,
                      timings={"errors_s": t1 - t0 + time.perf_counter() - t2,
                               "model_choice_s": t2 - t1},
                      newton=[dict(s, branch="thin") for s in thin_steps])
