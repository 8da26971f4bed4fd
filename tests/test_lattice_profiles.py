"""scripts/lattice_profiles.py's lattice model (docs/bias-matrix.md §14): on a lattice that
is the window's own grid it is the per-bin model, and on data it describes it finds C10
exactly where the lattice does not fit the window."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))

from bias_profiles import (
    _explained,
    c10_minimum,
    effective_frequencies,
    gamma,
    trotter_lobes,
    with_spectra,
)
from lattice_profiles import (
    found_lattice_c10,
    lattice_c10_minimum,
    lattice_loss,
    lattice_points,
    lattice_setup,
)

from livessb.physics.optics import wavelength_A

TRUTH = {"C10": -60.0, "C12": 5.0, "phi12": 0.3}


LAM = wavelength_A(200.0)
K_ALPHA = 20e-3 / LAM
PX = K_ALPHA / 6  # a BF radius of 6 px
_R = np.arange(-7, 8) * PX
_KR, _KC = np.meshgrid(_R, _R, indexing="ij")
INSIDE = _KR**2 + _KC**2 <= (K_ALPHA + PX) ** 2
PIXELS = int(INSIDE.sum())


def _case(I: np.ndarray, step_A: float) -> dict[str, Any]:
    """bias_profiles' case layout for counts ``I`` (n, n, PIXELS)."""
    step = np.array([step_A, step_A])
    return {"k": np.stack([_KR[INSIDE], _KC[INSIDE]], 1), "lam": LAM, "px": PX,
            "k_alpha": K_ALPHA, "step": step, **with_spectra(I, step), "truth": dict(TRUTH)}


def test_on_the_windows_own_grid_the_lattice_model_is_the_per_bin_model() -> None:
    # 0.25 Å steps: the scan's Nyquist 2 1/Å is above the BF band 2k_α = 1.59 1/Å, so every
    # grid frequency within the band is a bin of its own (no alias of one another).
    rng = np.random.default_rng(3)
    n, step = 8, 0.25
    case = _case(rng.poisson(50.0, (n, n, PIXELS)).astype(float), step)
    basis = np.eye(2) / (n * step)
    loss = lattice_loss(case, TRUTH, lattice_setup(case, lattice_points(case, basis)))
    nr, nc = case["nu_r"][None, :], case["nu_c"][None, :]
    in_minus, support = trotter_lobes(case, nr, nc)
    ok = nr[0] ** 2 + nc[0] ** 2 > 0
    explained = _explained(gamma(case, TRUTH, nr, nc), case["G"],
                           (in_minus & support, ~in_minus & support), ok)
    assert loss == pytest.approx(-explained, rel=1e-9)


def _model_counts(basis: np.ndarray, n: int, step_A: float, seed: int) -> dict[str, Any]:
    """Counts made by the lattice model itself on n × n positions: each lattice point's
    signal is Γ_lobe(k; g)·O_lobe(g) with random objects on its single-sideband support,
    real in R (c(−g) = conj c(g)); an undersampled scan aliases them as sampling does."""
    rng = np.random.default_rng(seed)
    empty = _case(np.zeros((n, n, PIXELS)), step_A)
    g = lattice_points(empty, basis)
    half = g[(g[:, 0] > 1e-12) | ((np.abs(g[:, 0]) <= 1e-12) & (g[:, 1] > 0))]
    gr, gc = half[None, :, 0], half[None, :, 1]
    gam = gamma(empty, TRUTH, gr, gc)
    in_minus, support = trotter_lobes(empty, gr, gc)
    objects = rng.normal(size=(2, len(half))) + 1j * rng.normal(size=(2, len(half)))
    c = np.where(support, np.where(in_minus, gam * objects[0], gam * objects[1]), 0)
    R = np.arange(n) * step_A
    phase = np.exp(2j * np.pi * (half[:, 0, None, None] * R[:, None]
                                 + half[:, 1, None, None] * R[None, :]))  # (n_g, n, n)
    return _case(100.0 + 2 * np.real(np.einsum("grc,bg->rcb", phase, c)), step_A)


def _rotated(a_A: float, angle_rad: float) -> np.ndarray:
    c, s = np.cos(angle_rad), np.sin(angle_rad)
    return np.array([[c, s], [-s, c]]) / a_A


@pytest.mark.parametrize(("angle_rad", "n", "step_A", "per_bin_off_A"), [
    (0.0, 20, 0.25, 1.0), (0.3, 20, 0.25, 0.5), (0.3, 24, 0.5, 0.05)])
def test_on_data_it_describes_the_lattice_model_finds_c10_where_the_lattice_misses_the_window(
        angle_rad: float, n: int, step_A: float, per_bin_off_A: float) -> None:
    # SrTiO3's 3.905 Å, aligned or turned 0.3 rad, on 1.28 or 3.07 periods (0.5 Å steps:
    # undersampled, aliased): every lattice frequency falls between bins.
    basis = _rotated(3.905, angle_rad)
    case = _model_counts(basis, n, step_A, seed=7)
    assert abs(lattice_c10_minimum(case, basis)) < 1e-4  # measured ≤ 4·10⁻⁶ Å
    # the per-bin model's one frequency per bin does not describe these bins: measured
    # 1.62, 0.88 and 0.12 Å off
    assert abs(c10_minimum(case, *effective_frequencies(case))) > per_bin_off_A


def test_the_lattice_is_found_from_the_data() -> None:
    # The strongest peaks and their differences, then the loss: a turned lattice on an
    # aliased 24² scan found to its basis, and C10 with it.
    basis = _rotated(3.905, 0.3)
    case = _model_counts(basis, 24, 0.5, seed=11)
    dc10, length, angle = found_lattice_c10(case, true_basis=basis)
    # measured: 0.009 % of length, 0.006 mrad, C10 0.006 Å
    assert length < 1e-3 and angle < 0.1 and abs(dc10) < 0.02, (dc10, length, angle)
