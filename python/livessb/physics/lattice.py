"""The lattice model of a crystal's spectra (docs/bias-matrix.md §14; issue 20).

A crystal's signal lives at its lattice frequencies g, and a finite scan window spreads
each over every bin of the spectrum:

    G(ν, k) = Σ_g W(g − ν) c_g(k),   W(x) = Π_axis Σ_{R<n} e^{2πi x·R·step},

so a small window's bins each carry several lattice frequencies, which the per-bin model
(one frequency per bin) cannot describe, and an undersampled scan's aliases land on bins
with their own Γ (W is periodic with period 1/step). The lattice model writes each c_g
as the per-lobe model at g itself, Γ(k; g)·O_lobe(g), one free object per (g, lobe), and
eliminates them by variable projection. W factors out of the normal equations:

    b[(g, l)]              = Σ_k Γ_l*(k; g) H(g, k),   H(g, k) = N Σ_R I′(R, k) e^{−2πi g·R}
    M[(g, l), (g′, l′)]    = K(g, g′) Σ_k Γ_l*(k; g) Γ_l′(k; g′),
    K(g, g′)               = N W(g′ − g) − W*(g) W(g′)       (the mean, DC, left out)

and the loss is −bᴴM⁻¹b: minus the energy the model explains of Σ_ν Σ_k |G(ν, k)|² over
every bin (N positions, I′ the mean-removed counts). Its size is the number of lattice
points within 2k_α (~120 for SrTiO3 at 20 mrad) whatever the window's size. With the
per-bin model's pixel sets (``lattice_columns(pixels="trotter")``), where the lattice fits
the window it *is* the per-bin model at g; crystal mode takes each lobe's term over its
whole disc (``pixels="discs"``, docs/bias-matrix.md §16). Every function here is pure and
runs on NumPy or CuPy arrays (``xp``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..xp import to_host
from .overlap import pairs_of

# Columns (g, lobe) whose Gram diagonal is below this fraction of the largest hold no
# BF pixel worth a free object: left out of the solve.
EMPTY_COLUMN_REL = 1e-12


def lattice_points(basis: np.ndarray, k_alpha: float) -> np.ndarray:
    """(n_g, 2) lattice frequencies h·b₁ + k·b₂ (1/Å, scan frame; ``basis`` rows b₁, b₂)
    whose trotter holds BF pixels: 0 < |g| < 2k_α."""
    # |(h, k)| ≤ |g|·‖basis⁻¹‖: every point within 2k_α, even for a skewed basis
    reach = int(np.ceil(2 * k_alpha * np.linalg.norm(np.linalg.inv(basis), 2))) + 1
    h = np.arange(-reach, reach + 1)
    hk = np.stack(np.meshgrid(h, h, indexing="ij"), -1).reshape(-1, 2)
    g = hk @ basis
    norm = np.hypot(g[:, 0], g[:, 1])
    return np.ascontiguousarray(g[(norm > 1e-12) & (norm < 2 * k_alpha)])


def lattice_periods_A(basis: Any) -> list[float]:
    """The periods (Å) a reciprocal basis's vectors describe: 1/|b| each (the spacing of
    the lattice planes b is normal to)."""
    return [1 / math.hypot(float(b[0]), float(b[1])) for b in basis]


def window_kernel(x: Any, shape: tuple[int, int], step: tuple[float, float],
                  xp: Any = np) -> Any:
    """W(x) for (..., 2) frequencies ``x`` (1/Å): the window's positions summed per axis,
    in closed form (a geometric series), exact at the bins where it is n."""
    out = xp.ones(x.shape[:-1], dtype=complex)
    for axis, n in enumerate(shape):
        phase = 2 * math.pi * x[..., axis] * step[axis]
        half = xp.sin(phase / 2)
        whole = xp.sin(n * phase / 2)
        near = xp.abs(half) < 1e-9
        ratio = xp.where(near, n * xp.cos(n * phase / 2) / xp.where(near, xp.cos(phase / 2), 1),
                         whole / xp.where(near, 1, half))
        out = out * ratio * xp.exp(0.5j * (n - 1) * phase)
    return out


@dataclass
class LatticeData:
    """What does not depend on the parameters for one window and lattice: the lattice
    frequencies ``g`` (n_g, 2) on the host, each g's transform of the mean-removed counts
    ``H`` (n_g, B), the window's Gram ``K`` (n_g, n_g) and the total energy ``energy``
    Σ_ν≠0 Σ_k |G(ν, k)|² (= N Σ_R Σ_k I′², Parseval); with ``derivatives``, ``dH``
    (2, n_g, B): ∂H/∂g per axis (the basis gradient's)."""

    g: np.ndarray
    H: Any
    K: Any
    energy: float
    n_positions: int
    shape: tuple[int, int] = (0, 0)
    step: tuple[float, float] = (0.0, 0.0)
    dH: Any = None


def lattice_data(counts: Any, g: np.ndarray, step: tuple[float, float],
                 xp: Any = np, derivatives: bool = False) -> LatticeData:
    """``LatticeData`` of a (h, w, B) window of BF counts (any real dtype) at ``g``."""
    h, w = counts.shape[:2]
    n = h * w
    intensity = counts.astype(np.float64)
    intensity = intensity - intensity.mean(axis=(0, 1), keepdims=True)
    gd = xp.asarray(g)
    r = xp.arange(h) * step[0]
    c = xp.arange(w) * step[1]
    e_r = xp.exp(-2j * math.pi * gd[:, 0, None] * r)
    e_c = xp.exp(-2j * math.pi * gd[:, 1, None] * c)
    # Σ_c e_c I (a matrix product over the window's columns), then Σ_r e_r per g
    by_col = xp.tensordot(e_c, intensity, axes=([1], [1]))  # (n_g, h, B)
    H = n * xp.einsum("gr,grb->gb", e_r, by_col)
    dH = None
    if derivatives:  # ∂/∂g of e^{−2πi g·R}: −2πi R per axis
        by_col_c = xp.tensordot(e_c * (-2j * math.pi * c), intensity, axes=([1], [1]))
        dH = n * xp.stack([xp.einsum("gr,grb->gb", e_r * (-2j * math.pi * r), by_col),
                           xp.einsum("gr,grb->gb", e_r, by_col_c)])
    W = window_kernel(gd, (h, w), step, xp)
    K = n * window_kernel(gd[None, :, :] - gd[:, None, :], (h, w), step, xp) - xp.outer(
        xp.conj(W), W)
    energy = float(n * xp.sum(intensity * intensity))
    return LatticeData(g=np.asarray(g), H=H, K=K, energy=energy, n_positions=n,
                       shape=(h, w), step=(float(step[0]), float(step[1])), dH=dH)


def window_kernel_gradient(x: Any, shape: tuple[int, int], step: tuple[float, float],
                           xp: Any = np) -> Any:
    """∂W/∂x (..., 2) for (..., 2) frequencies ``x``: each axis's sum differentiated
    term by term (Σ_R 2πi R e^{2πi x R}), times the other axis's sum."""
    sums, slopes = [], []
    for axis, n in enumerate(shape):
        R = xp.arange(n) * step[axis]
        e = xp.exp(2j * math.pi * x[..., axis, None] * R)
        sums.append(xp.sum(e, axis=-1))
        slopes.append(xp.sum(e * (2j * math.pi * R), axis=-1))
    return xp.stack([slopes[0] * sums[1], sums[0] * slopes[1]], axis=-1)


@dataclass
class LatticeFit:
    """The objects' solve at one parameter set: the loss −bᴴM⁻¹b, the objects ``x``
    (one per column, zero on empty ones), the columns ``A`` and how many objects were
    free (columns holding BF pixels), their indices ``used`` and the free block of the
    normal matrix ``Mu`` (the exact Hessian's solves, ``lattice_hessian``)."""

    loss: float
    x: Any
    A: Any
    objects: int
    used: Any = None
    Mu: Any = None


def _stacked(data: LatticeData, A: Any, xp: Any) -> tuple[Any, Any]:
    """H and K for the column blocks of ``A`` (each lobe's block reads every g):
    (2 n_g, B) and (2 n_g, 2 n_g)."""
    blocks = A.shape[1] // data.H.shape[0]
    return xp.concatenate([data.H] * blocks), xp.tile(data.K, (blocks, blocks))


def _used(K2: Any, A: Any, xp: Any) -> Any:
    """The columns of ``A`` that hold BF pixels: the Gram's diagonal K₂(j, j)·Σ|A_j|²
    above ``EMPTY_COLUMN_REL`` of its largest."""
    diag = xp.real(xp.diagonal(K2)) * xp.sum(xp.real(A * xp.conj(A)), axis=0)
    return diag > EMPTY_COLUMN_REL * float(diag.max())


def free_objects(data: LatticeData, A: Any, xp: Any = np) -> int:
    """How many objects ``lattice_solve`` frees for columns ``A`` (no solve)."""
    return int(xp.count_nonzero(_used(_stacked(data, A, xp)[1], A, xp)))


def lattice_solve(data: LatticeData, A: Any, xp: Any = np) -> LatticeFit:
    """Eliminate the objects (one per column of ``A``: per (g, lobe)) for columns ``A``."""
    Hs, K2 = _stacked(data, A, xp)
    b = xp.einsum("bj,jb->j", xp.conj(A), Hs)
    M = K2 * (xp.conj(A).T @ A)
    idx = xp.nonzero(_used(K2, A, xp))[0]
    Mu = M[idx][:, idx]
    xu = xp.linalg.solve(Mu, b[idx])
    x = xp.zeros_like(b)
    x[idx] = xu
    loss = -float(xp.real(xp.vdot(b[idx], xu)))
    return LatticeFit(loss=loss, x=x, A=A, objects=int(idx.size), used=idx, Mu=Mu)


def lattice_gradient(data: LatticeData, fit: LatticeFit, dA: Sequence[Any],
                     xp: Any = np) -> np.ndarray:
    """∂(−bᴴM⁻¹b)/∂p for each column derivative in ``dA``: with x = M⁻¹b and
    V = (A∘x)·K₂ᵀ (the model's projection), ∂L = −2 Re Σ conj(∂A∘x)·(Y − V), Y the
    transforms each column reads."""
    Hs, K2 = _stacked(data, fit.A, xp)
    resid = Hs.T - (fit.A * fit.x[None, :]) @ K2.T
    return np.array([-2.0 * float(xp.real(xp.sum(xp.conj(d * fit.x[None, :]) * resid)))
                     for d in dA])


def lattice_hessian(data: LatticeData, fit: LatticeFit, dA: Sequence[Any],
                    d2A: Sequence[Any], xp: Any = np) -> np.ndarray:
    """∂²(−bᴴM⁻¹b)/∂p_i∂p_k, exact, from the columns' first (``dA``) and second (``d2A``,
    ``overlap.pairs_of`` order) derivatives: the derivative of ``lattice_gradient``'s
    −2 Re Σ conj(∂_iA∘x)·R, R = Y − (A∘x)K₂ᵀ, with the objects' own derivatives
    ∂_k x = M⁻¹(∂_k b − ∂_k M x) over the free ones (one solve for every k):

        ∂_k∂_i L = −2 Re Σ [conj(∂_ikA∘x + ∂_iA∘∂_k x)·R − conj(∂_iA∘x)·((∂_kA∘x + A∘∂_k x)K₂ᵀ)].

    One pass of the columns' second derivatives where differences of the gradient took
    two gradients per parameter (crystal mode's Newton steps and its errors)."""
    Hs, K2 = _stacked(data, fit.A, xp)
    A, x = fit.A, fit.x
    resid = Hs.T - (A * x[None, :]) @ K2.T
    rhs = []
    for d in dA:  # ∂_k b − ∂_k M x, M = K₂∘(AᴴA): ∂(AᴴA) = G + Gᴴ, G = ∂Aᴴ A
        db = xp.einsum("bj,jb->j", xp.conj(d), Hs)
        G = xp.conj(d).T @ A
        rhs.append((db - (K2 * (G + xp.conj(G).T)) @ x)[fit.used])
    dx = xp.zeros((A.shape[1], len(dA)), dtype=x.dtype)
    dx[fit.used] = xp.linalg.solve(fit.Mu, xp.stack(rhs, axis=1))
    n = len(dA)
    H = xp.zeros((n, n), dtype=np.float64)
    second = dict(zip(pairs_of(n), d2A, strict=True))
    d_resid = [-(dA[k] * x[None, :] + A * dx[None, :, k]) @ K2.T for k in range(n)]
    for i in range(n):
        through_x = xp.sum(xp.conj(dA[i]) * resid, axis=0)  # Σ_b conj(∂_iA)·R, per column
        dAx = xp.conj(dA[i] * x[None, :])
        for k in range(i, n):
            term = (xp.sum(xp.conj(second[(i, k)] * x[None, :]) * resid)
                    + xp.sum(xp.conj(dx[:, k]) * through_x) + xp.sum(dAx * d_resid[k]))
            H[i, k] = H[k, i] = -2 * xp.real(term)
    return np.asarray(to_host(H, "lattice.hessian"))


def lattice_point_gradient(data: LatticeData, fit: LatticeFit, dA: Sequence[Any],
                           xp: Any = np) -> np.ndarray:
    """∂(−bᴴM⁻¹b)/∂g (n_g, 2) at ``fit``, through the columns (``dA``: ∂A/∂g per axis,
    each column by its own g), the transforms H (``data.dH``) and the window's Gram K:
    with x = M⁻¹b, ∂L = −2 Re xᴴ∂b + xᴴ∂M x, and ∂K(g_p, g_q) from ∂W."""
    n_g = data.H.shape[0]
    blocks = fit.A.shape[1] // n_g
    Hs, K2 = _stacked(data, fit.A, xp)
    x = fit.x
    xa = fit.A * x[None, :]
    resid = Hs.T - xa @ K2.T
    # Q(p, q) = Σ over p's and q's lobes of conj(x_j) (AᴴA)_jl x_l: the weight of ∂K(p, q)
    Q = (xp.conj(xa).T @ xa).reshape(blocks, n_g, blocks, n_g).sum(axis=(0, 2))
    g = xp.asarray(data.g)
    W = window_kernel(g, data.shape, data.step, xp)
    D = window_kernel_gradient(g, data.shape, data.step, xp)  # (n_g, 2)
    D_pairs = window_kernel_gradient(g[None, :, :] - g[:, None, :], data.shape, data.step,
                                     xp)  # (p, q, 2): at g_q − g_p
    n = data.n_positions
    out = []
    for axis in (0, 1):
        through_columns = -2 * xp.real(xp.sum(xp.conj(dA[axis] * x[None, :]) * resid, axis=0))
        dHs = xp.concatenate([data.dH[axis]] * blocks)
        through_h = -2 * xp.real(xp.conj(x) * xp.einsum("bj,jb->j", xp.conj(fit.A), dHs))
        Dp = D_pairs[..., axis]
        as_q = n * xp.sum(Q * Dp, axis=0) - D[:, axis] * (xp.conj(W) @ Q)  # g in K's column
        as_p = -n * xp.sum(Q * Dp, axis=1) - xp.conj(D[:, axis]) * (Q @ W)  # in K's row
        per_column = (through_columns + through_h).reshape(blocks, n_g).sum(axis=0)
        out.append(per_column + xp.real(as_q + as_p))
    return np.asarray(to_host(xp.stack(out, axis=1), "lattice.point_gradient"))
