"""The measured corrections of one dataset (``Corrections``) and the corrected counts
that engines gather their BF pixels from (``CorrectedCounts``).

One pass over the counts, a scan row at a time (memory-mapped input stays mapped):
bad pixels repaired, frame totals (dose normalisation) and block-summed windows around
the disk (descan). When nothing needs correcting the engines get the counts as they
are, so results are bit-identical to a session without preprocessing.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..calibration import CalibrationError
from ..dataset import Dataset4D, measure_bright_field
from ..mapped_pages import release_pages
from ..physics.bright_field import BrightFieldError, estimate_disk
from .descan import (
    DescanFit,
    block_centres,
    block_size,
    disk_window,
    fit_descan,
)
from .options import Preprocessing
from .pixels import RepairPlan, find_bad_pixels, repair, repair_plan


@dataclass(frozen=True, eq=False)
class Corrections:
    """What a session applies before the spectra (``Session.preprocessing``).

    ``bad_pixels`` (detector shape, True = bad: found and/or the user's), ``descan``
    (the fit, or None when off or unmeasurable), ``dose_factors`` (Rr, Rc) multipliers
    or None. ``active``: whether the counts are changed at all.
    """

    options: Preprocessing
    bad_pixels: np.ndarray
    found_pixels: int
    descan: DescanFit | None
    dose_factors: np.ndarray | None

    @property
    def descan_applied(self) -> bool:
        return self.descan is not None and self.descan.significant

    @property
    def active(self) -> bool:
        return bool(self.bad_pixels.any() or self.dose_factors is not None
                    or self.descan_applied)

    def dataset_for_engine(self, dataset: Dataset4D) -> Dataset4D:
        """The dataset itself when inactive; else a shallow copy whose counts are the
        corrected view and, with bad pixels, whose mean pattern and BF disk (centre,
        radius, a derived sampling) are measured again after the repair: a hot pixel or
        a dead column would otherwise move the BF centre the SSB geometry rests on."""
        if not self.active:
            return dataset
        view = copy.copy(dataset)
        view.counts = CorrectedCounts(dataset.counts, self)  # type: ignore[assignment]
        if self.bad_pixels.any():
            view.mean_pattern = repaired_mean(dataset.mean_pattern, repair_plan(self.bad_pixels))
            view.bright_field = measure_bright_field(view.mean_pattern)
            if dataset.detector_sampling_derived:
                view.detector_sampling_mrad = view.semiangle_mrad / view.bright_field.radius_px
        return view

    def to_dict(self) -> dict[str, Any]:
        rows, cols = np.nonzero(self.bad_pixels)
        return {"options": self.options.to_dict(),
                "bad_pixels": [[int(r), int(c)] for r, c in zip(rows, cols, strict=True)],
                "found_pixels": int(self.found_pixels),
                "descan": None if self.descan is None else self.descan.to_dict(),
                "descan_applied": self.descan_applied}


def repaired_mean(mean_pattern: np.ndarray, plan: RepairPlan) -> np.ndarray:
    """The mean pattern with its bad pixels repaired (the repair is linear: this is the
    mean of the repaired frames)."""
    kr, kc = mean_pattern.shape
    flat = np.array(mean_pattern, dtype=np.float64).reshape(1, kr * kc)
    out: np.ndarray = repair(np, flat, plan).reshape(kr, kc)
    return out


def _disk_level(mean_pattern: np.ndarray) -> float:
    """The disk level the descan measurement works with: the BF estimator's plateau
    (physics.bright_field: outliers such as an unrepaired hot pixel cleaned first)."""
    try:
        return float(estimate_disk(np.nan_to_num(mean_pattern)).disk_level)
    except BrightFieldError:  # an empty or flat pattern: no disk, nothing to measure
        return 0.0


def prepare_corrections(dataset: Dataset4D, options: Preprocessing | None = None,
                        recorded: dict[str, Any] | None = None,
                        before_pass: Callable[[bool], None] | None = None) -> Corrections:
    """Measure the corrections ``options`` ask for (``recorded``: a calibration file's
    entry, whose bad pixels and descan fit are reused instead of measured).
    ``before_pass(corrected)`` runs once the bad pixels are known, before the pass over
    the counts: ``corrected`` says the engine will hold corrected (float32) counts
    whatever the descan measurement finds (bad pixels to repair, dose normalisation)."""
    if recorded is not None:
        options = Preprocessing.from_dict(recorded.get("options", {}))
    opts = options if options is not None else Preprocessing()
    counts = dataset.counts
    Rr, Rc, kr, kc = (int(s) for s in counts.shape)
    mean = np.asarray(dataset.mean_pattern, dtype=np.float64)
    found = 0
    if recorded is not None:
        bad = np.zeros((kr, kc), dtype=bool)
        for r, c in recorded.get("bad_pixels", []):
            bad[int(r), int(c)] = True
        found = int(recorded.get("found_pixels", 0))
    else:
        bad = np.zeros((kr, kc), dtype=bool)
        if opts.find_bad_pixels:
            bad = find_bad_pixels(mean, Rr * Rc, opts.hot_factor, opts.dead_counts)
            found = int(bad.sum())
        if opts.detector_mask is not None:
            if opts.detector_mask.shape != (kr, kc):
                raise ValueError(f"detector_mask has shape {opts.detector_mask.shape}; the "
                                 f"detector is {(kr, kc)}: pass a bool array of that shape")
            bad = bad | ~opts.detector_mask
    if bad.all():
        raise ValueError("every detector pixel is masked as bad: check detector_mask "
                         "(True = use the pixel)")
    plan = repair_plan(bad)
    if before_pass is not None:
        before_pass(bool(bad.any()) or bool(opts.dose_normalise))
    measure = opts.descan is not None and recorded is None
    if not (measure or opts.dose_normalise):
        fit = None if recorded is None or recorded.get("descan") is None else (
            DescanFit.from_dict(recorded["descan"]))
        return Corrections(opts, bad, found, fit, None)
    totals, fit = _measure(counts, mean, plan, opts if measure else None)
    if recorded is not None and recorded.get("descan") is not None:
        fit = DescanFit.from_dict(recorded["descan"])
    factors = None
    if opts.dose_normalise:
        mean_total = float(totals[totals > 0].mean()) if (totals > 0).any() else 1.0
        factors = np.where(totals > 0, mean_total / np.where(totals > 0, totals, 1.0), 1.0)
    return Corrections(opts, bad, found, fit, factors)


def _resident(counts: Any) -> tuple[Any, Any]:
    """(array module, array) to measure on: counts resident on a GPU (a CuPy array, or a
    wrapper exposing one as ``device_array``) are measured there, without host copies."""
    array = getattr(counts, "device_array", counts)
    if type(array).__module__.split(".")[0] == "cupy":
        import cupy

        return cupy, array
    return np, counts


def _to_host(x: Any) -> np.ndarray:
    return np.asarray(x.get() if hasattr(x, "get") else x)


def _block_sums(xp: Any, x: Any, starts: np.ndarray) -> Any:
    """Sums over axis 0 of ``x`` in blocks beginning at ``starts`` (``np.add.reduceat``,
    which CuPy lacks); exact for integer-valued float64 data."""
    c = xp.cumsum(x, axis=0)
    ends = xp.asarray(np.append(starts[1:], x.shape[0]) - 1)
    out = c[ends]
    out[1:] -= c[ends[:-1]]
    return out


def _measure(counts: Any, mean_pattern: np.ndarray, plan: RepairPlan,
             opts: Preprocessing | None) -> tuple[np.ndarray, DescanFit | None]:
    """Frame totals (after repair) and, when ``opts``, the descan fit: one pass, in the
    counts' own array module; only the disk window is converted (the totals sum the
    native counts), so a resident GPU dataset is measured in milliseconds. Each block
    row's centres are found as soon as it is summed (the ramp's level per count is the
    repaired mean pattern's: known before the pass), so memory stays one block row."""
    Rr, Rc, kr, kc = (int(s) for s in counts.shape)
    xp, counts = _resident(counts)
    totals = np.empty((Rr, Rc))
    repaired = repaired_mean(mean_pattern, plan)
    level = _disk_level(repaired)
    rs, cs, window = disk_window(repaired, level)
    b = block_size(level)
    col_starts = np.arange(0, Rc, b)
    mean_total = float(repaired.sum())  # the mean frame total (the repair is linear)
    per_total = level / mean_total if mean_total > 0 else 0.0
    found: list[np.ndarray] = []
    acc = None
    cached: dict[str, Any] = {}
    for r in range(Rr):
        row = counts[r]
        if plan.count == 0:  # integer-valued: these sums equal the repaired float32 path's
            row_totals = row.reshape(Rc, -1).sum(axis=1, dtype=xp.float64)
            win = row[:, rs, cs].astype(xp.float64) if opts is not None else None
        else:
            flat = repair(xp, xp.ascontiguousarray(row.reshape(Rc, -1), dtype=xp.float32),
                          plan, cached)
            row_totals = flat.sum(axis=1, dtype=xp.float64)
            win = (flat.reshape(Rc, kr, kc)[:, rs, cs].astype(xp.float64)
                   if opts is not None else None)
        totals[r] = _to_host(row_totals)
        release_pages(row)  # a memory-mapped file's pages: read, no longer needed
        if win is None:
            continue
        part = _block_sums(xp, win, col_starts)
        acc = part if acc is None else acc + part
        if (r + 1) % b == 0 or r == Rr - 1:
            T = np.add.reduceat(totals[r - (r % b):r + 1].sum(axis=0), col_starts)
            found.append(block_centres(_to_host(acc), T, window, per_total,
                                       (rs.start, cs.start)))
            acc = None
    if opts is None:
        return totals, None
    centres = np.concatenate(found)
    row_starts = np.arange(0, Rr, b)
    n_r = np.minimum(row_starts + b, Rr) - row_starts
    n_c = np.minimum(col_starts + b, Rc) - col_starts
    pos_r = np.repeat(row_starts + 0.5 * (n_r - 1), col_starts.size)
    pos_c = np.tile(col_starts + 0.5 * (n_c - 1), row_starts.size)
    weights = np.outer(n_r, n_c).ravel().astype(np.float64)
    grid = centres.reshape(row_starts.size, col_starts.size, 2)
    assert opts.descan is not None
    fit = fit_descan(opts.descan, opts.degree, (Rr, Rc), np.stack([pos_r, pos_c], axis=1),
                     centres, weights, opts.descan_threshold_px, b, grid)
    return totals, fit


class CorrectedCounts:
    """The counts as an engine gathers them, corrected: bad pixels repaired, each frame
    shifted back by the fitted descan variation (bilinear), scaled by its dose factor.
    float32; ``bf_row`` runs in any array module (NumPy on the host, CuPy on a GPU)."""

    def __init__(self, counts: Any, corrections: Corrections) -> None:
        self.counts = counts
        self.corrections = corrections
        self.shape = tuple(int(s) for s in counts.shape)
        self.dtype = np.dtype(np.float32)
        self.ndim = 4
        self.plan = repair_plan(corrections.bad_pixels)
        fit = corrections.descan
        self.shift = (fit.centre_map(variation_only=True) if corrections.descan_applied
                      and fit is not None else None)
        self._arrays: dict[int, dict[str, Any]] = {}

    def _raw_row(self, xp: Any, r: int) -> Any:
        dev = getattr(self.counts, "device_array", None)
        if xp is not np and dev is not None:  # device-resident counts: stay there
            row = dev[r]
        else:
            row = xp.asarray(np.asarray(self.counts[r]))
        return xp.ascontiguousarray(row.reshape(row.shape[0], -1).astype(xp.float32))

    def bf_row(self, xp: Any, r: int, rows: np.ndarray, cols: np.ndarray) -> Any:
        """Corrected values of the BF pixels (``rows``, ``cols``) in scan row ``r``:
        (Rc, B) float32 in ``xp``."""
        cache = self._arrays.setdefault(id(xp), {})
        flat = repair(xp, self._raw_row(xp, r), self.plan, cache)
        kr, kc = self.shape[2:]
        if self.shift is None:
            out = xp.take(flat, xp.asarray((rows * kc + cols).astype(np.int64)), axis=1)
        else:
            out = _bilinear(xp, flat, self.shift[r], rows, cols, kr, kc)
        if self.corrections.dose_factors is not None:
            out = out * xp.asarray(self.corrections.dose_factors[r].astype(np.float32))[:, None]
        return out

    def __getitem__(self, r: int) -> np.ndarray:
        """Scan row ``r`` corrected, every detector pixel: (Rc, kr, kc) float32."""
        kr, kc = self.shape[2:]
        rr, cc = np.meshgrid(np.arange(kr), np.arange(kc), indexing="ij")
        out: np.ndarray = self.bf_row(np, int(r), rr.ravel(), cc.ravel())
        return out.reshape(self.shape[1], kr, kc)


def _bilinear(xp: Any, flat: Any, shift: np.ndarray, rows: np.ndarray, cols: np.ndarray,
              kr: int, kc: int) -> Any:
    """Each frame f of ``flat`` read at (rows + shift_r[f], cols + shift_c[f]) (bilinear,
    clamped at the detector edge): the disk moved back to where the scan centre has it."""
    pr = rows[None, :] + shift[:, 0, None]  # (F, B) host float64: small
    pc = cols[None, :] + shift[:, 1, None]
    r0, c0 = np.floor(pr), np.floor(pc)
    fr, fc = (pr - r0).astype(np.float32), (pc - c0).astype(np.float32)
    F = flat.shape[0]
    base = (np.arange(F) * (kr * kc))[:, None]
    out = None
    for dr, wr in ((0, 1.0 - fr), (1, fr)):
        ir = np.clip(r0 + dr, 0, kr - 1).astype(np.int64)
        for dc, wc in ((0, 1.0 - fc), (1, fc)):
            ic = np.clip(c0 + dc, 0, kc - 1).astype(np.int64)
            vals = xp.take(flat.ravel(), xp.asarray(base + ir * kc + ic))
            term = vals * xp.asarray(wr * wc)
            out = term if out is None else out + term
    return out


def preprocess_for(dataset: Dataset4D, options: Preprocessing | None,
                   calibration: dict[str, Any] | None,
                   before_pass: Callable[[bool], None] | None = None) -> Corrections:
    """A session's corrections: ``options`` measured (default ``Preprocessing()``); with a
    calibration document and no ``options``, its recorded entry reused (bad pixels and
    descan fit as recorded, nothing re-measured but the dose totals), and nothing
    corrected for a file written before preprocessing existed (as it was fitted).
    ``before_pass``: as for prepare_corrections."""
    if options is not None and not isinstance(options, Preprocessing):
        raise TypeError(f"preprocessing must be a livessb.Preprocessing, got "
                        f"{type(options).__name__}: e.g. Preprocessing(descan='smooth')")
    if calibration is None or options is not None:
        return prepare_corrections(dataset, options, before_pass=before_pass)
    recorded = calibration.get("preprocessing")
    if recorded is None:
        return prepare_corrections(dataset, Preprocessing.off(), before_pass=before_pass)
    try:
        out = prepare_corrections(dataset, recorded=recorded, before_pass=before_pass)
    except (KeyError, TypeError, ValueError, IndexError) as exc:
        raise CalibrationError(f"the calibration's preprocessing entry cannot be used: "
                               f"{exc}") from None
    if out.descan is not None and out.descan.scan_shape != dataset.scan_shape:
        raise CalibrationError(
            f"the calibration's descan fit is for a {out.descan.scan_shape} scan, the data "
            f"are {dataset.scan_shape}: refit on these data, or pass preprocessing=...")
    return out
