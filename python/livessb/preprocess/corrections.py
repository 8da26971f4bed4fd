"""The measured corrections of one dataset (``Corrections``) and the corrected counts
that engines gather their BF pixels from (``CorrectedCounts``).

One pass over the counts, a chunk of scan rows at a time (a memory-mapped file's pages
released behind it), in the counts' array module (CuPy for counts resident on a GPU):
bad pixels repaired, frame totals (dose normalisation) and block-summed windows around
the disk (descan). On a GPU with no bad pixel to repair the pass is one kernel
(engine/cuda/descan_sums.py), and the descan fit runs there too: the totals and the fit
come back, not the measurements' working data. When nothing needs correcting the
engines get the counts as they are, so results are bit-identical to a session without
preprocessing.
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
from ..memory import cuda_free_bytes
from ..physics.bright_field import BrightFieldError, estimate_disk
from ..xp import resident, to_host
from .descan import (
    DISK_RAMP,
    DescanFit,
    block_centres,
    block_size,
    block_sums,
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


# The pass's working set per chunk of scan rows: the window data (float64) and its
# temporaries, the float32 frames of a repair and, on the host, the chunk's pages of a
# memory-mapped file (released after each chunk). On the host it stays small beside the
# session's own memory; on a GPU a chunk is a few kernels, so the fewer chunks the better.
HOST_CHUNK_BYTES = 8 * 2**20
DEVICE_CHUNK_BYTES = 4 * 2**30  # at most, and at most a quarter of the free device memory


def _device_budget() -> int:
    free = cuda_free_bytes()
    return DEVICE_CHUNK_BYTES if free is None else max(2**28, min(DEVICE_CHUNK_BYTES, free // 4))


def _chunk_rows(xp: Any, counts: Any, window: np.ndarray | None, repairing: bool,
                block: int) -> int:
    """Scan rows per chunk of the pass: whole block rows within the working-set budget
    (at least one block row)."""
    Rc, kr, kc = (int(s) for s in counts.shape[1:])
    frame = (np.dtype(counts.dtype).itemsize if xp is np else 0) + (4 if repairing else 0)
    per_row = Rc * (kr * kc * frame + (0 if window is None else 24 * window.size))
    budget = HOST_CHUNK_BYTES if xp is np else _device_budget()
    return max(1, budget // max(per_row * block, 1)) * block


@dataclass(frozen=True)
class _Ramp:
    """What the descan measurement needs of every chunk: the disk window (detector box
    ``rows`` × ``cols`` and ``window`` in the counts' array module), the block edge and
    the ramp's disk level per count."""

    rows: slice
    cols: slice
    window: Any
    block: int
    level_per_total: float


def _measure_chunk(xp: Any, chunk: Any, plan: RepairPlan, cached: dict[str, Any],
                   ramp: _Ramp | None) -> tuple[Any, Any]:
    """Frame totals (n, Rc) float64 and, with ``ramp``, the centres (blocks, 2) of a chunk
    of whole block rows, in ``xp``: its temporaries go when it returns."""
    n, Rc, kr, kc = (int(s) for s in chunk.shape)
    frames = chunk.reshape(n * Rc, kr * kc)
    if plan.count > 0:  # a copy: the repair writes in place, never into the counts
        frames = repair(xp, xp.array(frames, dtype=xp.float32), plan, cached)
    # Integer-valued without a repair: these sums equal the repaired float32 path's.
    totals = frames.sum(axis=1, dtype=xp.float64).reshape(n, Rc)
    if ramp is None:
        return totals, None
    b = ramp.block
    sums = block_sums(xp, frames.reshape(n, Rc, kr, kc)[:, :, ramp.rows, ramp.cols], b)
    centres = block_centres(xp, sums.reshape(-1, *sums.shape[2:]),
                            block_sums(xp, totals, b).ravel(), ramp.window,
                            ramp.level_per_total, (ramp.rows.start, ramp.cols.start))
    return totals, centres


def _fused_pass(xp: Any, data: Any, plan: RepairPlan, descan: bool,
                ramp: _Ramp) -> tuple[Any, Any] | None:
    """The pass as one kernel launch (engine/cuda/descan_sums.py) for counts resident on
    a GPU with nothing to repair; None where it does not apply (host counts, a repair)."""
    if xp is np or plan.count > 0:
        return None
    from ..engine.cuda.descan_sums import device_descan_moments, fused_measure_supported

    if not fused_measure_supported(data):
        return None
    rows, cols = (ramp.rows, ramp.cols) if descan else (None, None)
    return device_descan_moments(xp, data, ramp.block, rows, cols, ramp.window,
                                 ramp.level_per_total, DISK_RAMP)


def _measure_chunks(xp: Any, data: Any, plan: RepairPlan, descan: bool,
                    ramp: _Ramp) -> tuple[Any, Any]:
    """The pass in chunks of whole block rows (``_chunk_rows``), any array module: frame
    totals (Rr, Rc) and, with ``descan``, the block centres, left in ``xp``."""
    step = _chunk_rows(xp, data, ramp.window if descan else None, plan.count > 0, ramp.block)
    totals_parts: list[Any] = []
    centre_parts: list[Any] = []
    cached: dict[str, Any] = {}
    for r0 in range(0, int(data.shape[0]), step):
        chunk = data[r0:r0 + step]
        totals, centres = _measure_chunk(xp, chunk, plan, cached, ramp if descan else None)
        totals_parts.append(totals)
        centre_parts.append(centres)
        release_pages(chunk)  # a memory-mapped file's pages: read, no longer needed
    return (xp.concatenate(totals_parts),
            xp.concatenate(centre_parts) if descan else None)


def _measure(counts: Any, mean_pattern: np.ndarray, plan: RepairPlan,
             opts: Preprocessing | None) -> tuple[np.ndarray, DescanFit | None]:
    """Frame totals (after repair) and, when ``opts``, the descan fit: one pass in the
    counts' own array module, in chunks of whole block rows (``_chunk_rows``); only the
    disk window is converted (the totals sum the native counts). Each chunk's block
    centres are found as soon as it is summed (the ramp's level per count is the
    repaired mean pattern's: known before the pass); totals and centres stay in the
    array module until the end, so counts resident on a GPU are measured (and the
    descan fitted) there with a few downloads whatever the scan size."""
    Rr, Rc = (int(s) for s in counts.shape[:2])
    xp, data = resident(counts)
    repaired = repaired_mean(mean_pattern, plan)
    level = _disk_level(repaired)
    rs, cs, window = disk_window(repaired, level)
    b = block_size(level)
    mean_total = float(repaired.sum())  # the mean frame total (the repair is linear)
    per_total = level / mean_total if mean_total > 0 else 0.0
    ramp = _Ramp(rs, cs, xp.asarray(window), b, per_total)
    descan = opts is not None
    passed = _fused_pass(xp, data, plan, descan, ramp)
    dev_totals, dev_centres = (passed if passed is not None
                               else _measure_chunks(xp, data, plan, descan, ramp))
    all_totals = to_host(dev_totals, site="preprocess.totals")
    if opts is None:
        return all_totals, None
    col_starts = np.arange(0, Rc, b)
    row_starts = np.arange(0, Rr, b)
    n_r = np.minimum(row_starts + b, Rr) - row_starts
    n_c = np.minimum(col_starts + b, Rc) - col_starts
    pos_r = np.repeat(row_starts + 0.5 * (n_r - 1), col_starts.size)
    pos_c = np.tile(col_starts + 0.5 * (n_c - 1), row_starts.size)
    weights = np.outer(n_r, n_c).ravel().astype(np.float64)
    assert opts.descan is not None
    fit = fit_descan(opts.descan, opts.degree, (Rr, Rc), np.stack([pos_r, pos_c], axis=1),
                     dev_centres, weights, opts.descan_threshold_px, b,
                     (row_starts.size, col_starts.size))
    return all_totals, fit


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
            f"are {dataset.scan_shape}: measure the corrections on these data instead "
            "(Python: preprocessing=livessb.Preprocessing(); CLI: --descan plane)")
    return out
