"""The virtual images' pass over counts resident on the GPU (``livessb.virtual``): one
launch of ``detector_sums`` (kernels/virtual.cu) over every pattern, reading the counts
once in their own dtype (no float copy); the (Rr, Rc, 4) float64 result stays on the
device. The kernel is compiled with the engine's module, so a session's first pass
pays no compilation."""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import cuda_kernels as ck
from .launch import DetectorSumsArgs, launch

__all__ = ["VIRTUAL_THREADS", "device_detector_sums"]

VIRTUAL_THREADS = 256  # VT in kernels/virtual.cu


def device_detector_sums(cp: Any, counts: Any, center: tuple[float, float],
                         radius_px: float) -> Any:
    """(Rr, Rc, 4) float64 on the device: counts inside the disk, outside it, and their
    row and column moments about ``center`` (detector px)."""
    Rr, Rc, kr, kc = (int(s) for s in counts.shape)
    data = cp.ascontiguousarray(counts)
    P = Rr * Rc
    out = cp.empty((P, 4), dtype=cp.float64)
    launch(ck.kernel("detector_sums", data.dtype), (P,), (VIRTUAL_THREADS,),
           DetectorSumsArgs(data, np.int64(P), np.int32(kr), np.int32(kc),
                            np.float64(center[0]), np.float64(center[1]),
                            np.float64(float(radius_px) ** 2), out))
    return out.reshape(Rr, Rc, 4)
