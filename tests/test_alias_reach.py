"""The two shortcuts of the CUDA alias test (kernels/common.cu ``alias_reach``,
kernels/walk.cu ``alias_shared``) that keep its pairs the CPU engine's, checked in NumPy
without a GPU: an alias ν' = ν + m/step beyond max|k| + k_α shares no BF pixel (so the
kernel skips its test), and the float32 squared distances decide a disc's side exactly as
float64 wherever they lie 1e-4 k_α² or more from its edge (nearer, float64 decides). The
two kernel functions transliterated, bookkeeping included, leave out the full test's
pixels. The kernels against the CPU engine: tests/test_cuda_alias.py on a device."""

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


def _kernel_reach(nr: float, nc: float, spacing: np.ndarray, reach2: float) -> int:
    """common.cu ``alias_reach``, line for line: bit i for the i-th alias m ≠ 0 within
    reach; from the 32nd on, bit 31 and every alias tested."""
    bits, i, m_r, m_c = 0, 0, int(spacing[2]), int(spacing[3])
    for mr in range(-m_r, m_r + 1):
        for mc in range(-m_c, m_c + 1):
            if mr == 0 and mc == 0:
                continue
            ar, ac = nr + mr * spacing[0], nc + mc * spacing[1]
            if i >= 31:
                return bits | 0x80000000
            if ar * ar + ac * ac <= reach2:
                bits |= 1 << i
            i += 1
    return bits


def _kernel_shared(k: np.ndarray, nr: float, nc: float, ka2: float, spacing: np.ndarray,
                   bits: int) -> bool:
    """walk.cu ``alias_shared``, line for line (float32 first, float64 near an edge)."""
    f32 = np.float32
    fka2 = f32(ka2)
    tol = f32(1e-4) * fka2
    fkr, fkc, fnr, fnc = f32(k[0]), f32(k[1]), f32(nr), f32(nc)
    fsr, fsc = f32(spacing[0]), f32(spacing[1])
    i, m_r, m_c = 0, int(spacing[2]), int(spacing[3])
    for mr in range(-m_r, m_r + 1):
        for mc in range(-m_c, m_c + 1):
            if mr == 0 and mc == 0:
                continue
            reach = (bits >> min(i, 31)) & 1
            i += 1
            if not reach:
                continue
            ar, ac = fnr + f32(mr) * fsr, fnc + f32(mc) * fsc
            dm = (fkr - ar) ** 2 + (fkc - ac) ** 2
            dp = (fkr + ar) ** 2 + (fkc + ac) ** 2
            in_minus, in_plus = dm <= fka2, dp <= fka2
            if abs(dm - fka2) < tol or abs(dp - fka2) < tol:
                dar, dac = nr + mr * spacing[0], nc + mc * spacing[1]
                in_minus = (k[0] - dar) ** 2 + (k[1] - dac) ** 2 <= ka2
                in_plus = (k[0] + dar) ** 2 + (k[1] + dac) ** 2 <= ka2
            if in_minus != in_plus:
                return True
    return False


@pytest.mark.parametrize("k_alpha,step", GEOMETRIES)
def test_the_kernels_bookkeeping_leaves_out_the_full_tests_pixels(k_alpha: float,
                                                                   step: float) -> None:
    # The kernel's two functions transliterated (bit order, the 31-alias overflow): the
    # pixels they leave out are physics.aliases.in_alias_support's, pair by pair.
    k, nu_r, nu_c = _pixels_and_frequencies(k_alpha, step, 150, seed=3)
    nu_r, nu_c = nu_r[:20], nu_c[:20]
    spacing = alias_spacing((step, step), k_alpha, "excluded")
    full = in_alias_support(k, nu_r, nu_c, k_alpha, spacing)
    reach2 = ((np.max(np.hypot(k[:, 0], k[:, 1])) + k_alpha) * (1 + 1e-9)) ** 2
    got = np.zeros_like(full)
    for j in range(nu_r.size):
        bits = _kernel_reach(nu_r[j], nu_c[j], spacing, reach2)
        for b in range(k.shape[0]):
            got[b, j] = bits != 0 and _kernel_shared(k[b], nu_r[j], nu_c[j], k_alpha**2,
                                                     spacing, bits)
    assert full.any() and not full.all()
    np.testing.assert_array_equal(got, full)


def _exclusion_rows(k: np.ndarray, nu_r: np.ndarray, nu_c: np.ndarray, k_alpha: float,
                    spacing: np.ndarray, reach2: float) -> np.ndarray:
    """energy_masks.cu ``alias_exclusion``, line for line: uint32 words (M, 4·tiles), bit i
    of word w set where the pair (pixel 32w + i, bin m) is left out: it shares an alias's
    support, or lies outside both discs or inside both by 1e-3 k_α (float32)."""
    f32 = np.float32
    B, M = k.shape[0], nu_r.size
    words = 4 * -(-B // 128)
    out = np.full((M, words), 0xFFFFFFFF, dtype=np.uint32)
    out2, in2 = (f32(k_alpha) * f32(1.001)) ** 2, (f32(k_alpha) * f32(0.999)) ** 2
    for m in range(M):
        reach = _kernel_reach(nu_r[m], nu_c[m], spacing, reach2)
        fnr, fnc = f32(nu_r[m]), f32(nu_c[m])
        for b in range(B):
            fkr, fkc = f32(k[b, 0]), f32(k[b, 1])
            dm = (fkr - fnr) ** 2 + (fkc - fnc) ** 2
            dp = (fkr + fnr) ** 2 + (fkc + fnc) ** 2
            off = (dm > out2 and dp > out2) or (dm < in2 and dp < in2)
            if not off and not (reach and _kernel_shared(k[b], nu_r[m], nu_c[m], k_alpha**2,
                                                         spacing, reach)):
                out[m, b // 32] &= np.uint32(~(1 << (b % 32)) & 0xFFFFFFFF)
    return out


def _kept(row: np.ndarray, b: int) -> bool:
    """walk.cu ``alias_kept`` on the tile's uint4 of a row (read once per tile of 128)."""
    ex = row[4 * (b // 128):4 * (b // 128) + 4]
    t = b % 128
    return not (int(ex[t >> 5]) >> (t & 31)) & 1


@pytest.mark.parametrize("k_alpha,step", GEOMETRIES)
def test_the_exclusion_table_keeps_the_full_tests_pairs_in_walks_and_masks(
        k_alpha: float, step: float) -> None:
    # The table the alias module builds once per window and rotation, as its walks read it
    # (a row per bin, a uint4 per tile of 128 pixels) and as the support masks OR it over
    # a warp's bins: the trotter pairs it keeps are exactly those the full test keeps, and
    # the masks list the pixels some bin takes (at steps ≥ 1 Å an alias shares every
    # trotter pair: the masks then list none, the walks visit nothing).
    k, nu_r, nu_c = _pixels_and_frequencies(k_alpha, step, 300, seed=5)  # 3 tiles, 1 partial
    nu_r, nu_c = nu_r[:32], nu_c[:32]  # one warp's bins
    spacing = alias_spacing((step, step), k_alpha, "excluded")
    reach2 = ((np.max(np.hypot(k[:, 0], k[:, 1])) + k_alpha) * (1 + 1e-9)) ** 2
    rows = _exclusion_rows(k, nu_r, nu_c, k_alpha, spacing, reach2)
    trotter = trotter_support(k, nu_r, nu_c, k_alpha)
    want = trotter & ~in_alias_support(k, nu_r, nu_c, k_alpha, spacing)
    walked = np.array([[trotter[b, m] and _kept(rows[m], b) for m in range(nu_r.size)]
                       for b in range(k.shape[0])])
    assert (trotter & ~want).any()
    np.testing.assert_array_equal(walked, want)
    # support_mask: the pixels some bin of the warp may take (the clear bits OR-ed)
    kept_any = np.bitwise_or.reduce(~rows, axis=0)
    listed = np.array([(int(kept_any[b // 32]) >> (b % 32)) & 1 for b in range(k.shape[0])])
    taken = want.any(axis=1)
    assert np.all(listed[taken] == 1)
    # beyond them only pixels within 1e-3 k_α of a disc's edge for some bin (not tested)
    assert np.count_nonzero(listed[~taken]) <= 0.02 * k.shape[0]
