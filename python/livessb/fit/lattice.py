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
   on the lattice loss (its exact gradient and Hessian, ``lattice_hessian``); where the
   per-bin fit kept the thick model, thin or thick is asked again on this model, which
   reads each pixel's area (``fit.lattice_choice``: a coarse camera's blur made the
   per-bin fit keep depths and tilts a thin crystal does not have); then the basis and
   the parameters once more (scale and C10 trade along a valley);
3. the thin object's every term (``fit.thin_object``: the beams T and the aberrations by
   L-BFGS, the strong object's second-order terms included), where the fit is thin and
   the data see those terms (a χ²₁ test of the energy they add);
4. errors: the noise part 2σ²κ(∂²L)⁻¹ as for the per-bin fit (fit.errors; σ² from the
   first-order lattice residual, so model error it leaves raises it), and a systematic
   part from pairs of estimates that should agree (``systematic_parts``: the two trotter
   lobes; the single-overlap pixels against every pixel; the inner and the outer BF
   pixels, in the first-order model and in the thin one): their difference beyond its
   noise, as fit.systematic does for the per-bin model, or the per-bin fit's own
   systematic part where that is larger.

Where the detector integrates (``Dataset4D.detector_pixels``), every stage's model is each
pixel's mean over s × s samples of its area (``pixel_samples``; physics.lattice_columns.
sampled_geometry): the columns, their derivatives and the thin object's terms alike.

Where no lattice is found (fewer than two peaks, or peaks on one line), or the one found
is no crystal's (its model explains less than ``CRYSTAL_CONTRAST`` times what lattices
turned or scaled off it explain: an amorphous specimen's speckle, or a lattice below the
noise), the per-bin fit is kept and ``lattice["reason"]`` says why.

This module runs the stages; ``lattice_problem`` holds a window's loss, the basis's
refinement and Newton, ``lattice_errors`` the errors.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from ..engine.blas_threads import one_blas_thread
from ..physics.geometry import scan_frame_frequencies, subpixel_offsets
from ..physics.lattice import lattice_periods_A, lattice_points
from ..physics.lattice_columns import LatticeGeometry
from ..physics.lattice_peaks import LatticeNotFoundError, peak_basis
from ..results import Bounds, FitResult
from .lattice_choice import asked_again, lattice_model_choice
from .lattice_errors import noise_errors, pair_systematic, systematic_parts
from .lattice_problem import LatticeProblem, lattice_newton, refined_basis
from .model_choice import THICK_ONLY
from .progress import Progress, StepProgress
from .systematic import combined_errors
from .thin_object import FirstOrder, thin_object_stage

OBJECT_MODELS = ("per_bin", "lattice")
CRYSTAL_CONTRAST = 3.0  # the lattice's explained energy over its controls' (a crystal)
CONTROL_LATTICES = ((0.21, 1.0), (0.37, 1.0), (0.0, 1.13), (0.53, 0.91))
PEAK_WINDOW = 128  # positions per side the first lattice is read from
# The most lattice points (within 2k_α) crystal mode models: its Gram and columns grow as
# their square and as their number × BF pixels (SrTiO3 at 20 mrad: 120; 2000 is a 10 Å
# cell at 30 mrad, 300 kV, ~1 GB of columns on a 9000-pixel disc)
MAX_LATTICE_POINTS = 2000
# An integrating pixel's samples: at least this many across the BF radius (the midpoint
# rule's error falls as the samples' area; a 6 px detector takes 4 × 4 per pixel, 24 px and
# finer their centres), so the model's cost is that of ~1800 samples over the BF disc
SAMPLES_PER_RADIUS = 24
# the fewest lattice periods across a window on which the first lattice was found in every
# case tried (docs/bias-matrix.md §19: 120 of 120 at 2.4 or more, 41 of 72 below)
MIN_PERIODS = 2.4
LATTICE_ROUNDS = 2  # the lattice refined, then Newton, twice: scale and C10 trade along a valley
# the "lattice" progress stage: the first lattice, each round, the errors, the thin stage
LATTICE_STEPS = 3 + LATTICE_ROUNDS


def check_object_model(value: str) -> str:
    if value not in OBJECT_MODELS:
        raise ValueError(f"object_model={value!r}: use one of {', '.join(OBJECT_MODELS)} "
                         "(\"lattice\" for crystals: docs/bias-matrix.md §15)")
    return value


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


def first_lattice(engine: Any, problem: LatticeProblem) -> np.ndarray:
    """The scan's first lattice guess: ``peak_basis`` of its central window (a scan's peaks
    are sharper than a region's), read once per scan and kept in the engine's
    ``scan_memo`` (with the reason where none is found) for the scan's next fits."""
    memo = engine.scan_memo  # one scan's counts and geometry: its window, step and band
    if "first_lattice" not in memo:
        window = window_counts(engine, central_window(engine.reference.geo.shape))
        try:
            memo["first_lattice"] = peak_basis(window, problem.step, problem.xp,
                                               band_inv_A=2 * problem.geo.k_alpha)
        except LatticeNotFoundError as e:
            memo["first_lattice"] = str(e)
    found = memo["first_lattice"]
    if isinstance(found, str):
        raise LatticeNotFoundError(found)
    return np.array(found)


def _too_few_periods(problem: LatticeProblem, basis: np.ndarray) -> str:
    """Where the window spans fewer lattice periods than crystal mode tells a lattice from
    its turned and scaled neighbours by, what to do about it ("" otherwise)."""
    h, w = problem.counts.shape[:2]
    period = max(lattice_periods_A(basis))
    periods = min(h * problem.step[0], w * problem.step[1]) / period
    if periods >= MIN_PERIODS:
        return ""
    return (f"; the {h}×{w}-position window spans {periods:.1f} periods of the "
            f"{period:.3g} Å lattice, fewer than the {MIN_PERIODS:g} crystal mode needs: "
            "draw a larger region")


def pixel_samples(detector_pixels: str, radius_px: float) -> int:
    """Samples per axis over each pixel's area: 1 where the detector reads points, else
    enough for SAMPLES_PER_RADIUS across the BF radius."""
    if detector_pixels == "points":
        return 1
    return max(1, math.ceil(SAMPLES_PER_RADIUS / radius_px - 1e-9))


def lattice_problem(engine: Any, bounds: Bounds | None, theta: float, transpose: bool,
                    detector_pixels: str = "integrating") -> LatticeProblem:
    geo = engine.reference.geo
    xp = engine.reference.xp
    k = scan_frame_frequencies(geo.bf.k_det, theta, transpose)
    # the BF radius in pixels: the aperture edge's width is one pixel's (DatasetGeometry)
    samples = pixel_samples(detector_pixels, geo.k_alpha / geo.edge_width)
    offsets = None if samples == 1 else xp.asarray(
        subpixel_offsets(geo.edge_width, samples, theta, transpose))
    return LatticeProblem(
        counts=window_counts(engine, bounds), step=tuple(geo.step), xp=xp,
        geo=LatticeGeometry(k=xp.asarray(k), wavelength=geo.wavelength,
                            k_alpha=geo.k_alpha, edge_width=geo.edge_width,
                            pixel_offsets=offsets))


def with_lattice(result: FitResult, engine: Any, bounds: Bounds | None, theta: float,
                 transpose: bool, box: Mapping[str, tuple[float, float]],
                 detector_pixels: str = "integrating", progress: Progress = False
                 ) -> FitResult:
    """``result`` (a per-bin VP fit with its errors) refined on the lattice model: the
    lattice found, the free parameters refined, their errors (module docstring). Where
    no lattice is found, or the one found is no crystal's, the per-bin fit is returned
    with the reason in ``lattice``. ``detector_pixels`` (``Dataset4D.detector_pixels``):
    "integrating" pixels are sampled over their area (``pixel_samples``); ``progress``:
    the "lattice" stage's steps (``fit.progress``). Its host linear algebra runs on one
    BLAS thread (``engine.blas_threads``: small calls, which OpenBLAS's threads slow)."""
    with (one_blas_thread(),
          StepProgress(progress, "lattice", LATTICE_STEPS, "crystal mode") as steps):
        return _with_lattice(result, engine, bounds, theta, transpose, box, detector_pixels,
                             steps)


def _with_lattice(result: FitResult, engine: Any, bounds: Bounds | None, theta: float,
                  transpose: bool, box: Mapping[str, tuple[float, float]],
                  detector_pixels: str, steps: StepProgress) -> FitResult:
    t0 = time.perf_counter()
    problem = lattice_problem(engine, bounds, theta, transpose, detector_pixels)
    free = [n for n in box if result.errors.get(n, 1.0) > 0 and n not in result.undetermined]
    try:
        basis = first_lattice(engine, problem)
    except LatticeNotFoundError as e:
        return replace(result, lattice={"model": "per_bin", "reason": f"no lattice: {e}"})
    steps.step()
    points = len(lattice_points(basis, problem.geo.k_alpha))
    if points > MAX_LATTICE_POINTS:
        periods = ", ".join(f"{a:.3g}" for a in lattice_periods_A(basis))
        return replace(result, lattice={"model": "per_bin", "reason": (
            f"the lattice found (periods {periods} Å) has {points} points within the BF "
            f"disc's band, more than crystal mode models ({MAX_LATTICE_POINTS}); the "
            "per-bin fit is kept")})
    params = dict(result.params)
    kept = (result.provenance.get("model_choice") or {}).get("kept")
    choice = None
    for round_ in range(LATTICE_ROUNDS):
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
                               f"{CRYSTAL_CONTRAST:g}x or more){_too_few_periods(problem, basis)}"
                               "; the per-bin fit is kept")})
        fit = lattice_newton(problem, params, free, box)
        if round_ == 0 and asked_again(kept, box):  # the pixels' area modelled: ask again
            fit, free, choice = lattice_model_choice(problem, fit, free, box)
            kept = choice.kept
        params = fit.params
        steps.step()
    noise, sigma2, kappa = noise_errors(problem, fit, free, box)
    parts = {name: pair_systematic(pair, nested, fit, noise, free, box, sigma2)
             for name, (pair, nested) in systematic_parts(problem, fit.params).items()}
    steps.step()
    data = problem._data()
    if float(fit.params.get("depth", 0.0)) != 0.0:
        kept = "thick"  # a depth held where given: the thin object's terms have none
    first = FirstOrder(params=fit.params, objects=problem.solve(fit.params).x, loss=fit.loss,
                       sigma2=sigma2, kappa=kappa, noise_rings=parts["rings"][2])
    thin, thin_record = thin_object_stage(
        data, problem.geo, basis, problem.counts, first, free, box, problem.xp, kept)
    steps.step()
    used = [part[0] for part in parts.values()]
    if thin is not None:  # the rings compared in the thin model too. Every first-order part
        # stays: the thin rings cannot resolve its ~0.1 Å residual at 2·10⁵ e⁻, which the
        # first-order parts bound (docs/bias-matrix.md §17)
        used.append(thin_record["errors_rings"])
    # The per-bin fit's systematic part (its frequency bands' disagreement) is kept where it
    # is larger: it also sees what both models share, beside the window's leakage this
    # model removes.
    systematic = {n: max([part.get(n, 0.0) for part in used]
                         + [result.errors_systematic.get(n, 0.0)]) for n in free}
    final = fit.params if thin is None else {**fit.params, **thin.params}
    errors = combined_errors(noise, systematic, box)
    # the thin model chosen here: depth and tilt held at 0 by it, as a per-bin thin fit's
    held = [n for n in THICK_ONLY if n in result.params] if kept == "thin" else []
    errors.update({n: 0.0 for n in held})
    systematic.update({n: 0.0 for n in held})
    record = {
        "model": "lattice", "basis_inv_A": basis.tolist(), "points": len(data.g),
        "contrast": contrast,
        "explained_fraction": float(-fit.loss / data.energy), "sigma2": sigma2,
        "kappa": kappa, "newton_iterations": fit.iterations, "errors_noise": noise,
        **{f"errors_{name}": part[0] for name, part in parts.items()},
        **{name: part[1] for name, part in parts.items()},
        "first_order": {n: fit.params[n] for n in free},
        "model_choice": None if choice is None else choice.to_dict(),
        "thin_object": thin_record,
        "detector_pixels": detector_pixels,
        "pixel_samples": problem.geo.samples_per_axis,  # what the model read
        "per_bin": {"params": dict(result.params), "errors": dict(result.errors),
                    "errors_systematic": dict(result.errors_systematic)},
        "seconds": time.perf_counter() - t0,
    }
    return replace(
        result, params={**result.params, **final},
        errors={**result.errors, **errors},
        errors_systematic={**{n: 0.0 for n in result.errors}, **systematic},
        undetermined=[n for n in result.params if n in result.undetermined or n in held],
        lattice=record, timings={**result.timings, "lattice_s": record["seconds"]})
