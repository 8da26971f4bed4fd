"""Checks on streamed counts: dtype rules, NaN/negative frames, saturation, dead rows."""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np

from ..dataset_base import SUPPORTED_DTYPES, DatasetError


@dataclass
class QualityStats:
    """Accumulated over every frame read; warnings are issued once, at the end."""

    integer_max: int | None
    pixels: int = 0
    saturated: int = 0
    frame_alive: np.ndarray | None = None  # (rows, cols) bool: frame has any counts

    def warn(self, name: str, offset: tuple[int, int]) -> None:
        if self.saturated:
            frac = self.saturated / max(self.pixels, 1)
            warnings.warn(
                f"{name}: {frac:.3%} of detector pixels ({self.saturated} of {self.pixels}) sit "
                f"at the dtype maximum {self.integer_max} (saturated or masked): the counts there "
                "are clipped; SSB still runs, but check the exposure or mask those pixels",
                stacklevel=4)
        if self.frame_alive is None:
            return
        dead_rows = [int(r) + offset[0] for r in np.nonzero(~self.frame_alive.any(axis=1))[0]]
        if dead_rows and len(dead_rows) < self.frame_alive.shape[0]:
            warnings.warn(
                f"{name}: scan row(s) {_short_list(dead_rows)} have zero counts in every frame "
                "(dead rows). They are loaded as zeros and act as missing signal in SSB; "
                "use scan_region=(r0, r1, c0, c1) to exclude them if they spoil the result",
                stacklevel=4)
        dead_cols = [int(c) + offset[1] for c in np.nonzero(~self.frame_alive.any(axis=0))[0]]
        if dead_cols and len(dead_cols) < self.frame_alive.shape[1]:
            warnings.warn(
                f"{name}: scan column(s) {_short_list(dead_cols)} have zero counts in every "
                "frame (dead columns). They are loaded as zeros; use scan_region to exclude them",
                stacklevel=4)


def _short_list(items: list[int], n: int = 8) -> str:
    return str(items) if len(items) <= n else f"{items[:n]}... ({len(items)} in all)"


def target_dtype(dtype: np.dtype, name: str) -> np.dtype:
    """Dtype the counts are stored in: the file's own when supported, else documented rules."""
    dtype = np.dtype(dtype)
    native = dtype.newbyteorder("=")
    for t in SUPPORTED_DTYPES:
        if native == np.dtype(t):
            return np.dtype(t)
    if dtype.kind == "b" or native == np.dtype(np.int8):
        return np.dtype(np.uint8)
    if native == np.dtype(np.int16):
        return np.dtype(np.uint16)
    if dtype.kind in "iu":
        return np.dtype(np.uint32)
    if dtype.kind == "f":
        return np.dtype(np.float32)
    raise DatasetError(f"{name}: counts of dtype {dtype} cannot be used: store numeric counts")


def convert_counts(block: np.ndarray, dtype: np.dtype, name: str,
                   where: tuple[int, int]) -> np.ndarray:
    if block.dtype == dtype:
        return block
    if block.dtype.kind == "i" and block.size and int(block.min()) < 0:
        idx = np.unravel_index(int(np.argmin(block.reshape(block.shape[0], block.shape[1], -1)
                                             .min(axis=2))), block.shape[:2])
        raise DatasetError(
            f"{name}: negative counts in frame (row {idx[0] + where[0]}, col "
            f"{idx[1] + where[1]}): subtract the dark level with clipping at zero, or pass raw "
            "counts")
    if dtype.kind == "u" and block.dtype.kind in "iu" and block.size:
        if int(block.max()) > np.iinfo(dtype).max:
            raise DatasetError(
                f"{name}: counts up to {int(block.max())} do not fit in {dtype}: rescale them "
                "or save them as float32")
    return block.astype(dtype)


def check_block(block: np.ndarray, stats: QualityStats, name: str,
                 where: tuple[int, int], local: tuple[int, int]) -> None:
    """Non-finite frames raise (naming the frame); saturation and dead frames are counted."""
    frames = block.reshape(block.shape[0], block.shape[1], -1)
    if block.dtype.kind == "f":
        finite = np.isfinite(frames)
        bad = ~finite.all(axis=2)
        if bad.any():
            r, c = (int(v) for v in np.argwhere(bad)[0])
            n_bad = int((~finite[r, c]).sum())
            what = ("is all NaN/inf" if n_bad == frames.shape[2]
                    else f"has {n_bad} NaN/inf pixel(s)")
            raise DatasetError(
                f"{name}: frame (scan row {r + where[0]}, col {c + where[1]}) {what}: replace "
                "it (e.g. with the mean of its neighbours) or load a scan_region that excludes "
                "it")
        if (frames < 0).any():
            r, c = (int(v) for v in np.argwhere((frames < 0).any(axis=2))[0])
            raise DatasetError(
                f"{name}: negative counts in frame (scan row {r + where[0]}, col {c + where[1]})"
                ": subtract the dark level with clipping at zero, or pass raw counts")
    if stats.integer_max is not None:  # a scan row at a time: a small comparison array
        stats.saturated += sum(int(np.count_nonzero(row == stats.integer_max)) for row in frames)
    stats.pixels += frames.size
    if stats.frame_alive is not None:
        lr, lc = local
        stats.frame_alive[lr:lr + block.shape[0], lc:lc + block.shape[1]] = frames.any(axis=2)

