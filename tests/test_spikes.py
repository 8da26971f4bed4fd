"""One-frame spikes in the BF counts (livessb.engine.spikes): replaced where they are,
nothing else touched, the same on any chunking of the pixels, either layout."""

from __future__ import annotations

import numpy as np
import pytest

from livessb.engine import spikes
from livessb.engine.spikes import SPIKE_FACTOR, repair_spikes


def _poisson(shape: tuple[int, ...], level: np.ndarray, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).poisson(level, size=shape).astype(np.uint16)


@pytest.mark.parametrize("level", [0.3, 5.0, 120.0])  # low dose to a bright disc
def test_poisson_counts_with_specimen_contrast_are_left_alone(level: float) -> None:
    # Strong contrast: the pixel's level varies 4× across the scan.
    contrast = 1.0 + 1.5 * np.sin(np.linspace(0, 6, 64))[:, None, None] ** 2
    bf = _poisson((64, 64, 50), level * contrast)
    before = bf.copy()
    assert repair_spikes(np, bf, pixel_axis=2) == 0
    np.testing.assert_array_equal(bf, before)


def test_a_spike_is_replaced_by_its_pixels_mean_and_nothing_else_moves() -> None:
    bf = _poisson((32, 40, 30), np.full(30, 100.0))
    clean = bf.copy()
    bf[3, 7, 11] = 65535
    bf[20, 1, 4] = 5000  # 50× the level: a spike too
    assert repair_spikes(np, bf, pixel_axis=2) == 2
    changed = np.argwhere(bf != clean)
    assert {tuple(c) for c in changed} <= {(3, 7, 11), (20, 1, 4)}
    for (r, c, b), value in (((3, 7, 11), 65535), ((20, 1, 4), 5000)):
        spiked = clean[..., b].astype(np.float64)
        spiked[r, c] = value
        assert bf[r, c, b] == np.rint(spiked.mean())  # the mean with the spike in it


def test_the_threshold_is_the_pixels_mean_times_the_factor() -> None:
    bf = np.full((10, 10, 2), 10, dtype=np.float32)
    just_below = 10 + 0.9 * (SPIKE_FACTOR * 11.0 - 10)  # the mean rises with the count
    bf[0, 0, 0] = just_below
    bf[0, 0, 1] = 1000.0
    assert repair_spikes(np, bf, pixel_axis=2) == 1
    assert bf[0, 0, 0] == np.float32(just_below) and bf[0, 0, 1] < 1000.0


def test_device_layout_and_pixel_blocks_give_the_same_counts(
        monkeypatch: pytest.MonkeyPatch) -> None:
    host = _poisson((24, 24, 70), np.linspace(1, 200, 70), seed=3)
    for b in (0, 33, 69):
        host[5, b % 24, b] = 60000
    device = np.ascontiguousarray(np.moveaxis(host, 2, 0))  # (B, Rr, Rc): the GPU's
    assert repair_spikes(np, host, pixel_axis=2) == 3
    monkeypatch.setattr(spikes, "PIXEL_BLOCK", 16)  # five blocks, the last partial
    assert repair_spikes(np, device, pixel_axis=0) == 3
    np.testing.assert_array_equal(np.moveaxis(device, 0, 2), host)
