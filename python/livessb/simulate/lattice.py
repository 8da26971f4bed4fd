"""The object: an SrTiO3-like lattice of Gaussian columns, separable per basis column."""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence

import numpy as np

# SrTiO3 [001] projection: fractional (row, col) positions and relative column weights.
SRTIO3_BASIS: tuple[tuple[float, float, float], ...] = (
    (0.0, 0.0, 1.0),    # Sr columns
    (0.5, 0.5, 0.75),   # Ti-O columns
    (0.5, 0.0, 0.25),   # O columns
    (0.0, 0.5, 0.25),   # O columns
)


def _periodic_gauss_1d(x: np.ndarray, x0: float, period: float, sigma: float) -> np.ndarray:
    """Σ_i exp(-(x - x0 - i·period)² / 2σ²), summed over the images that matter."""
    d = np.mod(x - x0, period)
    images = math.ceil(6 * sigma / period) + 1
    out = np.zeros_like(d)
    for i in range(-images, images + 1):
        out += np.exp(-((d - i * period) ** 2) / (2 * sigma * sigma))
    return out


def _lattice_potential_grid(
    rows_A: np.ndarray, cols_A: np.ndarray, a: float, sigma: float,
    origin: Sequence[float], basis: Sequence[tuple[float, float, float]],
) -> np.ndarray:
    """V on the outer grid rows_A × cols_A (unnormalised, separable per basis column)."""
    out = np.zeros((rows_A.size, cols_A.size), dtype=np.float64)
    for fr, fc, w in basis:
        gr = _periodic_gauss_1d(rows_A, origin[0] + fr * a, a, sigma)
        gc = _periodic_gauss_1d(cols_A, origin[1] + fc * a, a, sigma)
        out += w * gr[:, None] * gc[None, :]
    return out


def _lattice_potential_points(
    r: np.ndarray, c: np.ndarray, a: float, sigma: float,
    origin: Sequence[float], basis: Sequence[tuple[float, float, float]],
) -> np.ndarray:
    r, c = np.broadcast_arrays(r, c)
    out = np.zeros(r.shape, dtype=np.float64)
    for fr, fc, w in basis:
        out += (w * _periodic_gauss_1d(r, origin[0] + fr * a, a, sigma)
                * _periodic_gauss_1d(c, origin[1] + fc * a, a, sigma))
    return out


@functools.lru_cache(maxsize=32)
def _lattice_peak(a: float, sigma: float, basis: tuple[tuple[float, float, float], ...]) -> float:
    """Maximum of the (unnormalised) potential over one unit cell."""
    x = np.linspace(0.0, a, 257)
    grid = _lattice_potential_grid(x, x, a, sigma, (0.0, 0.0), basis)
    sites = np.array([[fr * a, fc * a] for fr, fc, _ in basis])
    at_sites = _lattice_potential_points(sites[:, 0], sites[:, 1], a, sigma, (0.0, 0.0), basis)
    peak = max(float(grid.max()), float(at_sites.max()))
    if not peak > 0:
        raise ValueError("the lattice potential is zero everywhere: check the basis weights")
    return peak
