"""A fit's uncertainty record: errors, undetermined names, model choice, warnings.

``assess`` is the one hook the full-field and regional fits call after their Newton
refinement: it measures the noise level of the model's window, runs the thin model
(depth and tilt held at 0, Newton from the thick optimum) when the thick one was
free, keeps one by the rule of fit.model_choice, and derives the errors from the
exact Hessian at the kept optimum: per parameter the larger of the noise error
(fit.errors) and the misfit (sandwich) error (fit.robust), combined with the
systematic error where the low and high scan frequencies disagree (fit.systematic).
"""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from ..physics.aliases import alias_spacing, kept_pair_fraction
from ..physics.apodisation import design_factor, power_factor
from ..physics.geometry import (
    BFPixels,
    bright_field_pixels,
    half_plane_weights,
    scan_frame_frequencies,
    scan_frequencies_half,
)
from ..results import FitResult
from .errors import (
    NoiseLevel,
    misfit_errors,
    noise_level,
    observation_counts,
    pixel_trotter_counts,
    poisson_sigma2,
    standard_errors,
)
from .fixed import FreeView
from .joint import newton_fit
from .model_choice import THICK_ONLY, ModelChoice, choose_model, edge_warnings, undetermined
from .robust import cluster_gradients, frequency_terms, misfit_meat
from .search import Box
from .systematic import (
    TILTS,
    BandComparison,
    band_kappa_ratio,
    band_sums,
    combined_errors,
    compare_bands,
    depth_not_described,
    depth_not_determined,
)
from .transpose_choice import orientation_notes


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
    # The two estimates behind ``errors`` (free parameters; {} where not formed).
    errors_noise: dict[str, float] = field(default_factory=dict)
    errors_misfit: dict[str, float] = field(default_factory=dict)
    misfit_clusters: int = 0
    errors_systematic: dict[str, float] = field(default_factory=dict)  # every param, 0 held
    bands: BandComparison = field(default_factory=BandComparison)

    def provenance(self) -> dict[str, Any]:
        return {"noise": self.noise.to_dict(),
                "model_choice": None if self.model_choice is None else self.model_choice.to_dict(),
                "warnings": list(self.warnings),
                "errors_rule": ERRORS_RULE,
                "errors_components": {"noise": dict(self.errors_noise),
                                      "misfit": dict(self.errors_misfit),
                                      "misfit_clusters": self.misfit_clusters,
                                      "systematic": dict(self.errors_systematic)},
                "frequency_bands": self.bands.to_dict()}


ERRORS_RULE = ("1-sigma, per parameter sqrt(max(noise, misfit)^2 + systematic^2): the noise "
               "error sqrt(kappa*2*sigma2/E*inv(Hessian of L)), the misfit error (sandwich "
               "inv(H) J inv(H) over the scan frequencies), the systematic error (the spread "
               "of the low and high frequency bands' estimates beyond their noise, where "
               "significant at p = 0.001); 0 for held")


def window_pixel_totals(dataset: Any, spectra: Any) -> np.ndarray:
    """Σ_R I(R, k_b) over the window's measured positions for every BF pixel: (B,).

    The full field is the mean pattern times the positions; a region's are the sums its
    engine kept for the window (``PreparedSpectra.pixel_totals``; on CUDA from the window
    mean it already computed: no device reduction or wait here).
    """
    r0, r1, c0, c1 = spectra.bounds
    rows, cols = dataset.scan_shape
    if (r0, r1, c0, c1) == (0, rows, 0, cols):
        bf = _bf_pixels(dataset)
        return np.asarray(dataset.mean_pattern[bf.rows, bf.cols] * (rows * cols))
    if spectra.pixel_totals is None:
        raise RuntimeError("the window's pixel totals are not set yet: its engine keeps them "
                           "from prepare (CPU) or the first set_rotation (CUDA)")
    return np.asarray(spectra.pixel_totals, dtype=np.float64)


def _bf_pixels(dataset: Any) -> BFPixels:
    """The BF pixel set the engines use (same function, same order)."""
    bf = dataset.bright_field
    return _bf_pixels_of((int(dataset.detector_shape[0]), int(dataset.detector_shape[1])),
                         (float(bf.center_row), float(bf.center_col)),
                         float(dataset.detector_pixel_inv_A), float(dataset.k_alpha))


# Every fit of a session (each map tile, region edit and model choice) asks for the same
# BF pixels and, per window shape and rotation, the same trotter counts: computed once.
_bf_pixels_of = functools.lru_cache(maxsize=8)(bright_field_pixels)


@functools.lru_cache(maxsize=32)
def _observations(shape: tuple[int, int], step: tuple[float, float], n_bf: int,
                  k_alpha: float) -> tuple[float, float]:
    nu_r, nu_c = scan_frequencies_half(shape, step)
    R, C = np.meshgrid(nu_r, nu_c, indexing="ij")
    weights = np.broadcast_to(half_plane_weights(shape[1]), R.shape)
    return observation_counts(n_bf, R.ravel(), C.ravel(), weights.ravel(), k_alpha)


@functools.lru_cache(maxsize=32)
def _trotter_counts(k: bytes, n: int, shape: tuple[int, int], step: tuple[float, float],
                    k_alpha: float) -> np.ndarray:
    out = pixel_trotter_counts(np.frombuffer(k, dtype=np.float64).reshape(n, 2), shape, step,
                               k_alpha)
    out.setflags(write=False)
    return out


POISSON_SAMPLE_PIXELS = 1024  # exact trotter counts on this many BF pixels at most


def window_statistics(spectra: Any, dataset: Any, pixel_totals: np.ndarray,
                      alias_pixels: str) -> tuple[float, float, float, float]:
    """(energy E, n_obs, n_object, Poisson σ²) of a prepared window at its rotation.

    n_obs and n_object from the trotter areas (fit.errors.observation_counts, within a
    few 1e-4 of the exact masks); the Poisson level weights each BF pixel's counts by its
    exact trotter count, on an evenly strided subset of at most
    ``POISSON_SAMPLE_PIXELS`` pixels (the counts vary slowly over the disk; the exact
    count costs O(B·N_rows) on the host). With ``alias_pixels`` "excluded" n_obs counts
    only the pairs the fit keeps (``physics.aliases.kept_pair_fraction``).
    """
    if spectra.rotation is None:
        raise RuntimeError("the window has no rotation set: set_rotation() first")
    theta, transpose = spectra.rotation
    step, k_alpha = dataset.scan_step_A, dataset.k_alpha
    n_obs, n_object = _observations(tuple(spectra.shape), (float(step[0]), float(step[1])),
                                    int(spectra.n_bf), float(k_alpha))
    k = scan_frame_frequencies(_bf_pixels(dataset).k_det, theta, transpose)
    spacing = alias_spacing(step, k_alpha, alias_pixels)
    if spacing[2:].any():  # the pairs an alias shares are not observations of this fit
        sample = np.ascontiguousarray(k, dtype=np.float64)
        n_obs *= kept_pair_fraction(sample.tobytes(), len(sample), tuple(spectra.shape),
                                    (float(step[0]), float(step[1])), float(k_alpha),
                                    tuple(float(v) for v in spacing))
    s2p = 0.0
    if len(pixel_totals) == len(k):
        stride = max(1, -(-len(k) // POISSON_SAMPLE_PIXELS))
        sample = np.ascontiguousarray(k[::stride], dtype=np.float64)
        counts = _trotter_counts(sample.tobytes(), len(sample), tuple(spectra.shape),
                                 (float(step[0]), float(step[1])), float(k_alpha))
        s2p = poisson_sigma2(pixel_totals[::stride], counts)
        if spectra.apodised:  # of the Hann-weighted counts (physics.apodisation)
            s2p *= power_factor(_measured(spectra))
    return float(spectra.energy), n_obs, n_object, s2p


def _window(model: Any, dataset: Any) -> tuple[float, float, float, float, float]:
    """(E, n_obs, n_object, Poisson σ², design factor) of a model's window at its rotation."""
    totals = window_pixel_totals(dataset, model.spectra)
    stats = window_statistics(model.spectra, dataset, totals, model.alias_pixels)
    design = design_factor(_measured(model.spectra)) if model.spectra.apodised else 1.0
    return (*stats, design)


def explained_variance(model: Any, loss: float, dataset: Any, n_parameters: int) -> float:
    """Counting-noise variance of a fit's explained fraction 1 - L at its optimum (the
    model at the fit's rotation): per frequency var X ≈ 2σ²X (the cross term of signal and
    noise), so var(1 - L) = 2κσ²·design·(1 - L)/E; inf where σ² is not determined."""
    energy, n_obs, n_object, s2p, design = _window(model, dataset)
    noise = noise_level(loss, energy, n_obs, n_object, n_parameters, s2p, design)
    if not (noise.determined and energy > 0):
        return math.inf
    return 2.0 * noise.kappa * noise.sigma2 * noise.design * max(1.0 - loss, 0.0) / energy


def _measured(spectra: Any) -> tuple[int, int]:
    """The window's measured positions per scan axis."""
    r0, r1, c0, c1 = spectra.bounds
    return (r1 - r0, c1 - c0)


def sub_box(box: Box, names: tuple[str, ...]) -> Box:
    """``box`` restricted to ``names`` (in that order)."""
    idx = [box.names.index(n) for n in names]
    return Box(low=box.low[idx].copy(), high=box.high[idx].copy(), names=names)


def _hessian(view: FreeView, params: Mapping[str, float], box: Box) -> np.ndarray:
    _, _, h = view.derivatives(np.array([[params[n] for n in box.names]]))
    return np.asarray(h[0])


def assess(
    view: FreeView, box: Box, params: Mapping[str, float], loss: float, dataset: Any,
    on_box_edge: list[str] | None = None, hessian: np.ndarray | None = None,
    choose: bool = True,
) -> Assessment:
    """Errors, undetermined names and the thin/thick choice of a refined VP fit.

    ``box`` holds the free parameters, ``view`` the held ones (error 0, not listed as
    undetermined); ``params`` is the fit's full dict at the optimum, ``on_box_edge`` its
    edges; ``hessian`` (free order, at ``params``) saves one derivatives call.
    """
    t0 = time.perf_counter()
    model = view.model
    energy, n_obs, n_object, s2p, design = _window(model, dataset)
    kept_hessian = hessian  # None: from the errors' own derivatives call below
    noise = noise_level(loss, energy, n_obs, n_object, len(box.names), s2p, design)
    kept_params, kept_loss, kept_noise, kept_box = dict(params), float(loss), noise, box
    kept_view = view
    edges = list(on_box_edge or [])
    choice: ModelChoice | None = None
    thin_steps: list[dict[str, Any]] = []
    by_model: list[str] = []
    t1 = time.perf_counter()
    if choose and "depth" in box.names and noise.determined:
        thick_free = [n for n in THICK_ONLY if n in box.names]
        thin_box = sub_box(box, tuple(n for n in box.names if n not in THICK_ONLY))
        thin_view = FreeView(model, thin_box, {**view.fixed, **dict.fromkeys(thick_free, 0.0)})
        thin = newton_fit(thin_view, params, thin_box, branch="thin")
        choice = choose_model(thin.loss, float(loss), energy, noise, len(thin_box.names))
        thin_steps = thin.newton
        if choice.kept == "thin":
            by_model = thick_free
            kept_params, kept_loss, kept_box, edges = (thin.params, thin.loss, thin_box,
                                                       thin.on_box_edge)
            kept_view = thin_view
            kept_hessian = thin.hessian
            kept_noise = noise_level(kept_loss, energy, n_obs, n_object, len(thin_box.names),
                                     s2p, design)
    t2 = time.perf_counter()
    free = kept_box.names
    box_t = {n: (float(lo), float(hi))
             for n, lo, hi in zip(free, kept_box.low, kept_box.high, strict=True)}
    errors = {n: 0.0 for n in kept_params}  # held: by the user or by the model choice
    terms = None
    if free and kept_noise.determined:  # one call: the misfit's gradients and the Hessian
        terms = frequency_terms(kept_view, kept_params)
        kept_hessian = terms.hessian if kept_hessian is None else kept_hessian
    elif kept_hessian is None:
        kept_hessian = _hessian(kept_view, kept_params, kept_box)
    noise_err = standard_errors(kept_hessian, free, free, kept_noise, energy, box_t)
    misfit_err: dict[str, float] = {}
    n_clusters = 0
    bands = BandComparison(reason="no noise estimate" if free else "no free parameters")
    if terms is not None:
        clusters = cluster_gradients(terms.per_nu, model.spectra.shape)
        n_clusters = int(clusters.shape[1])
        misfit_err = misfit_errors(kept_hessian, free, misfit_meat(clusters) * design, box_t)
    statistical = {n: max(noise_err[n], misfit_err.get(n, 0.0)) for n in free}
    if terms is not None:
        sums = band_sums(terms, model.spectra.shape, dataset.scan_step_A)
        kappa_ratio = band_kappa_ratio(sums.explained, sums.entries, kept_noise)
        bands = compare_bands(sums.gradients, kept_hessian, kept_params, free, noise_err,
                              kappa_ratio, box_t)
    errors.update(combined_errors(statistical, bands.systematic, box_t))
    undet = undetermined(kept_params, errors, box_t, free, by_model)
    warnings = edge_warnings({n: kept_params[n] for n in free}, errors, box_t, edges)
    depth_reason = (depth_not_determined(bands, kept_params)
                    or depth_not_described(choice, kept_noise))
    if depth_reason:  # the thick model's assumption fails: say so, keep the values
        undet = [n for n in kept_params if n in undet or n == "depth" or n in TILTS]
        warnings.append(depth_reason)
    if not kept_noise.determined:  # every error is its box: no ±2σ check says anything
        undet = [n for n in kept_params if n in free]
        warnings = [kept_noise.undetermined_reason()] + [w for w in warnings
                                                         if "sits on its box edge" in w]
    return Assessment(params=kept_params, loss=kept_loss, errors=errors, undetermined=undet,
                      noise=kept_noise, model_choice=choice, warnings=warnings,
                      on_box_edge=edges,
                      timings={"errors_s": t1 - t0 + time.perf_counter() - t2,
                               "model_choice_s": t2 - t1},
                      newton=thin_steps, errors_noise={n: noise_err[n] for n in free},
                      errors_misfit=misfit_err, misfit_clusters=n_clusters,
                      errors_systematic={n: bands.systematic.get(n, 0.0) for n in kept_params},
                      bands=bands)


def with_assessment(result: FitResult, a: Assessment) -> FitResult:
    """``result`` with the kept model's parameters and loss, its errors, undetermined
    names, edges, the thin model's Newton steps and the records of ``a``."""
    spent = a.timings.get("errors_s", 0.0) + a.timings.get("model_choice_s", 0.0)
    timings = {**result.timings, **a.timings}
    if "total_s" in timings:
        timings["total_s"] += spent
    provenance = {**result.provenance, **a.provenance()}
    # a full field whose detector orientation the data do not decide (fit.transpose_choice)
    by_orientation, warning = orientation_notes(a.params, a.errors, result.provenance)
    if warning:
        provenance["warnings"] = [*provenance["warnings"], warning]
    undet = [n for n in a.params if n in a.undetermined or n in by_orientation]
    return replace(result, params=dict(a.params), loss=a.loss, errors=dict(a.errors),
                   errors_systematic=dict(a.errors_systematic),
                   undetermined=undet, on_box_edge=list(a.on_box_edge),
                   newton=result.newton + a.newton, timings=timings, provenance=provenance)
