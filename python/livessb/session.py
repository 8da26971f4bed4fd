"""Session: owns the dataset, the resident engine and its models, and their lifetime."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .calibration import (
    CalibrationError,
    calibration_document,
    load_calibration,
    save_calibration,
)
from .dataset import Dataset4D
from .engine import make_engine
from .fit.joint import BranchFit, joint_fit, refine_rotation
from .fit.model import ThickSampleModel
from .fit.search import Box, box_is_mirror_symmetric, fit_names, mirror_in_box, mirror_params
from .fit.uncertainty import Assessment, assess
from .physics.geometry import auto_upsample, estimate_rotation
from .physics.objective import phase_skewness
from .physics.optics import unknown_aberration_keys
from .regions import RegionError as RegionError  # re-exported: livessb.session.RegionError
from .regions import check_bounds
from .results import Bounds, FitResult, Reconstruction, RegionResult


class SessionClosedError(RuntimeError):
    """The session was closed; results already returned stay valid."""


class FitRequiredError(RuntimeError):
    """A regional fit or reconstruction needs the full-field rotation first."""


class Session:
    """Resident SSB session on one dataset (see docs/api.md)."""

    def __init__(
        self,
        dataset: Dataset4D,
        device: str = "auto",
        calibration: str | Path | None = None,
        force: bool = False,
        staging_budget_MiB: float = 256,
    ) -> None:
        if not isinstance(dataset, Dataset4D):
            raise TypeError(
                f"Session needs a livessb.Dataset4D, got {type(dataset).__name__}: wrap the "
                "counts with livessb.Dataset4D(counts, voltage_kV=..., semiangle_mrad=..., "
                "scan_step_A=...) or use livessb.load(path)")
        self.dataset = dataset
        self._engine: Any = make_engine(dataset, device, staging_budget_MiB=staging_budget_MiB)
        self.device: str = self._engine.name
        self.upsample_factor = auto_upsample(dataset.scan_step_A, dataset.k_alpha)
        self._full: ThickSampleModel | None = None
        self.full_fit: FitResult | None = None
        self.regions: dict[str, RegionResult] = {}
        self.rotation_deg: float | None = None
        self.transpose: bool | None = None
        self._evaluations_at_close = 0
        self.last_close_s: float | None = None
        if calibration is not None:
            self._restore(calibration, force)

    # -- lifetime -----------------------------------------------------------------
    @property
    def closed(self) -> bool:
        return self._engine is None

    @property
    def evaluations(self) -> int:
        """Candidate evaluations (losses or derivatives) this session has run."""
        return self._evaluations_at_close if self._engine is None else self._engine.evaluations

    def _check_open(self) -> Any:
        if self._engine is None:
            raise SessionClosedError(
                "this session is closed; results already returned stay valid — open a new "
                "Session (optionally with calibration=...) to compute more")
        return self._engine

    def close(self) -> None:
        """Break the engine↔model cycle, release device memory; idempotent."""
        if self._engine is None:
            return
        t0 = time.perf_counter()
        self._evaluations_at_close = self._engine.evaluations
        self._engine.close()
        self._engine = None
        self._full = None
        self.last_close_s = time.perf_counter() - t0

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def memory_info(self) -> dict[str, Any]:
        return self._check_open().memory_info()

    # -- geometry -------------------------------------------------------------------
    @property
    def _theta(self) -> float:
        if self.rotation_deg is None or self.transpose is None:
            raise FitRequiredError(
                "no full-field rotation yet: call fit() first or restore a calibration "
                "(Session(ds, calibration=path))")
        return math.radians(self.rotation_deg)

    def _full_model(self, theta: float, transpose: bool) -> ThickSampleModel:
        engine = self._check_open()
        if self._full is None:
            self._full = ThickSampleModel(engine, None, theta, transpose)
        else:
            self._full.set_rotation(theta, transpose)
        return self._full

    # -- fits -----------------------------------------------------------------------------
    def fit(
        self, trials: int = 200, seed: int = 42,
        box: Mapping[str, tuple[float, float]] | None = None, objective: str = "vp",
        progress: bool = True, sampler: str = "native", extra: Sequence[str] = (),
        search_both_branches: bool = False,
    ) -> FitResult:
        """Full-field joint fit: rotation from the COM curl, both branches θ and θ+π.

        ``extra`` opts further coefficients into the joint fit: any of "C21", "C23"
        (each with its angle) and "C30"; those fits run on the generic (slower) path.

        The VP loss is exactly invariant under (θ→θ+π, C10→-C10, phi12→phi12+π/2,
        tilt→-tilt). When the box maps onto itself under that mirror, branch θ+π's
        search would be branch θ's search mirrored, so its fit is branch θ's fit
        mirrored; its loss is re-evaluated on θ+π to confirm, and a full search runs
        if the two disagree. ``search_both_branches=True`` always searches both.
        """
        engine = self._check_open()
        fit_box = Box.from_mapping(box, fit_names(tuple(extra)))  # bad input fails first
        t0 = time.perf_counter()
        rot = estimate_rotation(engine.bf_center_of_mass(), self.dataset.scan_step_A)
        t_rot = time.perf_counter()
        branches: list[tuple[float, BranchFit]] = []
        for i, theta in enumerate((rot.theta, rot.theta + math.pi)):
            model = self._full_model(theta, rot.transpose)
            fit = None
            if i == 1 and objective == "vp" and not search_both_branches:
                fit = _mirrored_branch(model, branches[0][1], fit_box)
            if fit is None:
                fit = joint_fit(model, trials, seed, fit_box, objective, branch=i,
                                progress=progress, label=f"full field, branch {i + 1}/2",
                                sampler=sampler)
            branches.append((theta, fit))
        theta, branch_best, choice = self._choose_branch(branches, rot.transpose, fit_box)
        t_branch = time.perf_counter()
        best = branch_best
        if objective == "vp":  # the comparison objectives have no Newton to re-run
            # Reconstructions (and restored calibrations) use radians(rotation_deg), a few
            # ulp from θ: the refined Newton runs there, and leaves the full field there.
            theta, best = refine_rotation(self._full_model(theta, rot.transpose), theta,
                                          rot.transpose, branch_best.params, fit_box,
                                          snap=_stored_theta)
        self.rotation_deg = math.degrees(theta) % 360.0
        self.transpose = rot.transpose
        full_model = self._full_model(self._theta, rot.transpose)  # in place after refining
        t_assess = time.perf_counter()
        checked = _assess(full_model, fit_box, best, objective, self.dataset)
        t_assess = time.perf_counter() - t_assess
        result = FitResult(
            params=checked.params if checked else best.params,
            loss=checked.loss if checked else best.loss, rotation_deg=self.rotation_deg,
            transpose=rot.transpose,
            trials=[t for _, b in branches for t in b.trials],
            newton=[s for _, b in branches for s in b.newton] + best.newton + (
                checked.newton if checked else []),
            timings={"rotation_s": t_rot - t0, "total_s": time.perf_counter() - t0,
                     "branch_choice_s": t_branch - t_rot - sum(
                         v for _, b in branches for v in b.timings.values()),
                     **best.timings, "assess_s": t_assess,
                     **(checked.timings if checked else {}),
                     **{f"branch{i}_{k}": v for i, (_, b) in enumerate(branches)
                        for k, v in b.timings.items()}},
            provenance=self._provenance(trials, seed, fit_box, objective, sampler=sampler,
                                        branches_searched=sum(not b.derived for _, b in branches),
                                        rotation_com_deg=math.degrees(rot.theta),
                                        rotation_residual=rot.residual,
                                        rotation_residual_other_transpose=(
                                            rot.residual_other_transpose),
                                        **(checked.provenance() if checked else {})),
            on_box_edge=checked.on_box_edge if checked else best.on_box_edge,
            errors=checked.errors if checked else {},
            undetermined=checked.undetermined if checked else [],
            branches=[{"rotation_deg": math.degrees(t) % 360.0, "loss": b.loss,
                       "params": b.params, "derived": b.derived, **choice[i]}
                      for i, (t, b) in enumerate(branches)],
        )
        self.full_fit = result
        return result

    def _choose_branch(
        self, branches: list[tuple[float, BranchFit]], transpose: bool, box: Box,
    ) -> tuple[float, BranchFit, list[dict[str, Any]]]:
        """Pick θ or θ+π.

        The VP loss is exactly invariant under (θ→θ+π, C10→-C10, phi12→phi12+π/2,
        tilt→-tilt), so when each branch's optimum has its mirror inside the box the
        two losses differ only by optimizer tolerance and cannot decide: then the
        branch whose phase has positive skewness (atoms bright: a positive projected
        potential) wins. Otherwise the lower loss wins.
        """
        if not all(mirror_in_box(fit.params, box) for _, fit in branches):
            i = int(np.argmin([fit.loss for _, fit in branches]))
            info = [{"chosen": j == i, "chosen_by": "loss"} for j in range(2)]
        else:
            skews = self._branch_skewness(branches, transpose)
            i = int(np.argmax(skews))
            info = [{"chosen": j == i, "chosen_by": "phase_skewness", "phase_skewness": skews[j]}
                    for j in range(2)]
        theta, best = branches[i]
        self._full_model(theta, transpose)
        return theta, best, info

    def _branch_skewness(
        self, branches: list[tuple[float, BranchFit]], transpose: bool
    ) -> list[float]:
        """Phase skewness of each branch's 1× reconstruction. A derived branch (the exact
        mirror of the other) reconstructs the complex conjugate object, so its skewness
        is the other's negated: one reconstruction, on the rotation the field is at."""
        if branches[1][1].derived is None:
            return [self._phase_skewness(theta, fit.params, transpose)
                    for theta, fit in branches]
        full = self._full
        at = 1 if full is not None and full.spectra.rotation == (branches[1][0], transpose) else 0
        skew = self._phase_skewness(branches[at][0], branches[at][1].params, transpose)
        return [skew, -skew] if at == 0 else [-skew, skew]

    def _phase_skewness(self, theta: float, params: dict[str, float], transpose: bool) -> float:
        model = self._full_model(theta, transpose)
        return phase_skewness(np.angle(model.reconstruct(params, 1, "ssb")))

    def fit_region(
        self, bounds: Bounds, trials: int = 200, seed: int = 42, region_id: str | None = None,
        box: Mapping[str, tuple[float, float]] | None = None, objective: str = "vp",
        progress: bool = False, sampler: str = "native", extra: Sequence[str] = (),
    ) -> RegionResult:
        """Joint fit on the region's sub-scan (rotation held), full-scan reconstruction, crop."""
        engine = self._check_open()
        b = self.check_bounds(bounds)
        fit_box = Box.from_mapping(box, fit_names(tuple(extra)))
        theta, transpose = self._theta, bool(self.transpose)
        t0 = time.perf_counter()
        model = ThickSampleModel(engine, b, theta, transpose)
        try:
            t_prep = time.perf_counter()
            fit = joint_fit(model, trials, seed, fit_box, objective, progress=progress,
                            label=f"region {b}", sampler=sampler)
            t_assess = time.perf_counter()
            checked = _assess(model, fit_box, fit, objective, self.dataset)
            t_assess = time.perf_counter() - t_assess
        finally:
            model.release()
        t_fit = time.perf_counter()
        params = checked.params if checked else fit.params
        rec = self.reconstruct(params)
        crop = rec.crop(b)
        t_end = time.perf_counter()
        timings = {"prepare_s": t_prep - t0, "fit_s": t_fit - t_prep,
                   "reconstruct_crop_s": t_end - t_fit, "total_s": t_end - t0, **fit.timings,
                   "assess_s": t_assess, **(checked.timings if checked else {})}
        result = FitResult(
            params=params, loss=checked.loss if checked else fit.loss,
            rotation_deg=float(self.rotation_deg or 0.0),
            transpose=transpose, trials=fit.trials,
            newton=fit.newton + (checked.newton if checked else []), timings=timings,
            provenance=self._provenance(trials, seed, fit_box, objective, sampler=sampler,
                                        **(checked.provenance() if checked else {})),
            on_box_edge=checked.on_box_edge if checked else fit.on_box_edge, bounds=b,
            errors=checked.errors if checked else {},
            undetermined=checked.undetermined if checked else [])
        rid = region_id or self._next_region_id()
        region = RegionResult(id=rid, bounds=b, fit=result, crop=crop, timings=timings)
        self.regions[rid] = region
        return region

    def remove_region(self, region_id: str) -> None:
        self.regions.pop(region_id, None)

    def _next_region_id(self) -> str:
        n = 1
        while f"r{n}" in self.regions:
            n += 1
        return f"r{n}"

    def check_bounds(self, bounds: Any) -> Bounds:
        """Validated (row_start, row_stop, col_start, col_stop), stops exclusive."""
        return check_bounds(bounds, self.dataset.scan_shape)

    # -- reconstruction ---------------------------------------------------------
    def reconstruct(
        self, params: Mapping[str, float] | None = None, upsample: int | str = "auto",
        method: str = "ssb",
    ) -> Reconstruction:
        """Full-scan reconstruction (Auto upsampling by default) with ``params``."""
        self._check_open()
        if params is None:
            if self.full_fit is None:
                raise FitRequiredError("no parameters given and no full-field fit: call fit() "
                                       "or pass params")
            params = self.full_fit.params
        unknown = unknown_aberration_keys(params)
        if unknown:
            raise ValueError(f"unknown parameter(s) {unknown}: use C10, C12, phi12, "
                             "tilt_row_mrad, tilt_col_mrad, depth, C21, phi21, …, C56, phi56")
        if upsample == "auto":
            f = self.upsample_factor
        elif isinstance(upsample, int) and upsample >= 1:
            f = upsample
        else:
            raise ValueError(f"upsample must be 'auto' or a positive integer, got {upsample!r}")
        model = self._full_model(self._theta, bool(self.transpose))
        obj = model.reconstruct(dict(params), f, method)
        rows, cols = self.dataset.scan_shape
        step = self.dataset.scan_step_A
        return Reconstruction(
            object=np.ascontiguousarray(obj[:f * rows, :f * cols]), params=dict(params),
            upsample=f, sampling_A=(step[0] / f, step[1] / f), method=method)

    # -- diagnostics --------------------------------------------------------------
    def loss_evaluator(self, bounds: Bounds | None = None) -> Callable[[np.ndarray], np.ndarray]:
        """A batch evaluator (K×6 → K losses) on the full field or a region, at the
        full-field rotation: for ``livessb.plots.plot_loss_slices`` and custom scans.
        A region's spectra stay resident until the session closes."""
        return self._model_for(bounds).evaluate

    def _model_for(self, bounds: Bounds | None) -> ThickSampleModel:
        engine = self._check_open()
        if bounds is None:
            return self._full_model(self._theta, bool(self.transpose))
        return ThickSampleModel(engine, self.check_bounds(bounds), self._theta,
                                bool(self.transpose))

    def plot_diagnostics(self, fit: FitResult | None = None) -> list[Any]:
        """Figures: BF disk + rotated COM field, trial history, loss slices around ``fit``."""
        from .plots import plot_bright_field, plot_loss_slices, plot_trials

        fit = fit or self.full_fit
        if fit is None or self.rotation_deg is None:
            raise FitRequiredError("nothing to plot yet: run fit() first")
        model = self._model_for(fit.bounds)
        try:
            slices = plot_loss_slices(fit, model.evaluate)
        finally:
            if model is not self._full:
                model.release()  # a region's spectra are not kept for a plot
        return [plot_bright_field(self.dataset, self.rotation_deg, bool(self.transpose),
                                  self._check_open().bf_center_of_mass()),
                plot_trials(fit), slices]

    # -- calibration --------------------------------------------------------------
    def save_calibration(self, path: str | Path) -> Path:
        if self.full_fit is None or self.rotation_deg is None:
            raise FitRequiredError("nothing to save yet: run fit() first")
        doc = calibration_document(
            self.dataset, self.rotation_deg, bool(self.transpose), self.upsample_factor,
            self.full_fit, [(rid, r.fit) for rid, r in self.regions.items()],
            {"device": self.device})
        return save_calibration(path, doc)

    def _restore(self, path: str | Path, force: bool) -> None:
        doc = load_calibration(path, self.dataset, force)
        try:
            self.rotation_deg = float(doc["rotation_deg"])
            self.transpose = bool(doc["transpose"])
            self.full_fit = FitResult.from_dict(doc["full_fit"]) if doc["full_fit"] else None
            fits = [(r["id"], FitResult.from_dict(r["fit"])) for r in doc["regions"]]
        except (KeyError, TypeError, ValueError) as exc:
            raise CalibrationError(f"calibration file {path} is corrupt: {exc!r}") from None
        for rid, fit in fits:
            b = self.check_bounds(fit.bounds)
            crop = self.reconstruct(fit.params).crop(b)
            self.regions[rid] = RegionResult(id=rid, bounds=b, fit=fit, crop=crop)

    def _provenance(
        self, trials: int, seed: int, box: Box, objective: str, **extra: Any,
    ) -> dict[str, Any]:
        from . import __version__

        return {"livessb": __version__, "device": self.device, "trials": trials, "seed": seed,
                "objective": objective, "box": box.to_dict(),
                "dataset_sha256": self.dataset.signature()["content_sha256"], **extra}


MIRROR_LOSS_RTOL = 1e-5  # float32 sums in another order; a real asymmetry is far larger


def _assess(model: ThickSampleModel, box: Box, fit: BranchFit,
            objective: str, dataset: Dataset4D) -> Assessment | None:
    """Errors, undetermined names and the thin/thick choice (VP fits only)."""
    if objective != "vp":
        return None
    return assess(model, box, fit.params, fit.loss, dataset)


def _stored_theta(theta: float) -> float:
    """θ as a session holds it: radians of rotation_deg = degrees(θ) mod 360."""
    return math.radians(math.degrees(theta) % 360.0)


def _mirrored_branch(model: ThickSampleModel, fit: BranchFit, box: Box) -> BranchFit | None:
    """Branch θ+π as the exact mirror of branch θ's fit, its loss evaluated on θ+π;
    None when the box is not mirror symmetric or the loss does not match."""
    if not box_is_mirror_symmetric(box):
        return None
    t0 = time.perf_counter()
    params = mirror_params(fit.params, box)
    vec = np.array([[params[p] for p in box.names]])
    loss = float(model.evaluate(vec, "vp", box.names)[0])
    if abs(loss - fit.loss) > MIRROR_LOSS_RTOL * max(abs(fit.loss), 1e-12):
        return None
    return BranchFit(params=params, loss=loss, trials=[], newton=[],
                     on_box_edge=list(fit.on_box_edge),
                     timings={"mirror_s": time.perf_counter() - t0},
                     derived=f"mirror of branch 1 (loss {fit.loss:.9g} there, "
                             f"{loss:.9g} evaluated here)")
