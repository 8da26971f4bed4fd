"""Preprocessing's pass over counts resident on the GPU (``preprocess.corrections``):
one launch of ``descan_moments`` (kernels/descan.cu) gives every frame's total and, per
b×b block of scan positions, the disk centre of the block-summed window, reading the
counts once in their own dtype. For counts with no bad pixel to repair (a repair needs
the float32 frames: the generic chunked path does that)."""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import cuda_kernels as ck
from .launch import DescanMomentsArgs, launch

__all__ = ["DESCAN_THREADS", "device_descan_moments", "fused_measure_supported"]

DESCAN_THREADS = 256  # DT in kernels/descan.cu


def fused_measure_supported(data: Any) -> bool:
    """Whether ``descan_moments`` reads these device counts as they are (a C-contiguous
    4-D array of a dtype the kernels are compiled for)."""
    return (getattr(data, "ndim", 0) == 4 and bool(data.flags.c_contiguous)
            and np.dtype(data.dtype) in ck.COUNT_TYPES)


def device_descan_moments(cp: Any, data: Any, block: int, rows: slice | None,
                          cols: slice | None, window: Any,
                          level_per_total: float, ramp: tuple[float, float]) -> tuple[Any, Any]:
    """Frame totals (Rr, Rc) float64 and block centres (⌈Rr/b⌉·⌈Rc/b⌉, 2) float64 (row,
    col detector px; NaN where nothing reaches the ramp), both on the device; ``window``
    (bool, detector box ``rows`` × ``cols``) on the host or the device; without it
    (``rows`` None) the totals alone and None."""
    Rr, Rc, kr, kc = (int(s) for s in data.shape)
    nbr, nbc = -(-Rr // block), -(-Rc // block)
    totals = cp.empty(Rr * Rc, dtype=cp.float64)
    if rows is None or cols is None or window is None:
        h = w = 0
        r0 = c0 = 0
        mask = cp.zeros(1, dtype=cp.uint8)
        centres = cp.empty(2, dtype=cp.float64)
    else:
        h, w = (int(s) for s in window.shape)
        r0, c0 = int(rows.start), int(cols.start)
        mask = cp.ascontiguousarray(cp.asarray(window), dtype=cp.uint8).ravel()
        centres = cp.empty(nbr * nbc * 2, dtype=cp.float64)
    lo, hi = ramp
    launch(ck.kernel("descan_moments", data.dtype), (nbr * nbc,), (DESCAN_THREADS,),
           DescanMomentsArgs(data, np.int32(Rr), np.int32(Rc), np.int32(kr), np.int32(kc),
                             np.int32(block), np.int32(r0), np.int32(c0), np.int32(h),
                             np.int32(w), mask, np.float64(level_per_total),
                             np.float64(lo), np.float64(hi - lo), totals, centres))
    return totals.reshape(Rr, Rc), (None if h == 0 else centres.reshape(nbr * nbc, 2))
