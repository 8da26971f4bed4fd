"""The rotation scan holds every trotter lobe's pixel set at the grid's middle θ (issue 20
item 5): its losses against the torch rebuild of the VP loss with the apertures and lobes
of the middle θ and the phases of each θ; at the middle θ, ``evaluate``'s loss. The
effect on fits (the rotation on small detectors, against the simulator's truth) is in
test_fit_physics.py."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pytest
import torch

from livessb.engine.cpu import CPUEngine
from livessb.engine.reference import evaluate_rotations_per_theta
from livessb.params import JOINT
from livessb.physics.geometry import scan_frame_frequencies
from livessb.simulate import simulate_4dstem
from vp_reference import torch_loss_args, torch_vp_loss

if TYPE_CHECKING:
    from livessb import Dataset4D
    from livessb.engine.cpu import HostSpectra

THETA0 = np.radians(10.0)


@dataclass
class Scan:
    eng: CPUEngine
    ds: Dataset4D
    sp: HostSpectra
    vec: np.ndarray
    grid: np.ndarray
    held: np.ndarray


@pytest.fixture(scope="module")
def scanned() -> Scan:
    ds, truth = simulate_4dstem(
        scan_shape=(16, 16), detector_shape=(24, 24), scan_step_A=0.6, dose=2e4, seed=4,
        aberrations={"C10": -40.0, "C12": 12.0, "phi12": 0.4}, depth_A=60.0,
        tilt_mrad=(4.0, -3.0), slice_A=20.0, rotation_deg=10.0)
    eng = CPUEngine(ds)
    sp = eng.prepare()
    vec = np.array([[truth.params[p] for p in JOINT]])
    grid = THETA0 + np.radians(np.linspace(-3.0, 3.0, 7))
    return Scan(eng, ds, sp, vec, grid, eng.evaluate_rotations(sp, grid, False, vec))


def test_held_scan_is_the_loss_with_the_middle_rotations_pixel_sets(scanned: Scan) -> None:
    eng, ds, sp, vec, grid, held = (scanned.eng, scanned.ds, scanned.sp, scanned.vec,
                                    scanned.grid, scanned.held)
    assert sp.rotation == (grid[3], False)  # left at the held θ
    G, k0, nu, mask, weights, energy, lam, k_alpha, edge = torch_loss_args(ds, sp)
    for i, theta in enumerate(grid):
        k = torch.tensor(scan_frame_frequencies(eng.geo.bf.k_det, float(theta), False))
        want = torch_vp_loss(torch.tensor(vec[0]), G, k, nu, mask, weights, energy, lam,
                             k_alpha, edge, pair_k=k0).item()
        assert held[i] == pytest.approx(want, rel=1e-10), i
    assert held[3] == pytest.approx(eng.evaluate(sp, vec)[0], rel=1e-12)


def test_held_scan_differs_from_moving_the_sets_off_the_middle(scanned: Scan) -> None:
    held = scanned.held
    moving = evaluate_rotations_per_theta(scanned.eng, scanned.sp, scanned.grid, False,
                                          scanned.vec)
    assert moving[3] == pytest.approx(held[3], rel=1e-12)
    # At ±3° on a 24² detector pixels have switched lobes: the losses differ by far more
    # than the 1e-10 agreement above.
    assert abs(moving[0] - held[0]) > 1e-6 * abs(held[0])
    assert abs(moving[-1] - held[-1]) > 1e-6 * abs(held[-1])
