"""One-frame spikes in the BF counts (livessb.engine.spikes): replaced where they are,
nothing else touched, the same in either layout."""

from __future__ import annotations

import numpy as np
import pytest

from livessb.engine.spikes import SPIKE_FACTOR, repair_spikes


def _poisson(shape: tuple[int, ...], level: np.ndarray, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).poisson(level, size=shape).astype(np.uint16)


def _means(bf: np.ndarray) -> np.ndarray:
    """Each pixel's mean count (what the engines read off the mean pattern)."""
    return np.asarray(bf.mean(axis=(0, 1), dtype=np.float64))


@pytest.mark.parametrize("level", [0.3, 5.0, 120.0])  # low dose to a bright disc
def test_poisson_counts_with_specimen_contrast_are_left_alone(level: float) -> None:
    # Strong contrast: the pixel's level varies 4× across the scan.
    contrast = 1.0 + 1.5 * np.sin(np.linspace(0, 6, 64))[:, None, None] ** 2
    bf = _poisson((64, 64, 50), level * contrast)
    before = bf.copy()
    assert repair_spikes(np, bf, 2, _means(bf)) == 0
    np.testing.assert_array_equal(bf, before)


def test_a_spike_is_replaced_by_its_pixels_mean_and_nothing_else_moves() -> None:
    bf = _poisson((32, 40, 30), np.full(30, 100.0))
    bf[3, 7, 11] = 65535
    bf[20, 1, 4] = 5000  # 50× the level: a spike too
    bf[8, 8, 4] = 6000  # the same pixel twice
    means = _means(bf)
    clean = bf.copy()
    assert repair_spikes(np, bf, 2, means) == 3
    assert {tuple(c) for c in np.argwhere(bf != clean)} == {(3, 7, 11), (20, 1, 4), (8, 8, 4)}
    assert bf[3, 7, 11] == np.rint(means[11])
    assert bf[20, 1, 4] == bf[8, 8, 4] == np.rint(means[4])


def test_the_limit_is_the_factor_times_the_pixels_mean_plus_one() -> None:
    bf = np.full((10, 10, 2), 10, dtype=np.float32)
    means = np.array([10.0, 10.0])
    limit = SPIKE_FACTOR * 11.0
    bf[0, 0, 0] = limit  # at the limit: kept
    bf[0, 0, 1] = limit + 1.0
    assert repair_spikes(np, bf, 2, means) == 1
    assert bf[0, 0, 0] == np.float32(limit) and bf[0, 0, 1] == np.float32(10.0)


def test_the_device_layout_gives_the_same_counts() -> None:
    host = _poisson((24, 24, 70), np.linspace(1, 200, 70), seed=3)
    for b in (0, 33, 69):
        host[5, b % 24, b] = 60000
    means = _means(host)
    device = np.ascontiguousarray(np.moveaxis(host, 2, 0))  # (B, Rr, Rc): the GPU's
    assert repair_spikes(np, host, 2, means) == 3
    assert repair_spikes(np, device, 0, means) == 3
    np.testing.assert_array_equal(np.moveaxis(device, 0, 2), host)
