"""The full-field fit strategy: rotation from the COM curl (both transposes where it
cannot tell: fit.transpose_choice), both branches θ and θ+π, the mirrored branch, the
branch choice by phase skewness, rotation refinement and the FitResult that records it
all.

The VP loss is exactly invariant under (θ→θ+π, C10→-C10, phi12→phi12+π/2, tilt→-tilt).
When the box maps onto itself under that mirror, branch θ+π's search would be branch
θ's search mirrored, so its fit is branch θ's fit mirrored; its loss is re-evaluated on
θ+π to confirm, and a full search runs if the two disagree.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..physics.geometry import estimate_rotation
from ..physics.objective import phase_skewness
from ..results import FitResult
from .fixed import FreeView
from .joint import BranchFit, joint_fit, refine_rotation
from .model import ThickSampleModel
from .progress import Progress
from .search import Box, box_is_mirror_symmetric, mirror_in_box, mirror_params
from .transpose_choice import choose_transpose
from .uncertainty import explained_variance

MIRROR_LOSS_RTOL = 1e-5  # float32 sums in another order; a real asymmetry is far larger

ModelAt = Callable[[float, bool], ThickSampleModel]  # the full-field model at (θ, transpose)


@dataclass(frozen=True)
class FullFieldSearch:
    """What the caller asked for (Session.fit's arguments, checked)."""

    trials: int
    seed: int
    box: Box  # the free parameters
    fixed: Mapping[str, float]
    objective: str = "vp"
    sampler: str = "native"
    search_both_branches: bool = False
    progress: Progress = True
    dataset: Any = None  # for the noise level that lets the transposes' losses decide
    transpose: bool | None = None  # held by the caller; None: from the COM curl

    def __post_init__(self) -> None:
        if self.transpose is not None and not isinstance(self.transpose, bool | np.bool_):
            raise TypeError(f"transpose must be True, False or None (estimate it from the "
                            f"COM curl), got {self.transpose!r}")


def stored_theta(theta: float) -> float:
    """θ as a session holds it: radians of rotation_deg = degrees(θ) mod 360."""
    return math.radians(math.degrees(theta) % 360.0)


def fit_full_field(
    model_at: ModelAt, bf_center_of_mass: Callable[[], np.ndarray],
    scan_step_A: tuple[float, float], spec: FullFieldSearch, provenance: dict[str, Any],
) -> FitResult:
    """Run the whole strategy; the full-field model is left at the stored rotation.

    ``provenance`` is the caller's record (versions, device, dataset); the strategy
    adds its own entries. The losses of the two transposes decide only where they differ
    beyond their noise (fit.transpose_choice; the VP objective with ``spec.dataset``,
    else the lower loss decides); a transpose held in ``spec`` is the only one fitted.
    """
    t0 = time.perf_counter()
    rot = estimate_rotation(bf_center_of_mass(), scan_step_A)
    t_rot = time.perf_counter()
    geometries = [(rot.theta, rot.transpose)]
    if spec.transpose is not None:  # the caller's: the curl's θ for that transpose
        geometries = [(rot.theta if rot.transpose == spec.transpose
                       else rot.theta_other_transpose, bool(spec.transpose))]
    elif rot.transpose_undecided:  # the final losses decide where significant
        geometries.append((rot.theta_other_transpose, not rot.transpose))
    fits = [_fit_geometry(model_at, theta0, transpose, spec)
            for theta0, transpose in geometries]
    losses = [f.best.loss for f in fits]
    measure_noise = len(fits) > 1 and spec.objective == "vp" and spec.dataset is not None
    variances = [explained_variance(model_at(f.theta, f.transpose), f.best.loss, spec.dataset,
                                    len(spec.box.names)) if measure_noise else 0.0
                 for f in fits]
    verdict = choose_transpose(losses, variances)
    if spec.transpose is not None:
        verdict = dataclasses.replace(verdict, chosen_by="given")
    g = fits[verdict.kept]
    theta, best, branches, choice, transpose = g.theta, g.best, g.branches, g.choice, g.transpose
    transpose_record = {
        "transpose_chosen_by": verdict.chosen_by,
        "transpose_determined": verdict.determined,
        "transpose_z": verdict.z if math.isfinite(verdict.z) else None,  # JSON: no nan
        "transpose_candidates": [
            {"transpose": f.transpose, "rotation_com_deg": math.degrees(th), "loss": f.best.loss,
             "rotation_deg": math.degrees(f.theta) % 360.0, "params": dict(f.best.params),
             "chosen": i == verdict.kept}
            for i, ((th, _), f) in enumerate(zip(geometries, fits, strict=True))]}
    rotation_deg = math.degrees(theta) % 360.0
    model_at(math.radians(rotation_deg), transpose)  # in place after the refinement
    return FitResult(
        params=best.params, loss=best.loss, rotation_deg=rotation_deg,
        transpose=transpose,
        trials=[t for _, b in branches for t in b.trials],
        newton=[s for _, b in branches for s in b.newton] + best.newton,
        timings={"rotation_s": t_rot - t0, "total_s": time.perf_counter() - t0,
                 "branch_choice_s": g.branch_choice_s,
                 **best.timings,
                 **{f"branch{i}_{k}": v for i, (_, b) in enumerate(branches)
                    for k, v in b.timings.items()}},
        provenance={**provenance, "sampler": spec.sampler,
                    "branches_searched": sum(not b.derived for _, b in branches),
                    "rotation_com_deg": math.degrees(geometries[verdict.kept][0]),
                    "rotation_residual": rot.residual,
                    "rotation_residual_other_transpose": rot.residual_other_transpose,
                    **transpose_record},
        on_box_edge=best.on_box_edge,
        branches=[{"rotation_deg": math.degrees(t) % 360.0, "loss": b.loss,
                   "params": b.params, "derived": b.derived, **choice[i]}
                  for i, (t, b) in enumerate(branches)],
    )


@dataclass
class _GeometryFit:
    """Both branches searched at one transpose, the branch chosen, θ refined."""

    transpose: bool
    theta: float
    best: BranchFit
    branches: list[tuple[float, BranchFit]]
    choice: list[dict[str, Any]]
    branch_choice_s: float


def _fit_geometry(model_at: ModelAt, theta0: float, transpose: bool,
                  spec: FullFieldSearch) -> _GeometryFit:
    branches, view = _search_branches(model_at, theta0, transpose, spec)
    t0 = time.perf_counter()
    theta, best, choice = _choose_branch(model_at, view, branches, transpose, spec.box)
    branch_choice_s = time.perf_counter() - t0
    if spec.objective == "vp":  # the comparison objectives have no Newton to re-run
        # Reconstructions (and restored calibrations) use radians(rotation_deg), a few
        # ulp from θ: the refined Newton runs there, and leaves the full field there.
        view = FreeView(model_at(theta, transpose), spec.box, spec.fixed)
        theta, best = refine_rotation(view, theta, transpose, best.params, spec.box,
                                      snap=stored_theta, progress=spec.progress)
    return _GeometryFit(transpose, theta, best, branches, choice, branch_choice_s)


def _search_branches(
    model_at: ModelAt, theta0: float, transpose: bool, spec: FullFieldSearch,
) -> tuple[list[tuple[float, BranchFit]], FreeView]:
    """Fit both branches θ0 and θ0+π at ``transpose`` (the second as the mirror of the
    first where that is exact)."""
    branches: list[tuple[float, BranchFit]] = []
    view: FreeView | None = None
    for i, theta in enumerate((theta0, theta0 + math.pi)):
        view = FreeView(model_at(theta, transpose), spec.box, spec.fixed)
        fit = None
        if i == 1 and spec.objective == "vp" and not spec.search_both_branches:
            fit = _mirrored_branch(view, branches[0][1], spec.box)
        if fit is None:
            fit = joint_fit(view, spec.trials, spec.seed, spec.box, spec.objective, branch=i,
                            progress=spec.progress, label=f"full field, branch {i + 1}/2",
                            sampler=spec.sampler)
        branches.append((theta, fit))
    assert view is not None
    return branches, view


def _fixed_mirror_invariant(fixed: Mapping[str, float], box: Box) -> bool:
    """Whether the held values are their own mirror (e.g. zero tilt): only then are the
    two branches' fits mirror images of each other."""
    return not fixed or mirror_params(fixed, box) == dict(fixed)


def _choose_branch(
    model_at: ModelAt, view: FreeView, branches: list[tuple[float, BranchFit]],
    transpose: bool, box: Box,
) -> tuple[float, BranchFit, list[dict[str, Any]]]:
    """Pick θ or θ+π.

    When each branch's optimum has its mirror inside the box the two losses differ
    only by optimizer tolerance and cannot decide: then the branch whose phase has
    positive skewness (atoms bright: a positive projected potential) wins. Otherwise
    the lower loss wins.
    """
    if not (_fixed_mirror_invariant(view.fixed, box)
            and all(mirror_in_box(fit.params, box) for _, fit in branches)):
        i = int(np.argmin([fit.loss for _, fit in branches]))
        info = [{"chosen": j == i, "chosen_by": "loss"} for j in range(2)]
    else:
        skews = _branch_skewness(model_at, view.model, branches, transpose)
        i = int(np.argmax(skews))
        info = [{"chosen": j == i, "chosen_by": "phase_skewness", "phase_skewness": skews[j]}
                for j in range(2)]
    theta, best = branches[i]
    model_at(theta, transpose)
    return theta, best, info


def _branch_skewness(
    model_at: ModelAt, full: ThickSampleModel, branches: list[tuple[float, BranchFit]],
    transpose: bool,
) -> list[float]:
    """Phase skewness of each branch's 1× reconstruction. A derived branch (the exact
    mirror of the other) reconstructs the complex conjugate object, so its skewness
    is the other's negated: one reconstruction, on the rotation the field is at."""

    def skewness(theta: float, params: dict[str, float]) -> float:
        model = model_at(theta, transpose)
        return phase_skewness(np.angle(model.reconstruct(params, 1, "ssb")))

    if branches[1][1].derived is None:
        return [skewness(theta, fit.params) for theta, fit in branches]
    at = 1 if full.spectra.rotation == (branches[1][0], transpose) else 0
    skew = skewness(branches[at][0], branches[at][1].params)
    return [skew, -skew] if at == 0 else [-skew, skew]


def _mirrored_branch(view: FreeView, fit: BranchFit, box: Box) -> BranchFit | None:
    """Branch θ+π as the exact mirror of branch θ's fit, its loss evaluated on θ+π;
    None when the box (or a held value) is not mirror symmetric or the loss does not
    match."""
    if not (box_is_mirror_symmetric(box) and _fixed_mirror_invariant(view.fixed, box)):
        return None
    t0 = time.perf_counter()
    params = mirror_params(fit.params, box)
    params.update(view.fixed)  # held values exactly as given (no -0.0)
    vec = np.array([[params[p] for p in box.names]])
    loss = float(view.evaluate(vec, "vp")[0])
    if abs(loss - fit.loss) > MIRROR_LOSS_RTOL * max(abs(fit.loss), 1e-12):
        return None
    return BranchFit(params=params, loss=loss, trials=[], newton=[],
                     on_box_edge=list(fit.on_box_edge),
                     timings={"mirror_s": time.perf_counter() - t0},
                     derived=f"mirror of branch 1 (loss {fit.loss:.9g} there, "
                             f"{loss:.9g} evaluated here)")
