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

import functools
from collections.abc import Mapping

import numpy as np

from ..physics.geometry import half_plane_weights
from ..physics.objective import MisfitTerms
from .fixed import FreeView


def frequency_terms(view: FreeView, params: Mapping[str, float]) -> MisfitTerms:
    """``MisfitTerms`` at ``params`` in the free parameters: ∂L_ν/∂θ of every stored
    frequency ν (both trotter lobes), (P, M), its explained energy and C10 curvature, and
    the exact Hessian (P, P).

    One engine call (``Engine.misfit_terms``: the derivative kernels' own per-frequency
    terms and the Hessian from the same sums, one download); the sum over ν is the
    engine's own gradient.
    """
    model = view.model
    if model.engine is None or model.spectra is None or model.spectra.rotation is None:
        raise RuntimeError("frequency_terms needs a live model with its rotation set")
    full = view.full_params(params)
    vector = np.array([full[n] for n in view.names], dtype=np.float64)
    terms = model.misfit_terms(vector, view.names)
    if not view.fixed:
        return terms
    i = view.free_index
    return MisfitTerms(per_nu=terms.per_nu[i], hessian=terms.hessian[i][:, i],
                       explained=terms.explained, curvature=terms.curvature)


@functools.lru_cache(maxsize=16)  # per window shape: every region edit and map tile reuses it
def cluster_index(shape: tuple[int, int]) -> np.ndarray:
    """Cluster of each stored frequency (row-major half plane of ``shape``): its own,
    except in the weight-1 columns (first, and Nyquist for an even width), where ν and
    -ν are both stored and form one cluster."""
    rows, cols = shape[0], shape[1] // 2 + 1
    i, j = np.meshgrid(np.arange(rows), np.arange(cols), indexing="ij")
    single = half_plane_weights(shape[1])[j] == 1.0
    partner = np.where(single, np.minimum(i, (-i) % rows), i)
    out = np.asarray((partner * cols + j).ravel())
    out.setflags(write=False)
    return out


@functools.lru_cache(maxsize=16)
def _partners(shape: tuple[int, int]) -> tuple[np.ndarray, np.ndarray]:
    """(-ν, ν) column pairs of the weight-1 columns: the frequencies whose cluster is
    another's (``cluster_index`` ≠ own index) and that cluster."""
    index = cluster_index(shape)
    src = np.flatnonzero(index != np.arange(index.size))
    dst = index[src]
    src.setflags(write=False)
    dst.setflags(write=False)
    return src, dst


def cluster_gradients(per_frequency: np.ndarray, shape: tuple[int, int]) -> np.ndarray:
    """(P, M) per-frequency gradients summed into clusters: (P, C) over the clusters
    that carry a gradient, in cluster order.

    A frequency is its own cluster except the few (-ν) of the weight-1 columns, which
    are added to their partner's column (the sums a bincount over ``cluster_index``
    gives, the same bits: its partner comes first), without a pass per parameter."""
    src, dst = _partners((int(shape[0]), int(shape[1])))
    sums = np.array(per_frequency, dtype=np.float64)
    sums[:, dst] += sums[:, src]
    keep = np.any(sums != 0.0, axis=0)
    keep[src] = False
    return np.compress(keep, sums, axis=1)


def misfit_meat(clusters: np.ndarray) -> np.ndarray:
    """J = C/(C - P) Σ_c g_c g_cᵀ (P, P); NaN when the clusters do not exceed P."""
    g = np.asarray(clusters, dtype=np.float64)
    P, C = g.shape
    if C <= P:
        return np.full((P, P), np.nan)
    return np.asarray(g @ g.T * (C / (C - P)))
