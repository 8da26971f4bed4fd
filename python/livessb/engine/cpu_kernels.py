"""Numba kernels of the CPU engine: Γ and the VP sums, fused, over the trotters.

Same math as ``physics.overlap.gamma_derivatives`` written per (b, ν) pair. Each kernel
finds the pairs of a frequency inside its trotter, and their aperture products, from the
BF frequencies k (B,) itself (``_trotter_pairs``: the operations of
``physics.geometry.trotter_support`` and ``physics.overlap.overlap_grid``, so the same
bits), or reads them from a ``pack`` that ``fill_pack`` wrote (the engine keeps one when
it is small; an empty pack: find them). The spectra come frequency-major, G (M, B), so
each frequency's pixels are read in memory order. Each
frequency's sums run over its pixels in index order: parallel over ν, sequential over b,
so results do not depend on the thread count. Scoring sums per (trotter lobe, ν): the
k-ν lobe of ν in column m, its k+ν lobe in column M + m (the objective's per-lobe sums);
the reconstruction sums per ν.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit, prange

from ..params import MRAD  # a float global: Numba compiles it in as a constant


@njit(cache=True, inline="always")
def _aperture(d2: float, ka: float, w: float, inner2: float, outer2: float) -> float:
    """``physics.optics.aperture`` at |q|² = d2 (same operations, same bits); no square
    root where |q| is a full edge width inside (1) or outside (0) the soft edge."""
    if w <= 0.0:
        return 1.0 if math.sqrt(d2) <= ka else 0.0
    if d2 <= inner2:
        return 1.0
    if d2 >= outer2:
        return 0.0
    return min(max((ka - math.sqrt(d2)) / w + 0.5, 0.0), 1.0)


@njit(cache=True)
def _trotter_pairs(nr, nc, k_r, k_c, a_k, geo, idx, amp_m, amp_p, minus):  # type: ignore[no-untyped-def]
    """Fill the pairs of ν = (nr, nc) inside its trotter, b ascending: pixel ``idx``, the
    aperture products A(k∓ν)A(k) and whether k-ν is in the disc (the k-ν lobe); returns
    how many. ``geo`` = (k_α, k_α², edge width, inner², outer², 1/step_r, 1/step_c, m_r,
    m_c) (``aperture_constants`` and ``physics.aliases.alias_spacing``): with orders
    m_r, m_c > 0 a pixel that also lies in an alias's trotter is left out."""
    ka, ka2, w, inner2, outer2 = geo[0], geo[1], geo[2], geo[3], geo[4]
    aliased = geo[7] > 0.0 or geo[8] > 0.0
    n = 0
    for b in range(k_r.shape[0]):
        qr, qc = k_r[b] - nr, k_c[b] - nc
        dm2 = qr * qr + qc * qc
        qr, qc = k_r[b] + nr, k_c[b] + nc
        dp2 = qr * qr + qc * qc
        in_minus = dm2 <= ka2
        if in_minus == (dp2 <= ka2):
            continue  # in both discs or in neither: not single sideband
        if aliased and _in_alias_support(nr, nc, k_r[b], k_c[b], geo):
            continue  # the pixel carries an alias's signal too (physics.aliases)
        am = _aperture(dm2, ka, w, inner2, outer2) * a_k[b]
        ap = _aperture(dp2, ka, w, inner2, outer2) * a_k[b]
        if am == 0.0 and ap == 0.0:
            continue
        idx[n] = b
        amp_m[n] = am
        amp_p[n] = ap
        minus[n] = in_minus
        n += 1
    return n


@njit(cache=True, inline="always")
def _in_alias_support(nr, nc, kr, kc, geo):  # type: ignore[no-untyped-def]
    """``physics.aliases.in_alias_support`` for one pixel and frequency."""
    ka2, s_r, s_c, m_r, m_c = geo[1], geo[5], geo[6], int(geo[7]), int(geo[8])
    for mr in range(-m_r, m_r + 1):
        for mc in range(-m_c, m_c + 1):
            if mr == 0 and mc == 0:
                continue
            ar, ac = nr + mr * s_r, nc + mc * s_c
            qr, qc = kr - ar, kc - ac
            in_minus = qr * qr + qc * qc <= ka2
            qr, qc = kr + ar, kc + ac
            if in_minus != (qr * qr + qc * qc <= ka2):
                return True
    return False


CHUNKS = 256  # blocks of consecutive frequencies the parallel loops hand out


@njit(cache=True)
def _chunks(M: int) -> int:
    return max(1, min(M, CHUNKS))


@njit(cache=True)
def _buffers(B: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    return (np.empty(B, dtype=np.int32), np.empty(B), np.empty(B),
            np.empty(B, dtype=np.bool_))


@njit(cache=True, inline="always")
def _pairs_at(m, pack, k_r, k_c, a_k, nu_r, nu_c, geo, buf):  # type: ignore[no-untyped-def]
    """(pixels, A(k-ν)A(k), A(k+ν)A(k), in the k-ν lobe, count) of frequency m: the pack's
    slice when there is a pack, else found now into ``buf``."""
    ptr, p_idx, p_am, p_ap, p_minus = pack
    if ptr.shape[0] > 0:
        lo, hi = ptr[m], ptr[m + 1]
        return p_idx[lo:hi], p_am[lo:hi], p_ap[lo:hi], p_minus[lo:hi], hi - lo
    idx, amp_m, amp_p, minus = buf
    n = _trotter_pairs(nu_r[m], nu_c[m], k_r, k_c, a_k, geo, idx, amp_m, amp_p, minus)
    return idx, amp_m, amp_p, minus, n


@njit(cache=True, parallel=True)
def pair_counts(k_r, k_c, a_k, nu_r, nu_c, geo):  # type: ignore[no-untyped-def]
    """Pairs inside a trotter (with a non-zero aperture product) per frequency: (M,)."""
    M, B = nu_r.shape[0], k_r.shape[0]
    counts = np.zeros(M, dtype=np.int64)
    n_chunks = _chunks(M)
    for c in prange(n_chunks):
        idx, amp_m, amp_p, minus = _buffers(B)
        for m in range(c * M // n_chunks, (c + 1) * M // n_chunks):
            counts[m] = _trotter_pairs(nu_r[m], nu_c[m], k_r, k_c, a_k, geo, idx, amp_m,
                                       amp_p, minus)
    return counts


@njit(cache=True, parallel=True)
def fill_pack(k_r, k_c, a_k, nu_r, nu_c, geo, ptr, idx, amp_m, amp_p, minus):  # type: ignore[no-untyped-def]
    """Write every frequency's pairs from ``ptr`` on (the cumulative ``pair_counts``)."""
    for m in prange(nu_r.shape[0]):
        lo, hi = ptr[m], ptr[m + 1]
        _trotter_pairs(nu_r[m], nu_c[m], k_r, k_c, a_k, geo, idx[lo:hi], amp_m[lo:hi],
                       amp_p[lo:hi], minus[lo:hi])


@njit(cache=True, parallel=True)
def vp_sums(G, k_r, k_c, a_k, nu_r, nu_c, pack, geo, pl, cand,  # type: ignore[no-untyped-def]
            det_r, det_c, row_off, col_off, to_det, phase_k_r, phase_k_c):
    """N (K, 2M) complex and D (K, 2M) per (lobe, ν) for K candidates (rows of ``cand``).

    The trotter pairs come from ``k_r``/``k_c`` (or the pack), the phases from the
    rotation of ``to_det`` and ``phase_k_r``/``phase_k_c``: the same k for a scoring, the
    held rotation's pairs with each θ's phases for a rotation scan (``CPUEngine``).

    The aberration phase is a plane wave in k: exp(iπλ·k·w) factors into a table
    over detector rows times one over detector columns (``row_off``/``col_off``
    are the detector frequencies of each row/column, ``to_det`` maps scan-frame
    vectors to the detector frame), so the inner loop has no sin/cos when Δ = 0.
    Each frequency's tables are made for every candidate first (rows × K), then every
    pair's pixel, apertures and spectrum are read once for all K candidates; each
    candidate's sums still add its pairs in pixel order (the same bits as a candidate at
    a time, which read them K times).
    """
    K = cand.shape[0]
    M, B = nu_r.shape[0], k_r.shape[0]
    R, C = row_off.shape[0], col_off.shape[0]
    N = np.zeros((K, 2 * M), dtype=np.complex128)
    D = np.zeros((K, 2 * M))
    n_chunks = _chunks(M)
    for ch in prange(n_chunks):
        buf = _buffers(B)
        tabs = (np.empty((R, K), dtype=np.complex128), np.empty((C, K), dtype=np.complex128),
                np.empty((R, K), dtype=np.complex128), np.empty((C, K), dtype=np.complex128))
        per_k = (np.empty((3, K)), np.empty((3, K), dtype=np.complex128))
        sums = (np.empty((2, K), dtype=np.complex128), np.empty((2, K)))
        for m in range(ch * M // n_chunks, (ch + 1) * M // n_chunks):
            idx, amp_m, amp_p, minus, n_pairs = _pairs_at(m, pack, k_r, k_c, a_k, nu_r, nu_c,
                                                          geo, buf)
            if n_pairs > 0:
                _vp_frequency(m, M, nu_r[m], nu_c[m], idx, amp_m, amp_p, minus, n_pairs, G,
                              phase_k_r, phase_k_c, pl, cand, det_r, det_c, row_off, col_off,
                              to_det, tabs, per_k, sums, N, D)
    return N, D


@njit(cache=True, inline="always")
def _vp_frequency(m, M, nr, nc, idx, amp_m, amp_p, minus, n_pairs, G, k_r, k_c, pl, cand,  # type: ignore[no-untyped-def]
                  det_r, det_c, row_off, col_off, to_det, tabs, per_k, sums, N, D):
    """``vp_sums`` at frequency m: columns m (k-ν lobe) and M + m (k+ν lobe)."""
    K = cand.shape[0]
    tab_r, tab_c, dep_r, dep_c = tabs
    real_k, cplx_k = per_k
    xa, xb, pd = real_k[0], real_k[1], real_k[2]  # sinc arguments' offsets, πλΔ
    eqc, ea, eb = cplx_k[0], cplx_k[1], cplx_k[2]  # e^{iπλq}, e^{i xa}, e^{i xb}
    acc_n, acc_d = sums
    nn, nd, nx = nr * nr + nc * nc, nr * nr - nc * nc, 2.0 * nr * nc
    for k in range(K):
        C10, C12, phi = cand[k, 0], cand[k, 1], cand[k, 2]
        c2, s2 = math.cos(2.0 * phi), math.sin(2.0 * phi)
        tilt = 2.0 * math.pi * MRAD * (nr * cand[k, 3] + nc * cand[k, 4])
        dep = cand[k, 5]
        q = C10 * nn + C12 * (c2 * nd + s2 * nx)
        # lin = k·w with w = 2Mν (scan frame); tables hold exp(iπλ k_det·w_det).
        w_r = 2.0 * (C10 * nr + C12 * (c2 * nr + s2 * nc))
        w_c = 2.0 * (C10 * nc + C12 * (s2 * nr - c2 * nc))
        _fill_plane_tables(pl, w_r, w_c, row_off, col_off, to_det, tab_r[:, k], tab_c[:, k])
        eqc[k] = complex(math.cos(pl * q), math.sin(pl * q))  # e^{iπλq}
        pd[k] = pl * dep
        if dep != 0.0:
            # exp(-iπλΔ k·ν) for the depth factors' sines, same factorisation.
            _fill_plane_tables(-pl * dep, nr, nc, row_off, col_off, to_det, dep_r[:, k],
                               dep_c[:, k])
            xa[k] = (pl * nn + tilt) * dep / 2.0
            xb[k] = (-pl * nn + tilt) * dep / 2.0
            ea[k] = complex(math.cos(xa[k]), math.sin(xa[k]))
            eb[k] = complex(math.cos(xb[k]), math.sin(xb[k]))
    acc_n[:] = 0j
    acc_d[:] = 0.0
    for j in range(n_pairs):
        b = idx[j]
        dr, dc = det_r[b], det_c[b]
        am, ap, g = amp_m[j], amp_p[j], G[m, b]
        lobe = 0 if minus[j] else 1
        ku = k_r[b] * nr + k_c[b] * nc
        for k in range(K):
            lin = tab_r[dr, k] * tab_c[dc, k]  # exp(iπλ·lin)
            eq = eqc[k]
            wa = am * eq.conjugate() * lin  # exp(-iπλ(q - lin))
            wb = ap * (eq * lin)  # exp(+iπλ(q + lin))
            if pd[k] != 0.0:
                e = dep_r[dr, k] * dep_c[dc, k]
                gam = _sinc_from(xa[k] - pd[k] * ku, (ea[k] * e).imag) * wa - _sinc_from(
                    xb[k] - pd[k] * ku, (eb[k] * e).imag) * wb
            else:
                gam = wa - wb
            acc_n[lobe, k] += gam.conjugate() * g
            acc_d[lobe, k] += gam.real * gam.real + gam.imag * gam.imag
    for k in range(K):
        N[k, m], D[k, m] = acc_n[0, k], acc_d[0, k]
        N[k, M + m], D[k, M + m] = acc_n[1, k], acc_d[1, k]


@njit(cache=True, inline="always")
def _sinc_from(x: float, sin_x: float) -> float:
    """sin(x)/x given sin(x) (from the tables); series near 0."""
    if abs(x) < 1e-3:
        return 1.0 - x * x / 6.0
    return sin_x / x


@njit(cache=True, inline="always")
def _sinc3(x: float) -> tuple[float, float, float]:
    if abs(x) < 1e-3:
        return 1.0 - x * x / 6.0, -x / 3.0 + x**3 / 30.0, -1.0 / 3.0 + x * x / 10.0
    s, c = math.sin(x), math.cos(x)
    S = s / x
    S1 = (x * c - s) / (x * x)
    return S, S1, -S - 2.0 * S1 / x


N_SECOND = 21  # second derivatives of the six parameters: physics.overlap.PAIRS


@njit(cache=True, parallel=True)
def vp_derivative_sums(G, k_r, k_c, a_k, nu_r, nu_c, pack, geo, pl, params):  # type: ignore[no-untyped-def]
    """N, D and their first (6) and second (21, ``physics.overlap.PAIRS`` order)
    derivative sums per (lobe, ν): 2M columns as ``vp_sums``."""
    M, B = nu_r.shape[0], k_r.shape[0]
    N = np.zeros(2 * M, dtype=np.complex128)
    D = np.zeros(2 * M)
    dN = np.zeros((6, 2 * M), dtype=np.complex128)
    dD = np.zeros((6, 2 * M))
    d2N = np.zeros((N_SECOND, 2 * M), dtype=np.complex128)
    d2D = np.zeros((N_SECOND, 2 * M))
    n_chunks = _chunks(M)
    for ch in prange(n_chunks):
        buf = _buffers(B)
        g1 = np.zeros(6, dtype=np.complex128)
        g2 = np.zeros(N_SECOND, dtype=np.complex128)
        # One frequency's sums per lobe (k-ν, k+ν): [N, dN (6), d2N (21)] and [D, dD, d2D],
        # added up here and stored once (the same additions in the same order as into
        # the outputs: the same bits, without a store per pair into 2M-strided rows).
        acc_n = np.zeros((2, 1 + 6 + N_SECOND), dtype=np.complex128)
        acc_d = np.zeros((2, 1 + 6 + N_SECOND))
        for m in range(ch * M // n_chunks, (ch + 1) * M // n_chunks):
            idx, amps_m, amps_p, minus, n_in = _pairs_at(m, pack, k_r, k_c, a_k, nu_r, nu_c,
                                                         geo, buf)
            acc_n[:] = 0
            acc_d[:] = 0
            _derivative_frequency(nu_r[m], nu_c[m], idx, amps_m, amps_p, minus, n_in, G[m],
                                  k_r, k_c, pl, params, g1, g2, acc_n, acc_d)
            for lobe in range(2):
                col = m if lobe == 0 else M + m
                N[col], D[col] = acc_n[lobe, 0], acc_d[lobe, 0]
                for p in range(6):
                    dN[p, col], dD[p, col] = acc_n[lobe, 1 + p], acc_d[lobe, 1 + p]
                for n in range(N_SECOND):
                    d2N[n, col], d2D[n, col] = acc_n[lobe, 7 + n], acc_d[lobe, 7 + n]
    return N, D, dN, dD, d2N, d2D


@njit(cache=True, inline="always")
def _derivative_frequency(nr, nc, idx, amps_m, amps_p, minus, n_in, G_m, k_r, k_c, pl,  # type: ignore[no-untyped-def]
                          params, g1, g2, acc_n, acc_d):
    """``vp_derivative_sums`` at one frequency: its pairs' Γ, first and second
    derivatives (g2 written out in PAIRS order: (0,0) (0,1) … (0,5) (1,1) … (5,5)), summed
    per lobe into acc_n, acc_d."""
    C10, C12, phi = params[0], params[1], params[2]
    dep = params[5]
    c2, s2 = math.cos(2.0 * phi), math.sin(2.0 * phi)
    nn, nd, nx = nr * nr + nc * nc, nr * nr - nc * nc, 2.0 * nr * nc
    tilt = 2.0 * math.pi * MRAD * (nr * params[3] + nc * params[4])
    dx0 = math.pi * dep * MRAD * nr  # ∂x/∂τ_r, ∂x/∂τ_c of the sinc argument x = βΔ/2
    dx1 = math.pi * dep * MRAD * nc
    for j in range(n_in):
        b = idx[j]
        kr, kc = k_r[b], k_c[b]
        gam = 0j
        g1[:] = 0
        g2[:] = 0
        for t in range(2):
            sign = -1.0 if t == 0 else 1.0  # a: k-ν, b: k+ν
            sgn = 1.0 if t == 0 else -1.0
            amp = amps_m[j] if t == 0 else amps_p[j]
            if amp == 0.0:
                continue
            d10 = pl * (nn + sign * 2.0 * (kr * nr + kc * nc))
            dc = pl * (nd + sign * 2.0 * (kr * nr - kc * nc))
            ds = pl * (nx + sign * 2.0 * (kr * nc + kc * nr))
            dchi = C10 * d10 + C12 * (c2 * dc + s2 * ds)
            wave = amp * complex(math.cos(dchi), sign * math.sin(dchi))
            beta = -sign * d10 + tilt
            S, S1, S2 = _sinc3(beta * dep / 2.0)
            gam += sgn * S * wave
            h0, h1 = d10, c2 * dc + s2 * ds  # ∂χ/∂C10, ∂χ/∂C12, ∂χ/∂φ12
            h2 = C12 * (-2.0 * s2 * dc + 2.0 * c2 * ds)
            d12phi = -2.0 * s2 * dc + 2.0 * c2 * ds
            dphiphi = C12 * (-4.0 * c2 * dc - 4.0 * s2 * ds)
            dx2 = beta / 2.0  # ∂x/∂Δ
            ip = complex(0.0, sign)
            w0, w1, w2 = ip * h0 * wave, ip * h1 * wave, ip * h2 * wave
            sS = sgn * S
            g1[0] += sS * w0
            g1[1] += sS * w1
            g1[2] += sS * w2
            g1[3] += sgn * S1 * dx0 * wave
            g1[4] += sgn * S1 * dx1 * wave
            g1[5] += sgn * S1 * dx2 * wave
            g2[0] += sS * (ip * h0 * w0)
            g2[1] += sS * (ip * h0 * w1)
            g2[2] += sS * (ip * h0 * w2)
            g2[3] += sgn * S1 * dx0 * w0
            g2[4] += sgn * S1 * dx1 * w0
            g2[5] += sgn * S1 * dx2 * w0
            g2[6] += sS * (ip * h1 * w1)
            g2[7] += sS * (ip * h1 * w2 + ip * d12phi * wave)
            g2[8] += sgn * S1 * dx0 * w1
            g2[9] += sgn * S1 * dx1 * w1
            g2[10] += sgn * S1 * dx2 * w1
            g2[11] += sS * (ip * h2 * w2 + ip * dphiphi * wave)
            g2[12] += sgn * S1 * dx0 * w2
            g2[13] += sgn * S1 * dx1 * w2
            g2[14] += sgn * S1 * dx2 * w2
            g2[15] += sgn * (S2 * dx0 * dx0) * wave
            g2[16] += sgn * (S2 * dx0 * dx1) * wave
            g2[17] += sgn * (S2 * dx0 * dx2 + S1 * math.pi * MRAD * nr) * wave
            g2[18] += sgn * (S2 * dx1 * dx1) * wave
            g2[19] += sgn * (S2 * dx1 * dx2 + S1 * math.pi * MRAD * nc) * wave
            g2[20] += sgn * (S2 * dx2 * dx2) * wave
        Gj = G_m[b]
        gc = gam.conjugate()
        lobe = 0 if minus[j] else 1
        acc_n[lobe, 0] += gc * Gj
        acc_d[lobe, 0] += gam.real * gam.real + gam.imag * gam.imag
        for p in range(6):
            acc_n[lobe, 1 + p] += g1[p].conjugate() * Gj
            acc_d[lobe, 1 + p] += 2.0 * (gc * g1[p]).real
        n = 0
        for i in range(6):
            for q in range(i, 6):
                acc_n[lobe, 7 + n] += g2[n].conjugate() * Gj
                acc_d[lobe, 7 + n] += 2.0 * (g1[q].conjugate() * g1[i] + gc * g2[n]).real
                n += 1


@njit(cache=True, parallel=True)
def reconstruction_sums(G, k_r, k_c, a_k, nu_r, nu_c, pack, alias, alias_conj, geo, pl,  # type: ignore[no-untyped-def]
                        params, eps, det_r, det_c, row_off, col_off, to_det, keep):
    """Per ν: Σ_b G conj(Γ)/max(|Γ|, ε) (SSB), N = Σ_b conj(Γ) G and D = Σ_b |Γ|² (Wiener),
    over the BF pixels b with ``keep[b]`` (a subset skips the others' pairs; all True:
    the full sums, in the same order).

    ν runs over the (possibly f-times finer) half plane; each reads the spectra's column
    ``alias`` (conjugated where ``alias_conj``). The phase linear in k comes from
    detector-row × detector-column tables as in ``vp_sums`` (one parameter vector, so
    the tables are built once per ν).
    """
    M, B = nu_r.shape[0], k_r.shape[0]
    C = np.zeros(M, dtype=np.complex128)
    N = np.zeros(M, dtype=np.complex128)
    D = np.zeros(M)
    n_chunks = _chunks(M)
    for ch in prange(n_chunks):
        buf = _buffers(B)
        for m in range(ch * M // n_chunks, (ch + 1) * M // n_chunks):
            idx, amp_m, amp_p, _, n_pairs = _pairs_at(m, pack, k_r, k_c, a_k, nu_r, nu_c,
                                                      geo, buf)
            if n_pairs > 0:  # else every table would go unused
                C[m], N[m], D[m] = _reconstruct_frequency(
                    m, nu_r[m], nu_c[m], idx, amp_m, amp_p, n_pairs, G, k_r, k_c, alias,
                    alias_conj, pl, params, eps, det_r, det_c, row_off, col_off, to_det, keep)
    return C, N, D


@njit(cache=True, inline="always")
def _reconstruct_frequency(m, nr, nc, idx, amp_m, amp_p, n_pairs, G, k_r, k_c, alias,  # type: ignore[no-untyped-def]
                           alias_conj, pl, params, eps, det_r, det_c, row_off, col_off,
                           to_det, keep):
    """``reconstruction_sums`` at frequency m: (C, N, D)."""
    C10, C12, phi = params[0], params[1], params[2]
    c2, s2 = math.cos(2.0 * phi), math.sin(2.0 * phi)
    dep = params[5]
    n_rows, n_cols = row_off.shape[0], col_off.shape[0]
    col, flip = alias[m], alias_conj[m]
    nn, nd, nx = nr * nr + nc * nc, nr * nr - nc * nc, 2.0 * nr * nc
    tilt = 2.0 * math.pi * MRAD * (nr * params[3] + nc * params[4])
    q = C10 * nn + C12 * (c2 * nd + s2 * nx)
    tab_r, tab_c = _plane_tables(
        pl, 2.0 * (C10 * nr + C12 * (c2 * nr + s2 * nc)),
        2.0 * (C10 * nc + C12 * (s2 * nr - c2 * nc)), row_off, col_off, to_det)
    eq = complex(math.cos(pl * q), math.sin(pl * q))
    if dep != 0.0:
        dep_r, dep_c = _plane_tables(-pl * dep, nr, nc, row_off, col_off, to_det)
        xa0 = (pl * nn + tilt) * dep / 2.0
        xb0 = (-pl * nn + tilt) * dep / 2.0
        ea0 = complex(math.cos(xa0), math.sin(xa0))
        eb0 = complex(math.cos(xb0), math.sin(xb0))
    else:
        dep_r = np.empty(n_rows, dtype=np.complex128)
        dep_c = np.empty(n_cols, dtype=np.complex128)
        xa0 = xb0 = 0.0
        ea0 = eb0 = 0j
    c_r = c_i = n_r = n_i = d_acc = 0.0
    # Γ = lin·(S_a a_m e^{-iπλq} - S_b a_p e^{iπλq}), in real arithmetic (Numba's
    # complex ops promote real operands and divide the slow way).
    for j in range(n_pairs):
        b = idx[j]
        if not keep[b]:
            continue
        dr, dc = det_r[b], det_c[b]
        tr, tc = tab_r[dr], tab_c[dc]
        l_r = tr.real * tc.real - tr.imag * tc.imag
        l_i = tr.real * tc.imag + tr.imag * tc.real
        am, ap = amp_m[j], amp_p[j]
        if dep != 0.0:
            ku = k_r[b] * nr + k_c[b] * nc
            e = dep_r[dr] * dep_c[dc]
            am *= _sinc_from(xa0 - pl * dep * ku, ea0.real * e.imag + ea0.imag * e.real)
            ap *= _sinc_from(xb0 - pl * dep * ku, eb0.real * e.imag + eb0.imag * e.real)
        b_r = (am - ap) * eq.real
        b_i = -(am + ap) * eq.imag
        g_r = l_r * b_r - l_i * b_i
        g_i = l_r * b_i + l_i * b_r
        mag2 = g_r * g_r + g_i * g_i
        Gj = G[col, b]
        G_r, G_i = Gj.real, (-Gj.imag if flip else Gj.imag)
        p_r = G_r * g_r + G_i * g_i  # G·conj(Γ)
        p_i = G_i * g_r - G_r * g_i
        inv = 1.0 / max(math.sqrt(mag2), eps)
        c_r += p_r * inv
        c_i += p_i * inv
        n_r += p_r
        n_i += p_i
        d_acc += mag2
    return complex(c_r, c_i), complex(n_r, n_i), d_acc


@njit(cache=True)
def _plane_tables(scale: float, v_r: float, v_c: float, row_off: np.ndarray, col_off: np.ndarray,
                  to_det: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """exp(i·scale·k_det·v_det) over detector rows and columns for the scan-frame vector v."""
    tab_r = np.empty(row_off.shape[0], dtype=np.complex128)
    tab_c = np.empty(col_off.shape[0], dtype=np.complex128)
    _fill_plane_tables(scale, v_r, v_c, row_off, col_off, to_det, tab_r, tab_c)
    return tab_r, tab_c


@njit(cache=True, inline="always")
def _fill_plane_tables(scale, v_r, v_c, row_off, col_off, to_det, tab_r, tab_c):  # type: ignore[no-untyped-def]
    """``_plane_tables`` into the given arrays (a kernel's per-thread buffers)."""
    vd_r = to_det[0, 0] * v_r + to_det[0, 1] * v_c
    vd_c = to_det[1, 0] * v_r + to_det[1, 1] * v_c
    for r in range(row_off.shape[0]):
        a = scale * row_off[r] * vd_r
        tab_r[r] = complex(math.cos(a), math.sin(a))
    for c in range(col_off.shape[0]):
        a = scale * col_off[c] * vd_c
        tab_c[c] = complex(math.cos(a), math.sin(a))
