"""Detector and scan geometry: BF pixels, COM rotation, frequencies, trotter support.

Pure functions; ``xp`` is numpy or cupy.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class BFPixels:
    """Bright-field pixel set: detector indices and detector-frame frequencies (1/Å)."""

    rows: np.ndarray  # (B,) int
    cols: np.ndarray  # (B,) int
    k_det: np.ndarray  # (B, 2) float64, (row, col) in 1/Å

    @property
    def count(self) -> int:
        return int(self.rows.size)


def bright_field_pixels(
    detector_shape: tuple[int, int],
    center: tuple[float, float],
    pixel_inv_A: float,
    k_alpha: float,
) -> BFPixels:
    """All detector pixels with |k_det| ≤ k_α (no subsampling), row-major order."""
    kr = (np.arange(detector_shape[0]) - center[0]) * pixel_inv_A
    kc = (np.arange(detector_shape[1]) - center[1]) * pixel_inv_A
    KR, KC = np.meshgrid(kr, kc, indexing="ij")
    inside = KR**2 + KC**2 <= k_alpha**2
    rows, cols = np.nonzero(inside)
    k_det = np.stack([KR[rows, cols], KC[rows, cols]], axis=1)
    return BFPixels(rows=rows, cols=cols, k_det=k_det)


def nearest_bf_pixels(bf: BFPixels, count: int | None) -> np.ndarray | None:
    """Which BF pixels a reconstruction with ``count`` of them sums over: the ``count``
    nearest the disk centre (|k_det| ascending, ties in index order, so the choice is
    deterministic), a (B,) bool mask in index order; None (``count`` None): all of them.

    Nearest the centre, as a smaller BF detector radius: the edge pixels, partly lit and
    the most sensitive to the aperture's edge, go first. The band the sums transfer
    narrows with the radius (a pixel at |k| from the centre carries the trotter
    frequencies kα - |k| ≤ |ν| ≤ kα + |k|) and the dose used falls with the count.
    """
    if count is None:
        return None
    total = bf.count
    if isinstance(count, bool) or not isinstance(count, (int, np.integer)):
        raise TypeError(f"bf_pixels must be an integer count or None (all {total}), got "
                        f"{count!r}")
    if not 1 <= int(count) <= total:
        raise ValueError(f"bf_pixels={int(count)} is outside 1..{total}: the BF disk has "
                         f"{total} pixels; pass at most {total}, or None for all")
    r2 = bf.k_det[:, 0] ** 2 + bf.k_det[:, 1] ** 2
    keep = np.zeros(total, dtype=bool)
    keep[np.argsort(r2, kind="stable")[:int(count)]] = True
    return keep


def rotation_matrix(theta: float) -> np.ndarray:
    c, s = math.cos(theta), math.sin(theta)
    return np.array([[c, -s], [s, c]])


def scan_frame_frequencies(k_det: np.ndarray, theta: float, transpose: bool) -> np.ndarray:
    """k = R(θ)·T·k_det for (B, 2) detector frequencies."""
    k = k_det[:, ::-1] if transpose else k_det
    return np.ascontiguousarray(k @ rotation_matrix(theta).T)


def subpixel_offsets(pixel_inv_A: float, samples: int, theta: float, transpose: bool
                     ) -> np.ndarray:
    """The scan-frame offsets (samples², 2) 1/Å from a detector pixel's centre of the
    centres of its samples × samples equal parts: where the intensity a pixel integrates
    over its area is sampled (the midpoint rule)."""
    u = ((np.arange(samples) + 0.5) / samples - 0.5) * pixel_inv_A
    rows, cols = np.meshgrid(u, u, indexing="ij")
    return scan_frame_frequencies(np.stack([rows.ravel(), cols.ravel()], axis=1), theta,
                                  transpose)


def to_detector_frame(theta: float, transpose: bool) -> np.ndarray:
    """The (2, 2) matrix that takes a scan-frame vector to the detector frame at θ (the
    inverse of ``scan_frame_frequencies``' map)."""
    return np.linalg.inv(scan_frame_frequencies(np.eye(2), theta, transpose).T)


def center_of_mass(
    counts: Any, center: tuple[float, float], rows_per_chunk: int = 16
) -> np.ndarray:
    """COM of each pattern in detector px relative to ``center``: (Rr, Rc, 2)."""
    Rr, Rc, kr, kc = counts.shape
    ir = np.arange(kr, dtype=np.float64) - center[0]
    ic = np.arange(kc, dtype=np.float64) - center[1]
    com = np.zeros((Rr, Rc, 2))
    for r0 in range(0, Rr, rows_per_chunk):
        block = np.asarray(counts[r0:r0 + rows_per_chunk], dtype=np.float64)
        total = block.sum(axis=(2, 3))
        total = np.where(total > 0, total, 1.0)
        com[r0:r0 + rows_per_chunk, :, 0] = block.sum(axis=3) @ ir / total
        com[r0:r0 + rows_per_chunk, :, 1] = block.sum(axis=2) @ ic / total
    return com


HALF_MIN_POSITIONS = 4  # a half of the scan needs this many positions per axis


@dataclass(frozen=True)
class RotationEstimate:
    theta: float  # rad in [0, π); θ + π is the other branch
    transpose: bool
    residual: float  # curl energy fraction at the minimum (lower is better)
    residual_other_transpose: float
    theta_other_transpose: float = 0.0  # the minimiser for the other transpose
    halves_transposes: tuple[bool, ...] = ()  # what each half of the scan prefers

    @property
    def transpose_undecided(self) -> bool:
        """A half of the scan prefers the other transpose: the curl's choice is not stable
        (measured on abTEM SrTiO3: at C10 +150 Å, where the whole scan picked the wrong
        one at residuals 0.311 / 0.316, and at +80 one half of four disagreed; in the 24
        other cases, and on the benchmark workload at ratio 0.9, all four agreed)."""
        return any(t != self.transpose for t in self.halves_transposes)


def _minimum(q: np.ndarray) -> tuple[float, float]:
    """(curl energy fraction, θ) at the minimum of the quadratic form ``q`` in
    (cos θ, sin θ): its smallest eigenvector."""
    evals, evecs = np.linalg.eigh(q)
    v = evecs[:, 0]
    return float(evals[0] / max(evals.sum(), 1e-300)), math.atan2(v[1], v[0]) % math.pi


def _form(curl: np.ndarray, div: np.ndarray) -> np.ndarray:
    return np.array([[curl @ curl, curl @ div], [curl @ div, div @ div]])


def _half_forms(u: tuple[np.ndarray, np.ndarray], d: tuple[np.ndarray, ...],
                curl: np.ndarray, div: np.ndarray, scan_step_A: tuple[float, float]
                ) -> list[np.ndarray]:
    """The quadratic forms of the scan's four halves (top, bottom, left, right) as if
    each had its own np.gradient: the whole field's curl and div inside, and at the cut
    edge the one-sided difference across the cut (np.gradient's edge) in place of the
    central one. u: (u_r, u_c); d: (∂u_r/∂r, ∂u_r/∂c, ∂u_c/∂r, ∂u_c/∂c) of the whole."""
    (u_r, u_c), (dr_r, dc_r, dr_c, dc_c) = u, d
    sums = [(x * y).sum(axis=a) for a in (1, 0) for x, y in ((curl, curl), (curl, div),
                                                              (div, div))]
    out = []
    for axis, step in enumerate(scan_step_A):
        n = curl.shape[axis]
        h = n // 2
        line = sums[3 * axis:3 * axis + 3]  # per row (axis 0) or column (axis 1)

        def at(i: int, x: np.ndarray, axis: int = axis) -> np.ndarray:
            return x[i] if axis == 0 else x[:, i]

        for keep, edge, inner in ((slice(0, h - 1), h - 1, h - 2), (slice(h + 1, n), h, h + 1)):
            sign = 1.0 if edge > inner else -1.0  # one-sided: (f[edge] - f[inner]) / dx
            d_ur = sign * (at(edge, u_r) - at(inner, u_r)) / step
            d_uc = sign * (at(edge, u_c) - at(inner, u_c)) / step
            if axis == 0:  # ∂/∂r replaced: curl = ∂u_c/∂r - ∂u_r/∂c, div = ∂u_r/∂r + ...
                c_e, d_e = d_uc - at(edge, dc_r), d_ur + at(edge, dc_c)
            else:  # ∂/∂c replaced
                c_e, d_e = at(edge, dr_c) - d_ur, at(edge, dr_r) + d_uc
            cc, cd, dd = (float(v[keep].sum()) for v in line)
            out.append(np.array([[cc + c_e @ c_e, cd + c_e @ d_e],
                                 [cd + c_e @ d_e, dd + d_e @ d_e]]))
    return out


def estimate_rotation(com: np.ndarray, scan_step_A: tuple[float, float]) -> RotationEstimate:
    """Minimise the curl of the rotated COM field over θ ∈ [0, π), for T and not-T, on
    the whole scan and on each of its four halves (for ``transpose_undecided``).

    curl(R(θ)u) = cos θ·curl(u) + sin θ·div(u), so the curl energy is a quadratic
    form in (cos θ, sin θ) whose smallest eigenvector is the minimiser. The gradients
    are taken once; the halves' forms come from the whole field's (``_half_forms``).
    """
    d0 = np.gradient(com[..., 0], *scan_step_A)
    d1 = np.gradient(com[..., 1], *scan_step_A)
    n0, n1 = com.shape[:2]
    with_halves = min(n0 // 2, n1 // 2) >= HALF_MIN_POSITIONS
    whole, halves_by_t = [], []
    for transpose in (False, True):
        # T swaps the two components: the same four gradients serve both choices.
        (d_ur_dr, d_ur_dc), (d_uc_dr, d_uc_dc) = (d1, d0) if transpose else (d0, d1)
        curl, div = d_uc_dr - d_ur_dc, d_ur_dr + d_uc_dc
        whole.append((*_minimum(_form(curl.ravel(), div.ravel())), transpose))
        if with_halves:
            u = (com[..., 1], com[..., 0]) if transpose else (com[..., 0], com[..., 1])
            halves_by_t.append([_minimum(q)[0] for q in _half_forms(
                u, (d_ur_dr, d_ur_dc, d_uc_dr, d_uc_dc), curl, div, scan_step_A)])
    best, other = sorted(whole)
    halves = tuple(bool(r_t < r_f) for r_f, r_t in zip(*halves_by_t, strict=True)) \
        if with_halves else ()
    return RotationEstimate(theta=best[1], transpose=best[2], residual=best[0],
                            residual_other_transpose=other[0],
                            theta_other_transpose=other[1], halves_transposes=halves)


def fft_friendly_size(n: int) -> int:
    """Smallest m ≥ n whose prime factors are 2, 3 and 5."""
    m = max(int(n), 1)
    while True:
        k = m
        for p in (2, 3, 5):
            while k % p == 0:
                k //= p
        if k == 1:
            return m
        m += 1


def scan_frequencies_half(
    shape: tuple[int, int], step_A: tuple[float, float]
) -> tuple[np.ndarray, np.ndarray]:
    """Row frequencies (full) and column frequencies (half plane, rfft) in 1/Å."""
    return (np.fft.fftfreq(shape[0], step_A[0]), np.fft.rfftfreq(shape[1], step_A[1]))


def half_plane_weights(n_cols: int) -> np.ndarray:
    """Weight of each rfft column in a full-plane sum of an even function."""
    w = np.full(n_cols // 2 + 1, 2.0)
    w[0] = 1.0
    if n_cols % 2 == 0:
        w[-1] = 1.0
    return w


def trotter_support(
    k: Any, nu_r: Any, nu_c: Any, k_alpha: float, xp: Any = np
) -> Any:
    """m_b(ν): pixel b lies in exactly one of the discs shifted by ±ν (single sideband).

    ``k`` (B, 2); ``nu_r``/``nu_c`` broadcastable frequency grids. Geometry only.
    """
    kr = k[:, 0].reshape((-1,) + (1,) * nu_r.ndim)
    kc = k[:, 1].reshape((-1,) + (1,) * nu_r.ndim)
    in_minus = (kr - nu_r) ** 2 + (kc - nu_c) ** 2 <= k_alpha**2
    in_plus = (kr + nu_r) ** 2 + (kc + nu_c) ** 2 <= k_alpha**2
    return xp.logical_xor(in_minus, in_plus)


MAX_AUTO_UPSAMPLE = 8  # beyond this the scan is far too coarse for the aperture: a unit typo?


class UpsampleCapWarning(UserWarning):
    """The Auto upsampling factor was capped at MAX_AUTO_UPSAMPLE."""


def auto_upsample(
    scan_step_A: tuple[float, float], k_alpha: float, cap: int = MAX_AUTO_UPSAMPLE,
) -> int:
    """Smallest integer f with f × scan Nyquist ≥ 2 k_α on both axes, at most ``cap``
    (with an UpsampleCapWarning saying what to check)."""
    import warnings

    nyquist = 1.0 / (2.0 * max(scan_step_A))
    f = max(1, math.ceil(2.0 * k_alpha / nyquist - 1e-9))
    if f > cap:
        warnings.warn(
            f"Auto upsampling would be {f}x (scan step {max(scan_step_A):g} Å against an "
            f"aperture of {k_alpha:.3g} 1/Å): capped at {cap}x. Check the scan step and "
            "voltage units (Å, kV), or choose the factor yourself (upsample=N)",
            UpsampleCapWarning, stacklevel=2)
        f = cap
    return f
