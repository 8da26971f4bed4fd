"""The VP loss rebuilt in torch (float64) from the probe P(q) = A exp(-iχ) in the Krivanek
polar form, independently of livessb's algebra (fast path and general χ alike): only the
prepared spectra, frequencies and trotter masks are shared. Autograd of it checks the
exact derivatives (test_derivatives.py); its value checks the losses the widget shows
(test_preview_loss.py)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import torch

from livessb.params import JOINT

if TYPE_CHECKING:
    from livessb import Dataset4D
    from livessb.engine.cpu import HostSpectra

    # G, k, nu, mask, weights; energy, wavelength, aperture and edge width (torch_vp_loss's order)
    LossArgs = tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor,
                     float, float, float, float]

torch.set_default_dtype(torch.float64)


def torch_vp_loss(theta: torch.Tensor, G: torch.Tensor, k: torch.Tensor, nu: torch.Tensor,
                  mask: torch.Tensor, weights: torch.Tensor, energy: float, lam: float,
                  k_alpha: float, edge: float, names: Sequence[str] = JOINT,
                  pair_k: torch.Tensor | None = None) -> torch.Tensor:
    """``pair_k``: the BF frequencies that set the apertures and the trotter lobes (a held
    rotation's), the phases taking ``k``'s; by default ``k`` for both."""
    p = dict(zip(names, theta, strict=True))
    t_r, t_c, depth = p["tilt_row_mrad"], p["tilt_col_mrad"], p["depth"]
    held = k if pair_k is None else pair_k

    def probe(qr: torch.Tensor, qc: torch.Tensor, ar: torch.Tensor,
              ac: torch.Tensor) -> torch.Tensor:
        q2 = qr**2 + qc**2
        phi = torch.atan2(qc, qr)
        chi = math.pi * lam * q2 * (p["C10"] + p["C12"] * torch.cos(2 * (phi - p["phi12"])))
        lq = torch.sqrt(q2) * lam  # Krivanek polar form, written out for the opt-in terms
        if "C21" in p:
            chi = chi + 2 * math.pi / lam * p["C21"] / 3 * lq**3 * torch.cos(phi - p["phi21"])
        if "C23" in p:
            chi = chi + 2 * math.pi / lam * p["C23"] / 3 * lq**3 * torch.cos(
                3 * (phi - p["phi23"]))
        if "C30" in p:
            chi = chi + 2 * math.pi / lam * p["C30"] / 4 * lq**4
        amp = torch.clamp((k_alpha - torch.sqrt(ar**2 + ac**2)) / edge + 0.5, 0.0, 1.0)
        return amp * torch.exp(-1j * chi)

    kr, kc = k[:, :1], k[:, 1:]
    hr, hc = held[:, :1], held[:, 1:]
    nr, nc = nu[None, :, 0], nu[None, :, 1]
    tilt = 2 * math.pi * 1e-3 * (nr * t_r + nc * t_c)
    b1 = math.pi * lam * ((kr - nr) ** 2 + (kc - nc) ** 2 - kr**2 - kc**2) + tilt
    b2 = -math.pi * lam * ((kr + nr) ** 2 + (kc + nc) ** 2 - kr**2 - kc**2) + tilt
    S1 = _sinc(b1 * depth / 2)
    S2 = _sinc(b2 * depth / 2)
    P = probe(kr, kc, hr, hc)
    gam = mask * (S1 * probe(kr - nr, kc - nc, hr - nr, hc - nc) * P.conj()
                  - S2 * probe(kr + nr, kc + nc, hr + nr, hc + nc).conj() * P)
    # One object per trotter lobe: the pairs whose k-ν lies in the disc, and the rest.
    lobes = [((hr - nr) ** 2 + (hc - nc) ** 2 <= k_alpha**2).to(gam.real.dtype)]
    lobes.append(1 - lobes[0])
    N = torch.cat([(lobe * gam.conj() * G).sum(0) for lobe in lobes])
    D = torch.cat([(lobe * gam.abs() ** 2).sum(0) for lobe in lobes])
    w = torch.cat([weights, weights])
    ok = D > 1e-12
    return 1 - (w[ok] * N[ok].abs() ** 2 / D[ok]).sum() / energy


def _sinc(x: torch.Tensor) -> torch.Tensor:
    # torch.sinc's double backward is NaN at 0; use the series there.
    small = x.abs() < 1e-3
    safe = torch.where(small, torch.ones_like(x), x)
    return torch.where(small, 1 - x**2 / 6 + x**4 / 120, torch.sin(safe) / safe)


def torch_loss_args(ds: Dataset4D, sp: HostSpectra) -> LossArgs:
    """torch_vp_loss's data arguments for prepared spectra ``sp`` of ``ds``."""
    ref = sp.part.geometry
    mask = np.concatenate([(g.amp_minus != 0) | (g.amp_plus != 0) for g in ref.grids])
    return (torch.tensor(sp.G), torch.tensor(ref.k),
            torch.tensor(np.stack([ref.nu_r, ref.nu_c], 1)),
            torch.tensor(mask, dtype=torch.float64), torch.tensor(ref.weights), sp.energy,
            ds.wavelength_A, ds.k_alpha, ds.detector_pixel_inv_A)
