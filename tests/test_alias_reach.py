"""The two shortcuts of the CUDA alias test (kernels/common.cu ``alias_reach``,
kernels/walk.cu ``alias_shared``) that keep its pairs the CPU engine's, checked in NumPy
without a GPU: an alias ν' = ν + m/step beyond max|k| + k_α shares no BF pixel (so the
kernel skips its test), and the float32 squared distances decide a disc's side exactly as
float64 wherever they lie 1e-4 k_α² or more from its edge (nearer, float64 decides). The
kernels themselves against the CPU engine: tests/test_cuda_alias.py on a device."""

from __future__ import annotations

import numpy as np
import pytest

from livessb.physics.aliases import alias_orders, alias_spacing, in_alias_support
from livessb.physics.geometry import trotter_support

# (k_α 1/Å, step Å): 20 mrad at 200 kV at 0.5 / 0.7 / 1.0 Å (orders 1, 1, 2), 10 mrad at
# 300 kV (small k_α), 30 mrad at 80 kV at 1.5 Å (orders 5: more than 31 aliases)
GEOMETRIES = [(0.797, 0.5), (0.797, 0.7), (0.797, 1.0), (0.509, 2.0), (0.717, 3.8)]


def _pixels_and_frequencies(k_alpha: float, step: float, n: int,
                            seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    radius = k_alpha * np.sqrt(rng.uniform(0, 1, n))  # BF pixels: |k| ≤ k_α
    angle = rng.uniform(0, 2 * np.pi, n)
    k = np.stack([radius * np.cos(angle), radius * np.sin(angle)], axis=1)
    nyquist = 0.5 / step
    nu = rng.uniform(-nyquist, nyquist, (2, 64))  # a scan's bins
    return k, nu[0], nu[1]


@pytest.mark.parametrize("k_alpha,step", GEOMETRIES)
def test_an_alias_beyond_the_reach_shares_no_pixel(k_alpha: float, step: float) -> None:
    k, nu_r, nu_c = _pixels_and_frequencies(k_alpha, step, 4000, seed=1)
    s = 1.0 / step
    m_max = alias_orders(step, k_alpha)
    assert m_max >= 1
    k_max = float(np.max(np.hypot(k[:, 0], k[:, 1])))
    reach2 = ((k_max + k_alpha) * (1.0 + 1e-9)) ** 2
    beyond = within = 0
    union = np.zeros((k.shape[0], nu_r.size), dtype=bool)
    for mr in range(-m_max, m_max + 1):
        for mc in range(-m_max, m_max + 1):
            if mr == 0 and mc == 0:
                continue
            ar, ac = nu_r + mr * s, nu_c + mc * s
            far = ar * ar + ac * ac > reach2
            shared = trotter_support(k, ar, ac, k_alpha)  # (pixel, frequency)
            assert not shared[:, far].any()
            union |= shared & ~far[None, :]
            beyond += int(far.sum())
            within += int((~far).sum())
    assert beyond > 0 and within > 0  # both branches of the shortcut are exercised
    # the aliases within reach leave out exactly the pixels the full test does
    full = in_alias_support(k, nu_r, nu_c, k_alpha, alias_spacing((step, step), k_alpha,
                                                                 "excluded"))
    assert full.any()
    np.testing.assert_array_equal(union, full)


@pytest.mark.parametrize("k_alpha,step", GEOMETRIES)
def test_float32_distances_decide_as_float64_away_from_the_edge(k_alpha: float,
                                                                 step: float) -> None:
    k, nu_r, nu_c = _pixels_and_frequencies(k_alpha, step, 3000, seed=2)
    s = 1.0 / step
    m_max = alias_orders(step, k_alpha)
    ka2 = k_alpha * k_alpha
    fka2 = np.float32(ka2)
    tol = np.float32(1e-4) * fka2
    f32 = np.float32
    fk = k.astype(f32)
    fnr, fnc, fs = nu_r.astype(f32), nu_c.astype(f32), f32(s)
    reach2 = ((np.max(np.hypot(k[:, 0], k[:, 1])) + k_alpha) * (1 + 1e-9)) ** 2
    decided = near = 0
    for mr in range(-m_max, m_max + 1):
        for mc in range(-m_max, m_max + 1):
            if mr == 0 and mc == 0:
                continue
            ar, ac = nu_r + mr * s, nu_c + mc * s
            keep = ar * ar + ac * ac <= reach2  # the aliases the kernel tests
            far_ = (fnr + f32(mr) * fs)[keep], (fnc + f32(mc) * fs)[keep]
            for sign in (-1, 1):
                qr = fk[:, :1] + f32(sign) * far_[0][None, :]
                qc = fk[:, 1:] + f32(sign) * far_[1][None, :]
                d32 = qr * qr + qc * qc
                er = k[:, :1] + sign * ar[keep][None, :]
                ec = k[:, 1:] + sign * ac[keep][None, :]
                d64 = er * er + ec * ec
                clear = np.abs(d32 - fka2) >= tol
                np.testing.assert_array_equal((d32 <= fka2)[clear], (d64 <= ka2)[clear])
                err = np.abs(d32.astype(np.float64) - d64).max(initial=0.0)
                assert err < 0.05 * tol  # the margin: 20× or more
                decided += int(clear.sum())
                near += int((~clear).sum())
    assert decided > 0 and near > 0
