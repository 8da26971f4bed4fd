"""Detector geometry: rotation/transpose, the scan-frame window and the bilinear resampling
of the scan-frame pattern onto the detector."""

from __future__ import annotations

import math

import numpy as np
import scipy.sparse

from ..physics.geometry import fft_friendly_size


def _rotation_transpose(rotation_deg: float, transpose: bool) -> np.ndarray:
    """M = R(θ)·T acting on (row, col) column vectors."""
    th = math.radians(rotation_deg)
    c, s = math.cos(th), math.sin(th)
    rot = np.array([[c, -s], [s, c]])
    # Clean exact multiples of 90° so that the geometry is exact there.
    rot[np.abs(rot) < 1e-12] = 0.0
    if transpose:
        rot = rot @ np.array([[0.0, 1.0], [1.0, 0.0]])
    return rot


def _detector_offsets(detector_shape: tuple[int, int], center: tuple[float, float]) -> np.ndarray:
    nkr, nkc = detector_shape
    kr, kc = np.meshgrid(np.arange(nkr) - center[0], np.arange(nkc) - center[1], indexing="ij")
    return np.stack([kr.ravel(), kc.ravel()])  # (2, Nd)


def _scan_frame_size(detector_shape: tuple[int, int], center: tuple[float, float],
                     m: np.ndarray, extra_px: float = 0.0) -> int:
    """Smallest FFT-friendly even window that holds every detector read with margin
    (``extra_px`` more for a pattern shifted by descan)."""
    k = m @ _detector_offsets(detector_shape, center)
    half = float(np.abs(k).max()) + extra_px
    # Even 2·3·5-smooth numbers are twice the 2·3·5-smooth ones.
    return 2 * fft_friendly_size(math.ceil(round(half, 9)) + 2)


def _resampling_matrix(detector_shape: tuple[int, int], center: tuple[float, float],
                       m: np.ndarray, ns: int) -> scipy.sparse.csr_matrix:
    """Sparse bilinear map from the fftshifted scan-frame pattern (ns²) to the detector.

    Equivalent to ``scipy.ndimage.map_coordinates(pattern, ns//2 + M k_det, order=1)``
    for reads inside the window (which the window size guarantees).
    """
    k = m @ _detector_offsets(detector_shape, center)
    pos = k + ns // 2
    base = np.floor(pos)
    frac = pos - base
    base = base.astype(np.int64)
    nd = k.shape[1]
    rows, cols, vals = [], [], []
    for dr in (0, 1):
        wr = frac[0] if dr else 1.0 - frac[0]
        for dc in (0, 1):
            wc = frac[1] if dc else 1.0 - frac[1]
            ir = base[0] + dr
            ic = base[1] + dc
            ok = (ir >= 0) & (ir < ns) & (ic >= 0) & (ic < ns) & (wr * wc > 0)
            rows.append(np.nonzero(ok)[0])
            cols.append((ir * ns + ic)[ok])
            vals.append((wr * wc)[ok])
    return scipy.sparse.csr_matrix(
        (np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))),
        shape=(nd, ns * ns))
