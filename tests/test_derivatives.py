"""Exact gradient and Hessian of the VP loss against torch autograd (float64).

The torch side (tests/vp_reference.py) rebuilds Γ from the probe P(q) = A exp(-iχ) in
the Krivanek polar form, independently of livessb's fast-path algebra; only the prepared
spectra, frequencies and trotter masks are shared.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pytest
import torch

from helpers import disk_dataset
from livessb.engine.cpu import CPUEngine
from livessb.params import fit_names
from vp_reference import torch_loss_args, torch_vp_loss

if TYPE_CHECKING:
    from livessb import Dataset4D
    from livessb.engine.cpu import HostSpectra

    Prepared = tuple[Dataset4D, list[CPUEngine], list[HostSpectra]]


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
