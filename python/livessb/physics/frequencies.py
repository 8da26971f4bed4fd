"""Effective scan frequencies: the frequency each spectrum bin's signal really has.

The scan window is finite and, on a crystal, not commensurate with the lattice, so a
Bragg frequency g falls between the bins ν of the window's FFT and its signal spreads
over the bins next to it. Each bin then carries the k-dependence of Γ_b(g), not of
Γ_b(ν): with a free object per trotter lobe, C10 is read from the phase slope of Γ
across the lobe (∝ C10·ν), so the fitted C10 comes out scaled by ≈ g/ν (2 % on SrTiO3
at C10 ±150 Å with 24 positions of 0.5 Å; docs/bias-matrix.md §2).

The offset x = g − ν of a bin is measured from the spectra themselves: for a single
frequency in the window, the DFTs of w(R)·I(R) and t(R)·I(R), with w = 1 − cos(2πR/N)
(a Hann window periodic over the N padded positions) and t = sin(2πR/N), have a ratio
that depends on x alone (the same for every BF pixel: Γ_b is a common factor), and
both are stencils of the N-point spectrum G: w·I ↦ G[ν] − (G[ν−1] + G[ν+1])/2 and
t·I ↦ (G[ν−1] − G[ν+1])/2i. So the energy-weighted ratio summed over the BF pixels gives
x per bin and per scan axis from one pass over the spectra the fit uses anyway (no
further FFT), inverted through a table of the ratio computed from the same weights over
the measured positions. A bin without a single dominant frequency (an amorphous
object's continuous spectrum) gets x ≈ 0, its grid frequency.

Noise: Σ_b |Gw|² carries the counts' noise energy while the cross's imaginary part does
not (the noise's expectation there is real), so a noisy bin's ratio shrinks towards 0 and
x towards the grid. On the Hann-apodised spectra, whose peaks spread over three bins of
lower signal-to-noise, that pulled 16² region fits of the demo at 5·10⁴ e⁻ towards the
grid frequencies' leakage bias: |C10| 2 Å low at −82 Å (docs/bias-matrix.md §13). For
integer counts (electron counts: Poisson, variance = count) of apodised spectra the
expected noise energy per axis, Σ_R (h·w)²(R) times the window's mean BF total, is taken
off the energy (``poisson_noise_energy``, ``corrects_noise``). Not on unapodised spectra:
there the uncorrected offsets are measured unbiased within the noise and the correction
overshoots (§13); nor on float data (noise-free simulations, scaled counts).
Pure; ``xp`` is numpy or cupy.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np

from .apodisation import hann, hann_2d
from .settings import check_setting

TABLE_POINTS = 401  # offsets tabulated over ± half a bin
APODISED_SPAN_BINS = 1.5  # an apodised peak's main lobe: three bins (physics.apodisation)
ENERGY_FLOOR = 1e-12  # of the largest bin's: below it a bin is round-off, kept at ν
SCAN_FREQUENCIES = ("grid", "effective")
# A bin's noise-corrected energy is kept at this share of its measured one at least: a
# bin the noise dominates (SNR < 1/3) is corrected only partly instead of dividing by ~0
# (0.5 left 35 % of the C10 bias on the demo's 16² Hann regions, 0.25 12 %: §13).
SIGNAL_SHARE_FLOOR = 0.25


def scan_frequencies_for(value: str | None, calibration: dict[str, Any] | None) -> str:
    """The setting a session uses: the one asked for; else a restored calibration's (its
    full fit's provenance; "grid" for a file saved before the key existed, the default
    then), so that its parameters mean what they meant; else "effective" (the default:
    each bin at the frequency its signal has, docs/bias-matrix.md §2a)."""
    if value is not None:
        return check_scan_frequencies(value)
    fit = (calibration or {}).get("full_fit") or {}
    if fit:
        return check_scan_frequencies(str(fit.get("provenance", {}).get("scan_frequencies",
                                                                         "grid")))
    return "effective"


def check_scan_frequencies(value: str) -> str:
    return check_setting("scan_frequencies", value, SCAN_FREQUENCIES,
                         "'grid' evaluates the overlaps at each FFT bin's frequency, "
                         "'effective' at the frequency its signal has (a crystal whose "
                         "lattice does not fit the scan window)")


@functools.lru_cache(maxsize=32)  # every window of a map shares its shape: made once
def offset_table(n: int, n_grid: int, apodised: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """(q(x), x): what a single frequency x = (g − ν)·step (cycles per position, within
    ± half a bin of the ``n_grid``-point FFT) gives for the measured q = Im(2π·Gt/Gw) of
    ``effective_frequencies``, the data on the first ``n`` of the ``n_grid`` positions,
    sorted by q (monotonic within the main lobe); read-only (shared between calls).
    ``apodised``: the data were weighted by the Hann h over their n positions
    (physics.apodisation), so the windows are h·w and h·t and a peak reaches ±1.5 bins."""
    r = np.arange(n)
    h = hann(n) if apodised else 1.0
    w = h * (1.0 - np.cos(2 * np.pi * r / n_grid))
    t = h * np.sin(2 * np.pi * r / n_grid)
    span = APODISED_SPAN_BINS if apodised else 0.5
    x = np.linspace(-span / n_grid, span / n_grid, TABLE_POINTS)
    tone = np.exp(2j * np.pi * x[:, None] * r[None, :])
    q = (2 * np.pi * (tone * t).sum(axis=1) / (tone * w).sum(axis=1)).imag
    order = np.argsort(q)
    table_q, table_x = q[order], x[order]
    table_q.setflags(write=False)
    table_x.setflags(write=False)
    return table_q, table_x


@functools.lru_cache(maxsize=32)  # per window shape (every map tile shares its own)
def stencil_weight_sums(data_shape: tuple[int, int], shape: tuple[int, int],
                        apodised: bool = False) -> tuple[float, float]:
    """Σ_R (h(R)·w(R))² over the ``data_shape`` measured positions for the stencil w of
    each scan axis (rows, columns), w = 1 − cos(2πR/N) over the ``shape`` padded ones, h
    the scan-window Hann when ``apodised`` (else 1): white noise of unit variance per
    position gives each bin's Gw this expected energy."""
    n_r, n_c = data_shape
    h = hann_2d((n_r, n_c), (n_r, n_c), np) if apodised else np.ones((n_r, n_c))
    w_r = 1.0 - np.cos(2 * np.pi * np.arange(n_r) / shape[0])
    w_c = 1.0 - np.cos(2 * np.pi * np.arange(n_c) / shape[1])
    return (float(np.sum((h * w_r[:, None]) ** 2)), float(np.sum((h * w_c[None, :]) ** 2)))


def corrects_noise(count_dtype: Any, apodised: bool) -> bool:
    """Whether a window's effective frequencies take the Poisson noise energy off: integer
    counts of apodised spectra (module docstring)."""
    return apodised and np.dtype(count_dtype).kind in "iu"


def poisson_noise_energy(G: Any, data_shape: tuple[int, int], shape: tuple[int, int],
                         apodised: bool = False, xp: Any = np) -> tuple[Any, Any]:
    """Expected noise energy of Σ_b |Gw|² per scan axis for Poisson counts, from the (B, M)
    spectra ``G``' DC column (each BF pixel's window mean × the ``shape`` positions; on
    the device a device scalar: no sync)."""
    mean_total = xp.sum(xp.asarray(G[:, 0]).real, dtype=np.float64) / float(shape[0] * shape[1])
    s_r, s_c = stencil_weight_sums(data_shape, shape, apodised)
    return mean_total * s_r, mean_total * s_c


def _axis_stencils(xp: Any, X: Any, axis: int, Nc: int) -> tuple[Any, Any]:
    """(Gw, Gt) of a (c, Nr, H) block of half-plane spectra along scan axis 0 (rows,
    periodic) or 1 (columns, the missing half from Hermitian symmetry)."""
    if axis == 0:
        lo, hi = xp.roll(X, 1, axis=1), xp.roll(X, -1, axis=1)  # G[ν−1], G[ν+1]
    else:
        H, Nr = X.shape[2], X.shape[1]
        mirror = (-np.arange(Nr)) % Nr  # G[r, −c] = conj(G[−r, c])
        left = X[:, mirror, 1:2].conj()  # column −1
        right = X[:, mirror, Nc - H:Nc - H + 1].conj()  # column H ≡ −(Nc − H)
        lo = xp.concatenate([left, X[:, :, :-1]], axis=2)
        hi = xp.concatenate([X[:, :, 1:], right], axis=2)
    return X - 0.5 * (lo + hi), (lo - hi) * (-0.5j)


def effective_chunk(staging_bytes: int, shape: tuple[int, int]) -> int:
    """BF pixels per block of ``effective_frequencies``: its complex128 copy and the
    stencils' temporaries (~8 of them) within the staging budget."""
    return max(1, staging_bytes // (shape[0] * (shape[1] // 2 + 1) * 16 * 8))


def effective_frequencies(
    G: Any, shape: tuple[int, int], data_shape: tuple[int, int],
    step_A: tuple[float, float], nu_r: np.ndarray, nu_c: np.ndarray, chunk_pixels: int,
    xp: Any = np, apodised: bool = False, poisson: bool = False,
) -> tuple[np.ndarray, np.ndarray]:
    """(ν_r, ν_c) of every half-plane bin (flattened, row-major, as ``nu_r``/``nu_c``,
    the grid frequencies) from the (B, M) half-plane spectra ``G`` of a window of
    ``data_shape`` positions padded to ``shape`` with its mean pattern (the engines'
    spectra; ``apodised``: of the Hann-weighted data), ``chunk_pixels`` BF pixels at a
    time. Bins with no energy keep ν. ``poisson``: the counts' Poisson noise energy is
    taken off (``corrects_noise``)."""
    energy, cross = effective_sums(G, shape, chunk_pixels, xp)
    noise = poisson_noise_energy(G, data_shape, shape, apodised, xp) if poisson else None
    return frequencies_from_sums(energy, cross, shape, data_shape, step_A, nu_r, nu_c, xp,
                                 tables_for(apodised), noise)


def tables_for(apodised: bool) -> Callable[[int, int], tuple[np.ndarray, np.ndarray]]:
    """``offset_table`` for spectra of unapodised or apodised (Hann) data."""
    return functools.partial(offset_table, apodised=True) if apodised else offset_table


def effective_sums(G: Any, shape: tuple[int, int], chunk_pixels: int,
                   xp: Any = np) -> tuple[Any, Any]:
    """Σ_b |Gw|² (2, M) and Σ_b conj(Gw)·Gt (2, M) complex per scan axis (rows, columns)
    of the (B, M) spectra ``G``, the DC bin (the mean pattern) as zero; the CUDA engine's
    kernel ``effective_sums`` computes the same in one pass."""
    Nr, Nc = shape
    H = Nc // 2 + 1
    n_bf = int(G.shape[0])
    energy = xp.zeros((2, Nr, H))
    cross = xp.zeros((2, Nr, H), dtype=complex)
    for s in range(0, n_bf, chunk_pixels):
        X = xp.asarray(G[s:s + chunk_pixels]).astype(np.complex128).reshape(-1, Nr, H)
        X[:, 0, 0] = 0  # the mean: what the padding and the DC carry
        for axis in (0, 1):
            gw, gt = _axis_stencils(xp, X, axis, Nc)
            energy[axis] += xp.sum(gw.real**2 + gw.imag**2, axis=0)
            cross[axis] += xp.sum(gw.conj() * gt, axis=0)
            del gw, gt
        del X
    return energy.reshape(2, -1), cross.reshape(2, -1)


def sums_by_axis(sums: Any) -> tuple[Any, Any]:
    """The engines' kernel layout, (6, M) = |Gw|², Re, Im of the cross for rows, then for
    columns, as ``effective_sums`` returns them: energy (2, M), cross (2, M) complex."""
    return sums[0::3], sums[1::3] + 1j * sums[2::3]


def frequencies_from_sums(
    energy: Any, cross: Any, shape: tuple[int, int], data_shape: tuple[int, int],
    step_A: tuple[float, float], nu_r: Any, nu_c: Any, xp: Any = np,
    tables: Callable[[int, int], tuple[Any, Any]] = offset_table,
    noise: tuple[Any, Any] | None = None,
) -> tuple[Any, Any]:
    """Each bin's frequency from ``effective_sums``' per-axis sums, in ``xp`` (on the
    device where the sums are: no round trip per window); ``tables`` gives
    ``offset_table``'s values (the CUDA engine's are kept on the device). ``noise``:
    each axis's expected noise energy per bin (``poisson_noise_energy``), taken off the
    energy that divides the cross (down to SIGNAL_SHARE_FLOOR of it)."""
    out = []
    for axis, (n, n_grid, nu) in enumerate(((data_shape[0], shape[0], nu_r),
                                            (data_shape[1], shape[1], nu_c))):
        e, c = energy[axis], cross[axis]
        # DC (mean removed: round-off only) and empty bins keep their grid frequency
        ok = e > ENERGY_FLOOR * xp.max(e)
        ok[0] = False
        signal = e if noise is None else xp.maximum(e - noise[axis], SIGNAL_SHARE_FLOOR * e)
        q = xp.where(ok, (2 * np.pi * c / xp.where(ok, signal, 1.0)).imag, 0.0)
        table_q, table_x = tables(n, n_grid)
        x = xp.interp(q, xp.asarray(table_q), xp.asarray(table_x))
        out.append(xp.asarray(nu, dtype=np.float64) + x / step_A[axis])
    return out[0], out[1]
