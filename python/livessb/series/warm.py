"""One scan's fit, warm-started from a reference calibration: the Session calls a series
makes per scan, with no Dask in sight (the serial loop and the workers run the same).

* The **reference** scan gets the full-field fit (rotation from the COM curl, both
  branches, search + Newton), with any user-given ``fixed`` values held; its calibration
  file is what every other scan reuses.
* A **warm** scan opens its session on that calibration (rotation and transpose
  restored, no COM estimate, no branch search: ``Session(ds, calibration=...,
  force=True)``, or a worker's resident session moved to the scan), then runs
  ``Session.refine``, the bounded trust-region Newton with exact derivatives, from the
  start parameters (the reference's or the previous scan's fit) with the held
  parameters fixed: only the drift (defocus, tilt, …) is fitted. A start that ends on
  the box edge falls back to the full search at the held values, and the record says so.
* A **cold** scan (``warm_start=False``) gets its own full-field fit, held values fixed.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..dataset import Dataset4D
from ..results import FitResult, Reconstruction
from .resident import SessionOpener, new_session

SAMPLING_RTOL = 0.02  # a derived detector sampling (from each scan's BF disk) may differ this much


@dataclass(frozen=True)
class FitPlan:
    """What every scan's fit uses: search size and seed, device, reconstruction sampling."""

    trials: int = 200
    seed: int = 42
    device: str = "auto"
    upsample: int | str = "auto"
    load_options: dict[str, Any] = field(default_factory=dict)  # livessb.load keywords


@dataclass
class ScanFit:
    """A scan's fit, its reconstruction and what it reused (the record's ``reused``)."""

    fit: FitResult
    reconstruction: Reconstruction
    mode: str  # "reference" | "warm" | "cold"
    reused: dict[str, Any]
    timings: dict[str, float]


def fit_reference(ds: Dataset4D, plan: FitPlan, fixed: Mapping[str, float],
                  calibration_path: Path, sessions: SessionOpener = new_session) -> ScanFit:
    """The full-field fit of the reference scan; its calibration saved for the others.
    ``sessions`` opens the scan's session (``series.resident``: a worker's own)."""
    t0 = time.perf_counter()
    with sessions(ds, plan.device, None) as s:
        t_open = time.perf_counter()
        fit = s.fit(trials=plan.trials, seed=plan.seed, fixed=dict(fixed) or None,
                    progress=False)
        t_fit = time.perf_counter()
        s.save_calibration(calibration_path)
        rec = s.reconstruct(fit.params, upsample=plan.upsample)
        t_rec = time.perf_counter()
    return ScanFit(fit, rec, "reference", {"fixed": dict(fixed)},
                   {"open_s": t_open - t0, "fit_s": t_fit - t_open,
                    "reconstruct_s": t_rec - t_fit})


def fit_from(ds: Dataset4D, plan: FitPlan, calibration_path: Path, start: Mapping[str, float],
             held: Mapping[str, float], start_from: str, warm: bool = True,
             sessions: SessionOpener = new_session) -> ScanFit:
    """A scan's fit at the reference calibration's rotation: Newton from ``start``
    (``warm``) or a full search (cold), ``held`` fixed."""
    t0 = time.perf_counter()
    with sessions(ds, plan.device, calibration_path) as s:
        t_open = time.perf_counter()
        reused: dict[str, Any] = {"fixed": dict(held), "start_from": start_from}
        if warm:
            reused.update(rotation_deg=s.rotation_deg, transpose=s.transpose,
                          start={k: float(v) for k, v in start.items()})
            fit = s.refine({k: v for k, v in start.items() if k not in held}, fixed=held)
            if fit.on_box_edge:  # a start too far off: the full search, said in the record
                reused["fallback"] = (f"Newton from the start ended on the box edge "
                                      f"({', '.join(fit.on_box_edge)}): full search instead")
                reused.pop("rotation_deg"), reused.pop("transpose")
                warm = False
        if not warm:
            fit = s.fit(trials=plan.trials, seed=plan.seed, fixed=dict(held) or None,
                        progress=False)
        t_fit = time.perf_counter()
        rec = s.reconstruct(fit.params, upsample=plan.upsample)
        t_rec = time.perf_counter()
    return ScanFit(fit, rec, "warm" if warm else "cold", reused,
                   {"open_s": t_open - t0, "fit_s": t_fit - t_open,
                    "reconstruct_s": t_rec - t_fit})


def held_values(fixed: Mapping[str, float] | tuple[str, ...],
                reference_params: Mapping[str, float]) -> dict[str, float]:
    """Values held in every non-reference scan: given ones, or names held at the
    reference's fitted values."""
    if isinstance(fixed, Mapping):
        return {k: float(v) for k, v in fixed.items()}
    return {name: float(reference_params[name]) for name in fixed}


def geometry_mismatch(ds: Dataset4D, reference: Mapping[str, Any]) -> str | None:
    """Why ``ds`` cannot reuse the reference calibration (``reference``: its dataset
    signature), or None: scan and detector shape and calibration values must match (a
    detector sampling derived from each scan's BF disk within ``SAMPLING_RTOL``)."""
    shape = list(reference["shape"])
    if list(ds.counts.shape) != shape:
        return (f"shape {list(ds.counts.shape)} differs from the reference's {shape}: a "
                "series needs scans of one geometry (fit it on its own, or as another series)")
    cal = reference["calibration"]
    for key in ("voltage_kV", "semiangle_mrad"):
        if not math.isclose(getattr(ds, key), cal[key], rel_tol=1e-9):
            return f"{key} {getattr(ds, key)!r} differs from the reference's {cal[key]!r}"
    if any(not math.isclose(a, b, rel_tol=1e-9)
           for a, b in zip(ds.scan_step_A, cal["scan_step_A"], strict=True)):
        return (f"scan_step_A {list(ds.scan_step_A)} differs from the reference's "
                f"{cal['scan_step_A']}")
    ref_s, s = float(cal["detector_sampling_mrad"]), ds.detector_sampling_mrad
    tol = SAMPLING_RTOL if ds.detector_sampling_derived else 1e-9
    if not math.isclose(s, ref_s, rel_tol=tol):
        return (f"detector sampling {s:.5g} mrad/px differs from the reference's {ref_s:.5g} "
                f"by more than {tol:.0%}: another camera length? (check the scan's metadata)")
    return None
