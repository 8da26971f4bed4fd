"""Misfit errors: the cluster-robust (sandwich) covariance over the scan frequencies.

The noise errors of ``fit.errors`` assume that what the model leaves unexplained is
counting noise, independent between frequencies and BF pixels. Where the model does
not describe the data exactly (scan-window leakage of a crystal that is not periodic
with the scan, aliasing, the second-order terms of a strong object, a detector that
is not the model's), the residual is coherent over the BF pixels of a frequency and
concentrated on the few frequencies of the lattice: counted as independent noise it
gives errors far below the parameters' real scatter (abTEM thin SrTiO3: C12 off by
0.40 Å with a noise error of 0.046 Å).

The loss is a sum over the stored scan frequencies, L = Σ_ν L_ν, and the estimate
solves ∇L = 0, so θ̂ - θ* ≈ -H⁻¹ Σ_ν ∇L_ν. With the frequencies as independent
clusters (the noise is independent between them; a misfit coherent within one is
kept whole) the sandwich

    cov θ = H⁻¹ J H⁻¹,  J = C/(C - P) Σ_c g_c g_cᵀ,  g_c = ∇L_c at the optimum,

is the covariance of the estimate under any error structure within a cluster (White;
Liang-Zeger), with C clusters that carry a gradient and P parameters. A frequency of
the first and of the Nyquist rfft column is stored twice (ν and -ν, both weight 1):
the pair is one cluster. On data the model describes the sandwich and the noise
errors agree (20 Poisson realisations of the thin calibration: ratio 0.97-1.0).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from ..params import JOINT
from ..physics import objective as obj
from ..physics.geometry import half_plane_weights, scan_frame_frequencies, trotter_support
from ..physics.overlap import gamma_derivatives, gamma_general_derivatives, pair_grid
from .fixed import FreeView


def _host(a: Any) -> np.ndarray:
    return np.asarray(a.get() if hasattr(a, "get") else a, dtype=np.float64)


def frequency_gradients(view: FreeView, params: Mapping[str, float]) -> np.ndarray:
    """∂L_ν/∂θ of every stored frequency ν (both trotter lobes), free parameters: (P, M).

    Runs over the window's resident spectra with the engine's reference geometry and
    array module (``engine.reference``), on the in-trotter (b, ν) pairs of one BF-pixel
    chunk at a time; the sum over ν is the engine's own gradient.
    """
    model = view.model
    engine, sp = model.engine, model.spectra
    if engine is None or sp is None or sp.rotation is None:
        raise RuntimeError("frequency_gradients needs a live model with its rotation set")
    reference = engine.reference
    xp, geo, names = reference.xp, reference.geo, view.names
    theta, transpose = sp.rotation
    M, P = int(sp.G.shape[1]), len(names)
    half = reference.half_plane(sp.shape)
    k = xp.asarray(scan_frame_frequencies(geo.bf.k_det, theta, transpose)
                   .astype(reference.real_dtype))
    full = view.full_params(params)
    sums = xp.zeros((2 + 2 * P, 2 * M), dtype=reference.complex_dtype)  # N, D, dN, dD
    for sl in reference.chunks(sp.n_bf, M):
        mask = trotter_support(k[sl], half.nu_r, half.nu_c, geo.k_alpha, xp)
        b, m = xp.nonzero(mask)
        kb = k[sl][b]
        g = pair_grid(kb[:, 0], kb[:, 1], half.nu_r[m], half.nu_c[m], geo.wavelength,
                      geo.k_alpha, geo.edge_width, xp)
        if names == JOINT:
            gam, dg, _ = gamma_derivatives(g, full, 1, xp)
        else:
            gam, dg, _ = gamma_general_derivatives(g, full, names, xp)
        gc, Gs = gam.conj(), sp.G[sl][b, m]
        terms = [gc * Gs, gam.real**2 + gam.imag**2,
                 *(d.conj() * Gs for d in dg), *(2 * (gc * d).real for d in dg)]
        group = m + M * (~g.minus_lobe)  # the k-ν lobe's sums first, then the k+ν lobe's
        for i, t in enumerate(terms):
            sums[i] += _group_sum(group, t, 2 * M, xp)
    N, D, dN, dD = sums[0], sums[1].real, sums[2:2 + P], sums[2 + P:].real
    inv_d = obj.inv_d_unweighted(D, D > obj.D_FLOOR, xp)
    w = obj.lobe_weights(half.weights, xp)
    n2 = N.real**2 + N.imag**2
    per_lobe = -(2 * (N.conj()[None, :] * dN).real - n2 * dD * inv_d) * inv_d * w / sp.energy
    per_nu = _host(per_lobe[:, :M] + per_lobe[:, M:])
    return per_nu[view.free_index] if view.fixed else per_nu


def _group_sum(group: Any, values: Any, n: int, xp: Any) -> Any:
    """Σ of ``values`` per group index (n,), complex or real."""
    if xp.iscomplexobj(values):
        return (xp.bincount(group, weights=values.real, minlength=n)
                + 1j * xp.bincount(group, weights=values.imag, minlength=n))
    return xp.bincount(group, weights=values, minlength=n)


def cluster_index(shape: tuple[int, int]) -> np.ndarray:
    """Cluster of each stored frequency (row-major half plane of ``shape``): its own,
    except in the weight-1 columns (first, and Nyquist for an even width), where ν and
    -ν are both stored and form one cluster."""
    rows, cols = shape[0], shape[1] // 2 + 1
    i, j = np.meshgrid(np.arange(rows), np.arange(cols), indexing="ij")
    single = half_plane_weights(shape[1])[j] == 1.0
    partner = np.where(single, np.minimum(i, (-i) % rows), i)
    return np.asarray((partner * cols + j).ravel())


def cluster_gradients(per_frequency: np.ndarray, shape: tuple[int, int]) -> np.ndarray:
    """(P, M) per-frequency gradients summed into clusters: (P, C) over the clusters
    that carry a gradient."""
    index = cluster_index(shape)
    sums = np.stack([np.bincount(index, weights=row, minlength=index.size)
                     for row in np.asarray(per_frequency, dtype=np.float64)])
    return np.asarray(sums[:, np.any(sums != 0.0, axis=0)])


def misfit_meat(clusters: np.ndarray) -> np.ndarray:
    """J = C/(C - P) Σ_c g_c g_cᵀ (P, P); NaN when the clusters do not exceed P."""
    g = np.asarray(clusters, dtype=np.float64)
    P, C = g.shape
    if C <= P:
        return np.full((P, P), np.nan)
    return np.asarray(g @ g.T * (C / (C - P)))
