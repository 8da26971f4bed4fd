import math

import numpy as np
import pytest

from livessb.physics.optics import aperture, chi, quadratic_chi_matrix, wavelength_A


def test_wavelength_200kV_matches_relativistic_value() -> None:
    assert wavelength_A(200) == pytest.approx(0.025079, abs=2e-6)
    assert wavelength_A(300) == pytest.approx(0.019687, abs=2e-6)
    with pytest.raises(ValueError, match="positive"):
        wavelength_A(0)
    with pytest.raises(ValueError, match="positive and finite"):
        wavelength_A(float("inf"))
    with pytest.raises(ValueError, match="too small"):  # the momentum underflows to 0
        wavelength_A(1e-300)


def test_chi_quadratic_terms_follow_spec_formula() -> None:
    lam = wavelength_A(200)
    rng = np.random.default_rng(0)
    qr, qc = rng.normal(size=(2, 50))
    coeffs = {"C10": 37.0, "C12": 12.0, "phi12": 0.7}
    phi = np.arctan2(qc, qr)
    expected = math.pi * lam * (qr**2 + qc**2) * (37.0 + 12.0 * np.cos(2 * (phi - 0.7)))
    np.testing.assert_allclose(chi(qr, qc, lam, coeffs), expected, rtol=1e-12)
    M = quadratic_chi_matrix(37.0, 12.0, 0.7)
    quad = math.pi * lam * np.einsum("in,ij,jn->n", np.stack([qr, qc]), M, np.stack([qr, qc]))
    np.testing.assert_allclose(quad, expected, rtol=1e-12)


def test_chi_higher_order_krivanek_polar_form() -> None:
    lam = wavelength_A(200)
    q = np.array([0.3, 0.5])
    got = chi(q, np.zeros(2), lam, {"C30": 1e4, "C23": 500.0, "phi23": 0.2})
    expected = (2 * math.pi / lam) * (1e4 / 4 * (lam * q) ** 4
                                      + 500.0 / 3 * (lam * q) ** 3 * np.cos(3 * (0 - 0.2)))
    np.testing.assert_allclose(got, expected, rtol=1e-12)


def test_aperture_soft_edge_is_one_pixel_wide() -> None:
    q = np.array([0.0, 0.95, 1.0, 1.05, 1.2])
    np.testing.assert_allclose(aperture(q, 0 * q, 1.0, 0.1), [1, 1, 0.5, 0, 0])
