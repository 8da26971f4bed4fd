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


def _spectra(window: np.ndarray, shape: tuple[int, int]) -> np.ndarray:
    """(B, M) half-plane spectra of an (h, w, B) window padded to ``shape`` with its mean
    pattern, as the engines make them."""
    padded = np.broadcast_to(window.mean(axis=(0, 1)), (*shape, window.shape[2])).copy()
    padded[:window.shape[0], :window.shape[1]] = window
    return np.fft.rfft2(padded, axes=(0, 1)).reshape(-1, window.shape[2]).T


@pytest.mark.parametrize("n", [(24, 24), (21, 27)])  # the second padded to 24 × 27
def test_a_frequency_between_bins_is_found_to_a_hundredth_of_a_bin(n: tuple[int, int]) -> None:
    step, g = 0.5, (0.2561, -0.1437)  # a rotated lattice: both axes off the bins
    shape = (24, 27) if n == (21, 27) else n
    nu_r, nu_c = np.meshgrid(np.fft.fftfreq(shape[0], step), np.fft.rfftfreq(shape[1], step),
                             indexing="ij")
    nu_r, nu_c = nu_r.ravel(), nu_c.ravel()
    er, ec = effective_frequencies(_spectra(_tone_window(g, n, step), shape), shape, n,
                                   (step, step), nu_r, nu_c, chunk_pixels=2)
    peak = int(np.argmin((nu_r + g[0]) ** 2 + (nu_c + g[1]) ** 2))  # the -g bin (c ≥ 0)
    bin_r, bin_c = 1 / (shape[0] * step), 1 / (shape[1] * step)
    assert abs(er[peak] + g[0]) < 0.01 * bin_r and abs(ec[peak] + g[1]) < 0.01 * bin_c
    assert abs(nu_r[peak] + g[0]) > 0.05 * bin_r  # the grid itself is off by more
    assert er[0] == 0.0 and ec[0] == 0.0  # DC stays at zero
    assert np.all(np.abs(er - nu_r) <= 0.5 * bin_r + 1e-12)  # never beyond half a bin
    assert np.all(np.abs(ec - nu_c) <= 0.5 * bin_c + 1e-12)


@pytest.mark.parametrize(("n", "shape"), [((24, 24), (24, 24)), ((21, 27), (24, 27)),
                                          ((20, 30), (20, 30)), ((9, 2), (9, 2))])
def test_the_stencils_are_the_weighted_windows_spectra(
        n: tuple[int, int], shape: tuple[int, int]) -> None:
    """effective_sums' stencils on the half plane (rows periodic, columns past the edges
    from Hermitian symmetry) equal the FFTs of the mean-removed padded window weighted by
    w = 1 − cos(2πR/N) and t = sin(2πR/N) along each axis, written out directly."""
    from livessb.physics.frequencies import effective_sums

    rng = np.random.default_rng(3)
    window = rng.poisson(50.0, (*n, 5)).astype(np.float64)
    padded = np.broadcast_to(window.mean(axis=(0, 1)), (*shape, 5)).copy()
    padded[:n[0], :n[1]] = window
    zero_mean = padded - padded.mean(axis=(0, 1))
    want_e, want_x = [], []
    for axis in (0, 1):
        phase = 2 * np.pi * np.arange(shape[axis]) / shape[axis]
        along = [1, 1, 1]
        along[axis] = shape[axis]
        gw = np.fft.rfft2(zero_mean * (1 - np.cos(phase)).reshape(along), axes=(0, 1))
        gt = np.fft.rfft2(zero_mean * np.sin(phase).reshape(along), axes=(0, 1))
        want_e.append((np.abs(gw) ** 2).sum(axis=2).ravel())
        want_x.append((gw.conj() * gt).sum(axis=2).ravel())
    energy, cross = effective_sums(_spectra(window, shape), shape, chunk_pixels=2)
    scale = float(np.max(want_e))
    np.testing.assert_allclose(energy, np.array(want_e), atol=1e-10 * scale)
    np.testing.assert_allclose(cross, np.array(want_x), atol=1e-10 * scale)


@pytest.mark.parametrize("shape", [(24, 24), (24, 27), (9, 2), (5, 3)])
def test_the_cpu_kernel_sums_equal_the_numpy_reference(shape: tuple[int, int]) -> None:
    """The CPU engine's Numba pass (engine/frequency_kernels.py, the CUDA kernel's twin)
    against physics.frequencies.effective_sums, on the frequency-major layout the engine
    stores, edge columns and the DC bin included."""
    from livessb.engine.frequency_kernels import effective_sums as numba_sums
    from livessb.physics.frequencies import effective_sums

    rng = np.random.default_rng(5)
    window = rng.poisson(30.0, (*shape, 7)).astype(np.float64)
    G = np.ascontiguousarray(_spectra(window, shape).T).T  # (B, M) view of (M, B) memory
    energy, cross = effective_sums(G, shape, chunk_pixels=3)
    sums = numba_sums(G.T, *shape)
    scale = float(np.max(energy))
    np.testing.assert_allclose(sums[0::3], energy, atol=1e-12 * scale)
    np.testing.assert_allclose(sums[1::3] + 1j * sums[2::3], cross, atol=1e-12 * scale)


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


@pytest.mark.parametrize("apodised", [False, True])
def test_poisson_noise_does_not_pull_the_offsets_towards_the_grid(apodised: bool) -> None:
    """Integer counts of a tone between the bins at low dose: the noise energy in Σ|Gw|²
    shrank every measured offset towards 0 (the grid); with it taken off
    (``poisson=True``) the mean offset over realisations is the tone's. Truth: the tone's
    own frequency."""
    from livessb.physics.apodisation import hann_2d

    step, g, n = 0.5, (0.29, -0.17), (16, 16)  # 0.32 and 0.36 bins off the grid
    level = _tone_window(g, n, step).astype(np.float64) * 2.0  # ~2 counts per pixel
    nu_r, nu_c = (a.ravel() for a in np.meshgrid(
        np.fft.fftfreq(n[0], step), np.fft.rfftfreq(n[1], step), indexing="ij"))
    peak = int(np.argmin((nu_r + g[0]) ** 2 + (nu_c + g[1]) ** 2))
    rng = np.random.default_rng(7)
    found: dict[bool, list[float]] = {False: [], True: []}
    for _ in range(40):
        counts = rng.poisson(np.repeat(level, 40, axis=2))  # 120 BF pixels
        if apodised:  # the engines' apodised spectra: (I − Ī)·h, the DC the mean's
            mean = counts.mean(axis=(0, 1))
            G = _spectra((counts - mean) * hann_2d(n, n)[:, :, None], n)
            G[:, 0] = mean * (n[0] * n[1])
        else:
            G = _spectra(counts.astype(np.float64), n)
        for poisson in (False, True):
            er, _ = effective_frequencies(G, n, n, (step, step), nu_r, nu_c, chunk_pixels=64,
                                          apodised=apodised, poisson=poisson)
            found[poisson].append(er[peak] + g[0])
    bin_r = 1 / (n[0] * step)
    true_offset = -g[0] - nu_r[peak]
    plain, corrected = (np.mean(found[p]) / bin_r for p in (False, True))
    spread = np.std(found[True]) / bin_r / np.sqrt(len(found[True]))
    # Uncorrected, the offset is short by a share of itself (toward the grid, not random)
    assert abs(plain) > 3 * max(spread, 0.004)
    assert np.sign(plain) == -np.sign(true_offset)
    # Corrected, it is within three standard errors of the tone (and far closer)
    assert abs(corrected) < 3 * spread + 0.004
    assert abs(corrected) < 0.3 * abs(plain)


def test_the_engines_take_the_noise_off_for_integer_counts_of_apodised_spectra() -> None:
    """The same counts as uint16 and as float32: with scan_window="hann" the integer
    counts' measured frequencies move (the noise energy taken off), the float ones' are
    the plain estimator's; unapodised, both are the same (``corrects_noise``)."""
    from livessb.dataset import Dataset4D
    from livessb.physics.frequencies import corrects_noise
    from livessb.simulate.forward import simulate_4dstem

    assert corrects_noise(np.uint16, True) and not corrects_noise(np.float32, True)
    assert not corrects_noise(np.uint32, False)
    ds, _ = simulate_4dstem(scan_shape=(16, 16), detector_shape=(32, 32), dose=3e3,
                            aberrations={"C10": -30.0}, seed=3)
    as_float = Dataset4D(ds.counts.astype(np.float32), voltage_kV=ds.voltage_kV,
                         semiangle_mrad=ds.semiangle_mrad, scan_step_A=ds.scan_step_A,
                         detector_sampling_mrad=ds.detector_sampling_mrad)

    def measured(data: Dataset4D, window: str) -> np.ndarray:
        with livessb.Session(data, device="cpu", scan_window=window) as s:
            geometry = s._engine.prepare(None).part.geometry  # type: ignore[union-attr]
            return np.concatenate([geometry.nu_r, geometry.nu_c])

    assert np.array_equal(measured(ds, "none"), measured(as_float, "none"))
    moved = np.abs(measured(ds, "hann") - measured(as_float, "hann"))
    bin_A = 1 / (16 * 0.6)
    assert np.median(moved) > 0.02 * bin_A  # the typical bin by 2 % of a bin (measured 8 %)


def test_hann_fits_of_low_dose_integer_counts_are_not_pulled_towards_the_grid() -> None:
    """A 16² crystal scan (2.5 lattice periods) at C10 −82 Å, 5·10⁴ e⁻, fitted with
    "excluded" + "hann" from the same Poisson counts as uint16 (noise energy taken off) and
    as float32 (not): the float fits read |C10| low (the noisy offsets pull towards the
    grid, docs/bias-matrix.md §13), the integer ones near the truth. Truth: the
    simulator's C10; four fixed seeds, paired."""
    from livessb.dataset import Dataset4D
    from livessb.simulate.forward import simulate_4dstem

    free, _ = simulate_4dstem(scan_shape=(16, 16), detector_shape=(32, 32), scan_step_A=0.6,
                              aberrations={"C10": -82.0, "C12": 15.0, "phi12": 0.5},
                              rotation_deg=12.0, seed=5)
    expected = np.asarray(free.counts, dtype=np.float64) * 5e4
    delta: dict[str, list[float]] = {"uint16": [], "float32": []}
    for seed in range(4):
        counts = np.random.default_rng(seed).poisson(expected)
        for dtype in delta:
            ds = Dataset4D(counts.astype(dtype), voltage_kV=200, semiangle_mrad=20,
                           scan_step_A=free.scan_step_A,
                           detector_sampling_mrad=free.detector_sampling_mrad)
            with livessb.Session(ds, device="cpu", scan_window="hann",
                                 alias_pixels="excluded") as s:
                delta[dtype].append(s.fit(trials=100, seed=1, progress=False).params["C10"] + 82)
    corrected, plain = (np.array(delta[k]) for k in ("uint16", "float32"))
    # measured: paired shift +1.43 Å (every seed positive), integer mean −0.26, float +1.17
    assert np.mean(plain - corrected) > 0.7 and np.all(plain > corrected)
    assert abs(np.mean(corrected)) < 1.0 and abs(np.mean(corrected)) < abs(np.mean(plain))
