"""The lattice model's columns (physics.lattice): each lattice point's per-lobe term of
Γ(k; g) over the BF pixels, its derivatives by the fit's parameters (first and second:
the loss's exact gradient and Hessian) and by g itself (the basis's exact gradient)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from ..params import JOINT, MRAD
from .geometry import trotter_support
from .optics import aperture
from .overlap import (
    PAIRS,
    _sinc_and_derivatives,
    gamma_derivatives,
    gamma_general,
    gamma_general_derivatives,
    pair_grid,
    pairs_of,
)


@dataclass
class LatticeGeometry:
    """The BF pixels' scan-frame frequencies ``k`` (B, 2) and the optics constants;
    ``pixel_offsets`` (s², 2) the scan-frame offsets of s × s samples over each pixel's
    area where the detector integrates (None: each pixel read at its centre, the
    aperture's edge one pixel soft). The columns and the thin object's terms are each
    pixel's mean over its samples (``sampled_geometry``)."""

    k: Any
    wavelength: float
    k_alpha: float
    edge_width: float
    pixel_offsets: Any = None

    @property
    def samples_per_axis(self) -> int:
        """s: each pixel read as the mean of s × s samples (1: at its centre)."""
        return 1 if self.pixel_offsets is None else math.isqrt(int(self.pixel_offsets.shape[0]))


PIXEL_SETS = ("discs", "single", "trotter")


def sampled_geometry(geo: LatticeGeometry, xp: Any = np) -> tuple[LatticeGeometry, int]:
    """``geo`` at its pixels' samples (B·n rows, pixel after pixel; each sample's aperture
    edge as soft as its part of the pixel: the lit fraction) and n, the samples a pixel
    (``geo`` itself and 1 where the pixels are read at their centres)."""
    if geo.pixel_offsets is None:
        return geo, 1
    n = int(geo.pixel_offsets.shape[0])
    k = (geo.k[:, None, :] + xp.asarray(geo.pixel_offsets)[None]).reshape(-1, 2)
    return replace(geo, k=k, edge_width=geo.edge_width / geo.samples_per_axis,
                   pixel_offsets=None), n


def pixel_mean(rows: Any, n: int) -> Any:
    """(B·n, m) rows of samples → (B, m): each pixel's mean over its n samples (the
    midpoint rule of its integral)."""
    return rows if n == 1 else rows.reshape(-1, n, rows.shape[-1]).mean(axis=1)


def lattice_columns(geo: LatticeGeometry, g: np.ndarray, params: Mapping[str, float],
                    names: Sequence[str], xp: Any = np, order: int = 0,
                    pixels: str = "discs") -> tuple[Any, list[Any]]:
    """The model's columns A (B, 2 n_g): the k−g lobe's term of Γ(k; g), then the k+g
    lobe's, and (``order`` 1) their derivatives by each of ``names``.

    ``pixels`` "discs": each lobe's term wherever its disc reaches. A pixel both discs
    cover carries both, as the first-order intensity does: there the two terms have the
    same slope in k and differ by the phases ∓πλC10|g|² (for defocus), which the objects
    the single-overlap pixels fix turn into a direct reading of C10. The columns go to
    zero with the aperture's soft edge, so the loss is smooth in g (the basis is refined
    by its gradient, ``lattice_point_gradient``). "single": the same terms faded out
    where the other disc covers the pixel (1 − its aperture): the single-overlap pixels
    alone, whose estimate reads C10 from the slopes only (crystal mode's systematic part
    compares the two). "trotter": Γ on each lobe's single-overlap pixels with hard edges,
    the per-bin model's sets (the model is then the per-bin model on the window's own
    grid); a pixel crossing a hard disc edge as g moves makes that loss jump."""
    gam, grads, _ = lattice_column_derivatives(geo, g, params, names, xp, min(order, 1),
                                               pixels)
    return gam, grads


def lattice_column_derivatives(geo: LatticeGeometry, g: np.ndarray,
                               params: Mapping[str, float], names: Sequence[str],
                               xp: Any = np, order: int = 2, pixels: str = "discs"
                               ) -> tuple[Any, list[Any], list[Any]]:
    """``lattice_columns`` with (``order`` 2) the second derivatives by each pair of
    ``names`` too (``overlap.pairs_of`` order): the exact Hessian's columns
    (``lattice_hessian``)."""
    sampled, n = sampled_geometry(geo, xp)
    if n > 1:  # each integrating pixel's mean over its samples: the terms are linear in it
        out = lattice_column_derivatives(sampled, g, params, names, xp, order, pixels)
        return pixel_mean(out[0], n), *([pixel_mean(d, n) for d in part] for part in out[1:])
    k = geo.k
    kr, kc = k[:, 0:1], k[:, 1:2]
    gd = xp.asarray(g)
    nr, nc = gd[None, :, 0], gd[None, :, 1]
    grid = pair_grid(kr, kc, nr, nc, geo.wavelength, geo.k_alpha, geo.edge_width, xp)
    if pixels in ("discs", "single"):  # the lobes side by side, each computed alone
        minus, plus = grid.amp_minus, grid.amp_plus
        if pixels == "single":  # each lobe faded out where the other disc covers the pixel
            a_k = aperture(kr, kc, geo.k_alpha, geo.edge_width, xp)
            a_k = xp.where(a_k > 0, a_k, 1)
            minus, plus = minus * (1 - plus / a_k), plus * (1 - grid.amp_minus / a_k)
        lobes = [_gamma_terms(replace(grid, amp_minus=minus, amp_plus=None), params, names,
                              order, xp),
                 _gamma_terms(replace(grid, amp_minus=None, amp_plus=plus), params, names,
                              order, xp)]
        gam = xp.concatenate([lobes[0][0], lobes[1][0]], axis=1)
        return gam, *([xp.concatenate([a, b], axis=1) for a, b in zip(*parts, strict=True)]
                      for parts in ((lobes[0][1], lobes[1][1]), (lobes[0][2], lobes[1][2])))
    if pixels != "trotter":
        raise ValueError(f"pixels={pixels!r}: use one of {', '.join(PIXEL_SETS)}")
    gam, grads, hess = _gamma_terms(grid, params, names, order, xp)
    support = trotter_support(k, nr[0], nc[0], geo.k_alpha, xp)
    in_minus = grid.minus_lobe & support
    in_plus = ~grid.minus_lobe & support

    def split(x: Any) -> Any:
        return xp.concatenate([xp.where(in_minus, x, 0), xp.where(in_plus, x, 0)], axis=1)

    return split(gam), [split(d) for d in grads], [split(d) for d in hess]


def _gamma_terms(grid: Any, params: Mapping[str, float], names: Sequence[str], order: int,
                 xp: Any) -> tuple[Any, list[Any], list[Any]]:
    """Γ on ``grid`` and (``order`` 1, 2) its derivatives by ``names``."""
    if set(params) <= set(JOINT) and set(names) <= set(JOINT):  # the six's fast path
        gam, every, every2 = gamma_derivatives(grid, params, order, xp)
        index = [JOINT.index(n) for n in names]
        grads = [every[i] for i in index] if order else []
        hess = [every2[PAIRS.index(tuple(sorted((index[a], index[b]))))]
                for a, b in pairs_of(len(names))] if order > 1 else []
        return gam, grads, hess
    if order:
        gam, grads, hess = gamma_general_derivatives(grid, params, tuple(names), xp)
        return gam, grads, hess if order > 1 else []
    return gamma_general(grid, params, xp), [], []


def lattice_columns_by_g(geo: LatticeGeometry, g: np.ndarray, params: Mapping[str, float],
                         xp: Any = np) -> tuple[Any, list[Any]] | None:
    """The "discs" columns A (B, 2 n_g) and, per axis, each column's derivative by its own
    g ([∂A/∂g_r, ∂A/∂g_c]): the basis's exact gradient (``lattice_point_gradient``). For
    the lobe of sign s (q = k + s·g; the k−g lobe s = −1) the term is
    −s·a(k)a(q)·e^{i s(χ(q)−χ(k))}·S(βΔ/2), β = −s·πλ(|q|² − |k|²) + 2πg·τ, so

        ∂/∂g_a = −s·a(k)e^{i s Δχ}·[s·a′(q)·(q_a/|q|)·S + a(q)·(i ∂_aχ(q)·S + S′·(Δ/2)·∂_aβ)],

    ∂_aβ = −2πλq_a + 2πτ_a, a′ the soft edge's slope (−1/edge width on it, 0 off it).
    None where the parameters go beyond the six (χ's general form: differences of the
    columns instead)."""
    if not set(params) <= set(JOINT):
        return None
    sampled, n = sampled_geometry(geo, xp)
    if n > 1:  # each integrating pixel's mean over its samples
        at_samples = lattice_columns_by_g(sampled, g, params, xp)
        assert at_samples is not None
        return pixel_mean(at_samples[0], n), [pixel_mean(d, n) for d in at_samples[1]]
    A = lattice_columns(geo, g, params, (), xp)[0]
    C10, C12, phi12 = (float(params.get(n, 0.0)) for n in JOINT[:3])
    tilt = [float(params.get(n, 0.0)) * MRAD for n in ("tilt_row_mrad", "tilt_col_mrad")]
    depth = float(params.get("depth", 0.0))
    c2, s2 = math.cos(2 * phi12), math.sin(2 * phi12)
    pl = math.pi * geo.wavelength
    kr, kc = geo.k[:, 0:1], geo.k[:, 1:2]
    gd = xp.asarray(g)
    nr, nc = gd[None, :, 0], gd[None, :, 1]
    a_k = aperture(kr, kc, geo.k_alpha, geo.edge_width, xp)
    chi_k = pl * (C10 * (kr * kr + kc * kc) + C12 * (c2 * (kr * kr - kc * kc) + s2 * 2 * kr * kc))
    by_axis: list[list[Any]] = [[], []]
    for s in (-1, 1):
        qr, qc = kr + s * nr, kc + s * nc
        q2 = qr * qr + qc * qc
        a_q = aperture(qr, qc, geo.k_alpha, geo.edge_width, xp)
        on_edge = (a_q > 0) & (a_q < 1)
        slope = xp.where(on_edge, -1.0 / max(geo.edge_width, 1e-300), 0.0) / xp.sqrt(
            xp.where(q2 > 0, q2, 1.0))  # a′(|q|)/|q|
        chi_q = pl * (C10 * q2 + C12 * (c2 * (qr * qr - qc * qc) + s2 * 2 * qr * qc))
        wave = -s * a_k * xp.exp(1j * s * (chi_q - chi_k))
        beta = -s * pl * (q2 - (kr * kr + kc * kc)) + 2 * math.pi * (nr * tilt[0] + nc * tilt[1])
        S, dS, _ = _sinc_and_derivatives(beta * (depth / 2), xp)
        dchi = [2 * pl * (C10 * qr + C12 * (c2 * qr + s2 * qc)),
                2 * pl * (C10 * qc + C12 * (s2 * qr - c2 * qc))]
        for axis, (q_a, t_a) in enumerate(((qr, tilt[0]), (qc, tilt[1]))):
            d_beta = -2 * pl * q_a + 2 * math.pi * t_a
            inner = s * slope * q_a * S + a_q * (1j * dchi[axis] * S + dS * (depth / 2) * d_beta)
            by_axis[axis].append(wave * inner)
    return A, [xp.concatenate(parts, axis=1) for parts in by_axis]
