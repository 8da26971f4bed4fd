"""Crystal mode: refine a fit with the lattice model of the spectra (physics.lattice).

``object_model="lattice"`` on ``Session.fit`` / ``fit_region``: the per-bin fit (search,
Newton, errors) runs as always; then, on the same window of BF counts,

1. the lattice is found: a first basis from the peaks of the Hann-apodised power
   spectrum of the scan's central ≤ 128² positions (``peak_basis``: a crystal's lattice
   is the scan's, and its peaks are sharper there than in a small region), refined on
   the window by the lattice model's own loss at the fitted parameters (L-BFGS over its
   four numbers with the loss's exact gradient; the loss fixes the scale within ~0.1 %,
   docs/bias-matrix.md §14, §16);
2. the crystal test (``crystal_contrast``), then the free parameters refined by Newton
   on the lattice loss (its exact gradient and Hessian, ``lattice_hessian``),
   then the basis and the parameters once more (scale and C10 trade along a valley);
3. errors: the noise part 2σ²κ(∂²L)⁻¹ as for the per-bin fit (fit.errors; σ² from the
   lattice residual, so model error it leaves raises it), and a systematic part from
   pairs of estimates that should agree (``systematic_parts``: the two trotter lobes; the
   single-overlap pixels against every pixel; the inner and the outer BF pixels): their
   difference beyond its noise, as fit.systematic does for the per-bin model, or the
   per-bin fit's own systematic part where that is larger. The strong object's
   second-order terms are not in the model.

Where no lattice is found (fewer than two peaks, or peaks on one line), or the one found
is no crystal's (its model explains less than ``CRYSTAL_CONTRAST`` times what lattices
turned or scaled off it explain: an amorphous specimen's speckle, or a lattice below the
noise), the per-bin fit is kept and ``lattice["reason"]`` says why.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
from scipy.optimize import minimize

from ..params import PERIODS, on_circle
from ..physics.geometry import scan_frame_frequencies
from ..physics.lattice import (
    LatticeData,
    LatticeNotFoundError,
    free_objects,
    lattice_data,
    lattice_gradient,
    lattice_hessian,
    lattice_point_gradient,
    lattice_points,
    lattice_solve,
    peak_basis,
)
from ..physics.lattice_columns import (
    LatticeGeometry,
    lattice_column_derivatives,
    lattice_columns,
    lattice_columns_by_g,
)
from ..results import Bounds, FitResult
from .errors import capped_errors, covariance, profile_inflation
from .systematic import combined_errors, disagreement

OBJECT_MODELS = ("per_bin", "lattice")
NEWTON_ITERATIONS = 20
STEP_TOLERANCE = 1e-5  # of each parameter's box width
CRYSTAL_CONTRAST = 3.0  # the lattice's explained energy over its controls' (a crystal)
CONTROL_LATTICES = ((0.21, 1.0), (0.37, 1.0), (0.0, 1.13), (0.53, 0.91))
PEAK_WINDOW = 128  # positions per side the first lattice is read from
BASIS_ITERATIONS = 60
# L-BFGS stops when an iteration lowers the loss by less than this fraction: on the
# demo's 16² region a further 43 evaluations moved the basis 7·10⁻⁷ of its length
# and C10 1.8·10⁻⁵ Å (its error ±0.45), the loss's rounding floor
BASIS_FTOL = 1e-10
BASIS_FD_STEP = 1e-6  # 1/Å: the columns' central differences in g


def check_object_model(value: str) -> str:
    if value not in OBJECT_MODELS:
        raise ValueError(f"object_model={value!r}: use one of {', '.join(OBJECT_MODELS)} "
                         "(\"lattice\" for crystals: docs/bias-matrix.md §15)")
    return value


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
                    ) -> tuple[dict[str, float], list[dict[str, float]]]:
    """The systematic part from two estimates that should agree, each linearised at the
    joint fit (``_linear_estimate``): where they differ by more than their noise (d²/v
    above fit.systematic's SIGNIFICANCE), √((d² − v)/2) per parameter, as
    fit.systematic's ``disagreement`` does for the per-bin model's frequency bands. v is
    the sum of their variances for independent parts, and for ``nested`` ones (the
    second is the joint fit's own problem, whose data hold the first's: its estimate is
    the fit itself with its ``noise`` errors, the efficient one) their difference
    (Hausman's test). Returns it and the two estimates."""
    p0, e0 = _linear_estimate(parts[0], fit, free, box, sigma2)
    if nested:  # the joint problem: at its own minimum, with its own errors
        p1, e1 = {n: float(fit.params[n]) for n in free}, dict(noise)
    else:
        p1, e1 = _linear_estimate(parts[1], fit, free, box, sigma2)
    out = {}
    for n in free:
        v = abs(e0[n] ** 2 - e1[n] ** 2) if nested else e0[n] ** 2 + e1[n] ** 2
        out[n] = disagreement(on_circle(n, p0[n] - p1[n]), v, box[n][1] - box[n][0])[1]
    return out, [p0, p1]


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
    xp = problem.xp
    radius = xp.hypot(problem.geo.k[:, 0:1], problem.geo.k[:, 1:2])
    inner = (radius <= xp.median(radius)).astype(np.float64)
    return {"lobes": ((problem.lobe_of(0, joint), problem.lobe_of(1, joint)), False),
            "pixel_sets": ((replace(problem, pixels="single"), problem), True),
            "rings": ((replace(problem, rows=inner), replace(problem, rows=1 - inner)), False)}


def box_mapping(box: Any) -> dict[str, tuple[float, float]]:
    """A search ``Box`` as {name: (low, high)}."""
    return {n: (lo, hi) for n, (lo, hi) in box.to_dict().items()}


def window_counts(engine: Any, bounds: Bounds | None) -> Any:
    """The window's resident BF counts as (h, w, B), in the engine's array module (the
    whole scan for ``bounds`` None)."""
    counts = engine.resident_bf_counts()
    r0, r1, c0, c1 = bounds or (0, engine.reference.geo.shape[0], 0,
                                engine.reference.geo.shape[1])
    if engine.name == "cuda":  # held BF pixels first there
        return engine.reference.xp.moveaxis(counts[:, r0:r1, c0:c1], 0, 2)
    return counts[r0:r1, c0:c1]


def crystal_contrast(problem: LatticeProblem, basis: np.ndarray,
                     params: Mapping[str, float]) -> tuple[float, float]:
    """(contrast, explained fraction): the energy the lattice's model explains over the
    mean that lattices turned (0.21, 0.37, 0.53 rad) or scaled (1.13×) off it explain.
    Measured (docs/bias-matrix.md §15): SrTiO3 one cell 20 (scan), 7 (16²); 10⁴ e⁻ 20;
    an amorphous slab's speckle "lattice" 1.0–1.1; a 0.3 rad weak slab at 2·10⁵ e⁻ 1.0–1.5
    (its lattice below the noise)."""
    def explained(b: np.ndarray) -> float:
        at = problem.at_basis(b)
        return -at.loss(params) / at._data().energy

    def turned(angle: float, scale: float) -> np.ndarray:
        c, s = math.cos(angle), math.sin(angle)
        return scale * basis @ np.array([[c, s], [-s, c]])

    found = explained(basis)
    controls = [explained(turned(a, m)) for a, m in CONTROL_LATTICES]
    return found / max(float(np.mean(controls)), 1e-300), found


def central_window(scan_shape: Sequence[int], size: int = PEAK_WINDOW) -> Bounds:
    """The scan's central ``size``² positions (all of a smaller scan): where the first
    lattice is read (a crystal's lattice is the scan's; its peaks sharpen with the
    window, and ``size`` bounds the cost)."""
    r, c = (max(0, (n - size) // 2) for n in scan_shape[:2])
    return (r, min(r + size, scan_shape[0]), c, min(c + size, scan_shape[1]))


def lattice_problem(engine: Any, bounds: Bounds | None, theta: float, transpose: bool
                    ) -> LatticeProblem:
    geo = engine.reference.geo
    xp = engine.reference.xp
    k = scan_frame_frequencies(geo.bf.k_det, theta, transpose)
    return LatticeProblem(
        counts=window_counts(engine, bounds), step=tuple(geo.step), xp=xp,
        geo=LatticeGeometry(k=xp.asarray(k), wavelength=geo.wavelength,
                            k_alpha=geo.k_alpha, edge_width=geo.edge_width))


def with_lattice(result: FitResult, engine: Any, bounds: Bounds | None, theta: float,
                 transpose: bool, box: Mapping[str, tuple[float, float]],
                 rounds: int = 2) -> FitResult:
    """``result`` (a per-bin VP fit with its errors) refined on the lattice model: the
    lattice found, the free parameters refined, their errors (module docstring). Where
    no lattice is found, or the one found is no crystal's, the per-bin fit is returned
    with the reason in ``lattice``."""
    t0 = time.perf_counter()
    problem = lattice_problem(engine, bounds, theta, transpose)
    free = [n for n in box if result.errors.get(n, 1.0) > 0 and n not in result.undetermined]
    try:  # the scan's peaks are sharper than a region's: the first guess from there
        basis = peak_basis(window_counts(engine, central_window(engine.reference.geo.shape)),
                           problem.step, problem.xp)
    except LatticeNotFoundError as e:
        return replace(result, lattice={"model": "per_bin", "reason": f"no lattice: {e}"})
    params = dict(result.params)
    for round_ in range(rounds):  # scale and C10 trade along a valley
        basis = refined_basis(problem, basis, params)
        problem = problem.at_basis(basis)
        if round_ == 0:
            contrast, explained = crystal_contrast(problem, basis, params)
            if contrast < CRYSTAL_CONTRAST:
                return replace(result, lattice={
                    "model": "per_bin", "contrast": contrast, "explained_fraction": explained,
                    "reason": (f"no crystal lattice: the lattice found explains "
                               f"{explained:.1%} of the spectra, {contrast:.1f}x what "
                               f"lattices turned or scaled off it do (a crystal's: "
                               f"{CRYSTAL_CONTRAST:g}x or more); the per-bin fit is kept")})
        fit = lattice_newton(problem, params, free, box)
        params = fit.params
    noise, sigma2, kappa = noise_errors(problem, fit, free, box)
    parts = {name: pair_systematic(pair, nested, fit, noise, free, box, sigma2)
             for name, (pair, nested) in systematic_parts(problem, fit.params).items()}
    # The per-bin fit's systematic part (its frequency bands' disagreement) is kept where it
    # is larger: it also sees what both models share, beside the window's leakage this
    # model removes.
    systematic = {n: max([part[0][n] for part in parts.values()]
                         + [result.errors_systematic.get(n, 0.0)]) for n in free}
    errors = combined_errors(noise, systematic, box)
    data = problem._data()
    record = {
        "model": "lattice", "basis_inv_A": basis.tolist(), "points": len(data.g),
        "contrast": contrast,
        "explained_fraction": float(-fit.loss / data.energy), "sigma2": sigma2,
        "kappa": kappa, "newton_iterations": fit.iterations, "errors_noise": noise,
        **{f"errors_{name}": part[0] for name, part in parts.items()},
        **{name: part[1] for name, part in parts.items()},
        "per_bin": {"params": dict(result.params), "errors": dict(result.errors),
                    "errors_systematic": dict(result.errors_systematic)},
        "seconds": time.perf_counter() - t0,
    }
    return replace(
        result, params={**result.params, **fit.params},
        errors={**result.errors, **errors},
        errors_systematic={**{n: 0.0 for n in result.errors}, **systematic},
        lattice=record, timings={**result.timings, "lattice_s": record["seconds"]})
