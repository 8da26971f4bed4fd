"""Effective scan frequencies: the frequency each spectrum bin's signal really has.

The scan window is finite and, on a crystal, not commensurate with the lattice, so a
Bragg frequency g falls between the bins ν of the window's FFT and its signal spreads
over the bins next to it. Each bin then carries the k-dependence of Γ_b(g), not of
Γ_b(ν): with a free object per trotter lobe, C10 is read from the phase slope of Γ
across the lobe (∝ C10·ν), so the fitted C10 comes out scaled by ≈ g/ν (2 % on SrTiO3
at C10 ±150 Å with 24 positions of 0.5 Å; docs/bias-matrix.md §2).

The offset x = g − ν of a bin is measured from the data: for a single frequency in the
window, the DFTs of w(R)·I(R) and w(R)·(R − R̄)·I(R) (w a Hann window) have the ratio
i·F'(x)/F(x)/(2π) of the window's own kernel F, the same for every BF pixel (Γ_b is a
common factor), so the energy-weighted ratio summed over the BF pixels gives x per bin
and per scan axis, inverted through a table of F. A bin without a single dominant
frequency (an amorphous object's continuous spectrum) gets x ≈ 0, its grid frequency.
Pure; ``xp`` is numpy or cupy.
"""

from __future__ import annotations

from typing import Any

import numpy as np

TABLE_POINTS = 401  # offsets tabulated over ± half a bin
ENERGY_FLOOR = 1e-12  # of the largest bin's: below it a bin is round-off, kept at ν
SCAN_FREQUENCIES = ("grid", "effective")


def check_scan_frequencies(value: str) -> str:
    if value not in SCAN_FREQUENCIES:
        raise ValueError(f"scan_frequencies must be one of {SCAN_FREQUENCIES}, got {value!r}: "
                         "'grid' evaluates the overlaps at each FFT bin's frequency, "
                         "'effective' at the frequency its signal has (a crystal whose "
                         "lattice does not fit the scan window)")
    return value


def window_weights(n: int) -> np.ndarray:
    """Hann weights over ``n`` scan positions (no zero end points)."""
    return np.hanning(n + 2)[1:-1]


def offset_table(n: int, n_grid: int) -> tuple[np.ndarray, np.ndarray]:
    """(q(x), x): what a single frequency x = (g − ν)·step (cycles per position, within
    ± half a bin of the ``n_grid``-point FFT) gives for the measured q = Im(2π·Gt/G) on
    a window of ``n`` positions, sorted by q (monotonic within the main lobe)."""
    r = np.arange(n) - (n - 1) / 2
    x = np.linspace(-0.5 / n_grid, 0.5 / n_grid, TABLE_POINTS)
    kernel = np.exp(2j * np.pi * x[:, None] * r[None, :]) * window_weights(n)[None, :]
    q = (2 * np.pi * (kernel * r[None, :]).sum(axis=1) / kernel.sum(axis=1)).imag
    order = np.argsort(q)
    return q[order], x[order]


def effective_frequencies(
    window: Any, shape: tuple[int, int], step_A: tuple[float, float],
    nu_r: np.ndarray, nu_c: np.ndarray, chunk_pixels: int, xp: Any = np,
) -> tuple[np.ndarray, np.ndarray]:
    """(ν_r, ν_c) of every half-plane bin (flattened, row-major, as ``nu_r``/``nu_c``,
    the grid frequencies) for a (h, w, B) window of BF counts padded to ``shape``,
    summed over BF pixels ``chunk_pixels`` at a time. Bins with no energy keep ν."""
    h, w, n_bf = window.shape
    M = shape[0] * (shape[1] // 2 + 1)
    wr = xp.asarray(window_weights(h))[:, None, None]
    wc = xp.asarray(window_weights(w))[None, :, None]
    rr = xp.asarray(np.arange(h) - (h - 1) / 2)[:, None, None]
    rc = xp.asarray(np.arange(w) - (w - 1) / 2)[None, :, None]
    energy = xp.zeros((2, M))
    cross = xp.zeros((2, M), dtype=complex)
    for s in range(0, n_bf, chunk_pixels):
        block = window[:, :, s:s + chunk_pixels].astype(np.float64)
        block = block - block.mean(axis=(0, 1), keepdims=True)
        for axis, (weights, r) in enumerate(((wr, rr), (wc, rc))):
            g = xp.fft.rfft2(block * weights, s=shape, axes=(0, 1)).reshape(M, -1)
            gt = xp.fft.rfft2(block * weights * r, s=shape, axes=(0, 1)).reshape(M, -1)
            energy[axis] += xp.sum(g.real**2 + g.imag**2, axis=1)
            cross[axis] += xp.sum(g.conj() * gt, axis=1)
        del block
    out = []
    for axis, (n, n_grid, nu) in enumerate(((h, shape[0], nu_r), (w, shape[1], nu_c))):
        # DC (mean removed: round-off only) and empty bins keep their grid frequency
        ok = energy[axis] > ENERGY_FLOOR * xp.max(energy[axis])
        ok[0] = False
        q = xp.where(ok, (2 * np.pi * cross[axis] / xp.where(ok, energy[axis], 1.0)).imag, 0.0)
        table_q, table_x = offset_table(n, n_grid)
        x = np.interp(_host(q, xp), table_q, table_x)
        out.append(np.asarray(nu, dtype=np.float64) + x / step_A[axis])
    return out[0], out[1]


def _host(a: Any, xp: Any) -> np.ndarray:
    if xp is np:
        return np.asarray(a)
    from ..xp import to_host

    return to_host(a, "effective_frequencies", np.float64)
