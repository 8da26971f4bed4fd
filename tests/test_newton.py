"""Trust-region Newton on analytic objectives: convergence, and merging of starts."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from livessb.fit.newton import NewtonOptions, _merge_duplicates, newton_refine
from livessb.fit.search import Box
from livessb.params import JOINT, scale_of

Derivatives = Callable[[np.ndarray], tuple[np.ndarray, np.ndarray, np.ndarray]]

BOX = Box.from_mapping(None)
CENTER = np.array([-80.0, 20.0, 0.5, 2.0, -3.0, 40.0])


def _counted(f: Derivatives) -> tuple[Derivatives, list[int]]:
    calls: list[int] = []

    def derivatives(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        calls.append(len(x))
        return f(x)

    return derivatives, calls


def _valley(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """1 + Σ w (x - c)²/s², nearly flat along the tilts (as at small depth spread)."""
    w = np.array([1.0, 1.0, 1.0, 1e-4, 1e-4, 1.0]) / scale_of(JOINT) ** 2
    d = x - CENTER
    loss = 1.0 + (w * d * d).sum(axis=1)
    grad = 2 * w * d
    hess = np.array([np.diag(2 * w)] * len(x))
    return loss, grad, hess


def test_a_start_on_the_valley_another_descends_is_merged() -> None:
    x = CENTER + np.array([[0.5, 0.0, 0.0, 0.0, 0.0, 0.0],     # best: near the floor
                           [0.0, 0.0, 0.0, 9.0, -7.0, 0.0],    # 11 trust units along it
                           [0.0, 6.0, 0.0, 0.0, 0.0, 0.0]])    # up the C12 wall
    loss, grad, hess = _valley(x)
    scale = scale_of(JOINT)
    active = np.ones(3, dtype=bool)
    _merge_duplicates(active, x, loss, JOINT, scale, grad * scale,
                      hess * np.outer(scale, scale), NewtonOptions().merge_model_rel)
    assert active.tolist() == [True, False, False]  # an exact quadratic predicts both
    # A start whose loss the best one's model misses (another basin) stays.
    other = loss.copy()
    other[1] -= 1e-3 * (other[1] - other[0])
    active[:] = True
    _merge_duplicates(active, x, other, JOINT, scale, grad * scale,
                      hess * np.outer(scale, scale), 1e-9)
    assert active[1]


def test_lockstep_starts_converge_to_the_valley_floor() -> None:
    starts = CENTER + np.array([[5.0, 1.0, 0.02, 8.0, 0.0, 10.0],
                                [-6.0, 2.0, -0.03, -9.0, 6.0, -8.0]])
    f, calls = _counted(_valley)
    x, loss, _, _ = newton_refine(starts, f, BOX)
    np.testing.assert_allclose(x[int(np.argmin(loss))], CENTER, atol=1e-6)
    assert calls[0] == 2


def test_starts_in_different_basins_are_not_merged() -> None:
    def double_well(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        u = (x[:, 0] - CENTER[0]) / 100.0  # minima at C10 = c ± 100 Å
        rest = ((x[:, 1:] - CENTER[1:]) / scale_of(JOINT)[1:]) ** 2
        loss = 1.0 + (u * u - 1.0) ** 2 + 0.01 * u + rest.sum(axis=1)
        grad = np.zeros_like(x)
        grad[:, 0] = (4 * u * (u * u - 1.0) + 0.01) / 100.0
        grad[:, 1:] = 2 * (x[:, 1:] - CENTER[1:]) / scale_of(JOINT)[1:] ** 2
        hess = np.zeros((len(x), 6, 6))
        hess[:, 0, 0] = (12 * u * u - 4.0) / 1e4
        for i in range(1, 6):
            hess[:, i, i] = 2 / scale_of(JOINT)[i] ** 2
        return loss, grad, hess

    starts = CENTER + np.array([[90.0, 1.0, 0.0, 0.0, 0.0, 0.0],
                                [-90.0, 1.0, 0.0, 0.0, 0.0, 0.0]])
    f, calls = _counted(double_well)
    x, loss, _, _ = newton_refine(starts, f, BOX)
    # Both wells are refined (neither start's model predicts the other well), and the
    # lower one (u = -1, tilted by the 0.01 u term) is found.
    assert calls[1] == 2
    best = int(np.argmin(loss))
    assert abs(x[best, 0] - (CENTER[0] - 100.0)) < 1.0


def test_symmetric_eigh_gives_numpys_bits_and_its_errors() -> None:
    """The short path to the eigensystem is numpy's own: the same bits (Newton's steps,
    and so the golden record, depend on them); a non-finite matrix takes numpy's path,
    which refuses it."""
    import pytest

    from livessb.fit.newton import norm, symmetric_eigh

    rng = np.random.default_rng(7)
    for _ in range(50):
        a = rng.normal(size=(6, 6)) * rng.uniform(1e-3, 1e3)
        H = a + a.T
        for got, want in zip(symmetric_eigh(H), np.linalg.eigh(H), strict=True):
            np.testing.assert_array_equal(got, want)
        v = a[0]
        assert norm(v) == np.linalg.norm(v)
    with pytest.raises(np.linalg.LinAlgError):
        symmetric_eigh(np.full((6, 6), np.nan))
