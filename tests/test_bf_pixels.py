"""Reconstruction over a subset of the BF pixels (``bf_pixels``: the N nearest the disk
centre), against the simulator's truth and the SSB geometry (CPU engine; the CUDA
parity test is in tests/test_cuda_features.py).

A pixel at |k| from the disk centre lies in the trotters of frequencies
kα - |k| ≤ |ν| ≤ kα + |k| only, so the N nearest pixels (radius r) transfer that
annulus and nothing else; fewer pixels use less of the dose: the phase is noisier but
still that of the object.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import TYPE_CHECKING

import numpy as np
import pytest

import livessb
from livessb.engine.cpu import CPUEngine
from livessb.physics.geometry import nearest_bf_pixels
from livessb.simulate import simulate_4dstem

if TYPE_CHECKING:
    from livessb import Dataset4D
    from livessb.engine.cpu import HostSpectra
    from livessb.simulate import SimulationTruth

SCAN = (32, 32)


@pytest.fixture(scope="module")
def noisy() -> tuple[Dataset4D, SimulationTruth]:
    return simulate_4dstem(scan_shape=SCAN, detector_shape=(32, 32), dose=3e4, seed=11,
                           aberrations={"C10": 25.0, "C12": 6.0, "phi12": 0.2},
                           rotation_deg=14.0)


@pytest.fixture(scope="module")
def prepared(noisy: tuple[Dataset4D, SimulationTruth]) -> Iterator[
        tuple[CPUEngine, HostSpectra, CPUEngine, HostSpectra]]:
    ds, truth = noisy
    fast, ref = CPUEngine(ds), CPUEngine(ds, kernels=False)
    sf, sr = fast.prepare(), ref.prepare()
    for eng, sp in ((fast, sf), (ref, sr)):
        eng.set_rotation(sp, math.radians(truth.rotation_deg), truth.transpose)
    yield fast, sf, ref, sr
    fast.close()
    ref.close()


def _true_phase(truth: SimulationTruth) -> np.ndarray:
    step = truth.scan_step_A
    rows, cols = np.meshgrid(np.arange(SCAN[0]) * step[0], np.arange(SCAN[1]) * step[1],
                             indexing="ij")
    out: np.ndarray = truth.phase(rows, cols)
    return out


def _corr(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.corrcoef(a.ravel(), b.ravel())[0, 1])


def test_nearest_pixels_are_a_disk_about_the_centre(
        noisy: tuple[Dataset4D, SimulationTruth]) -> None:
    ds, _ = noisy
    bf = CPUEngine(ds).geo.bf
    r = np.hypot(bf.k_det[:, 0], bf.k_det[:, 1])
    for n in (1, 7, bf.count // 3, bf.count):
        keep = nearest_bf_pixels(bf, n)
        assert keep is not None and keep.dtype == bool and int(keep.sum()) == n
        assert r[keep].max() <= r[~keep].min() if n < bf.count else keep.all()
    assert nearest_bf_pixels(bf, None) is None
    np.testing.assert_array_equal(nearest_bf_pixels(bf, 40), nearest_bf_pixels(bf, 40))
    for bad, error in ((0, ValueError), (bf.count + 1, ValueError), (2.5, TypeError),
                       (True, TypeError), ("10", TypeError)):
        with pytest.raises(error, match="bf_pixels"):
            nearest_bf_pixels(bf, bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("upsample,method", [(1, "ssb"), (2, "ssb"), (2, "wiener")])
def test_every_pixel_counted_gives_the_default_bits(
        prepared: tuple[CPUEngine, HostSpectra, CPUEngine, HostSpectra],
        noisy: tuple[Dataset4D, SimulationTruth], upsample: int, method: str) -> None:
    fast, sf, ref, sr = prepared
    params = dict(noisy[1].params)
    for eng, sp in ((fast, sf), (ref, sr)):
        default = eng.reconstruct(sp, params, upsample, method)
        every = eng.reconstruct(sp, params, upsample, method, bf_pixels=eng.n_bf)
        np.testing.assert_array_equal(every, default)  # through the subset path, all kept
        fewer = eng.reconstruct(sp, params, upsample, method, bf_pixels=eng.n_bf // 2)
        assert not np.array_equal(fewer, default)


@pytest.mark.parametrize("params", [
    {"C10": 25.0, "C12": 6.0, "phi12": 0.2},
    {"C10": 25.0, "C12": 6.0, "phi12": 0.2, "tilt_row_mrad": 3.0, "depth": 80.0},
    {"C10": 25.0, "C30": 2e4},  # higher order: the reference path in the fast engine too
])
@pytest.mark.parametrize("method", ["ssb", "wiener"])
def test_kernel_subset_matches_the_reference_subset(
        prepared: tuple[CPUEngine, HostSpectra, CPUEngine, HostSpectra],
        params: dict[str, float], method: str) -> None:
    fast, sf, ref, sr = prepared
    n = fast.n_bf // 3
    a = fast.reconstruct(sf, params, 2, method, bf_pixels=n)
    b = ref.reconstruct(sr, params, 2, method, bf_pixels=n)
    np.testing.assert_allclose(a, b, rtol=0, atol=1e-6 * np.abs(b).max())


def test_a_subset_transfers_only_its_trotter_annulus(
        prepared: tuple[CPUEngine, HostSpectra, CPUEngine, HostSpectra],
        noisy: tuple[Dataset4D, SimulationTruth]) -> None:
    fast, sf, _, _ = prepared
    ds, truth = noisy
    bf = fast.geo.bf
    n = bf.count // 4
    keep = nearest_bf_pixels(bf, n)
    assert keep is not None
    radius = float(np.hypot(bf.k_det[keep, 0], bf.k_det[keep, 1]).max())  # 1/Å
    k_alpha = ds.k_alpha
    O = fast.object_spectrum(sf, dict(truth.params), 1, "ssb", keep)
    g = sf.part.geometry
    nu = np.hypot(g.nu_r, g.nu_c)
    edge = 1e-9 + ds.detector_pixel_inv_A  # the soft aperture edge: one pixel
    outside = (nu < k_alpha - radius - edge) | (nu > k_alpha + radius + edge)
    inside = (nu > k_alpha - radius + edge) & (nu < k_alpha + radius - edge)
    assert outside.sum() > 20 and inside.sum() > 20
    assert np.abs(O[outside]).max() == 0.0  # no pixel of the subset carries them
    assert np.abs(O[inside]).max() > 0.0
    full = fast.object_spectrum(sf, dict(truth.params), 1, "ssb")
    low = (nu > 0) & (nu < k_alpha - radius - edge)
    assert np.abs(full[low]).max() > 0  # every pixel: the low band is there


def test_fewer_pixels_lower_snr_but_the_same_object(
        prepared: tuple[CPUEngine, HostSpectra, CPUEngine, HostSpectra],
        noisy: tuple[Dataset4D, SimulationTruth]) -> None:
    fast, sf, _, _ = prepared
    _, truth = noisy
    true = _true_phase(truth)
    corr = {}
    for n in (fast.n_bf, fast.n_bf // 2, fast.n_bf // 6):
        phase = np.angle(fast.reconstruct(sf, dict(truth.params), 1, "ssb", bf_pixels=n))
        corr[n] = _corr(phase, true)
    full, half, sixth = corr[fast.n_bf], corr[fast.n_bf // 2], corr[fast.n_bf // 6]
    assert full > 0.85, corr
    assert full > half > sixth, corr  # less dose and a narrower band: a worse image
    assert sixth > 0.3, corr  # still the object, atoms bright where the simulator put them


def test_session_reconstruct_bf_pixels(noisy: tuple[Dataset4D, SimulationTruth]) -> None:
    ds, truth = noisy
    with livessb.Session(ds, device="cpu") as s:
        s.rotation_deg, s.transpose = truth.rotation_deg, truth.transpose  # the known rotation
        default = s.reconstruct(truth.params)
        n = s.diagnostics.engine.n_bf
        every = s.reconstruct(truth.params, bf_pixels=n)
        fewer = s.reconstruct(truth.params, upsample=1, bf_pixels=n // 2)
        assert default.bf_pixels is None and every.bf_pixels == n and fewer.bf_pixels == n // 2
        np.testing.assert_array_equal(every.object, default.object)
        assert fewer.shape == SCAN and fewer.params == dict(truth.params)
        assert fewer.crop((0, 8, 0, 8)).bf_pixels == n // 2
        with pytest.raises(ValueError, match=f"outside 1..{n}"):
            s.reconstruct(truth.params, bf_pixels=n + 1)


def test_cuda_subset_mask_words_set_the_kept_pixels_bits() -> None:
    """The support-mask row the CUDA engine ANDs into its masks (word q of tile t, bit i =
    pixel 128t + 32q + i): checked here on the host, the launch in test_cuda_features."""
    from livessb.engine.cuda.prepare import subset_mask_words

    keep = np.zeros(300, dtype=bool)
    keep[[0, 31, 32, 127, 128, 299]] = True
    words = subset_mask_words(keep, 3)
    assert words.dtype == np.uint32 and words.shape == (12,)
    bits = np.unpackbits(words.view(np.uint8), bitorder="little").astype(bool)
    np.testing.assert_array_equal(np.nonzero(bits)[0], [0, 31, 32, 127, 128, 299])
    every = subset_mask_words(np.ones(300, dtype=bool), 3)
    assert int(np.unpackbits(every.view(np.uint8)).sum()) == 300
