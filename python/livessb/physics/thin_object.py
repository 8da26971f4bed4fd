"""A thin crystal's every term: the lattice model's second order (issue 20; docs/bias-matrix.md
§14, §17).

The lattice model (physics.lattice) gives each lattice frequency g a free object per trotter
lobe: the first-order terms of the intensity. A thin object's exit wave at BF pixel k for
the probe at R is Σ_b T(b) P(k − b) e^{2πi b·R} over its beams b (the lattice points and the
zero beam), so the intensity's component at g is

    c(g, k) = Σ_b ψ(b, k) ψ*(b − g, k),   ψ(b, k) = T(b) P(k − b),   P = a·e^{−iχ}:

the terms b = g and b = 0 are the two lobes (their objects T(g)T*(0) and −T(0)T*(−g) times
``lattice_columns``' columns), the others the strong object's second-order terms. On the
lattice's integer grid c is an autocorrelation over the beams, pixel by pixel: two FFTs
over a grid of (3r+1)² cells (r the largest index) whatever the number of terms. The loss
is the lattice model's, −2 Re Σ c*H + Σ_k c_kᴴ K c_k (``LatticeData``: the window's leakage and the
aliases included), with the gradient by T and by the aberrations in the same two FFTs.
Every function is pure and runs on NumPy or CuPy arrays (``xp``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..xp import to_host
from .geometry import fft_friendly_size
from .lattice import LatticeData
from .lattice_columns import LatticeGeometry, pixel_mean, sampled_geometry
from .optics import aperture
from .transforms import fft2, rfft2

# The aberrations whose derivative χ′ the thin object's gradient holds (the phase of P).
THIN_OBJECT_PARAMS = ("C10", "C12", "phi12")


@dataclass(frozen=True)
class BeamGrid:
    """The beams of one lattice on its integer grid: ``index`` (n_g, 2) of each lattice
    frequency g (h, k: g = h·b₁ + k·b₂), ``reach`` r (the grid runs −r…r per axis), ``size``
    the FFT's side (> 3r: the lags −r…r read, of a correlation spanning −2r…2r, take no
    wrapped-around term), ``beams`` (n_b, 2) 1/Å, the zero beam first, then the lattice
    frequencies, and ``lattice_at`` (n_g, 2), ``lattice_conj`` (n_g,): where each g's
    autocorrelation lies in the half spectrum ``rfft2`` gives of a real power (the bin of
    g, read conjugated, where g's column is in the half; else the bin of −g as it is)."""

    index: np.ndarray
    reach: int
    size: int
    beams: np.ndarray
    lattice_at: np.ndarray
    lattice_conj: np.ndarray


def beam_grid(g: np.ndarray, basis: np.ndarray) -> BeamGrid:
    """The ``BeamGrid`` of the lattice frequencies ``g`` (n_g, 2) of ``basis`` (rows b₁, b₂)."""
    index = np.rint(np.asarray(g) @ np.linalg.inv(basis)).astype(int)
    if not np.allclose(index @ basis, g, atol=1e-9 * max(1.0, float(np.abs(g).max()))):
        raise ValueError("g are not points of the lattice of basis")
    reach = int(np.abs(index).max())
    size = fft_friendly_size(3 * reach + 1)
    beams = np.concatenate([np.zeros((1, 2)), np.asarray(g, dtype=float)])
    in_half = index[:, 1] % size <= size // 2
    lattice_at = np.where(in_half[:, None], index, -index) % size
    return BeamGrid(index=index, reach=reach, size=size, beams=beams,
                    lattice_at=lattice_at, lattice_conj=in_half)


@dataclass(frozen=True)
class BeamTerms:
    """What P(k − b) needs that the parameters do not change, per beam and BF pixel
    sample (n_b, B·samples): |q|², q_r² − q_c², 2 q_r q_c (q = k − b) and the aperture
    a(q); ``samples`` per pixel (``LatticeGeometry.pixel_offsets``: 1 at each centre)."""

    q2: Any
    astig_c: Any
    astig_s: Any
    amplitude: Any
    wavelength: float
    samples: int = 1


def beam_terms(geo: LatticeGeometry, grid: BeamGrid, xp: Any = np) -> BeamTerms:
    """``BeamTerms`` at each pixel's centre, or at its samples where the detector integrates
    (``lattice_columns.sampled_geometry``)."""
    at, samples = sampled_geometry(geo, xp)
    b = xp.asarray(grid.beams)
    qr = at.k[None, :, 0] - b[:, 0:1]
    qc = at.k[None, :, 1] - b[:, 1:2]
    return BeamTerms(q2=qr * qr + qc * qc, astig_c=qr * qr - qc * qc, astig_s=2 * qr * qc,
                     amplitude=aperture(qr, qc, at.k_alpha, at.edge_width, xp),
                     wavelength=at.wavelength, samples=samples)


def _pixel_mean(c: Any, samples: int) -> Any:
    """(n, B·samples) → (n, B): each pixel's samples averaged (its integral over its area)."""
    return c if samples == 1 else pixel_mean(c.T, samples).T


def probe_at_beams(terms: BeamTerms, params: Mapping[str, float], xp: Any = np
                   ) -> tuple[Any, list[Any]]:
    """P(k − b) (n_b, B) for every beam and BF pixel, and ∂χ(k − b)/∂p for each of
    ``THIN_OBJECT_PARAMS`` (the convention of ``lattice_columns``: its k−g lobe is
    P(k − g)P*(k))."""
    C10, C12, phi12 = (float(params.get(n, 0.0)) for n in THIN_OBJECT_PARAMS)
    c2, s2 = math.cos(2 * phi12), math.sin(2 * phi12)
    pl = math.pi * terms.wavelength
    astig = c2 * terms.astig_c + s2 * terms.astig_s
    chi = pl * (C10 * terms.q2 + C12 * astig)
    P = terms.amplitude * xp.exp(-1j * chi)
    dchi = [pl * terms.q2, pl * astig, pl * C12 * 2 * (-s2 * terms.astig_c + c2 * terms.astig_s)]
    return P, dchi


def _on_grid(values: Any, grid: BeamGrid, rows: np.ndarray, xp: Any) -> Any:
    """(n, B) values at the integer ``rows`` (n, 2) → (B, size, size) on the FFT grid
    (each at its index mod size)."""
    out = xp.zeros((values.shape[1], grid.size, grid.size), dtype=complex)
    idx = rows % grid.size
    out[:, idx[:, 0], idx[:, 1]] = values.T
    return out


def _at_lattice(full: Any, grid: BeamGrid, rows: np.ndarray) -> Any:
    """(B, size, size) → (n, B) at the integer ``rows`` (n, 2)."""
    idx = rows % grid.size
    return full[:, idx[:, 0], idx[:, 1]].T


def _beam_rows(grid: BeamGrid) -> np.ndarray:
    return np.concatenate([np.zeros((1, 2), dtype=int), grid.index])


@dataclass
class ThinObjectLoss:
    """The loss at one (T, parameters) and its gradient, on the host: by T (n_b,) complex,
    as ∂L/∂Re T + i ∂L/∂Im T, and by each of ``THIN_OBJECT_PARAMS``; ``c`` (n_g, B) the
    model's spectra (in ``xp``)."""

    loss: float
    by_T: np.ndarray
    by_params: list[float]
    c: Any


def thin_object_spectra(geo: LatticeGeometry, grid: BeamGrid, T: Any,
                        params: Mapping[str, float], xp: Any = np) -> Any:
    """c(g, k) (n_g, B) of the thin object with beams ``T`` (n_b,: the zero beam first),
    each pixel's integral where ``geo`` says the detector integrates."""
    terms = beam_terms(geo, grid, xp)
    P, _ = probe_at_beams(terms, params, xp)
    return _pixel_mean(_autocorrelation(T[:, None] * P, grid, xp)[1], terms.samples)


def _autocorrelation(psi: Any, grid: BeamGrid, xp: Any) -> tuple[Any, Any]:
    """(F, c): ψ's transform over the beam grid and c(g, k) = Σ_b ψ(b)ψ*(b − g) at the
    lattice frequencies: the inverse transform of the real power |F|², taken as the
    conjugate of its half-spectrum forward transform (c(−g) = c(g)*)."""
    F = fft2(_on_grid(psi, grid, _beam_rows(grid), xp), xp)
    power = F.real * F.real + F.imag * F.imag
    half = rfft2(power, xp)
    at = grid.lattice_at
    c = half[:, at[:, 0], at[:, 1]].T / (grid.size * grid.size)
    return F, xp.where(xp.asarray(grid.lattice_conj)[:, None], xp.conj(c), c)


def thin_object_loss(data: LatticeData, geo: LatticeGeometry, grid: BeamGrid, T: Any,
                     params: Mapping[str, float], xp: Any = np,
                     terms: BeamTerms | None = None) -> ThinObjectLoss:
    """The lattice loss −2 Re Σ c*H + Σ_k c_kᴴ K c_k of the thin object and its gradient
    (``terms``: ``beam_terms(geo, grid)``, computed here when not given), read back in one
    transfer.

    With E = Kc − H (E(−g) = E(g)*), dL = 4 Re Σ_{b,k} G*(b, k) dψ(b, k) where
    G(b) = Σ_g E(g) ψ(b − g): a convolution over the beams, the second FFT product. Where
    the pixels integrate, c is each pixel's mean over its samples and each sample takes
    its pixel's E over the number of samples."""
    terms = terms or beam_terms(geo, grid, xp)
    P, dchi = probe_at_beams(terms, params, xp)
    F, c_samples = _autocorrelation(T[:, None] * P, grid, xp)
    c = _pixel_mean(c_samples, terms.samples)
    Kc = data.K @ c
    residual = Kc - data.H
    if terms.samples > 1:
        residual = xp.repeat(residual / terms.samples, terms.samples, axis=1)
    E = fft2(_on_grid(residual, grid, grid.index, xp), xp)
    G = _at_lattice(fft2(E * F, xp, inverse=True), grid, _beam_rows(grid))  # (n_b, B)
    weight = xp.conj(G) * P  # dL = 4 Re Σ G* (dT P + T dP), dP = −i χ′ P
    # Re(−i T w) = Im(T w): each parameter's term is a real dot product with χ′
    tw = (T[:, None] * weight).imag.ravel()
    scalars = xp.stack([xp.vdot(c, Kc - 2 * data.H).real]
                       + [4 * xp.dot(d.ravel(), tw) for d in dchi])
    host = to_host(xp.concatenate([scalars.astype(complex),
                                   4 * xp.conj(xp.sum(weight, axis=1))]),
                   "thin_object.loss")
    return ThinObjectLoss(loss=float(host[0].real), by_T=host[4:],
                          by_params=[float(v.real) for v in host[1:4]], c=c)


def first_order_objects(T: Any, grid: BeamGrid, xp: Any = np) -> Any:
    """The lobes' objects (2 n_g,) the thin object's first-order terms give, in
    ``lattice_columns``' order (the k−g lobes, then the k+g lobes): T(g)T*(0) and
    −T(0)T*(−g)."""
    where = {tuple(i): n + 1 for n, i in enumerate(grid.index)}
    minus_g = xp.asarray([where[(-i[0], -i[1])] for i in grid.index])
    return xp.concatenate([T[1:] * xp.conj(T[0]), -T[0] * xp.conj(T[minus_g])])
