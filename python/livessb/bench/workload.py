"""The SPEC §4 reference workload: regions, targets, timing candidates."""

from __future__ import annotations

import numpy as np

from ..params import DEFAULT_BOX, JOINT

# Regions of the 512² reference scan (row_start, row_stop, col_start, col_stop).
REGIONS = {
    "region_256": (128, 384, 128, 384),
    "region_128": (192, 320, 192, 320),
    "region_128_moved": (224, 352, 224, 352),
    "region_127x128_resized": (224, 351, 224, 352),
}
# Issue 19's targets (close: 7 ms, the driver's floor for ~14 GB is ~6 ms; open: a session
# on device-resident counts, preprocessing measured there).
TARGETS_S = {"open": 0.10, "fit_full_both_branches": 0.60, "region_256": 0.12,
             "region_128": 0.05, "region_128_moved": 0.05, "region_127x128_resized": 0.05,
             "reconstruct_auto": 0.010, "close": 0.007}
REFERENCE_S = {"fit_full_both_branches": 1.228, "region_256": 0.264, "region_128": 0.133,
               "region_128_moved": 0.117, "region_127x128_resized": 0.122,
               "reconstruct_auto": 0.026, "close": 0.0016}
# The synthetic sample (device generator and its CPU stand-in).
ABERRATIONS = {"C10": -80.0, "C12": 20.0, "phi12": 0.5}
DEFOCUS_GRADIENT = (0.0, 0.05)  # Å of C10 per scan pixel (rows, cols)
ROTATION_DEG = 12.0
SCAN_STEP_A = 0.7
# Arithmetic of one (b, ν) pair and candidate in the factored form (two sincos ≈ 2×8,
# Γ assembly 10, the N and D sums 6): the floor counts these, not the mask tests.
FLOPS_PER_PAIR = 32


def scaled_regions(scan: tuple[int, int]) -> dict[str, tuple[int, int, int, int]]:
    """The reference regions, scaled to another scan size (identity at 512²)."""
    if tuple(scan) == (512, 512):
        return dict(REGIONS)
    fr, fc = scan[0] / 512, scan[1] / 512
    out = {}
    for k, (r0, r1, c0, c1) in REGIONS.items():
        a, b = round(r0 * fr), round(r1 * fr)
        c, d = round(c0 * fc), round(c1 * fc)
        if k.endswith("resized"):
            b = max(a + 4, b - 1)
        out[k] = (a, max(a + 4, b), c, max(c + 4, d))
    return out


# phi12 of the timing inputs spans ±1.5 rad (inside the box's ±π/2): the loss hashes the
# kernel-variant records quote since pass 3 are over exactly these inputs.
TIMING_RANGE = {**DEFAULT_BOX, "phi12": (-1.5, 1.5)}


def random_candidates(rng: np.random.Generator, k: int) -> np.ndarray:
    """k parameter vectors (``params.JOINT`` order) spread over the default search box."""
    return np.column_stack([rng.uniform(*TIMING_RANGE[name], k) for name in JOINT])
