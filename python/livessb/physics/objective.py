"""Objectives on per-frequency sums (pure; ``xp`` numpy or cupy).

Variable projection (default): with N(ν) = Σ_b conj(Γ_b) G_b, D(ν) = Σ_b |Γ_b|² and
E = Σ_ν Σ_b m_b |G_b|², the best object per frequency is eliminated and
L = 1 - Σ_ν≠0 |N|²/D / E. Sums over the half plane carry weights ``w`` (1 or 2).

The sums run per trotter lobe: each ν has one N, D over the pairs whose k-ν lies in
the disc and one over those whose k+ν does (``lobe_sums``), each lobe with its own
least-squares object. A thin object that is not weak carries T0*·T(ν) on the first lobe
and -T0·T*(-ν) on the second; one shared object (equal only for a weak phase) leaves
the amplitude part -½FT(φ²) to be absorbed by defocus: |C10| came out 2-7 % low for a
0.2-1 rad object (issue 15). E is unchanged: the lobes partition the trotter.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..xp import to_host
from .geometry import scan_frequencies_half
from .overlap import pairs_of

D_FLOOR = 1e-12  # frequencies without any BF pixel in their trotters carry no energy


class NoSidebandSignalError(ValueError):
    """No BF pixel lies in any trotter of the scan window: SSB has nothing to fit."""


def require_energy(energy: float) -> float:
    if not energy > 0:
        raise NoSidebandSignalError(
            "this scan window has no single-sideband signal (no bright-field pixel lies in any "
            "trotter, sideband energy 0): the scan step is far too coarse or too fine for the "
            "aperture; check the scan step (Å), voltage (kV) and semiangle (mrad), or choose a "
            "larger region")
    return energy


def lobe_sums(x: Any, minus_lobe: Any, xp: Any = np) -> Any:
    """Σ_b of ``x`` (B, M) per lobe: (2M,), the k-ν lobe first, then the k+ν lobe."""
    return xp.concatenate([xp.sum(xp.where(minus_lobe, x, 0), axis=0),
                           xp.sum(xp.where(minus_lobe, 0, x), axis=0)])


def lobe_weights(weights: Any, xp: Any = np) -> Any:
    """Half-plane weights (M,) for per-lobe sums (2M,)."""
    return xp.concatenate([weights, weights])


def vp_loss(N: Any, D: Any, weights: Any, energy: float, xp: Any = np) -> float:
    """1 - Σ w |N|²/D / E."""
    ok = D > D_FLOOR
    ratio = xp.where(ok, (N.real**2 + N.imag**2) / xp.where(ok, D, 1.0), 0.0)
    return float(1.0 - float(xp.sum(weights * ratio)) / require_energy(energy))


def vp_loss_derivatives(
    N: Any, D: Any, dN: Any, dD: Any, d2N: Any, d2D: Any, weights: Any, energy: float,
    xp: Any = np,
) -> tuple[float, np.ndarray, np.ndarray]:
    """Loss, gradient (P,) and Hessian (P, P) of the VP loss from per-ν sums.

    ``dN``/``dD`` are (P, M), ``d2N``/``d2D`` are (P(P+1)/2, M) in ``pairs_of(P)`` order.
    f = |N|²/D per ν; its derivatives follow from the quotient rule.
    """
    loss, grad, hess, _, _ = _vp_derivatives(N, D, dN, dD, d2N, d2D, weights, energy, xp)
    return loss, grad, hess


@dataclass(frozen=True)
class MisfitTerms:
    """What a fit's errors need at one parameter vector, float64 on the host, per stored
    frequency (both trotter lobes added): the gradient (P, M), the explained energy
    w|N|²/D (M,) and the C10 curvature (M,) (the frequency bands of fit/systematic); and
    the exact Hessian (P, P)."""

    per_nu: np.ndarray
    hessian: np.ndarray
    explained: np.ndarray
    curvature: np.ndarray


@functools.lru_cache(maxsize=16)  # per window shape: every map tile and region reuses it
def radial_order(shape: tuple[int, int], step_A: tuple[float, float],
                 ) -> tuple[np.ndarray, np.ndarray]:
    """|ν| of the stored half plane's grid frequencies (M,), row-major, and the stable
    order that sorts them: the bands are cut by the grid radius of each bin (the
    effective frequencies move a bin by less than its width)."""
    nu_r, nu_c = scan_frequencies_half(shape, step_A)
    radius = np.hypot(nu_r[:, None], nu_c[None, :]).ravel()
    order = np.argsort(radius, kind="stable").astype(np.int32)
    radius.setflags(write=False)
    order.setflags(write=False)
    return radius, order


def frequency_bands(radius: Any, order: Any, info: Any, xp: Any = np) -> Any:
    """Band of each stored frequency (M,): True (high) where its grid |ν| (``radius``,
    sorted by ``order``: ``radial_order``) exceeds the radius below which half of
    ``info`` (each frequency's C10 curvature, both lobes, any sign) lies."""
    cum = xp.cumsum(xp.abs(info)[order])
    cut = xp.minimum(xp.searchsorted(cum, cum[-1] * 0.5), radius.size - 1)
    return radius > radius[order[cut]]


def vp_misfit_terms(
    N: Any, D: Any, dN: Any, dD: Any, d2N: Any, d2D: Any, weights: Any, energy: float,
    info_index: int = 0, xp: Any = np,
) -> MisfitTerms:
    """``MisfitTerms`` from the per-lobe sums of ``vp_loss_derivatives`` (the k-ν lobe
    first) and the index of C10 in the parameters: the per-frequency gradients sum over
    ν to the gradient (the misfit errors' clusters, fit/robust)."""
    _, _, hess, grad_f, pair_f = _vp_derivatives(N, D, dN, dD, d2N, d2D, weights, energy, xp)
    per_lobe = -grad_f / energy
    M = per_lobe.shape[1] // 2
    P = per_lobe.shape[0]
    ok = D > D_FLOOR
    explained = xp.where(ok, (N.real**2 + N.imag**2) / xp.where(ok, D, 1.0), 0.0) * weights
    info = pair_f[pairs_of(P).index((info_index, info_index))]
    # One (counted) download of every per-frequency term.
    host = to_host(xp.concatenate([(per_lobe[:, :M] + per_lobe[:, M:]).ravel(),
                                   explained[:M] + explained[M:], info[:M] + info[M:]]),
                   "frequency_gradients", np.float64)
    n = P * M
    return MisfitTerms(per_nu=host[:n].reshape(P, M), hessian=hess, explained=host[n:n + M],
                       curvature=host[n + M:])


def symmetric_from_pairs(values: np.ndarray, P: int) -> np.ndarray:
    """(..., P(P+1)/2) in ``pairs_of(P)`` order -> symmetric (..., P, P)."""
    out = np.empty((*values.shape[:-1], P, P))
    for n, (i, j) in enumerate(pairs_of(P)):
        out[..., i, j] = out[..., j, i] = values[..., n]
    return out


def _vp_derivatives(
    N: Any, D: Any, dN: Any, dD: Any, d2N: Any, d2D: Any, weights: Any, energy: float,
    xp: Any,
) -> tuple[float, np.ndarray, np.ndarray, Any, Any]:
    """Loss, gradient, Hessian, the gradient's per-lobe-frequency terms ∂f (P, 2M) and
    the Hessian's, (P(P+1)/2, 2M) in ``pairs_of`` order."""
    require_energy(energy)
    ok = D > D_FLOOR
    inv_d = xp.where(ok, 1.0 / xp.where(ok, D, 1.0), 0.0) * weights
    n2 = N.real**2 + N.imag**2
    loss = 1.0 - float(xp.sum(n2 * inv_d)) / energy
    re_n_dn = (N.conj()[None, :] * dN).real  # Re(N* N_i), (P, 2M)
    grad_f = 2 * re_n_dn * inv_d - n2 * dD * inv_d * inv_d_unweighted(D, ok, xp)
    grad = -xp.sum(grad_f, axis=1) / energy
    n_params = dN.shape[0]
    inv_uw = inv_d_unweighted(D, ok, xp)
    # Each pair's terms (2M,) in rows: a row's sum is the Hessian entry.
    pair_t = xp.stack([
        (2 * (dN[j].conj() * dN[i] + N.conj() * d2N[n]).real
         - 2 * re_n_dn[i] * dD[j] * inv_uw
         - 2 * re_n_dn[j] * dD[i] * inv_uw
         - n2 * d2D[n] * inv_uw
         + 2 * n2 * dD[i] * dD[j] * inv_uw * inv_uw) * inv_d
        for n, (i, j) in enumerate(pairs_of(n_params))])
    hess = symmetric_from_pairs(_host(-xp.sum(pair_t, axis=1) / energy, xp), n_params)
    return loss, _host(grad, xp), hess, grad_f, -pair_t / energy


def inv_d_unweighted(D: Any, ok: Any, xp: Any) -> Any:
    return xp.where(ok, 1.0 / xp.where(ok, D, 1.0), 0.0)


def coherence_loss(C_sum: Any, weights: Any, energy: float, n_bf: int, xp: Any = np) -> float:
    """Phase-only coherence: 1 - Σ w |Σ_b C_b|² / (B E)."""
    return float(1.0 - float(xp.sum(weights * (C_sum.real**2 + C_sum.imag**2)))
                 / (n_bf * require_energy(energy)))


def phase_variance_loss(phase: Any, xp: Any = np) -> float:
    """Real-space phase variance of the reconstruction, negated (sharper images score lower)."""
    return -float(xp.var(phase))


def phase_skewness(phase: Any, xp: Any = np) -> float:
    """Skewness of a phase image: positive when sparse positive peaks (atoms) dominate.

    The VP loss is exactly invariant under (θ → θ+π, aberrations → -aberrations,
    tilt → -tilt), which flips the sign of the reconstructed phase; a positive
    projected potential (atoms bright) breaks that tie.
    """
    d = phase - xp.mean(phase)
    var = float(xp.mean(d * d))
    return float(xp.mean(d * d * d)) / var**1.5 if var > 0 else 0.0


def _host(a: Any, xp: Any) -> np.ndarray:
    if xp is np:
        return np.asarray(a, dtype=np.float64)
    return to_host(a, "objective", np.float64)
