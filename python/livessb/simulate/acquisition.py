"""Imperfect acquisitions: descan (the BF disk moving on the detector as the probe scans)
and beam-current fluctuation, each off by default (then the forward model is unchanged)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

Descan = tuple[float, float, float, float]


def check_descan(descan_px_per_px: Sequence[float], offset_px: Sequence[float]) -> tuple[
        Descan, tuple[float, float]]:
    """``(a_rr, a_rc, a_cr, a_cc)`` and ``(row, col)`` offset as floats, checked."""
    a = [float(v) for v in np.asarray(descan_px_per_px, dtype=float).ravel()]
    o = [float(v) for v in np.asarray(offset_px, dtype=float).ravel()]
    if len(a) != 4 or not all(math.isfinite(v) for v in a):
        raise ValueError(
            f"descan_px_per_px must be 4 finite numbers (a_rr, a_rc, a_cr, a_cc: detector px "
            f"of disk shift per scan px), got {descan_px_per_px!r}")
    if len(o) != 2 or not all(math.isfinite(v) for v in o):
        raise ValueError(f"descan_offset_px must be a finite (row, col) pair, got {offset_px!r}")
    return (a[0], a[1], a[2], a[3]), (o[0], o[1])


def descan_field(scan_shape: tuple[int, int], a: Descan,
                 offset: tuple[float, float]) -> np.ndarray:
    """Disk-centre shift (detector px) at every scan position, (Rr·Rc, 2), scan order:
    ``d_row = a_rr·i' + a_rc·j' + o_row``, ``d_col = a_cr·i' + a_cc·j' + o_col`` with
    (i', j') the scan position from the scan centre."""
    nr, nc = scan_shape
    i, j = np.meshgrid(np.arange(nr) - 0.5 * (nr - 1), np.arange(nc) - 0.5 * (nc - 1),
                       indexing="ij")
    d_r = a[0] * i + a[1] * j + offset[0]
    d_c = a[2] * i + a[3] * j + offset[1]
    return np.stack([d_r.ravel(), d_c.ravel()], axis=1)


def pattern_shift_ramps(shift_px: np.ndarray, m: np.ndarray, ns: int) -> tuple[
        np.ndarray, np.ndarray]:
    """Row and column phase ramps (batch, ns) that shift the scan-frame pattern of an exit
    wave by ``M·d`` window pixels (exact, sub-pixel): the detector then sees the disk
    moved by ``d`` (FFT[ψ·exp(2πi m·x/ns)](k) = Ψ(k - m))."""
    scan_frame = shift_px @ m.T  # (batch, 2): M·d per position
    x = np.arange(ns)
    ramp_r = np.exp((2j * math.pi / ns) * scan_frame[:, 0, None] * x[None, :])
    ramp_c = np.exp((2j * math.pi / ns) * scan_frame[:, 1, None] * x[None, :])
    return ramp_r.astype(np.complex64), ramp_c.astype(np.complex64)


def beam_current(n_positions: int, fluctuation: float, seed: int) -> np.ndarray | None:
    """Relative beam current per position, uniform in [1 - f, 1 + f] (None when f = 0),
    from its own generator so the counts' Poisson stream is unchanged."""
    f = float(fluctuation)
    if not 0.0 <= f < 1.0:
        raise ValueError(f"beam_current_fluctuation must be in [0, 1), got {fluctuation!r}")
    if f == 0.0:
        return None
    rng = np.random.default_rng([int(seed), 0xBEA])
    return 1.0 + rng.uniform(-f, f, size=n_positions)
