"""A fit's uncertainty record: errors, undetermined names, model choice, warnings.

``assess`` is the one hook the full-field and regional fits call after their Newton
refinement: it measures the noise level of the model's window, runs the thin model
(depth and tilt held at 0, Newton from the thick optimum) when the thick one was
free, keeps one by the rule of fit.model_choice, and derives the errors from the
exact Hessian at the kept optimum (fit.errors).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..physics.geometry import half_plane_weights, scan_frame_frequencies, scan_frequencies_half
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

    def provenance(self) -> dict[str, Any]:
        return {"noise": self.noise.to_dict(),
                "model_choice": None if self.model_choice is None else self.model_choice.to_dict(),
                "warnings": list(self.warnings),
                "errors_rule": "1-sigma from kappa*2*sigma2/E*inv(Hessian of L); 0 for held"}


def _host(a: Any) -> np.ndarray:
    return np.asarray(a.get() if hasattr(a, "get") else a)


def window_statistics(model: Any) -> tuple[float, float, float, float]:
    """(energy E, n_obs, n_object, Poisson σ²) of the model's prepared window."""
    engine, spectra = model.engine, model.spectra
    nu_r, nu_c = scan_frequencies_half(spectra.shape, engine.step)
    R, C = np.meshgrid(nu_r, nu_c, indexing="ij")
    weights = np.broadcast_to(half_plane_weights(spectra.shape[1]), R.shape)
    _, n_object = observation_counts(spectra.n_bf, R.ravel(), C.ravel(), weights.ravel(),
                                     engine.k_alpha)
    theta, transpose = spectra.rotation
    k = scan_frame_frequencies(engine.bf.k_det, theta, transpose)
    counts = pixel_trotter_counts(k, spectra.shape, engine.step, engine.k_alpha)
    n_obs = float(counts.sum())
    b = spectra.bounds
    measured = (b[1] - b[0]) * (b[3] - b[2])
    padded = spectra.shape[0] * spectra.shape[1]
    totals = _host(spectra.G[:, 0]).real.astype(np.float64) * (measured / padded)
    s2p = poisson_sigma2(totals, counts)
    return float(spectra.energy), n_obs, n_object, s2p


def _held_box(box: Box, held: Mapping[str, float]) -> Box:
    """``box`` with the ``held`` parameters pinned (low = high = value)."""
    low, high = box.low.copy(), box.high.copy()
    for name, value in held.items():
        i = box.names.index(name)
        low[i] = high[i] = float(value)
    return Box(low=low, high=high, names=box.names)


def assess(
    model: Any, box: Box, params: Mapping[str, float], loss: float,
    fixed: Mapping[str, float] | None = None, hessian: np.ndarray | None = None,
    choose: bool = True,
) -> Assessment:
    """Errors, undetermined names and the thin/thick choice of a refined VP fit.

    ``fixed`` names parameters the user held (error 0, not listed as undetermined);
    ``hessian`` (in ``box.names`` order, at ``params``) saves one derivatives call.
    """
    names = box.names
    held = dict(fixed or {})
    energy, n_obs, n_object, s2p = window_statistics(model)
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
                      newton=[dict(s, branch="thin") for s in thin_steps])
