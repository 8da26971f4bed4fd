"""The COM rotation estimate takes its gradients once: the halves' quadratic forms come
from the whole field's curl and div, with np.gradient's one-sided edge at each cut. Held
here against the direct form (np.gradient of each half, then its curl energy), which it
replaced because the four extra passes cost ~20 ms of every full-field fit."""

from __future__ import annotations

import math

import numpy as np
import pytest

from livessb.physics.geometry import estimate_rotation


def _direct(com: np.ndarray, step: tuple[float, float]) -> list[tuple[float, float, bool]]:
    """(curl energy fraction, θ, transpose), best first: np.gradient of this field."""
    out = []
    d0, d1 = np.gradient(com[..., 0], *step), np.gradient(com[..., 1], *step)
    for transpose in (False, True):
        (a, b), (c, e) = (d1, d0) if transpose else (d0, d1)
        curl, div = (c - b).ravel(), (a + e).ravel()
        w, v = np.linalg.eigh(np.array([[curl @ curl, curl @ div], [curl @ div, div @ div]]))
        out.append((float(w[0] / w.sum()), math.atan2(v[1, 0], v[0, 0]) % math.pi, transpose))
    return sorted(out)


def _com_field(shape: tuple[int, int], theta: float, transpose: bool, noise: float,
               seed: int) -> np.ndarray:
    """A curl-free field (the gradient of a smooth potential) seen by a detector turned
    by -θ (and transposed), plus noise."""
    rng = np.random.default_rng(seed)
    r, c = np.meshgrid(np.arange(shape[0]), np.arange(shape[1]), indexing="ij")
    waves = [(0.3, 0.1), (-0.15, 0.25), (0.2, -0.35)]  # φ = Σ cos(a r + b c + p)
    phase = rng.uniform(0, 2 * np.pi, len(waves))
    gr = sum(-a * np.sin(a * r + b * c + p) for (a, b), p in zip(waves, phase, strict=True))
    gc = sum(-b * np.sin(a * r + b * c + p) for (a, b), p in zip(waves, phase, strict=True))
    cos, sin = math.cos(-theta), math.sin(-theta)
    com = np.stack([cos * gr - sin * gc, sin * gr + cos * gc], axis=-1)
    if transpose:
        com = com[..., ::-1]
    return com + noise * rng.normal(size=com.shape)


@pytest.mark.parametrize("shape, step", [((64, 64), (0.7, 0.7)), ((37, 51), (0.3, 0.55)),
                                         ((8, 9), (1.0, 2.0)), ((6, 40), (0.5, 0.5))])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_estimate_matches_np_gradient_of_every_half(shape: tuple[int, int],
                                                    step: tuple[float, float],
                                                    seed: int) -> None:
    rng = np.random.default_rng(seed)
    fields = [rng.normal(size=(*shape, 2)),
              _com_field(shape, 0.21 + seed, bool(seed % 2), 0.3 * seed, seed)]
    for com in fields:
        got = estimate_rotation(com, step)
        best, other = _direct(com, step)
        # the whole scan's figures: the same operations, bit for bit
        assert (got.residual, got.theta, got.transpose) == best
        assert (got.residual_other_transpose, got.theta_other_transpose) == other[:2]
        n0, n1 = shape
        if min(n0 // 2, n1 // 2) < 4:
            assert got.halves_transposes == ()
            continue
        parts = (com[:n0 // 2], com[n0 // 2:], com[:, :n1 // 2], com[:, n1 // 2:])
        assert got.halves_transposes == tuple(_direct(p, step)[0][2] for p in parts)


def test_a_clean_field_gives_its_rotation_and_transpose_on_every_half() -> None:
    for transpose in (False, True):
        com = _com_field((48, 56), 0.4, transpose, 0.01, 3)
        got = estimate_rotation(com, (0.5, 0.5))
        assert got.transpose == transpose and not got.transpose_undecided
        assert got.halves_transposes == (transpose,) * 4
        assert min(abs(got.theta - 0.4), abs(got.theta - 0.4 - math.pi)) < 0.02
