"""Electron optics: wavelength, Krivanek aberration function, aperture.

Pure functions; ``xp`` is numpy or cupy. Lengths in Å, angles in rad.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from ..params import ABERRATION_KEYS, ABERRATION_ORDERS, GEOMETRY_KEYS, JOINT, OPTIONAL

__all__ = ["ABERRATION_KEYS", "ABERRATION_ORDERS"]  # the orders chi() sums, from the table

_H = 6.62607015e-34  # Planck, J s
_M0 = 9.1093837015e-31  # electron rest mass, kg
_E = 1.602176634e-19  # elementary charge, C
_C = 299792458.0  # speed of light, m/s


def wavelength_A(voltage_kV: float) -> float:
    """Relativistic electron wavelength in Å (200 kV -> 0.025079 Å)."""
    if not (math.isfinite(voltage_kV) and voltage_kV > 0):
        raise ValueError(f"voltage_kV must be positive and finite, got {voltage_kV!r}")
    volts = voltage_kV * 1e3
    momentum = math.sqrt(2 * _M0 * _E * volts * (1 + _E * volts / (2 * _M0 * _C**2)))
    if momentum == 0.0:  # a voltage so small that the momentum underflows
        raise ValueError(f"voltage_kV={voltage_kV!r} is too small to give a wavelength")
    return _H / momentum * 1e10


def unknown_aberration_keys(coeffs: Mapping[str, float]) -> list[str]:
    """Keys of ``coeffs`` that are neither aberrations nor fit parameters."""
    return sorted(k for k in coeffs if k not in ABERRATION_KEYS and k not in GEOMETRY_KEYS)


def check_reconstruction_params(coeffs: Mapping[str, float]) -> None:
    """ValueError naming unknown keys, or values that are not finite numbers (a NaN would
    give a silent NaN image)."""
    unknown = unknown_aberration_keys(coeffs)
    if unknown:
        raise ValueError(f"unknown parameter(s) {unknown}: use {', '.join(JOINT)} or "
                         f"aberrations up to fifth order ({', '.join(OPTIONAL)}, …, C56, "
                         "phi56: livessb.params.TABLE)")
    bad = {}
    for k, v in coeffs.items():
        try:
            finite = math.isfinite(float(v))
        except (TypeError, ValueError):
            finite = False
        if not finite:
            bad[k] = v
    if bad:
        raise ValueError(f"parameter(s) {bad} are not finite numbers: give each a finite "
                         "value (Å for C.., rad for phi.., mrad for tilts)")


def has_higher_order(coeffs: Mapping[str, float]) -> bool:
    """Whether any aberration beyond C10/C12 is nonzero (leaves the quadratic fast path)."""
    return any(float(v) != 0.0 for k, v in coeffs.items()
               if k in ABERRATION_KEYS and k.startswith("C") and k not in ("C10", "C12"))


def chi(
    q_row: Any, q_col: Any, wavelength: float, coeffs: Mapping[str, float], xp: Any = np
) -> Any:
    """Krivanek aberration phase χ(q) in rad for spatial frequencies q (1/Å).

    χ(q) = (2π/λ) Σ C_nm/(n+1) (λ|q|)^(n+1) cos(m(φ - φ_nm)),  φ = atan2(q_col, q_row).
    """
    q2 = q_row * q_row + q_col * q_col
    phi = xp.arctan2(q_col, q_row)
    lam_q = xp.sqrt(q2) * wavelength
    out = xp.zeros_like(q2)
    for n, m in ABERRATION_ORDERS:
        c = float(coeffs.get(f"C{n}{m}", 0.0))
        if c == 0.0:
            continue
        term = lam_q ** (n + 1) * (c / (n + 1))
        if m:
            term = term * xp.cos(m * (phi - float(coeffs.get(f"phi{n}{m}", 0.0))))
        out = out + term
    return out * (2 * math.pi / wavelength)


def quadratic_chi_matrix(C10: float, C12: float, phi12: float) -> np.ndarray:
    """M with χ(q) = πλ qᵀMq for the defocus/astigmatism terms (the fast path)."""
    a = C12 * math.cos(2 * phi12)
    b = C12 * math.sin(2 * phi12)
    return np.array([[C10 + a, b], [b, C10 - a]])


def aperture(q_row: Any, q_col: Any, k_alpha: float, edge_width: float, xp: Any = np) -> Any:
    """Probe-forming aperture amplitude with a linear soft edge ``edge_width`` (1/Å) wide."""
    q = xp.sqrt(q_row * q_row + q_col * q_col)
    if edge_width <= 0:
        return (q <= k_alpha).astype(q.dtype)
    return xp.clip((k_alpha - q) / edge_width + 0.5, 0.0, 1.0)


def probe_spectrum(
    q_row: Any,
    q_col: Any,
    wavelength: float,
    k_alpha: float,
    edge_width: float,
    coeffs: Mapping[str, float],
    xp: Any = np,
) -> Any:
    """P(q) = A(q) exp(-iχ(q))."""
    amp = aperture(q_row, q_col, k_alpha, edge_width, xp)
    return amp * xp.exp(-1j * chi(q_row, q_col, wavelength, coeffs, xp))
