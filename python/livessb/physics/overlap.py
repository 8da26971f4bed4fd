"""Thin and ThickSample overlap Γ_b(ν), with exact first and second derivatives.

Γ_b(ν) = S1·P(k-ν)P*(k) - S2·P*(k+ν)P(k),  S_i = sinc(β_i Δ/2),
β1 = πλ(|k-ν|² - |k|²) + 2πν·τ,  β2 = -πλ(|k+ν|² - |k|²) + 2πν·τ.

Parameters (order of ``livessb.params.JOINT``): C10 Å, C12 Å, phi12 rad, tilt_row_mrad,
tilt_col_mrad, depth Å. For these six, χ(k∓ν) - χ(k) is a polynomial in (k, ν),
so everything below is elementwise over a (B, ν) grid; ``xp`` is numpy or cupy.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..params import JOINT, MRAD, N_JOINT
from .optics import aperture, chi


def pairs_of(n: int) -> tuple[tuple[int, int], ...]:
    """(i, j), i ≤ j, for ``n`` parameters: the order second derivatives come in."""
    return tuple((i, j) for i in range(n) for j in range(i, n))


PAIRS: tuple[tuple[int, int], ...] = pairs_of(N_JOINT)  # the six joint parameters' pairs


@dataclass
class OverlapGrid:
    """Frequencies of one block: ``k_r``/``k_c`` (B, 1), ``nu_r``/``nu_c`` (1, M) in 1/Å,
    the masked aperture products ``amp_minus`` = m·A(k-ν)A(k), ``amp_plus`` = m·A(k+ν)A(k),
    and ``minus_lobe`` (B, M): the pair's k-ν lies in the hard disc (the trotter lobe of
    P(k-ν)P*(k)); inside a trotter every other pair is in the P*(k+ν)P(k) lobe.
    """

    k_r: Any
    k_c: Any
    nu_r: Any
    nu_c: Any
    amp_minus: Any
    amp_plus: Any
    wavelength: float
    minus_lobe: Any = None


def overlap_grid(
    k: Any, nu_r: Any, nu_c: Any, mask: Any, wavelength: float, k_alpha: float,
    edge_width: float, xp: Any = np,
) -> OverlapGrid:
    """Build the geometry of a block: ``k`` (B, 2); ``nu_r``/``nu_c``/``mask`` (M,) / (B, M)."""
    return _grid(k[:, 0:1], k[:, 1:2], nu_r.reshape(1, -1), nu_c.reshape(1, -1), mask,
                 wavelength, k_alpha, edge_width, xp)


def pair_grid(
    k_r: Any, k_c: Any, nu_r: Any, nu_c: Any, wavelength: float, k_alpha: float,
    edge_width: float, xp: Any = np,
) -> OverlapGrid:
    """The geometry of a list of (b, ν) pairs, all inside their trotter: every argument
    (n,), elementwise (``gamma_derivatives`` is elementwise over any shape)."""
    return _grid(k_r, k_c, nu_r, nu_c, 1.0, wavelength, k_alpha, edge_width, xp)


def _grid(k_r: Any, k_c: Any, nr: Any, nc: Any, mask: Any, wavelength: float,
          k_alpha: float, edge_width: float, xp: Any) -> OverlapGrid:
    a_k = aperture(k_r, k_c, k_alpha, edge_width, xp)
    amp_minus = mask * aperture(k_r - nr, k_c - nc, k_alpha, edge_width, xp) * a_k
    amp_plus = mask * aperture(k_r + nr, k_c + nc, k_alpha, edge_width, xp) * a_k
    minus_lobe = (k_r - nr) ** 2 + (k_c - nc) ** 2 <= k_alpha**2  # trotter_support's test
    return OverlapGrid(k_r, k_c, nr, nc, amp_minus, amp_plus, wavelength, minus_lobe)


def _basis_differences(g: OverlapGrid, sign: int) -> tuple[Any, Any, Any]:
    """(f(k + sign·ν) - f(k)) for f = πλ|q|², πλ(qr² - qc²), πλ·2 qr qc."""
    pl = math.pi * g.wavelength
    nr, nc = g.nu_r, g.nu_c
    d10 = pl * (nr * nr + nc * nc + sign * 2 * (g.k_r * nr + g.k_c * nc))
    dc = pl * (nr * nr - nc * nc + sign * 2 * (g.k_r * nr - g.k_c * nc))
    ds = pl * (2 * nr * nc + sign * 2 * (g.k_r * nc + g.k_c * nr))
    return d10, dc, ds


def _sinc_and_derivatives(x: Any, xp: Any) -> tuple[Any, Any, Any]:
    """sinc(x) = sin x / x and its first two derivatives, stable near 0."""
    small = xp.abs(x) < 1e-3
    xs = xp.where(small, 1.0, x)
    s, c = xp.sin(xs), xp.cos(xs)
    S = xp.where(small, 1 - x * x / 6, s / xs)
    S1 = xp.where(small, -x / 3 + x**3 / 30, (xs * c - s) / xs**2)
    S2 = xp.where(small, -1.0 / 3 + x * x / 10, -S - 2 * S1 / xs)
    return S, S1, S2


def gamma(g: OverlapGrid, params: Mapping[str, float], xp: Any = np) -> Any:
    """Γ on the block for one parameter set (order-0 fast path of ``gamma_derivatives``)."""
    return gamma_derivatives(g, params, order=0, xp=xp)[0]


def gamma_derivatives(
    g: OverlapGrid, params: Mapping[str, float], order: int = 2, xp: Any = np
) -> tuple[Any, list[Any], list[Any]]:
    """Γ, [∂Γ/∂p_i] (6) and [∂²Γ/∂p_i∂p_j for (i, j) in PAIRS] (21) on the block
    (``order`` 1: the second derivatives are not computed and come back as 0)."""
    C10, C12, phi12 = (float(params.get(k, 0.0)) for k in JOINT[:3])
    t_r = float(params.get("tilt_row_mrad", 0.0)) * MRAD
    t_c = float(params.get("tilt_col_mrad", 0.0)) * MRAD
    depth = float(params.get("depth", 0.0))
    c2, s2 = math.cos(2 * phi12), math.sin(2 * phi12)
    tilt_phase = 2 * math.pi * (g.nu_r * t_r + g.nu_c * t_c)

    terms = []
    for sign, amp, phase_sign in ((-1, g.amp_minus, -1), (+1, g.amp_plus, +1)):
        if amp is None:  # that lobe left out (physics.lattice's columns: one lobe each)
            continue
        d10, dc, ds = _basis_differences(g, sign)
        dchi = C10 * d10 + C12 * (c2 * dc + s2 * ds)
        wave = amp * xp.exp(1j * phase_sign * dchi)
        # β1 = Δχ-basis d10 for k-ν; β2 = -d10 for k+ν (see module docstring).
        beta = -sign * d10 + tilt_phase
        x = beta * (depth / 2)
        # a thin object (no depth spread): sinc's values at 0, as the series gives them
        S, dS, d2S = _sinc_and_derivatives(x, xp) if depth else (1.0, 0.0, -1.0 / 3)
        terms.append((phase_sign, wave, S, dS, d2S, beta, (d10, dc, ds)))

    # Γ = S1·(k−ν lobe) − S2·(k+ν lobe) (the same operations as a − b where both are there)
    gam: Any = None
    for phase_sign, wave, S, *_ in terms:
        term = S * wave
        if phase_sign < 0:
            gam = term if gam is None else gam + term
        else:
            gam = -term if gam is None else gam - term
    if order == 0:
        return gam, [], []

    grads: list[Any] = [0] * N_JOINT
    hess: list[Any] = [0] * len(PAIRS)
    for phase_sign, wave, S, dS, d2S, beta, (d10, dc, ds) in terms:
        sgn = -float(phase_sign)
        # ∂(Δχ) over the three aberration parameters, and the nonzero second ones.
        dchi_d = [d10, c2 * dc + s2 * ds, C12 * (-2 * s2 * dc + 2 * c2 * ds)]
        dchi_12_phi = -2 * s2 * dc + 2 * c2 * ds
        dchi_phi_phi = C12 * (-4 * c2 * dc - 4 * s2 * ds)
        # ∂x over the tilt/depth parameters (x = β Δ / 2).
        dx = [math.pi * depth * MRAD * g.nu_r, math.pi * depth * MRAD * g.nu_c, beta / 2]
        ip = 1j * phase_sign
        dwave = [ip * d * wave for d in dchi_d]
        dS_d = [dS * d for d in dx]
        for i in range(3):
            grads[i] = grads[i] + sgn * S * dwave[i]
            grads[3 + i] = grads[3 + i] + sgn * dS_d[i] * wave
        if order < 2:  # first derivatives only (the per-frequency gradients of fit.robust)
            continue
        for n, (i, j) in enumerate(PAIRS):
            if j < 3:  # aberration × aberration
                second = ip * dchi_d[i] * dwave[j]
                if (i, j) == (1, 2):
                    second = second + ip * dchi_12_phi * wave
                elif (i, j) == (2, 2):
                    second = second + ip * dchi_phi_phi * wave
                hess[n] = hess[n] + sgn * S * second
            elif i < 3:  # aberration × tilt/depth
                hess[n] = hess[n] + sgn * dS_d[j - 3] * dwave[i]
            else:  # tilt/depth × tilt/depth
                a, b = i - 3, j - 3
                d2 = d2S * dx[a] * dx[b]
                if b == 2 and a < 2:  # ∂²x/∂τ∂Δ = π ν MRAD
                    d2 = d2 + dS * math.pi * MRAD * (g.nu_r if a == 0 else g.nu_c)
                hess[n] = hess[n] + sgn * d2 * wave
    return gam, grads, hess


def _chi_partials(
    q_row: Any, q_col: Any, wavelength: float, params: Mapping[str, float], name: str, xp: Any
) -> tuple[Any, Any, Any]:
    """∂χ/∂θ for one aberration name, and the nonzero second partials
    (∂²χ/∂C_nm∂φ_nm, ∂²χ/∂φ_nm²) of that coefficient (zero for a C name's own square)."""
    n, m = int(name[-2]), int(name[-1])
    C = float(params.get(f"C{n}{m}", 0.0))
    phi_nm = float(params.get(f"phi{n}{m}", 0.0))
    radial = (2 * math.pi / wavelength) / (n + 1) * (
        xp.sqrt(q_row * q_row + q_col * q_col) * wavelength) ** (n + 1)
    if m == 0:
        return radial, 0.0 * radial, 0.0 * radial
    ang = m * (xp.arctan2(q_col, q_row) - phi_nm)
    cos_a, sin_a = xp.cos(ang), xp.sin(ang)
    if name.startswith("C"):
        return radial * cos_a, radial * m * sin_a, 0.0 * radial
    return C * radial * m * sin_a, radial * m * sin_a, -C * radial * m * m * cos_a


def gamma_general_derivatives(
    g: OverlapGrid, params: Mapping[str, float], names: tuple[str, ...], xp: Any = np
) -> tuple[Any, list[Any], list[Any]]:
    """Γ, first and second derivatives (``pairs_of(len(names))`` order) for any fit
    parameters: aberration coefficients C_nm/phi_nm of any order plus tilt and depth.

    Slower than ``gamma_derivatives`` (general χ, trigonometry per pair); used when
    coefficients beyond C10/C12 are opted into a fit.
    """
    kr, kc, nr, nc, lam = g.k_r, g.k_c, g.nu_r, g.nu_c, g.wavelength
    geom = ("tilt_row_mrad", "tilt_col_mrad", "depth")
    depth = float(params.get("depth", 0.0))
    tilt_phase = 2 * math.pi * MRAD * (
        nr * float(params.get("tilt_row_mrad", 0.0)) + nc * float(params.get("tilt_col_mrad", 0.0)))
    chi_k = chi(kr, kc, lam, params, xp)
    aber = [i for i, p in enumerate(names) if p not in geom]
    parts_k = {i: _chi_partials(kr, kc, lam, params, names[i], xp) for i in aber}
    P = len(names)
    pairs = pairs_of(P)
    gam: Any = 0
    grads: list[Any] = [0] * P
    hess: list[Any] = [0] * len(pairs)
    pl = math.pi * lam
    for sign, amp, sgn in ((-1, g.amp_minus, 1.0), (+1, g.amp_plus, -1.0)):
        if amp is None:  # that lobe left out
            continue
        qr, qc = kr + sign * nr, kc + sign * nc
        ip = 1j * sign  # a: exp(-i Δχ), b: exp(+i Δχ)
        wave = amp * xp.exp(ip * (chi(qr, qc, lam, params, xp) - chi_k))
        d1 = {}
        d2 = {}
        for i in aber:
            pq = _chi_partials(qr, qc, lam, params, names[i], xp)
            d1[i] = pq[0] - parts_k[i][0]
            d2[i] = (pq[1] - parts_k[i][1], pq[2] - parts_k[i][2])
        beta = -sign * pl * ((qr * qr + qc * qc) - (kr * kr + kc * kc)) + tilt_phase
        S, dS, d2S = _sinc_and_derivatives(beta * (depth / 2), xp)
        dx = {"tilt_row_mrad": math.pi * depth * MRAD * nr,
              "tilt_col_mrad": math.pi * depth * MRAD * nc, "depth": beta / 2}
        gam = gam + sgn * S * wave
        for i, name in enumerate(names):
            if name in geom:
                grads[i] = grads[i] + sgn * dS * dx[name] * wave
            else:
                grads[i] = grads[i] + sgn * S * ip * d1[i] * wave
        for n_, (i, j) in enumerate(pairs):
            a_name, b_name = names[i], names[j]
            if a_name not in geom and b_name not in geom:
                second = ip * d1[i] * ip * d1[j] * wave
                if a_name[-2:] == b_name[-2:]:  # same coefficient: C_nm/phi_nm cross terms
                    if a_name.startswith("phi") and b_name.startswith("phi"):
                        second = second + ip * d2[i][1] * wave
                    elif a_name != b_name:
                        second = second + ip * d2[i][0] * wave
                hess[n_] = hess[n_] + sgn * S * second
            elif a_name in geom and b_name in geom:
                d2x = d2S * dx[a_name] * dx[b_name]
                if b_name == "depth" and a_name != "depth":
                    d2x = d2x + dS * math.pi * MRAD * (nr if a_name == "tilt_row_mrad" else nc)
                hess[n_] = hess[n_] + sgn * d2x * wave
            else:
                ab, ge = (i, b_name) if a_name not in geom else (j, a_name)
                hess[n_] = hess[n_] + sgn * dS * dx[ge] * ip * d1[ab] * wave
    return gam, grads, hess


def gamma_general(
    g: OverlapGrid, params: Mapping[str, float], xp: Any = np
) -> Any:
    """Γ with every aberration coefficient up to fifth order (reconstruction path)."""
    kr, kc, nr, nc = g.k_r, g.k_c, g.nu_r, g.nu_c
    lam = g.wavelength
    chi_k = chi(kr, kc, lam, params, xp)
    # a lobe whose amplitude is None is left out (physics.lattice's columns: one lobe each)
    a = 0 if g.amp_minus is None else g.amp_minus * xp.exp(
        -1j * (chi(kr - nr, kc - nc, lam, params, xp) - chi_k))
    b = 0 if g.amp_plus is None else g.amp_plus * xp.exp(
        1j * (chi(kr + nr, kc + nc, lam, params, xp) - chi_k))
    depth = float(params.get("depth", 0.0))
    if depth == 0.0:
        return a - b
    tilt_phase = 2 * math.pi * MRAD * (
        nr * float(params.get("tilt_row_mrad", 0.0)) + nc * float(params.get("tilt_col_mrad", 0.0)))
    pl = math.pi * lam
    beta1 = pl * ((kr - nr) ** 2 + (kc - nc) ** 2 - kr**2 - kc**2) + tilt_phase
    beta2 = -pl * ((kr + nr) ** 2 + (kc + nc) ** 2 - kr**2 - kc**2) + tilt_phase
    S1 = _sinc_and_derivatives(beta1 * (depth / 2), xp)[0]
    S2 = _sinc_and_derivatives(beta2 * (depth / 2), xp)[0]
    return S1 * a - S2 * b


def depth_factor(beta: Any, depth: float, xp: Any = np) -> Any:
    """S = sinc(β Δ / 2): the real weight a slab of depth spread Δ puts on a Γ term."""
    return _sinc_and_derivatives(beta * (depth / 2), xp)[0]
