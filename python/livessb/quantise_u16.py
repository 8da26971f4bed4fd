"""The preview frame's uint16 quantisation as one fused pass (Numba).

``u = floor((v - lo) · scale + 0.5)`` in float64 per pixel, non-finite pixels 0: the
same values as NumPy's ``rint`` except at exact half-way ties, without the three
full-size float64 temporaries NumPy needs (a 1024² frame: ~0.5 ms instead of ~13).
Serial on purpose: memory bound, and threads only add synchronisation.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit


@njit(cache=True)
def quantise_into(flat: np.ndarray, lo: float, scale: float, out: np.ndarray) -> None:
    """``out[i]`` (uint16) of ``flat[i]`` (float32/float64, 1-D), ``lo``/``scale`` floats."""
    for i in range(flat.shape[0]):
        v = np.float64(flat[i])
        if math.isfinite(v):
            u = math.floor((v - lo) * scale + 0.5)
            out[i] = np.uint16(min(max(u, 0.0), 65535.0))
        else:
            out[i] = np.uint16(0)
