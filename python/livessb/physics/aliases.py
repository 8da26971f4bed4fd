"""BF pixels that carry an alias of an undersampled scan (docs/bias-matrix.md §2b, §6).

Where the scan's Nyquist frequency 1/(2·step) lies below the BF band's 2k_α, a spectrum
bin ν also holds the signal of the frequencies ν + m/step (m ≠ 0 on an undersampled
axis). Each alias has its own trotter: a BF pixel inside the single-sideband support of
ν and of an alias carries both, and the model of bin ν (Γ at ν) misreads it: near focus
that biases C10 by more than a whole ångström at 0.5 Å steps. With
``alias_pixels="excluded"`` the fit leaves those pixels out of bin ν (every pixel it
keeps carries ν alone); on a scan that samples the band there is no alias and nothing
changes. Resolving each alias with its own object instead gave the same C10 on the
bias matrix (to 0.08 Å), so the simpler exclusion is what the engines run. The Auto
reconstruction's f-times finer grid reads each of its frequencies from the coarse bin it
aliases to (``alias_map``) and keeps every pair. Pure; ``xp`` is numpy or cupy.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np

from .geometry import half_plane_weights, scan_frequencies_half, trotter_support
from .settings import check_setting

ALIAS_PIXELS = ("kept", "excluded")


def check_alias_pixels(value: str) -> str:
    return check_setting("alias_pixels", value, ALIAS_PIXELS,
                         "'kept' fits every BF pixel of a bin's trotter, 'excluded' leaves "
                         "out those that also lie in an alias's trotter (an undersampled "
                         "scan, docs/bias-matrix.md §7)")


def alias_pixels_for(value: str | None, calibration: dict[str, Any] | None) -> str:
    """The setting a session uses: the one asked for; else a restored calibration's (its
    full fit's provenance; "kept" for a file saved before the key existed), so that its
    parameters mean what they meant; else "kept" (the default of both engines)."""
    if value is not None:
        return check_alias_pixels(value)
    fit = (calibration or {}).get("full_fit") or {}
    return check_alias_pixels(str(fit.get("provenance", {}).get("alias_pixels", "kept")))


def alias_orders(step_A: float, k_alpha: float) -> int:
    """The largest |m| whose alias ν + m/step can put a trotter on the BF disc along an
    axis of this step: |ν| ≤ 1/(2·step), so |ν + m/step| ≥ (|m| − ½)/step, and a trotter
    meets the disc only below 2k_α. 0 where the axis samples the band."""
    return max(0, math.floor(2.0 * k_alpha * step_A + 0.5 - 1e-9))


def alias_spacing(step_A: tuple[float, float], k_alpha: float, mode: str) -> np.ndarray:
    """(1/step_r, 1/step_c, m_r, m_c) for the kernels (float64): the alias spacing and
    the orders to test per scan axis; all 0 for "kept" (no pixel is left out)."""
    if check_alias_pixels(mode) == "kept":
        return np.zeros(4)
    return np.array([1.0 / step_A[0], 1.0 / step_A[1], alias_orders(step_A[0], k_alpha),
                     alias_orders(step_A[1], k_alpha)], dtype=np.float64)


def in_alias_support(k: Any, nu_r: Any, nu_c: Any, k_alpha: float, spacing: Any,
                     xp: Any = np) -> Any:
    """Whether pixel b lies in the single-sideband support of an alias ν + m/step of ν
    (m ≠ 0), shaped as ``trotter_support``'s mask; all False for "kept"'s spacing."""
    s_r, s_c, m_r, m_c = (float(v) for v in spacing)
    out = xp.zeros((k.shape[0], *nu_r.shape), dtype=bool)
    for mr in range(-int(m_r), int(m_r) + 1):
        for mc in range(-int(m_c), int(m_c) + 1):
            if mr or mc:
                out |= trotter_support(k, nu_r + mr * s_r, nu_c + mc * s_c, k_alpha, xp)
    return out


def fit_support(k: Any, nu_r: Any, nu_c: Any, k_alpha: float, spacing: Any,
                xp: Any = np) -> Any:
    """The pairs the fit uses: ``trotter_support`` less the pixels an alias shares."""
    mask = trotter_support(k, nu_r, nu_c, k_alpha, xp)
    if not np.any(np.asarray(spacing)[2:]):
        return mask
    return mask & ~in_alias_support(k, nu_r, nu_c, k_alpha, spacing, xp)


KEPT_SAMPLE_PIXELS = 128  # BF pixels, evenly strided
KEPT_SAMPLE_ROWS = 64  # frequency rows of the half plane, evenly strided


@functools.lru_cache(maxsize=32)
def kept_pair_fraction(k: bytes, n: int, shape: tuple[int, int], step_A: tuple[float, float],
                       k_alpha: float, spacing: tuple[float, ...]) -> float:
    """The fraction of a window's trotter pairs (half-plane weights included) that the
    fit keeps with ``spacing``, estimated on evenly strided BF pixels and frequency
    rows of the window's half plane: the errors' count of observations follows it."""
    if not any(spacing[2:]):
        return 1.0
    kk = np.frombuffer(k, dtype=np.float64).reshape(n, 2)
    kk = kk[::max(1, -(-n // KEPT_SAMPLE_PIXELS))]
    rows, cols = scan_frequencies_half(shape, step_A)
    rows = rows[::max(1, -(-shape[0] // KEPT_SAMPLE_ROWS))]
    nu_r, nu_c = np.meshgrid(rows, cols, indexing="ij")
    w = half_plane_weights(shape[1])
    support = trotter_support(kk, nu_r, nu_c, k_alpha)
    kept = support & ~in_alias_support(kk, nu_r, nu_c, k_alpha, spacing)
    total = float(np.sum(support * w))
    return float(np.sum(kept * w)) / total if total > 0 else 1.0


def alias_map(
    coarse: tuple[int, int], fine: tuple[int, int]
) -> tuple[np.ndarray, np.ndarray]:
    """For each fine half-plane frequency: index into the coarse half plane, and conj flag.

    Fine and coarse grids share the frequency spacing, so fine index n maps to n mod N;
    columns past the coarse half plane are read from -ν by Hermitian symmetry.
    """
    Nr, Nc = coarse
    nr = np.round(np.fft.fftfreq(fine[0]) * fine[0]).astype(np.int64) % Nr
    nc = np.arange(fine[1] // 2 + 1) % Nc
    R, C = np.meshgrid(nr, nc, indexing="ij")
    conj = C > Nc // 2
    R = np.where(conj, (-R) % Nr, R)
    C = np.where(conj, Nc - C, C)
    return (R * (Nc // 2 + 1) + C).ravel(), conj.ravel()
