"""Exact gradient and Hessian of the VP loss against torch autograd (float64).

The torch side rebuilds Γ from the probe P(q) = A exp(-iχ) in the Krivanek polar
form, independently of livessb's fast-path algebra; only the prepared spectra,
frequencies and trotter masks are shared.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import pytest
import torch

from helpers import disk_dataset
from livessb.engine.cpu import CPUEngine
from livessb.params import JOINT, fit_names

if TYPE_CHECKING:
    from livessb import Dataset4D
    from livessb.engine.cpu import HostSpectra

    Prepared = tuple[Dataset4D, list[CPUEngine], list[HostSpectra]]
    # G, k, nu, mask, weights; energy, wavelength, aperture and edge width (torch_vp_loss's order)
    LossArgs = tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor,
                     float, float, float, float]

torch.set_default_dtype(torch.float64)


def torch_vp_loss(theta: torch.Tensor, G: torch.Tensor, k: torch.Tensor, nu: torch.Tensor,
                  mask: torch.Tensor, weights: torch.Tensor, energy: float, lam: float,
                  k_alpha: float, edge: float, names: Sequence[str] = JOINT) -> torch.Tensor:
    p = dict(zip(names, theta, strict=True))
    t_r, t_c, depth = p["tilt_row_mrad"], p["tilt_col_mrad"], p["depth"]

    def probe(qr: torch.Tensor, qc: torch.Tensor) -> torch.Tensor:
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
        amp = torch.clamp((k_alpha - torch.sqrt(q2)) / edge + 0.5, 0.0, 1.0)
        return amp * torch.exp(-1j * chi)

    kr, kc = k[:, :1], k[:, 1:]
    nr, nc = nu[None, :, 0], nu[None, :, 1]
    tilt = 2 * math.pi * 1e-3 * (nr * t_r + nc * t_c)
    b1 = math.pi * lam * ((kr - nr) ** 2 + (kc - nc) ** 2 - kr**2 - kc**2) + tilt
    b2 = -math.pi * lam * ((kr + nr) ** 2 + (kc + nc) ** 2 - kr**2 - kc**2) + tilt
    S1 = _sinc(b1 * depth / 2)
    S2 = _sinc(b2 * depth / 2)
    P = probe(kr, kc)
    gam = mask * (S1 * probe(kr - nr, kc - nc) * P.conj() - S2 * probe(kr + nr, kc + nc).conj() * P)
    # One object per trotter lobe: the pairs whose k-ν lies in the disc, and the rest.
    lobes = [((kr - nr) ** 2 + (kc - nc) ** 2 <= k_alpha**2).to(gam.real.dtype)]
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


@pytest.fixture(scope="module")
def prepared() -> Prepared:
    ds = disk_dataset(scan=(12, 12), det=24, radius=6)
    engines = [CPUEngine(ds), CPUEngine(ds, kernels=False)]  # Numba, NumPy reference
    spectra = []
    for e in engines:
        sp = e.prepare()
        e.set_rotation(sp, 0.4, True)
        spectra.append(sp)
    return ds, engines, spectra


@pytest.mark.parametrize("theta", [
    [25.0, 8.0, 0.3, 0.0, 0.0, 0.0],
    [-40.0, 15.0, -1.1, 4.0, -7.0, 120.0],
    [5.0, 0.5, 1.4, -12.0, 3.0, 400.0],
])
def test_gradient_and_hessian_match_autograd(prepared: Prepared, theta: list[float]) -> None:
    ds, engines, spectra = prepared
    args = torch_loss_args(ds, spectra[1])
    x = torch.tensor(theta)
    loss_t = torch_vp_loss(x, *args).item()
    grad_t = torch.autograd.functional.jacobian(lambda t: torch_vp_loss(t, *args), x).numpy()
    hess_t = torch.autograd.functional.hessian(lambda t: torch_vp_loss(t, *args), x).numpy()
    for engine, s in zip(engines, spectra, strict=True):
        loss, grad, hess = engine.derivatives(s, np.array([theta]))
        assert loss[0] == pytest.approx(loss_t, rel=1e-10)
        np.testing.assert_allclose(grad[0], grad_t, rtol=1e-6, atol=1e-9 * np.abs(grad_t).max())
        np.testing.assert_allclose(hess[0], hess_t, rtol=1e-6, atol=1e-9 * np.abs(hess_t).max())
        assert engine.evaluate(s, np.array([theta]))[0] == pytest.approx(loss_t, rel=1e-10)


def test_numba_kernels_equal_numpy_reference(prepared: Prepared) -> None:
    _, (fast, ref), (s_fast, s_ref) = prepared
    cand = np.array([[30.0, 12.0, 0.4, 3.0, -2.0, 80.0], [-10, 5, -1, 0, 0, 0]])
    np.testing.assert_allclose(fast.evaluate(s_fast, cand), ref.evaluate(s_ref, cand), rtol=1e-12)
    for a, b in zip(fast.derivatives(s_fast, cand), ref.derivatives(s_ref, cand), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-14)


@pytest.mark.parametrize("method", ["ssb", "wiener"])
@pytest.mark.parametrize("upsample", [1, 2])
def test_numba_reconstruction_equals_numpy_reference(
        prepared: Prepared, method: str, upsample: int) -> None:
    _, (fast, ref), (s_fast, s_ref) = prepared
    params = {"C10": 20.0, "C12": 4.0, "phi12": 0.3, "tilt_row_mrad": 2.0, "depth": 60.0}
    a = fast.reconstruct(s_fast, params, upsample, method)
    b = ref.reconstruct(s_ref, params, upsample, method)
    assert a.shape == b.shape == (12 * upsample, 12 * upsample)
    np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6 * np.abs(b).max())


def test_opt_in_coefficients_derivatives_match_autograd(prepared: Prepared) -> None:
    ds, engines, spectra = prepared
    names = fit_names(("C21", "C23", "C30"))
    theta = [25.0, 8.0, 0.3, 4.0, -7.0, 120.0, 300.0, 0.7, 200.0, -0.4, 3e4]
    args = (*torch_loss_args(ds, spectra[1]), names)
    x = torch.tensor(theta)
    fn = lambda t: torch_vp_loss(t, *args)  # noqa: E731
    grad_t = torch.autograd.functional.jacobian(fn, x).numpy()
    hess_t = torch.autograd.functional.hessian(fn, x).numpy()
    for engine, s in zip(engines, spectra, strict=True):  # the CPU engine falls back to NumPy
        loss, grad, hess = engine.derivatives(s, np.array([theta]), names)
        assert loss[0] == pytest.approx(fn(x).item(), rel=1e-10)
        assert engine.evaluate(s, np.array([theta]), "vp", names)[0] == pytest.approx(loss[0])
        np.testing.assert_allclose(grad[0], grad_t, rtol=1e-6, atol=1e-9 * np.abs(grad_t).max())
        np.testing.assert_allclose(hess[0], hess_t, rtol=1e-6, atol=1e-9 * np.abs(hess_t).max())
