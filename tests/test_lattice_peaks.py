"""The first lattice basis from a scan's power spectrum (``physics.lattice_peaks``), against
the lattice the counts were made with: small undersampled scans of the simulator's
crystal, where aliases and merged maxima made spurious short vectors, and model crystals
whose reflections have random strengths."""

from __future__ import annotations

import math

import numpy as np
import pytest

from helpers import with_counts
from livessb.physics.lattice_peaks import (
    LatticeNotFoundError,
    _integer_span,
    _refinement,
    _Window,
    peak_basis,
)
from livessb.physics.optics import wavelength_A
from livessb.simulate import simulate_4dstem
from livessb.simulate.demo import DEMO_SETTINGS, demo_dataset
from test_lattice_fit import _model_counts
from test_lattice_profiles import _rotated


def _lattice_of(found: np.ndarray, truth: np.ndarray) -> tuple[float, float]:
    """How far ``found``'s vectors are from integer combinations of ``truth``'s (0 for a
    lattice of the truth's points), and the index of that sublattice (1: the lattice)."""
    hk = found @ np.linalg.inv(truth)
    return float(np.abs(hk - np.round(hk)).max()), abs(float(np.linalg.det(np.round(hk))))


def _bf_counts(counts: np.ndarray) -> np.ndarray:
    """(h, w, B) counts of the BF pixels (the detector's brighter half)."""
    mean = counts.mean(axis=(0, 1))
    return counts[:, :, mean > 0.5 * mean.max()].astype(np.float64)


def _band(voltage_kV: float, semiangle_mrad: float) -> float:
    """2k_α (1/Å): the largest frequency the BF disc transfers."""
    return 2 * semiangle_mrad * 1e-3 / wavelength_A(voltage_kV)


@pytest.mark.parametrize("n", [16, 24, 32, 48, 64])
def test_small_undersampled_scans_of_the_simulators_crystal_find_its_lattice(n: int) -> None:
    # The demo's SrTiO3-like crystal (3.905 Å, (1, 0) reflections 25x weaker than (1, 1))
    # at 0.6 Å steps: its reflections beyond 0.83 1/Å fold back half a period off the
    # lattice. Before the alias-aware reading, windows of 16-64 positions returned
    # half-period or 5-8 Å lattices on 20 of 25 such crops; a 16² window reads the lattice
    # to ~5 % (docs/bias-matrix.md §19).
    ds, truth = demo_dataset(with_truth=True)
    basis = np.eye(2) / truth.lattice_A
    band = _band(DEMO_SETTINGS["voltage_kV"], DEMO_SETTINGS["semiangle_mrad"])
    step = (DEMO_SETTINGS["scan_step_A"],) * 2
    for r0, c0 in ((0, 0), (96 - n, 96 - n), ((96 - n) // 2, (96 - n) // 2), (0, 96 - n)):
        window = _bf_counts(np.asarray(ds.counts[r0:r0 + n, c0:c0 + n]))
        off, index = _lattice_of(peak_basis(window, step, band_inv_A=band), basis)
        # the lattice itself, or the centred one of its strong (h + k even) reflections
        # where the weak ones do not stand out of a small window
        assert off < 0.08 and index in (1, 2), (n, r0, c0, off, index)


@pytest.mark.parametrize("angle_rad", [0.0, 0.7, 1.2])
def test_model_crystals_of_random_reflection_strengths(angle_rad: float) -> None:
    # Every reflection with a random object (no order of strengths to lean on), windows
    # of 2.5 periods and more at steps that alias; measured 120 of 120 at 4 angles × 3
    # seeds (the differences alone: 114).
    truth = _rotated(3.905, angle_rad)
    for n, step_A in ((16, 0.6), (24, 0.45), (32, 0.3), (20, 0.5)):
        for seed in (6, 7):
            case = _model_counts(truth, n, step_A, seed=seed)
            found = peak_basis(case["I"], (step_A, step_A), band_inv_A=2 * case["k_alpha"])
            off, index = _lattice_of(found, truth)
            assert off < 0.1 and index == 1, (n, step_A, seed, off, index)



@pytest.mark.parametrize("a_A", [2.46, 3.2, 4.0])
def test_hexagonal_model_crystals(a_A: float) -> None:
    # Hexagonal lattices (graphene's 2.46 Å and wider), random reflection strengths,
    # turned 0.4 rad: measured 69 of 72 over 3 sizes × 3 angles × 4 scans × 2 seeds (the
    # differences alone: 51; the misses 20² at 0.6 Å, heavily aliased)
    g = 1 / a_A
    turn = np.array([[math.cos(0.4), -math.sin(0.4)], [math.sin(0.4), math.cos(0.4)]])
    truth = np.array([[g, 0.0], [g / 2, g * math.sqrt(3) / 2]]) @ turn.T
    for n, step_A in ((24, 0.5), (32, 0.4), (32, 0.3)):
        for seed in (5, 6):
            case = _model_counts(truth, n, step_A, seed=seed)
            found = peak_basis(case["I"], (step_A, step_A), band_inv_A=2 * case["k_alpha"])
            off, index = _lattice_of(found, truth)
            assert off < 0.1 and index == 1, (n, step_A, seed, off, index)

def test_another_crystal_at_another_step_voltage_and_aperture_finds_its_lattice() -> None:
    # 24² positions of 0.45 Å over a 4.2 Å crystal (2.6 periods), 300 kV, 25 mrad
    # (its reflections fold beyond 1.11 1/Å), a weaker phase, overfocus
    ds, truth = simulate_4dstem(scan_shape=(24, 24), detector_shape=(32, 32),
                                scan_step_A=0.45, voltage_kV=300, semiangle_mrad=25,
                                aberrations={"C10": 40.0}, rotation_deg=30.0, dose=1e5,
                                phase_peak_rad=0.1, seed=11, lattice_A=4.2)
    found = peak_basis(_bf_counts(np.asarray(ds.counts)), (0.45, 0.45),
                       band_inv_A=_band(300, 25))
    off, index = _lattice_of(found, np.eye(2) / truth.lattice_A)
    assert off < 0.05 and index in (1, 2), (off, index)


def test_an_alias_is_read_as_the_reflection_it_folds_from_only_within_the_band() -> None:
    g = 1 / 3.905
    square = np.eye(2) * g
    step = 0.6
    alias = np.array([6 * g - 1 / step, 0.0])  # (6, 0) folded: half a period off (−1, 0)
    lobe = np.array([2 / (24 * step)] * 2)  # a 24² window's
    within = _Window(np.array([1 / step] * 2), band=7 * g, lobe=lobe)
    assert within.miss(square, alias) < 0.01 * g
    beyond = _Window(np.array([1 / step] * 2), band=5 * g, lobe=lobe)  # (6, 0): no signal
    assert beyond.miss(square, alias) == pytest.approx(abs(alias[0] + g), rel=1e-9)


def test_a_centred_lattice_is_refined_by_a_peak_on_its_half_points() -> None:
    g = 1 / 3.905
    centred = np.array([[g, g], [g, -g]])
    found = _refinement(centred, np.array([g, 0.001 * g]), within=0.01 * g)
    assert found is not None and found[1] == 2
    assert abs(abs(np.linalg.det(found[0])) - g * g) < 1e-12
    assert _refinement(centred, np.array([0.8 * g, 0.3 * g]), within=0.01 * g) is None
    assert abs(np.linalg.det(_integer_span(np.array([[2, 0], [0, 2], [1, 1]])))) == pytest.approx(2)
    assert abs(np.linalg.det(_integer_span(np.array([[3, 0], [0, 3], [1, 2]])))) == pytest.approx(3)



def test_speckle_gives_no_lattice_finer_than_two_periods_across_the_window() -> None:
    # An amorphous slab's speckle refined to periods of 30 and 230 Å on a 12 Å window
    # (55 806 lattice points: crystal mode asked for 46 GiB) before the floor.
    rng = np.random.default_rng(3)
    for seed in range(6):
        counts = rng.poisson(50.0, size=(24, 24, 60)).astype(np.float64)
        smooth = np.fft.ifft2(np.fft.fft2(counts, axes=(0, 1))
                              * np.exp(-seed * 0.05 * np.arange(24)[:, None, None]),
                              axes=(0, 1)).real  # speckle of several grain sizes
        try:
            found = peak_basis(smooth, (0.5, 0.5), band_inv_A=1.6)
        except LatticeNotFoundError:
            continue
        assert min(np.hypot(found[:, 0], found[:, 1])) >= 2 / (24 * 0.5) - 1e-12, found


def test_crystal_mode_keeps_the_per_bin_fit_and_says_why_beyond_its_lattice_points(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import livessb
    from livessb.fit import lattice

    monkeypatch.setattr(lattice, "MAX_LATTICE_POINTS", 50)  # the demo's lattice has 120
    ds = demo_dataset()
    small = with_counts(ds, np.ascontiguousarray(ds.counts[36:60, 36:60]))
    with livessb.Session(small, device="cpu") as s:
        fit = s.fit(trials=40, seed=1, progress=False, object_model="lattice")
    assert fit.lattice is not None and fit.lattice["model"] == "per_bin"
    assert "more than crystal mode models (50)" in fit.lattice["reason"], fit.lattice
    assert np.isfinite(fit.params["C10"]) and fit.errors["C10"] > 0
