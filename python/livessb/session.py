"""Session: owns the dataset, the resident engine and its models, and their lifetime."""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ._version import __version__
from .calibration import calibration_document, save_calibration
from .dataset import Dataset4D
from .diagnostics import SessionDiagnostics
from .engine import make_engine
from .engine.protocol import Engine
from .fit.fixed import FreeView, check_fixed, free_names, refine_start
from .fit.full_field import FullFieldSearch, fit_full_field
from .fit.joint import newton_fit
from .fit.lattice import box_mapping, check_object_model, with_lattice
from .fit.maps import fit_map, tile_grid
from .fit.model import ThickSampleModel
from .fit.progress import Progress, callback_of
from .fit.region import WindowSpec, fit_window
from .fit.sampling import check_sampling_request, refit_detector_sampling
from .fit.search import Box
from .fit.transpose_choice import inherited_orientation
from .fit.uncertainty import assess, with_assessment
from .fit.window_check import with_window_check
from .map_blend import TILES_PER_BATCH, auto_density, blend_tiles, refine_tiles
from .maps import MapResult
from .memory import check_reconstruct_memory
from .params import JOINT, fit_names
from .physics.geometry import auto_upsample
from .physics.optics import check_reconstruction_params
from .preprocess import Corrections, DescanFit, Preprocessing
from .progress import staged, with_progress
from .regions import RegionError as RegionError  # re-exported: livessb.session.RegionError
from .regions import check_bounds, check_scan_fits
from .reprs import Pretty
from .results import Bounds, FitResult, Reconstruction, RegionResult
from .session_guard import FitRequiredError as FitRequiredError  # re-exported
from .session_guard import SessionClosedError as SessionClosedError
from .session_guard import keeps_fitted_geometry
from .session_open import OpenedScan, open_scan, restore_results


class Session(Pretty):  # concise repr and notebook table (livessb.reprs)
    """Resident SSB session on one dataset (see docs/api.md)."""

    def __init__(
        self, dataset: Dataset4D, device: str = "auto", calibration: str | Path | None = None,
        force: bool = False, staging_budget_MiB: float = 256,
        preprocessing: Preprocessing | None = None, scan_frequencies: str | None = None,
        alias_pixels: str | None = None, scan_window: str | None = None,
    ) -> None:
        scan = open_scan(dataset, device, calibration, force, staging_budget_MiB,
                         preprocessing, scan_frequencies, alias_pixels=alias_pixels,
                         scan_window=scan_window)
        self._staging_budget_MiB = staging_budget_MiB
        self._engine: Engine | None = scan.engine(device, staging_budget_MiB)
        self.device: str = self._engine.name
        self._evaluations_at_close = 0
        self.last_close_s: float | None = None
        self.scans_loaded = 1
        self._adopt(scan, calibration)

    def _adopt(self, scan: OpenedScan, calibration: str | Path | None) -> None:
        """The scan's state, nothing fitted yet (or the calibration's results restored)."""
        self.dataset = scan.dataset
        self.scan_frequencies, self.alias_pixels = scan.scan_frequencies, scan.alias_pixels
        self.scan_window = scan.scan_window  # the fit's spectra (physics.apodisation)
        self._engine_options = scan.engine_options
        self.preprocessing: Corrections = scan.preprocessing
        self.upsample_factor = auto_upsample(scan.dataset.scan_step_A, scan.dataset.k_alpha)
        self._full: ThickSampleModel | None = None
        self._unapodised: ThickSampleModel | None = None  # reconstructs, "hann"/"auto" fits
        self.full_fit: FitResult | None = None
        self.regions: dict[str, RegionResult] = {}
        self.maps: list[MapResult] = []
        self.rotation_deg: float | None = None
        self.transpose: bool | None = None
        if calibration is not None and scan.doc is not None:
            restore_results(self, calibration, scan.doc)

    def load_scan(
        self, dataset: Dataset4D, calibration: str | Path | None = None, force: bool = False,
        preprocessing: Preprocessing | None = None, scan_frequencies: str | None = None,
        alias_pixels: str | None = None, scan_window: str | None = None,
    ) -> Session:
        """The next scan on this open session (a series' scans of one geometry): what
        opening paid for stays (compiled kernels, the device memory pool, FFT plans, the
        counts buffer where the BF pixel count is the same), the results are those a new
        ``Session(dataset, ...)`` gives. Fits, regions and maps of the last scan leave
        the session (returned results stay valid); ``calibration`` restores its own. Bad
        input is refused before the last scan's state is touched."""
        engine = self._check_open()
        scan = open_scan(dataset, self.device, calibration, force, self._staging_budget_MiB,
                         preprocessing, scan_frequencies,
                         int(engine.memory_info()["live_bytes"]), alias_pixels, scan_window)
        self._full = self._unapodised = None
        try:
            kept = (scan.engine_options == self._engine_options
                    and engine.load_counts(scan.engine_dataset))
            if not kept:  # another shape, frequency estimator or pair set: a new engine
                self.close()
                self._engine = scan.engine(self.device, self._staging_budget_MiB)
        except BaseException:
            self.close()  # a part-loaded engine is not left behind
            raise
        for m in self.maps:  # the last scan's maps reconstruct through this session no more
            m.detach()
        self.scans_loaded += 1
        self._adopt(scan, calibration)
        return self

    # -- lifetime -----------------------------------------------------------------
    @property
    def closed(self) -> bool:
        return self._engine is None

    @property
    def evaluations(self) -> int:
        """Candidate evaluations (losses or derivatives) this session has run."""
        return self._evaluations_at_close if self._engine is None else self._engine.evaluations

    def _check_open(self) -> Engine:
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
        self._engine = self._full = self._unapodised = None
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

    def _at_rotation(self, model: ThickSampleModel | None, theta: float, transpose: bool,
                     apodise: bool | None = None) -> ThickSampleModel:
        """A resident full-field ``model`` at this rotation, prepared when there is none."""
        engine = self._check_open()
        if model is None:
            return ThickSampleModel(engine, None, theta, transpose, apodise)
        model.set_rotation(theta, transpose)
        return model

    def _full_model(self, theta: float, transpose: bool) -> ThickSampleModel:
        self._full = self._at_rotation(self._full, theta, transpose)
        return self._full

    def _reconstruction_model(self, at: tuple[float, bool] | None = None) -> ThickSampleModel:
        """The full field's unapodised spectra at ``at`` (θ, transpose; default the fitted
        rotation): the fit's own model, or with "hann"/"auto" windows a second one."""
        theta, transpose = at or (self._theta, bool(self.transpose))
        if self.scan_window == "none":
            return self._full_model(theta, transpose)
        self._unapodised = self._at_rotation(self._unapodised, theta, transpose, apodise=False)
        return self._unapodised

    # -- fits -----------------------------------------------------------------------------
    @keeps_fitted_geometry  # cancelled or failed: the session as before the call
    @with_progress
    def fit(
        self, trials: int = 200, seed: int = 42,
        box: Mapping[str, tuple[float, float]] | None = None, objective: str = "vp",
        progress: Progress = True, sampler: str = "native", extra: Sequence[str] = (),
        search_both_branches: bool = False, fixed: Mapping[str, float] | None = None,
        fit_detector_sampling: bool = False, transpose: bool | None = None,
        object_model: str = "per_bin",
    ) -> FitResult:
        """Full-field joint fit: rotation from the COM curl, both branches θ and θ+π
        (the strategy: ``livessb.fit.full_field``).

        ``extra`` opts further coefficients into the joint fit: any of "C21", "C23"
        (each with its angle) and "C30"; those fits run on the generic (slower) path.
        ``fixed`` holds parameters at the given values (search and Newton run over the
        rest). ``progress``: True for tqdm bars, or a callable (stage, done, total).
        ``search_both_branches=True`` searches branch θ+π even when it could be derived
        as the mirror of branch θ. ``fit_detector_sampling=True`` refines the detector
        sampling too (``livessb.fit.sampling``; the session continues at the fitted one).
        ``transpose`` (True/False) holds the detector transpose you know instead of the
        COM curl's (docs/uncertainty.md "The detector orientation"). ``object_model=
        "lattice"``: crystal mode, the fit refined on the lattice model (fit.lattice).
        """
        engine = self._check_open()
        check_scan_fits(self.dataset.scan_shape)
        check_sampling_request(fit_detector_sampling, objective)
        fit_box, held = self._fit_box(box, extra, fixed)  # bad input fails first
        callback_of(progress), check_object_model(object_model)
        spec = FullFieldSearch(trials, seed, fit_box, held, objective, sampler,
                               search_both_branches, progress, self.dataset, transpose)
        result = fit_full_field(
            self._full_model, engine.bf_center_of_mass, self.dataset.scan_step_A, spec,
            self._provenance(trials, seed, fit_box, objective, mode="full_field", fixed=held))
        if objective == "vp":  # errors, undetermined names, thin or thick (fit.uncertainty)
            view = FreeView(self._full_model(math.radians(result.rotation_deg),
                                             result.transpose), fit_box, held)
            result = with_assessment(result, assess(view, fit_box, result.params, result.loss,
                                                    self.dataset, result.on_box_edge))
            if self.scan_window != "none":  # did the window matter? (fit.window_check)
                unapodised = self._reconstruction_model((math.radians(result.rotation_deg),
                                                         result.transpose))
                result = with_window_check(result, unapodised, fit_box, held, self.dataset,
                                           adopt=self.scan_window == "auto")
            if fit_detector_sampling:
                result = refit_detector_sampling(result, fit_box, held, self.dataset,
                                                 self._engine_for, self._rebind)
            if object_model == "lattice":
                result = with_lattice(
                    result, self._check_open(), None, math.radians(result.rotation_deg),
                    result.transpose, box_mapping(fit_box), self.dataset.detector_pixels, progress)
        self.rotation_deg = result.rotation_deg
        self.transpose = result.transpose
        self.full_fit = result
        return result

    def _engine_for(self, dataset: Dataset4D) -> Engine:
        return make_engine(self.preprocessing.dataset_for_engine(dataset), self.device,
                           **self._engine_options)

    def _rebind(self, dataset: Dataset4D) -> Callable[[float, bool], ThickSampleModel]:
        """Continue on ``dataset`` (the same counts at a fitted detector sampling)."""
        engine = self._engine_for(dataset)
        self._check_open().close()
        self._engine, self._full, self._unapodised, self.dataset = engine, None, None, dataset
        return self._full_model

    def _fit_box(
        self, box: Mapping[str, tuple[float, float]] | None, extra: Sequence[str],
        fixed: Mapping[str, float] | None,
    ) -> tuple[Box, dict[str, float]]:
        """The free parameters' box and the held values, checked."""
        names = fit_names(tuple(extra))
        held = check_fixed(fixed, names, box)
        return Box.from_mapping(box, free_names(names, held)), held

    @with_progress
    def fit_region(
        self, bounds: Bounds, trials: int = 200, seed: int = 42, region_id: str | None = None,
        box: Mapping[str, tuple[float, float]] | None = None, objective: str = "vp",
        progress: Progress = False, sampler: str = "native", extra: Sequence[str] = (),
        fixed: Mapping[str, float] | None = None, object_model: str = "per_bin",
    ) -> RegionResult:
        """Joint fit on the region's sub-scan (rotation held), full-scan reconstruction, crop.
        ``fixed``, ``progress`` and ``object_model`` as in :meth:`fit`."""
        engine = self._check_open()
        b = self.check_bounds(bounds)
        fit_box, held = self._fit_box(box, extra, fixed)
        report = callback_of(progress)
        theta, transpose = self._theta, bool(self.transpose)
        t0 = time.perf_counter()
        spec = WindowSpec(trials, seed, fit_box, held, objective, sampler, self.dataset,
                          self.scan_window, check_object_model(object_model), advise=True)
        result = fit_window(
            engine, b, theta, float(self.rotation_deg or 0.0), transpose, spec,
            self._provenance(trials, seed, fit_box, objective, mode="region", fixed=held,
                             sampler=sampler), progress=progress)
        t_fit = time.perf_counter()
        if report is not None:
            report("reconstruct", 0, 1)
        crop = self.reconstruct(result.params, crop=b)
        if report is not None:
            report("reconstruct", 1, 1)
        t_end = time.perf_counter()
        result.timings = timings = {**result.timings, "reconstruct_crop_s": t_end - t_fit,
                                    "total_s": t_end - t0}
        rid = region_id or self._next_region_id()
        region = RegionResult(id=rid, bounds=b, fit=result, crop=crop, timings=timings)
        self.regions[rid] = region
        return region

    def refine(
        self, params: Mapping[str, float], fixed: Mapping[str, float] | None = None,
        bounds: Bounds | None = None, progress: Progress = False,
    ) -> FitResult:
        """Bounded trust-region Newton from ``params`` (no search): on the full field
        (``bounds=None``) or a region, at the full-field rotation, with ``fixed`` held.
        ``params`` names every fit parameter (C21/phi21, C23/phi23, C30 opt in by being
        present) except those in ``fixed``; the start must lie in the default box. The
        result is returned, not stored (``full_fit`` and ``regions`` keep the fits)."""
        engine = self._check_open()
        theta, transpose = self._theta, bool(self.transpose)
        fit_box, held, start = refine_start(params, fixed)
        callback_of(progress)
        t0 = time.perf_counter()
        b = None if bounds is None else self.check_bounds(bounds)
        if b is None:
            check_scan_fits(self.dataset.scan_shape)
        model = (self._full_model(theta, transpose) if b is None
                 else ThickSampleModel(engine, b, theta, transpose))
        try:
            view = FreeView(model, fit_box, held)
            fit = newton_fit(view, start, fit_box, progress=progress)
            # Errors at the refined point; the model is the caller's (no thin/thick choice).
            checked = assess(view, fit_box, fit.params, fit.loss, self.dataset,
                             fit.on_box_edge, hessian=fit.hessian, choose=False)
        finally:
            if b is not None:
                model.release()
        return with_assessment(FitResult(
            params=fit.params, loss=fit.loss, rotation_deg=float(self.rotation_deg or 0.0),
            transpose=transpose, trials=[], newton=fit.newton,
            timings={**fit.timings, "total_s": time.perf_counter() - t0},
            provenance=self._provenance(0, None, fit_box, "vp", mode="refine", fixed=held,
                                        start=dict(start)),
            on_box_edge=fit.on_box_edge, bounds=b), checked)

    def fit_map(
        self, tile: Any = (64, 64), step: Any = None, trials: int = 200, seed: int = 42,
        fixed: Mapping[str, float] | None = None,
        box: Mapping[str, tuple[float, float]] | None = None, progress: Progress = True,
        extra: Sequence[str] = (),
    ) -> MapResult:
        """The joint fit (rotation held) on every tile of a grid (``livessb.fit.maps``): ``tile``
        (rows, cols) positions every ``step`` (None: the tile; smaller: overlapping), the last
        aligned to the scan edge; ``fixed``, ``box``, ``extra`` and the window check as in
        :meth:`fit_region`, per tile; ``progress``: tqdm over tiles or a callable ("map", done,
        total). Kept in ``maps``, saved with the calibration; ``MapResult.reconstruct`` draws it."""
        engine = self._check_open()
        grid = tile_grid(self.dataset.scan_shape, tile, step)
        fit_box, held = self._fit_box(box, extra, fixed)
        callback_of(progress)  # a bad progress argument refused before any work
        theta, transpose = self._theta, bool(self.transpose)
        provenance = self._provenance(trials, seed, fit_box, "vp", mode="map", fixed=held)
        spec = WindowSpec(trials, seed, fit_box, held, dataset=self.dataset,
                          scan_window=self.scan_window)
        result = fit_map(engine, grid, theta, self.rotation_deg or 0.0, transpose, spec,
                         provenance, progress)
        result.attach(self)
        self.maps.append(result)
        return result

    def reconstruct_map(
        self, map_result: MapResult, upsample: int | str = "auto", method: str = "ssb",
        density: int | str = "auto",
    ) -> Reconstruction:
        """Full field, each place corrected with its local fit: the field reconstructed
        once per tile, blended with hats on the tile-centre grid (``livessb.map_blend``).
        ``density`` > 1 inserts virtual tiles between the tiles' centres, their parameters
        interpolated bilinearly (density² times the reconstructions, closer to a correction
        that varies continuously); "auto" picks the smallest (≤ 4) at which neighbours
        differ by ≤ π/4 of aberration phase in the aperture. ``params`` of the result: the
        tiles' mean."""
        engine = self._check_open()
        f = self._upsample_factor(upsample)
        tile_params = [[fit.params for fit in row] for row in map_result.fits]
        if density == "auto":
            density = auto_density(tile_params, self.dataset.wavelength_A,
                                   self.dataset.k_alpha)
        if not isinstance(density, int) or isinstance(density, bool) or density < 1:
            raise ValueError(f"density must be 'auto' or a positive integer, got {density!r}")
        rows, cols = self.dataset.scan_shape
        tiles, row_centers, col_centers = refine_tiles(
            tile_params, map_result.centers_px[:, 0, 0], map_result.centers_px[0, :, 1],
            density)
        model = self._reconstruction_model()
        # a batch of tiles' f-times images and the blend, refused before any
        check_reconstruct_memory(self, f, images=TILES_PER_BATCH + 1)
        obj = blend_tiles(lambda ps: model.reconstruct_many(ps, f, method), tiles,
                          row_centers, col_centers, (f * rows, f * cols), f,
                          engine.reference.xp)
        mean = {n: float(np.mean(v)) for n, v in map_result.params.items()}
        step = self.dataset.scan_step_A
        return Reconstruction(object=obj, params=mean, upsample=f,
                              sampling_A=(step[0] / f, step[1] / f), method=method)

    def remove_region(self, region_id: str) -> None:
        self.regions.pop(region_id, None)

    def _next_region_id(self) -> str:
        return next(f"r{n}" for n in itertools.count(1) if f"r{n}" not in self.regions)

    def check_bounds(self, bounds: Any) -> Bounds:
        """Validated (row_start, row_stop, col_start, col_stop), stops exclusive."""
        return check_bounds(bounds, self.dataset.scan_shape)

    # -- reconstruction ---------------------------------------------------------
    @staged("reconstruct")
    def reconstruct(
        self, params: Mapping[str, float] | None = None, upsample: int | str = "auto",
        method: str = "ssb", bf_pixels: int | None = None, crop: Bounds | None = None,
    ) -> Reconstruction:
        """Full-scan reconstruction (Auto upsampling by default) with ``params``; with
        ``bf_pixels`` only that many BF pixels, the nearest the disk centre, enter it;
        ``crop`` (scan-px bounds, as a region's): ``Reconstruction.crop`` of the result,
        cut where it is computed (a GPU sends only the crop)."""
        self._check_open()
        if params is None:
            if self.full_fit is None:
                raise FitRequiredError("no parameters given and no full-field fit: call fit() "
                                       "or pass params")
            params = self.full_fit.params
        check_reconstruction_params(params)
        f = self._upsample_factor(upsample)
        check_reconstruct_memory(self, f)  # refuse before allocating the f-times grid
        (rows, cols), step = self.dataset.scan_shape, self.dataset.scan_step_A
        r0, r1, c0, c1 = (0, rows, 0, cols) if crop is None else self.check_bounds(crop)
        model = self._reconstruction_model()
        obj = model.reconstruct(dict(params), f, method, bf_pixels=bf_pixels,
                                crop=(r0 * f, r1 * f, c0 * f, c1 * f))
        return Reconstruction(object=np.ascontiguousarray(obj), params=dict(params), upsample=f,
                              sampling_A=(step[0] / f, step[1] / f), method=method,
                              origin_px=(r0 * f, c0 * f), bf_pixels=bf_pixels)

    def _upsample_factor(self, upsample: int | str) -> int:
        if upsample == "auto":
            return self.upsample_factor
        if isinstance(upsample, int) and upsample >= 1:
            return upsample
        raise ValueError(f"upsample must be 'auto' or a positive integer, got {upsample!r}")

    # -- diagnostics --------------------------------------------------------------
    def loss_evaluator(self, bounds: Bounds | None = None, names: tuple[str, ...] = JOINT,
                       ) -> Callable[[np.ndarray], np.ndarray]:
        """Batch VP losses (K×len(names) → K), full field or a region, full-field rotation."""
        model = self._model_for(bounds)
        return lambda candidates: model.evaluate(candidates, names=tuple(names))

    def _model_for(self, bounds: Bounds | None) -> ThickSampleModel:
        engine = self._check_open()
        if bounds is None:
            return self._full_model(self._theta, bool(self.transpose))
        return ThickSampleModel(engine, self.check_bounds(bounds), self._theta,
                                bool(self.transpose))

    def plot_diagnostics(self, fit: FitResult | None = None) -> list[Any]:
        """Figures: BF disk + rotated COM field, trial history, loss slices around ``fit``."""
        from .plots import session_figures

        fit = fit or self.full_fit
        if fit is None or self.rotation_deg is None:
            raise FitRequiredError("nothing to plot yet: run fit() first")
        return session_figures(self.dataset, fit, self._model_for(fit.bounds), self._full,
                               self.rotation_deg, bool(self.transpose),
                               self._check_open().bf_center_of_mass)

    # -- calibration --------------------------------------------------------------
    def save_calibration(self, path: str | Path) -> Path:
        if self.full_fit is None or self.rotation_deg is None:
            raise FitRequiredError("nothing to save yet: run fit() first")
        doc = calibration_document(
            self.dataset, self.rotation_deg, bool(self.transpose), self.upsample_factor,
            self.full_fit, [(rid, r.fit) for rid, r in self.regions.items()],
            {"device": self.device}, maps=[m.to_dict() for m in self.maps],
            preprocessing=self.preprocessing.to_dict())
        return save_calibration(path, doc)

    @property
    def descan(self) -> DescanFit | None:
        """The BF disk centre fitted over the scan (None when descan is off or the scan
        too small to measure it); applied only where ``significant``."""
        return self.preprocessing.descan

    @property
    def diagnostics(self) -> SessionDiagnostics:
        """Engine internals for benchmarks and tests (``livessb.diagnostics``); open only."""
        return SessionDiagnostics(self._check_open(), self._full)

    def _provenance(
        self, trials: int, seed: int | None, box: Box, objective: str, **extra: Any,
    ) -> dict[str, Any]:
        return {"livessb": __version__, "device": self.device, "trials": trials, "seed": seed,
                "objective": objective, "box": box.to_dict(),
                "scan_frequencies": self.scan_frequencies, "alias_pixels": self.alias_pixels,
                "scan_window": self.scan_window,
                "dataset_sha256": self.dataset.signature()["content_sha256"],
                **inherited_orientation(self.full_fit), **extra}

