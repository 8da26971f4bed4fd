"""Bounded trust-region Newton with exact derivatives, several starts in lockstep.

Each iteration scores every active start's trial step in one ``evaluate`` call
and differentiates the accepted ones in one ``derivatives`` call. Steps are
taken in scaled coordinates so one trust radius fits all six parameters.
C12 < 0 is folded to (|C12|, phi12 + π/2) and phi12 wraps into the box,
so astigmatism crossing zero is a smooth move, not a wall.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from numba import njit

from ..params import PERIODS, on_circle, scale_of
from ..progress import staged
from .search import Box


@dataclass
class NewtonOptions:
    max_iterations: int = 30
    initial_radius: float = 4.0
    max_radius: float = 20.0
    min_radius: float = 1e-4
    # Converged once the model predicts a loss change below this fraction of the loss:
    # far below any physical difference, and above float32 rounding of the sums.
    min_predicted_rel: float = 1e-7
    # A start whose loss the better start's quadratic model predicts to this fraction
    # (ten times the float32 noise of the sums) refines the same basin: it is merged.
    merge_model_rel: float = 1e-6


def symmetric_eigh(H: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.linalg.eigh(H)`` of a small finite symmetric float64 matrix, the same LAPACK
    call and bits without the wrapper's checks and error-state set-up (most of its ~30 µs;
    a map's tiles take ~2000 of these). Anything else goes through ``np.linalg.eigh``."""
    if _EIGH_LO is not None and H.dtype == np.float64 and np.isfinite(H).all():
        w, v = _EIGH_LO(H, signature="d->dd")
        return w, v
    w, v = np.linalg.eigh(H)
    return w, v


# numpy's own gufunc behind eigh(UPLO="L") (numpy.linalg._umath_linalg, there since 1.8)
_EIGH_LO = getattr(getattr(np.linalg, "_umath_linalg", None), "eigh_lo", None)


def norm(v: np.ndarray) -> float:
    """``np.linalg.norm`` of a real vector: the same dot product and square root."""
    return math.sqrt(v.dot(v))


def trust_region_step(g: np.ndarray, H: np.ndarray, radius: float,
                      eig: tuple[np.ndarray, np.ndarray] | None = None) -> np.ndarray:
    """argmin gᵀs + ½ sᵀHs with ‖s‖ ≤ radius (Moré–Sorensen on a 6×6 eigensystem);
    ``eig``: H's eigensystem when already known."""
    evals, evecs = symmetric_eigh(H) if eig is None else eig
    gt = evecs.T @ g

    def step(lam: float) -> np.ndarray:
        return -evecs @ (gt / (evals + lam))

    if evals[0] > 0:
        s = step(0.0)
        if norm(s) <= radius:
            return s
    lo = max(0.0, -evals[0]) + 1e-12 * max(1.0, abs(evals[-1]))
    hi = lo + norm(g) / radius + abs(evals[-1]) + 1.0
    s = step(_bisect_multiplier(np.ascontiguousarray(evals, dtype=np.float64),
                                np.ascontiguousarray(gt * gt, dtype=np.float64),
                                float(radius), float(lo), float(hi)))
    if not np.all(np.isfinite(s)):  # hard case: move along the lowest curvature
        s = -radius * evecs[:, 0] * np.sign(gt[0] or 1.0)
    return s


@njit(cache=True)
def _bisect_multiplier(evals: np.ndarray, gt2: np.ndarray, radius: float, lo: float,
                       hi: float) -> float:
    """λ in [lo, hi] with ‖s(λ)‖ = radius by bisection (‖s(λ)‖ is monotone in λ):
    ‖s(λ)‖² = Σ gt_i² / (e_i + λ)², the eigenvectors being orthonormal. Compiled: a
    map's tiles take ~700 trust-region steps of 100 bisections each (0.3 s of the host's
    time in Python); the sum runs in the same order, so the bits are the same."""
    r2 = radius * radius
    for _ in range(100):
        mid = 0.5 * (lo + hi)
        total = 0.0
        for i in range(evals.size):
            total += gt2[i] / ((evals[i] + mid) * (evals[i] + mid))
        if total > r2:
            lo = mid
        else:
            hi = mid
        if hi - lo <= 1e-14 * hi:
            break
    return hi


@dataclass(frozen=True)
class _Angle:
    """One angle of a box, as ``fold_into_box`` treats it."""

    index: int
    magnitude: int | None  # its C_nm's index (None: held)
    half_period: float
    period: float
    wraps: bool  # the box spans a whole period
    low: float


@functools.lru_cache(maxsize=64)
def _angles(names: tuple[str, ...], low: bytes, high: bytes) -> tuple[_Angle, ...]:
    box = Box(np.frombuffer(low), np.frombuffer(high), names)
    out = []
    for i, name in enumerate(names):
        if name in PERIODS:
            magnitude = "C" + name[3:]
            out.append(_Angle(i, names.index(magnitude) if magnitude in names else None,
                              PERIODS[name] / 2, PERIODS[name], box.full_period(name),
                              box.low[i]))
    return tuple(out)


def fold_into_box(v: np.ndarray, box: Box) -> np.ndarray:
    """Fold each C_nm sign into its angle (C < 0 ≡ φ + π/m), wrap angles, clip the rest."""
    v = v.copy()
    for a in _angles(box.names, box.low.tobytes(), box.high.tobytes()):
        i, i_c = a.index, a.magnitude
        if i_c is not None and v[i_c] < 0:
            v[i_c] = -v[i_c]
            v[i] += a.half_period
        if a.wraps:  # Box.wrap's formula
            v[i] = float(a.low + np.mod(v[i] - a.low, a.period))
    return np.minimum(np.maximum(v, box.low), box.high)  # np.clip's result, less overhead


@staged("Newton")
def newton_refine(
    starts: np.ndarray,
    derivatives: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray, np.ndarray]],
    box: Box,
    options: NewtonOptions | None = None,
    on_iteration: Callable[[], Any] | None = None,
) -> tuple[np.ndarray, np.ndarray, list[dict[str, Any]], np.ndarray]:
    """Refine each start; returns (params (S, P), losses (S,), step record, Hessians
    (S, P, P) at the returned params: the errors' Hessian without another call).

    One ``derivatives`` call per iteration scores every active start's trial point
    and, where the step is accepted, supplies the next gradient and Hessian.
    """
    opt = options or NewtonOptions()
    scale = scale_of(box.names)
    scale2 = np.outer(scale, scale)
    x = np.array([fold_into_box(s, box) for s in starts])
    loss, grad, hess = derivatives(x)
    radius = np.full(len(x), opt.initial_radius)
    active = np.ones(len(x), dtype=bool)
    record: list[dict[str, Any]] = [
        _step_entry(box.names, i, 0, x[i], loss[i], grad[i] * scale, radius[i], True, None)
        for i in range(len(x))]
    # Gradients and Hessians in scaled coordinates, and the eigensystems of those the
    # last pruning took: the next steps start from them (the same arrays, the same bits).
    grad_s, hess_s = grad * scale, hess * scale2
    eig: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    for it in range(1, opt.max_iterations + 1):
        steps = {}
        for i in np.flatnonzero(active):
            g_s, H_s = grad_s[i], hess_s[i]
            s = trust_region_step(g_s, H_s, radius[i], eig.get(int(i)))
            y = fold_into_box(x[i] + s * scale, box)
            # Re-measure the step actually taken after folding/clipping for the model.
            s_taken = _taken_step(x[i], y, box.names) / scale
            pred = -(g_s @ s_taken + 0.5 * s_taken @ H_s @ s_taken)
            if pred < opt.min_predicted_rel * max(abs(loss[i]), 1e-6):
                active[i] = False  # converged: no step left worth evaluating
            else:
                steps[int(i)] = (y, pred)
        if not steps:
            break
        idx = np.array(list(steps))
        trial = np.array([steps[i][0] for i in idx])
        predicted = np.array([steps[i][1] for i in idx])
        t_loss, t_grad, t_hess = derivatives(trial)
        entries: list[dict[str, Any]] = []
        for n, i in enumerate(idx):
            actual = loss[i] - t_loss[n]
            rho = actual / predicted[n] if predicted[n] > 0 else -1.0
            ok = bool(rho > 1e-4 and actual > 0)
            step_norm = norm(_taken_step(x[i], trial[n], box.names) / scale)
            if rho < 0.25:
                radius[i] = 0.25 * max(step_norm, 1e-12)
            elif rho > 0.75 and step_norm >= 0.99 * radius[i]:
                radius[i] = min(2 * radius[i], opt.max_radius)
            if ok:
                x[i], loss[i], grad[i], hess[i] = trial[n], t_loss[n], t_grad[n], t_hess[n]
            entries.append(_step_entry(box.names, int(i), it, trial[n], t_loss[n],
                                       t_grad[n] * scale if ok else None, radius[i], ok,
                                       float(rho)))
            if radius[i] < opt.min_radius:
                active[i] = False
        record += entries
        grad_s, hess_s = grad * scale, hess * scale2
        eig = _prune_hopeless(active, loss, grad_s, hess_s)
        _merge_duplicates(active, x, loss, box.names, scale, grad_s, hess_s,
                          opt.merge_model_rel)
        if on_iteration is not None:
            on_iteration()
    return x, loss, record, hess


def _merge_duplicates(active: np.ndarray, x: np.ndarray, loss: np.ndarray,
                      names: tuple[str, ...], scale: np.ndarray, grad: np.ndarray,
                      hess: np.ndarray, model_rel: float) -> None:
    """Starts that meet refine the same basin: keep the best. Start i meets a better
    start j when it lies within one trust-region unit of j, or when j's quadratic model
    (``grad``/``hess`` in scaled coordinates) predicts i's loss to ``model_rel`` of the
    loss: then i sits on the bowl or valley j is descending."""
    order = [int(i) for i in np.argsort(loss, kind="stable")]
    for n, i in enumerate(order):
        if not active[i]:
            continue
        for j in order[:n]:
            d = _taken_step(x[j], x[i], names) / scale
            predicted = loss[j] + grad[j] @ d + 0.5 * d @ hess[j] @ d
            if (norm(d) < 1.0
                    or abs(predicted - loss[i]) <= model_rel * abs(loss[j])):
                active[i] = False
                break


def _prune_hopeless(active: np.ndarray, loss: np.ndarray, grad: np.ndarray,
                    hess: np.ndarray) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """Stop starts whose local quadratic model cannot reach the best loss so far
    (``grad``/``hess`` in scaled coordinates); returns the eigensystems it computed, by
    start.

    With a positive definite Hessian the model's minimum is L - ½ gᵀH⁻¹g; a start
    whose model minimum lies above the current best loss is in a worse basin, and
    further derivatives there are wasted. Indefinite starts are kept.
    """
    best = int(np.argmin(loss))
    eig = {}
    for i in np.flatnonzero(active):
        if i == best:
            continue
        H, g = hess[i], grad[i]
        evals, evecs = eig[int(i)] = symmetric_eigh(H)
        if evals[0] <= 0:
            continue
        decrement = 0.5 * float(np.sum((evecs.T @ g) ** 2 / evals))
        if loss[i] - 2.0 * decrement > loss[best]:
            active[i] = False
    return eig


def _taken_step(x: np.ndarray, y: np.ndarray, names: tuple[str, ...]) -> np.ndarray:
    """y - x with angle differences taken on their circles."""
    d = y - x
    for i in _angle_indices(names):
        d[i] = on_circle(names[i], float(d[i]))
    return d


@functools.lru_cache(maxsize=64)
def _angle_indices(names: tuple[str, ...]) -> tuple[int, ...]:
    return tuple(i for i, n in enumerate(names) if n in PERIODS)


def _step_entry(
    names: tuple[str, ...], start: int, iteration: int, v: np.ndarray, loss: float,
    grad: np.ndarray | None,
    radius: float, accepted: bool, rho: float | None,
) -> dict[str, Any]:
    return {
        "start": start, "iteration": iteration,
        "params": {p: float(x) for p, x in zip(names, v, strict=True)},
        "loss": float(loss),
        "grad_norm": None if grad is None else norm(grad),
        "radius": float(radius), "accepted": accepted, "rho": rho,
    }
