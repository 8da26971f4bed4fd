"""Crystal mode's problem (fit.lattice): one window's lattice loss with its exact
gradient and Hessian (physics.lattice), the lattice basis refined by the loss's gradient,
and Newton on the free parameters."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
from scipy.optimize import minimize

from ..params import PERIODS, on_circle
from ..physics.lattice import (
    LatticeData,
    LatticeFit,
    free_objects,
    lattice_data,
    lattice_gradient,
    lattice_hessian,
    lattice_point_gradient,
    lattice_points,
    lattice_solve,
)
from ..physics.lattice_columns import (
    LatticeGeometry,
    lattice_column_derivatives,
    lattice_columns,
    lattice_columns_by_g,
)

NEWTON_ITERATIONS = 20
STEP_TOLERANCE = 1e-5  # of each parameter's box width
BASIS_ITERATIONS = 60
# L-BFGS stops when an iteration lowers the loss by less than this fraction: on the
# demo's 16² region a further 43 evaluations moved the basis 7·10⁻⁷ of its length
# and C10 1.8·10⁻⁵ Å (its error ±0.45), the loss's rounding floor
BASIS_FTOL = 1e-10
BASIS_FD_STEP = 1e-6  # 1/Å: the columns' central differences in g



@dataclass
class LatticeProblem:
    """One window's lattice fit: its counts (h, w, B), geometry and array module, and
    (``at_basis``) the transforms of one lattice. A lobe's problem (``lobe_of``: the
    systematic part's separate estimates) varies that lobe's columns with the parameters
    and holds the other's at the joint fit's (``held``), which keep modelling their
    signal and its leakage into every bin (a small window's)."""

    counts: Any
    geo: LatticeGeometry
    step: tuple[float, float]
    xp: Any
    data: LatticeData | None = field(default=None, repr=False)
    pixels: str = "discs"  # the columns' pixel sets (physics.lattice.lattice_columns)
    rows: Any = None  # (B, 1) BF pixels' weights of a ring's problem (``systematic_parts``)
    varied: Any = None  # (1, 2 n_g) the columns a lobe's problem varies (``lobe_of``)
    held: Any = field(default=None, repr=False)  # the columns at the joint fit (B, 2 n_g)
    # the latest columns per pixel set, shared by the problems ``replace`` derives from this
    # one (same lattice): at the joint fit the lobes', rings' and noise errors' columns
    # are the Newton's last ones (``_raw_columns``)
    memo: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    def at_basis(self, basis: np.ndarray, indices: np.ndarray | None = None
                 ) -> LatticeProblem:
        """At the lattice ``basis``: its points within 2k_α, or those of the integer
        ``indices`` (n_g, 2), held while a basis is refined (a point crossing 2k_α would
        make the loss jump)."""
        g = lattice_points(basis, self.geo.k_alpha) if indices is None else indices @ basis
        return replace(self, data=lattice_data(self.counts, g, self.step, self.xp), memo={})

    def lobe_of(self, which: int, joint: Mapping[str, float]) -> LatticeProblem:
        """The problem of lobe ``which`` (0: k−g, 1: k+g): its own columns over the half
        plane of g and the other lobe's over the other half (their conjugate mirror: over
        every g the two lobes hold the same data) vary, the rest held at ``joint``."""
        g = self._data().g
        upper = (g[:, 0] > 0) | ((g[:, 0] == 0) & (g[:, 1] > 0))
        mine = np.concatenate([upper, ~upper] if which == 0 else [~upper, upper])
        held = self._raw_columns(joint)[0]
        return replace(self, varied=self.xp.asarray(mine[None, :]), held=held)

    def _data(self) -> LatticeData:
        if self.data is None:
            raise RuntimeError("LatticeProblem.at_basis first")
        return self.data

    def _raw_columns(self, params: Mapping[str, float], names: Sequence[str] = (),
                     order: int = 0) -> tuple[Any, list[Any], list[Any]]:
        """The columns of this pixel set at ``params`` and their derivatives (``order``);
        the latest derivatives kept (the same arrays: every use derives new ones from
        them), a loss's columns not (a line search's would evict them)."""
        key = (tuple(sorted(params.items())), tuple(names))
        kept = self.memo.get(self.pixels)
        if kept is not None and kept[0][0] == key[0] and (
                order == 0 or (kept[0][1] == key[1] and kept[1] >= order)):
            A, dA, d2A = kept[2]
            return A, dA if order else [], d2A if order > 1 else []
        out = lattice_column_derivatives(self.geo, self._data().g, params, names, self.xp,
                                         order, self.pixels)
        if order:
            self.memo[self.pixels] = (key, order, out)
        return out

    def _columns(self, params: Mapping[str, float], names: Sequence[str] = (),
                 order: int = 0) -> tuple[Any, list[Any], list[Any]]:
        A, dA, d2A = self._raw_columns(params, names, order)
        if self.rows is not None:
            A, dA, d2A = A * self.rows, [d * self.rows for d in dA], [
                d * self.rows for d in d2A]
        if self.varied is None:
            return A, dA, d2A
        return (self.xp.where(self.varied, A, self.held),
                [self.xp.where(self.varied, d, 0) for d in dA],
                [self.xp.where(self.varied, d, 0) for d in d2A])

    def loss(self, params: Mapping[str, float]) -> float:
        return lattice_solve(self._data(), self._columns(params)[0], self.xp).loss

    def gradient(self, params: Mapping[str, float], names: Sequence[str]
                 ) -> tuple[float, np.ndarray]:
        A, dA, _ = self._columns(params, names, order=1)
        fit = lattice_solve(self._data(), A, self.xp)
        return fit.loss, lattice_gradient(self._data(), fit, dA, self.xp)

    def derivatives(self, params: Mapping[str, float], names: Sequence[str]
                    ) -> tuple[float, np.ndarray, np.ndarray]:
        """The loss, its gradient and its exact Hessian by ``names`` at ``params``."""
        A, dA, d2A = self._columns(params, names, order=2)
        fit = lattice_solve(self._data(), A, self.xp)
        return (fit.loss, lattice_gradient(self._data(), fit, dA, self.xp),
                lattice_hessian(self._data(), fit, dA, d2A, self.xp))

    def solve(self, params: Mapping[str, float]) -> LatticeFit:
        """The objects' solve at ``params``."""
        return lattice_solve(self._data(), self._columns(params)[0], self.xp)

    def objects(self, params: Mapping[str, float]) -> int:
        """Free objects (columns with BF pixels) at ``params``."""
        return free_objects(self._data(), self._columns(params)[0], self.xp)


def basis_loss_gradient(problem: LatticeProblem, basis: np.ndarray, indices: np.ndarray,
                        params: Mapping[str, float]) -> tuple[float, np.ndarray]:
    """The lattice loss at the lattice ``indices @ basis`` and its gradient by the basis
    (2, 2): ∂L/∂g per point (``lattice_point_gradient``; each column's ∂A/∂g exact,
    ``lattice_columns_by_g``, or by central differences of its g where that has no exact
    form: other pixel sets, coefficients beyond the six) summed over the points as
    g = indices·basis says."""
    xp = problem.xp
    g = indices @ basis
    data = lattice_data(problem.counts, g, problem.step, xp, derivatives=True)
    exact = lattice_columns_by_g(problem.geo, g, params, xp) if problem.pixels == "discs" \
        else None
    if exact is not None:
        A, dA = exact
    else:
        def columns(at: np.ndarray) -> Any:
            return lattice_columns(problem.geo, at, params, (), xp, pixels=problem.pixels)[0]

        A, dA = columns(g), []
        for axis in (0, 1):
            shift = np.zeros(2)
            shift[axis] = BASIS_FD_STEP
            dA.append((columns(g + shift) - columns(g - shift)) / (2 * BASIS_FD_STEP))
    fit = lattice_solve(data, A, xp)
    return fit.loss, indices.T @ lattice_point_gradient(data, fit, dA, xp)


def refined_basis(problem: LatticeProblem, basis: np.ndarray,
                  params: Mapping[str, float]) -> np.ndarray:
    """``basis`` refined by the lattice loss at ``params``: the lattice whose model
    explains the most, by quasi-Newton (L-BFGS) on its four numbers with the loss's exact
    gradient, the lattice points' indices held (a point crossing 2k_α would make the loss
    jump). The columns' "discs" pixel sets make the loss smooth in the basis (the
    single-overlap sets of the per-bin model made it a staircase whose steps, as BF pixels
    crossed a hard disc edge, held Nelder–Mead ~0.1 % of scale off)."""
    indices = np.round(lattice_points(basis, problem.geo.k_alpha) @ np.linalg.inv(basis))
    scale = float(np.hypot(*basis[0]) + np.hypot(*basis[1])) / 2
    x0 = basis.ravel() / scale
    start = basis_loss_gradient(problem, x0.reshape(2, 2) * scale, indices, params)
    first = abs(start[0])  # the loss's scale; L-BFGS's first evaluation is this one

    def at(v: np.ndarray) -> tuple[float, np.ndarray]:
        loss, grad = start if np.array_equal(v, x0) else basis_loss_gradient(
            problem, v.reshape(2, 2) * scale, indices, params)
        return loss / first, grad.ravel() * scale / first

    best = minimize(at, x0, jac=True, method="L-BFGS-B",
                    options={"maxiter": BASIS_ITERATIONS, "ftol": BASIS_FTOL, "gtol": 1e-12})
    return np.asarray(best.x, dtype=np.float64).reshape(2, 2) * scale


@dataclass
class NewtonOutcome:
    params: dict[str, float]
    loss: float
    hessian: np.ndarray
    iterations: int


def _widths(box: Mapping[str, tuple[float, float]], free: Sequence[str]) -> np.ndarray:
    """Each free parameter's box width (the scale of its steps and differences)."""
    return np.array([max(box[n][1] - box[n][0], 1e-12) for n in free])


def _clipped(params: dict[str, float], box: Mapping[str, tuple[float, float]]
             ) -> dict[str, float]:
    out = dict(params)
    for name, (lo, hi) in box.items():
        if name in PERIODS:
            out[name] = lo + (out[name] - lo) % PERIODS[name]
        else:
            out[name] = min(max(out[name], lo), hi)
    return out


def _curved_inverse(H: np.ndarray, widths: np.ndarray) -> np.ndarray:
    """(∂²L)⁻¹ over the curved directions of the box-scaled Hessian (flat or negative
    ones: no step along them), in the parameters' units."""
    evals, evecs = np.linalg.eigh(H * np.outer(widths, widths))
    curved = evals > 1e-10 * max(float(np.abs(evals).max()), 1e-300)
    inverse_s = (evecs[:, curved] / evals[curved]) @ evecs[:, curved].T
    return np.asarray(inverse_s * np.outer(widths, widths))


def lattice_newton(problem: LatticeProblem, params: Mapping[str, float],
                   free: Sequence[str], box: Mapping[str, tuple[float, float]],
                   iterations: int = NEWTON_ITERATIONS) -> NewtonOutcome:
    """Newton on the lattice loss over ``free`` from ``params`` (held values kept):
    steps over the curved directions of the box-scaled Hessian, halved until the loss
    falls, until every step is below ``STEP_TOLERANCE`` of its box width."""
    widths = _widths(box, free)
    p = dict(params)
    loss, grad, H = problem.derivatives(p, free)
    for it in range(1, iterations + 1):
        step = -_curved_inverse(H, widths) @ grad
        # the whole step is usually taken: its derivatives at once (the next iteration's)
        at_trial: tuple[float, np.ndarray, np.ndarray] | None = None
        for attempt in range(30):
            trial = _clipped({**p, **{n: p[n] + s for n, s in zip(free, step, strict=True)}},
                             box)
            if attempt == 0:
                at_trial = problem.derivatives(trial, free)
                trial_loss = at_trial[0]
            else:
                at_trial, trial_loss = None, problem.loss(trial)
            if trial_loss <= loss:
                break
            step = step / 2
        else:
            return NewtonOutcome(p, loss, H, it)
        moved = max(abs(on_circle(n, trial[n] - p[n])) / w
                    for n, w in zip(free, widths, strict=True))
        p = trial
        loss, grad, H = at_trial if at_trial is not None else problem.derivatives(p, free)
        if moved < STEP_TOLERANCE:
            return NewtonOutcome(p, loss, H, it)
    return NewtonOutcome(p, loss, H, iterations)
