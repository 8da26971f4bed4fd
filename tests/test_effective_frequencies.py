"""Effective scan frequencies (issue 20 item 2, physics/frequencies.py): each spectrum
bin's signal frequency measured from the data, so that a crystal whose lattice does
not fit the scan window no longer scales the fitted C10 by g/ν.

The fixtures are abTEM 1.0.11 multislice cases of the bias matrix
(scripts/bias_matrix.py, tests/fixtures/abtem/README.md), truth C10 at the centroid of
abTEM's slice planes. Both have a scan that samples the probe's band (no aliasing)
and a window that is not commensurate with the lattice.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import livessb
from livessb.physics.frequencies import effective_frequencies
from livessb.results import FitResult

FIXTURES = Path(__file__).parent / "fixtures" / "abtem"


def _tone_window(g: tuple[float, float], n: tuple[int, int], step: float) -> np.ndarray:
    rr, cc = np.meshgrid(np.arange(n[0]) * step, np.arange(n[1]) * step, indexing="ij")
    pattern = 1.0 + 0.2 * np.cos(2 * np.pi * (g[0] * rr + g[1] * cc) + 0.7)
    return (pattern[:, :, None] * np.array([1.0, 0.6, 0.3])).astype(np.float32)


@pytest.mark.parametrize("n", [(24, 24), (21, 27)])  # the second padded to 24 × 27
def test_a_frequency_between_bins_is_found_to_a_hundredth_of_a_bin(n: tuple[int, int]) -> None:
    step, g = 0.5, (0.2561, -0.1437)  # a rotated lattice: both axes off the bins
    shape = (24, 27) if n == (21, 27) else n
    nu_r, nu_c = np.meshgrid(np.fft.fftfreq(shape[0], step), np.fft.rfftfreq(shape[1], step),
                             indexing="ij")
    nu_r, nu_c = nu_r.ravel(), nu_c.ravel()
    er, ec = effective_frequencies(_tone_window(g, n, step), shape, (step, step), nu_r, nu_c,
                                   chunk_pixels=2)
    peak = int(np.argmin((nu_r + g[0]) ** 2 + (nu_c + g[1]) ** 2))  # the -g bin (c ≥ 0)
    bin_r, bin_c = 1 / (shape[0] * step), 1 / (shape[1] * step)
    assert abs(er[peak] + g[0]) < 0.01 * bin_r and abs(ec[peak] + g[1]) < 0.01 * bin_c
    assert abs(nu_r[peak] + g[0]) > 0.05 * bin_r  # the grid itself is off by more
    assert er[0] == 0.0 and ec[0] == 0.0  # DC stays at zero
    assert np.all(np.abs(er - nu_r) <= 0.5 * bin_r + 1e-12)  # never beyond half a bin
    assert np.all(np.abs(ec - nu_c) <= 0.5 * bin_c + 1e-12)


def _fit(name: str, frequencies: str) -> tuple[FitResult, dict[str, float]]:
    d = np.load(FIXTURES / f"{name}.npz")
    ds = livessb.load(FIXTURES / f"{name}.npz")  # counts and calibration from its keys
    truth = {k[len("truth_"):]: float(d[k]) for k in d.files if k.startswith("truth_")}
    with livessb.Session(ds, device="cpu", scan_frequencies=frequencies) as s:
        return s.fit(trials=200, seed=1, progress=False), truth


@pytest.mark.slow
@pytest.mark.parametrize("name", ["sto1_C10m150", "sto1_step0p3"])
def test_effective_frequencies_remove_the_lattice_window_bias_on_srtio3(name: str) -> None:
    """Measured (CPU): C10 −150 Å, 24 × 0.5 Å: grid −3.05 Å (z −9), effective −0.14;
    C10 −80 Å, 32 × 0.3 Å: grid +1.05, effective −0.01. C12 within 0.3 Å in both."""
    fit, t = _fit(name, "effective")
    target = max(0.5, 0.01 * abs(t["C10"]))  # the max(1 %, 0.5 Å)
    assert abs(fit.params["C10"] - t["C10"]) <= target, fit.params
    assert abs(fit.params["C12"] - t["C12"]) <= 0.5, fit.params
    assert abs(fit.params["C10"] - t["C10"]) <= 2 * fit.errors["C10"], fit.errors
    assert fit.provenance["scan_frequencies"] == "effective" and not fit.transpose


def test_the_option_is_checked_by_both_engines() -> None:
    from livessb.engine.cuda.engine import CUDAEngine

    ds = livessb.simulate.demo_dataset()
    with pytest.raises(ValueError, match="scan_frequencies must be one of"):
        livessb.Session(ds, device="cpu", scan_frequencies="fine")
    with pytest.raises(ValueError, match="scan_frequencies must be one of"):  # before CuPy
        CUDAEngine(ds, scan_frequencies="effective ")


@pytest.mark.parametrize("shape", [(24, 24), (21, 27), (1536, 1536)])
def test_the_cuda_engines_per_bin_grid_is_the_references(shape: tuple[int, int]) -> None:
    """The per-bin frequency tables the CUDA kernels read (built on the device from the
    two axes; NumPy stands in for CuPy here) equal the reference's half plane bit for bit,
    so grid-frequency results did not change when the kernels moved to per-bin tables."""
    from livessb.engine.cuda.prepare import device_half_plane_grid
    from livessb.engine.reference import half_plane_grid

    step = (0.37, 0.5)
    for a, b in zip(device_half_plane_grid(np, shape, step), half_plane_grid(shape, step),
                    strict=True):
        assert a.shape == b.shape == (shape[0] * (shape[1] // 2 + 1),)
        assert np.array_equal(a, b)
