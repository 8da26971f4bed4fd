"""The joint fit of one scan window at a held rotation: a region, or one tile of a map.

``Session.fit_region`` and the map strategy (``fit.maps``) both call ``fit_window``, so a
region and a map tile with the same bounds, box, fixed values and seed give the same
record, and whatever a fit gains (e.g. its errors) reaches both from here.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import Any

from ..engine.protocol import Engine
from ..results import Bounds, FitResult
from .fixed import FreeView
from .joint import joint_fit
from .lattice import box_mapping, with_lattice
from .model import ThickSampleModel
from .periods_advice import few_periods
from .progress import Progress
from .search import Box
from .uncertainty import assess, with_assessment
from .window_check import with_window_check


@dataclass(frozen=True)
class WindowSpec:
    """What every window of one call is fitted with."""

    trials: int
    seed: int
    box: Box
    held: dict[str, float] = field(default_factory=dict)
    objective: str = "vp"
    sampler: str = "native"
    dataset: Any = None  # for the noise level of the errors (None: no assessment)
    # The session's window: "hann" and "auto" windows (regions and map tiles) are compared
    # with the unapodised fit (fit.window_check), "auto" reports the advised one
    scan_window: str = "none"
    object_model: str = "per_bin"  # "lattice": crystal mode's refinement (fit.lattice)
    # a per-bin fit of a window of few lattice periods advises crystal mode in its warnings
    # (fit.periods_advice): Session.fit_region's regions, not a map's many tiles
    advise: bool = False


def fit_window(
    engine: Engine, bounds: Bounds, theta: float, rotation_deg: float, transpose: bool,
    spec: WindowSpec, provenance: dict[str, Any], progress: Progress = False,
    label: str | None = None,
) -> FitResult:
    """Prepare the window's spectra, search + Newton over the free parameters at the
    rotation ``theta`` (held), release the spectra. Timings: prepare_s, fit_s and the
    fit's own stages (the engine reuses a released buffer for the next window of the
    same shape)."""
    t0 = time.perf_counter()
    model = ThickSampleModel(engine, bounds, theta, transpose)
    apodised = model.spectra.apodised
    try:
        t_prep = time.perf_counter()
        view = FreeView(model, spec.box, spec.held)
        fit = joint_fit(view, spec.trials, spec.seed, spec.box, spec.objective,
                        progress=progress, label=label or f"region {bounds}",
                        sampler=spec.sampler)
        checked = (assess(view, spec.box, fit.params, fit.loss, spec.dataset, fit.on_box_edge,
                          hessian=fit.hessian)
                   if spec.objective == "vp" and spec.dataset is not None else None)
    finally:
        model.release()
    t_fit = time.perf_counter()
    result = FitResult(
        params=fit.params, loss=fit.loss, rotation_deg=float(rotation_deg),
        transpose=transpose, trials=fit.trials, newton=fit.newton,
        timings={"prepare_s": t_prep - t0, "fit_s": t_fit - t_prep, **fit.timings},
        provenance=provenance, on_box_edge=fit.on_box_edge, bounds=bounds)
    if checked is None:
        return result
    result = with_assessment(result, checked)
    if spec.scan_window != "none" and apodised:
        unapodised = ThickSampleModel(engine, bounds, theta, transpose, apodise=False)
        try:
            result = with_window_check(result, unapodised, spec.box, spec.held, spec.dataset,
                                       adopt=spec.scan_window == "auto")
        finally:
            unapodised.release()
    if spec.object_model == "per_bin" and spec.advise:
        few = few_periods(engine, bounds, theta, transpose, result.params)
        if few is not None:
            result = replace(result, provenance={
                **result.provenance, "few_periods": few.to_dict(),
                "warnings": [*result.provenance.get("warnings", []), few.warning()]})
    if spec.object_model == "lattice":
        result = with_lattice(result, engine, bounds, theta, transpose, box_mapping(spec.box),
                              # a spec without its dataset: a camera's (the default)
                              detector_pixels=getattr(spec.dataset, "detector_pixels",
                                                      "integrating"), progress=progress)
    return result
