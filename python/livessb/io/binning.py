"""Explicit detector binning and cropping to the bright-field disk.

Nothing here happens unless asked (``bin_detector=`` / ``crop_to_bf=``):

* binning sums ``f x f`` detector pixels; the detector sampling (mrad/px) is
  multiplied by ``f`` (when it is known; otherwise it is derived from the
  binned BF disk). Detector rows/cols that do not fill a whole bin are dropped
  with a warning. Integer counts become ``uint32`` (sums of up to ``f²`` pixels),
  float counts stay ``float32``.
* cropping keeps a window around the BF disk plus a margin, at the same
  sampling (the disk centre moves, the calibration does not change).
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np

from ..dataset import BrightField, Dataset4D, DatasetError, measure_bright_field

DEFAULT_MARGIN_MIN_PX = 4
DEFAULT_MARGIN_FRACTION = 0.25


def check_factor(factor: Any) -> int:
    """Validated binning factor (``None``/1: no binning)."""
    if factor is None:
        return 1
    if isinstance(factor, bool) or not isinstance(factor, int | np.integer):
        raise DatasetError(f"bin_detector must be a positive integer (e.g. 2), got {factor!r}")
    if factor < 1:
        raise DatasetError(f"bin_detector must be >= 1, got {factor}")
    return int(factor)


def check_crop(crop: Any) -> int | None:
    """``crop_to_bf``: False -> None (no crop); True -> default margin (-1); int -> margin px."""
    if crop is None or crop is False:
        return None
    if crop is True:
        return -1
    if isinstance(crop, int | np.integer) and crop >= 0:
        return int(crop)
    raise DatasetError(
        f"crop_to_bf must be True/False or a margin in detector pixels (int >= 0), got {crop!r}")


def binned_dtype(dtype: np.dtype) -> np.dtype:
    return np.dtype(np.float32) if np.dtype(dtype).kind == "f" else np.dtype(np.uint32)


def bin_frames(block: np.ndarray, factor: int, *, name: str = "counts") -> np.ndarray:
    """Sum ``factor x factor`` detector pixels of a ``(..., kr, kc)`` block."""
    if factor == 1:
        return block
    kr, kc = block.shape[-2:]
    nr, nc = kr // factor, kc // factor
    if nr < 1 or nc < 1:
        raise DatasetError(
            f"{name}: bin_detector={factor} is larger than the {kr}x{kc} detector")
    trimmed = block[..., :nr * factor, :nc * factor]
    shaped = trimmed.reshape(*block.shape[:-2], nr, factor, nc, factor)
    if block.dtype.kind == "f":
        return shaped.sum(axis=(-3, -1), dtype=np.float64).astype(np.float32)
    sums = shaped.sum(axis=(-3, -1), dtype=np.uint64)
    if sums.size and int(sums.max()) > np.iinfo(np.uint32).max:
        raise DatasetError(
            f"{name}: binned counts exceed uint32: convert the counts to float32 first")
    return sums.astype(np.uint32)


def warn_trim(detector_shape: tuple[int, int], factor: int, name: str = "counts") -> None:
    """Warn (once per load) when binning drops detector rows/cols that fill no whole bin."""
    kr, kc = detector_shape
    if factor > 1 and (kr % factor or kc % factor):
        warnings.warn(
            f"{name}: bin_detector={factor}: the {kr}x{kc} detector is not a multiple of "
            f"{factor}; the last {kr % factor} row(s) and {kc % factor} column(s) are dropped",
            stacklevel=4)


def bf_crop_window(bf: BrightField, shape: tuple[int, ...],
                   margin: int | None = -1) -> tuple[int, int, int, int]:
    """``(row0, row1, col0, col1)`` holding the BF disk plus ``margin`` px (-1: default)."""
    if margin is None or margin < 0:
        margin = max(DEFAULT_MARGIN_MIN_PX, math.ceil(DEFAULT_MARGIN_FRACTION * bf.radius_px))
    kr, kc = int(shape[-2]), int(shape[-1])
    half = bf.radius_px + margin
    r0 = max(0, math.floor(bf.center_row - half))
    r1 = min(kr, math.ceil(bf.center_row + half) + 1)
    c0 = max(0, math.floor(bf.center_col - half))
    c1 = min(kc, math.ceil(bf.center_col + half) + 1)
    # The Dataset4D detector minimum is 8x8: grow the window (within the detector) if needed.
    r0, r1 = _at_least(r0, r1, kr, 8)
    c0, c1 = _at_least(c0, c1, kc, 8)
    return (r0, r1, c0, c1)


def _at_least(a: int, b: int, n: int, size: int) -> tuple[int, int]:
    while b - a < min(size, n):
        if a > 0:
            a -= 1
        if b - a < min(size, n) and b < n:
            b += 1
    return a, b


def bin_dataset(ds: Dataset4D, factor: int) -> Dataset4D:
    """A new ``Dataset4D`` with ``factor x factor`` detector binning (in memory): its
    pixels integrate (a sum over each bin's area), whatever the source's were."""
    factor = check_factor(factor)
    warn_trim(ds.detector_shape, factor)
    counts = bin_frames(np.asarray(ds.counts), factor)
    sampling = None if ds.detector_sampling_derived else ds.detector_sampling_mrad * factor
    return Dataset4D(counts, voltage_kV=ds.voltage_kV, semiangle_mrad=ds.semiangle_mrad,
                     scan_step_A=ds.scan_step_A, detector_sampling_mrad=sampling)


def crop_dataset(ds: Dataset4D, margin: int | None = -1) -> Dataset4D:
    """A new ``Dataset4D`` cropped to the BF disk plus ``margin`` (same sampling)."""
    bf = measure_bright_field(ds.mean_pattern)
    r0, r1, c0, c1 = bf_crop_window(bf, ds.detector_shape, margin)
    counts = np.ascontiguousarray(ds.counts[:, :, r0:r1, c0:c1])
    return Dataset4D(counts, voltage_kV=ds.voltage_kV, semiangle_mrad=ds.semiangle_mrad,
                     scan_step_A=ds.scan_step_A,
                     detector_sampling_mrad=ds.detector_sampling_mrad,
                     detector_pixels=ds.detector_pixels)
