"""The BF-disk estimator against disks of known radius: synthetic (soft edge, blur, Poisson
noise, off-centre, hot pixel, dead column, saturated spot) and the simulator's own."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from livessb import Dataset4D
from livessb.physics.bright_field import edge_profile, estimate_disk
from livessb.simulate import simulate_4dstem

SUPERSAMPLE = 5


def _disk(radius: float, offset: tuple[float, float], blur: float, seed: int,
          level: float = 100.0, dark: float = 2.0, frames: int = 400,
          ) -> tuple[np.ndarray, tuple[float, float]]:
    """Mean of ``frames`` Poisson patterns: the aperture edge (amplitude ½ at ``radius``,
    one pixel wide) squared, blurred by a Gaussian of ``blur`` px and integrated over
    each pixel (5× supersampled), plus one hot pixel far above the disk in every frame,
    a dead column through the disk and a saturated 3×3 spot in the dark field."""
    from scipy.ndimage import gaussian_filter

    n = int(2 * radius + 44)
    center = (n // 2 + offset[0], n // 2 + offset[1])
    fine = (np.indices((n * SUPERSAMPLE,) * 2) + 0.5) / SUPERSAMPLE - 0.5
    a = np.clip(0.5 + radius - np.hypot(fine[0] - center[0], fine[1] - center[1]), 0, 1)
    p = a * a
    if blur > 0:
        p = gaussian_filter(p, blur * SUPERSAMPLE)
    p = dark + (level - dark) * p.reshape(n, SUPERSAMPLE, n, SUPERSAMPLE).mean(axis=(1, 3))
    rng = np.random.default_rng(seed)
    p = rng.poisson(p * frames) / frames
    p[3, 5] = 50 * level  # hot pixel
    p[:, n // 2 + 2] = 0.0  # dead column
    p[n - 8:n - 5, 4:7] = 20 * level  # saturated spot
    return p, center


@pytest.mark.parametrize("radius", [10.0, 23.7, 61.3, 200.0])
@pytest.mark.parametrize("blur", [0.0, 0.7])
@pytest.mark.parametrize("offset", [(0.3, -0.2), (-7.45, 4.1)])
def test_radius_within_0p3_percent_despite_hot_dead_and_saturated_pixels(
        radius: float, blur: float, offset: tuple[float, float]) -> None:
    pattern, center = _disk(radius, offset, blur, seed=int(radius * 10))
    est = estimate_disk(pattern)
    assert est.radius_px == pytest.approx(radius, rel=3e-3)
    assert math.hypot(est.center_row - center[0], est.center_col - center[1]) < 0.05
    assert est.outliers_replaced >= 2 * radius  # the dead column, the hot pixel, the spot


def test_edge_profile_is_the_squared_ramp_without_blur_and_keeps_its_area() -> None:
    x = np.linspace(-6, 6, 12001)
    ramp = np.clip(0.5 + x, 0, 1) ** 2
    assert np.max(np.abs(edge_profile(x, 0.0) - ramp)) < 2e-3  # blur floor 1e-3 px
    # A blur moves intensity across the edge but keeps its total (area under 1 - I).
    dx = x[1] - x[0]
    assert float(np.sum(edge_profile(x, 0.6) - ramp) * dx) == pytest.approx(0.0, abs=1e-4)


@pytest.mark.parametrize(("detector", "kwargs"), [
    ((40, 40), {"depth_A": 150.0, "tilt_mrad": (6.0, -3.0), "phase_peak_rad": 0.1}),
    ((48, 48), {"dose": 5e4, "rotation_deg": 12.0}),
    ((64, 64), {"dose": 1e4, "rotation_deg": -30.0, "transpose": True}),
])
def test_derived_detector_sampling_matches_the_simulator(
        detector: tuple[int, int], kwargs: dict[str, Any]) -> None:
    ds, truth = simulate_4dstem(scan_shape=(12, 12), detector_shape=detector, **kwargs)
    derived = Dataset4D(ds.counts, voltage_kV=200, semiangle_mrad=20, scan_step_A=0.6)
    assert derived.detector_sampling_derived
    assert derived.detector_sampling_mrad == pytest.approx(truth.detector_sampling_mrad,
                                                           rel=3e-3)
    bf = derived.bright_field
    assert math.hypot(bf.center_row - truth.bf_center_px[0],
                      bf.center_col - truth.bf_center_px[1]) < 0.05


def test_one_hot_pixel_no_longer_breaks_the_bf_detection() -> None:
    ds, truth = simulate_4dstem(scan_shape=(12, 12), detector_shape=(48, 48), dose=5e4)
    counts = ds.counts.copy()
    counts[:, :, 2, 3] = 60000  # far above the disk (~50 counts) in every frame
    derived = Dataset4D(counts, voltage_kV=200, semiangle_mrad=20, scan_step_A=0.6)
    assert derived.detector_sampling_mrad == pytest.approx(truth.detector_sampling_mrad,
                                                           rel=3e-3)
