"""Numba kernel of the effective scan frequencies' sums for the CPU engine: the same
stencils and sums as ``physics.frequencies.effective_sums`` (the NumPy reference, which
the tests hold it to) and the CUDA kernel ``effective_sums``, in one parallel pass over
the frequency-major spectra instead of rolled copies of pixel blocks."""

from __future__ import annotations

import numpy as np
from numba import njit, prange


@njit(cache=True, inline="always")
def _at(GT, idx, b, flip):  # type: ignore[no-untyped-def]
    """G[idx] of pixel b (conjugated when ``flip``), the DC bin as zero."""
    if idx == 0:
        return 0j
    v = GT[idx, b]
    return v.conjugate() if flip else v


@njit(cache=True, inline="always")
def _add(acc, q, c, lo, hi):  # type: ignore[no-untyped-def]
    """|Gw|² and conj(Gw)·Gt of Gw = c − (lo + hi)/2, Gt = (lo − hi)/2i into acc[q:q + 3]."""
    w = c - 0.5 * (lo + hi)
    t = (lo - hi) * (-0.5j)
    x = w.conjugate() * t
    acc[q] += w.real * w.real + w.imag * w.imag
    acc[q + 1] += x.real
    acc[q + 2] += x.imag


@njit(cache=True, parallel=True)
def effective_sums(GT, Nr, Nc):  # type: ignore[no-untyped-def]
    """(6, M) sums of the (M, B) frequency-major spectra ``GT`` on the (Nr, Nc) grid's
    half plane: |Gw|², Re, Im of the cross along rows, then along columns."""
    H = Nc // 2 + 1
    M, B = GT.shape
    out = np.zeros((6, M))
    for m in prange(M):
        ir, ic = m // H, m % H
        mirror = (Nr - ir) % Nr  # the row of −ν_r
        up, down = ((ir + Nr - 1) % Nr) * H + ic, ((ir + 1) % Nr) * H + ic
        lconj, rconj = ic == 0, ic == H - 1
        left = mirror * H + 1 if lconj else m - 1  # column −1 ≡ conj(column 1 at −r)
        right = mirror * H + (Nc - H) if rconj else m + 1  # column H ≡ −(Nc − H)
        acc = np.zeros(6)
        for b in range(B):
            c = _at(GT, m, b, False)
            _add(acc, 0, c, _at(GT, up, b, False), _at(GT, down, b, False))
            _add(acc, 3, c, _at(GT, left, b, lconj), _at(GT, right, b, rconj))
        for q in range(6):
            out[q, m] = acc[q]
    return out
