"""Crystal mode's errors (fit.lattice): the noise part 2σ²κ(∂²L)⁻¹ and the systematic
part from pairs of estimates that should agree (docs/bias-matrix.md §15–16)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from ..params import on_circle
from .errors import capped_errors, covariance, profile_inflation
from .lattice_problem import LatticeProblem, NewtonOutcome, _curved_inverse, _widths
from .systematic import disagreement


def noise_errors(problem: LatticeProblem, fit: NewtonOutcome, free: Sequence[str],
                 box: Mapping[str, tuple[float, float]], noise: float | None = None
                 ) -> tuple[dict[str, float], float, float]:
    """(errors, σ², κ): 2σ²κ(∂²L)⁻¹ with σ² = R_min / (m − n − P) over the m complex
    values of every bin but DC (each independent one counted twice, as ν and −ν: the
    all-bin sum R = Σ|G − model|² has E[R] = σ²(m − n − P) for n free objects, P
    parameters) and κ the profile inflation of fit.errors. ``noise``: σ² given (a part's
    estimate: its own residual holds the other part's signal)."""
    data = problem._data()
    n_bf = int(problem.counts.shape[2])
    m = (data.n_positions - 1) * n_bf
    n_objects = problem.objects(fit.params)
    dof = m - n_objects - len(free)
    residual = data.energy + fit.loss
    sigma2 = noise if noise is not None else residual / dof if dof > 0 else math.inf
    kappa = profile_inflation(residual / data.energy, data.energy, sigma2, n_objects)
    widths = _widths(box, free)
    if not math.isfinite(sigma2):
        return {n: float(w) for n, w in zip(free, widths, strict=True)}, sigma2, kappa
    cov = covariance(fit.hessian, sigma2 * kappa, 1.0, widths)
    return capped_errors(cov, free, widths), float(sigma2), float(kappa)


def _linear_estimate(one: LatticeProblem, fit: NewtonOutcome, free: Sequence[str],
                     box: Mapping[str, tuple[float, float]], sigma2: float
                     ) -> tuple[dict[str, float], dict[str, float]]:
    """A part's estimate linearised at the joint fit: one Newton step −H⁻¹∇ on the part's
    problem ``one``, and its noise errors 2σ²κH⁻¹ from the same H, σ² the joint fit's."""
    widths = _widths(box, free)
    _, grad, H = one.derivatives(fit.params, free)
    step = -_curved_inverse(H, widths) @ grad
    at = {**fit.params, **{n: fit.params[n] + d for n, d in zip(free, step, strict=True)}}
    errors = noise_errors(one, NewtonOutcome(at, fit.loss, H, 1), free, box, sigma2)[0]
    return {n: float(at[n]) for n in free}, errors


def pair_systematic(parts: tuple[LatticeProblem, LatticeProblem], nested: bool,
                    fit: NewtonOutcome, noise: Mapping[str, float], free: Sequence[str],
                    box: Mapping[str, tuple[float, float]], sigma2: float
                    ) -> tuple[dict[str, float], list[dict[str, float]], list[dict[str, float]]]:
    """The systematic part from two estimates that should agree, each linearised at the
    joint fit (``_linear_estimate``): where they differ by more than their noise (d²/v
    above fit.systematic's SIGNIFICANCE), √((d² − v)/2) per parameter, as
    fit.systematic's ``disagreement`` does for the per-bin model's frequency bands. v is
    the sum of their variances for independent parts, and for ``nested`` ones (the
    second is the joint fit's own problem, whose data hold the first's: its estimate is
    the fit itself with its ``noise`` errors, the efficient one) their difference
    (Hausman's test). Returns it, the two estimates and their noise errors."""
    p0, e0 = _linear_estimate(parts[0], fit, free, box, sigma2)
    if nested:  # the joint problem: at its own minimum, with its own errors
        p1, e1 = {n: float(fit.params[n]) for n in free}, dict(noise)
    else:
        p1, e1 = _linear_estimate(parts[1], fit, free, box, sigma2)
    return pair_part(p0, p1, e0, e1, nested, free, box), [p0, p1], [e0, e1]


def pair_part(p0: Mapping[str, float], p1: Mapping[str, float], e0: Mapping[str, float],
              e1: Mapping[str, float], nested: bool, names: Sequence[str],
              box: Mapping[str, tuple[float, float]]) -> dict[str, float]:
    """Per parameter, the systematic part of two estimates ``p0``, ``p1`` with noise errors
    ``e0``, ``e1`` (``pair_systematic``'s rule; also the thin object's rings)."""
    out = {}
    for n in names:
        v = abs(e0[n] ** 2 - e1[n] ** 2) if nested else e0[n] ** 2 + e1[n] ** 2
        out[n] = disagreement(on_circle(n, p0[n] - p1[n]), v, box[n][1] - box[n][0])[1]
    return out


def inner_pixels(k: Any, xp: Any) -> Any:
    """(B,) True on the inner half of the BF pixels (|k| up to their median): the rings
    pair's split, the same for the first-order model and the thin object's."""
    radius = xp.hypot(k[:, 0], k[:, 1])
    return radius <= xp.median(radius)


def systematic_parts(problem: LatticeProblem, joint: Mapping[str, float]
                     ) -> dict[str, tuple[tuple[LatticeProblem, LatticeProblem], bool]]:
    """The pairs of estimates that should agree, and whether they are nested: the two
    trotter lobes (each lobe's columns varied, the other's held at the joint fit so its
    leakage stays modelled; a split into low and high lattice frequencies left each band
    too weakly determined on 16² regions, docs/bias-matrix.md §15); the single-overlap
    pixels against every pixel (the pixels both discs cover read C10 from the lobes'
    relative phase, which a thick crystal's dynamical scattering moves); the inner half
    of the BF pixels against the outer (a model error that depends on k: the strong
    object's second-order terms, a detector's pixel integration), docs/bias-matrix.md
    §16."""
    inner = inner_pixels(problem.geo.k, problem.xp)[:, None].astype(np.float64)
    return {"lobes": ((problem.lobe_of(0, joint), problem.lobe_of(1, joint)), False),
            "pixel_sets": ((replace(problem, pixels="single"), problem), True),
            "rings": ((replace(problem, rows=inner), replace(problem, rows=1 - inner)), False)}
