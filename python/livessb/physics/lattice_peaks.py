"""A crystal's first lattice basis from the peaks of its scan's power spectrum.

A scan of step s samples the spectrum with period 1/s per axis: a reflection g beyond
the Nyquist frequency lands at g − m/s (an alias), and a window of few lattice periods
merges neighbouring reflections into maxima that sit on no lattice point. Two readings
of the peaks are made and the coarsest that explains them is kept:

- *differences*: the peaks and their differences, the shortest two non-collinear span
  the lattice (a crystal's weak reflections enter through the differences of strong
  ones; an alias or a merged maximum makes a spurious short difference);
- *strongest first*: the two strongest peaks span a first lattice, which each further
  peak, in power order, refines to B/n (n ≤ ``MAX_REFINEMENT``) where neither it nor an
  alias of it within the band the BF disc transfers (|g| < 2k_α) is on the lattice yet;
  only a peak within ``REFINE_WITHIN_LOBE`` of the window's resolution of a point of
  B/n refines it (a merged maximum does not sit there), and n ≥ 3 needs a second peak
  the refined lattice explains.

Both keep to vectors of two periods or more across the window (|g| ≥ 2/extent): a
finer lattice is not one the window resolves (an amorphous slab's speckle refined to
periods of 30 and 230 Å on a 12 Å window, 55 806 points).

Pure NumPy after one power spectrum, computed where the counts live (``xp``).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..xp import to_host
from .apodisation import hann
from .transforms import fft2

# A refining peak sits within this fraction of the Hann window's main-lobe half width
# (2/extent per axis) of a point of B/n: a maximum merged of neighbouring reflections
# or folded images sits a third of a lobe or more off any (measured on the demo's and
# the model's small windows).
REFINE_WITHIN_LOBE = 0.1
# The largest refinement index: B/2 makes a centred lattice primitive, B/3 a hexagonal
# crystal's √3 superstructure; each index n adds n² − 1 candidate points a merged
# maximum can fall on.
MAX_REFINEMENT = 4
# A candidate lattice explains a peak within this fraction of its shorter vector.
EXPLAINED_WITHIN = 0.25
# Of the readings whose explained peak power is within this of the best, the coarsest.
EXPLAINED_SLACK = 0.05


class LatticeNotFoundError(ValueError):
    """No two-dimensional lattice in the window's power spectrum."""


def peak_basis(counts: Any, step: tuple[float, float], xp: Any = np, peaks: int = 24,
               chunk_pixels: int = 64, band_inv_A: float = math.inf) -> np.ndarray:
    """A first lattice basis (2, 2) from a (h, w, B) window of counts: the ``peaks``
    strongest local maxima of the BF-summed power spectrum of the Hann-apodised counts
    (zero-padded 4× on windows up to 64 positions, 2× above), read as lattice points
    (module docstring). ``band_inv_A``: the largest frequency the data carry (2k_α, 1/Å);
    a peak may be an alias only of a frequency within it."""
    h, w, _ = counts.shape
    oversample = 4 if max(h, w) <= 64 else 2
    E = _power_spectrum(counts, (oversample * h, oversample * w), xp, chunk_pixels)
    rows, cols = _local_maxima(E, oversample)
    if rows.size < 2:
        raise LatticeNotFoundError("the power spectrum has fewer than two peaks")
    order = np.argsort(-E[rows, cols])[:peaks]
    P = _peak_positions(E, rows[order], cols[order], step)
    power = E[rows[order], cols[order]]
    window = _Window(np.array([1 / step[0], 1 / step[1]]), band_inv_A,
                     2 / np.array([h * step[0], w * step[1]]))
    readings = [b for b in (_difference_basis(P, window.shortest),
                            _strongest_first_basis(P, window)) if b is not None]
    if not readings:
        raise LatticeNotFoundError(
            "the power spectrum's peaks lie on one line or are finer than two periods "
            f"across the {h}×{w}-position window")
    return _coarsest_explaining([_fitted_to_peaks(b, P) for b in readings], P, power,
                                window)


def _power_spectrum(counts: Any, shape: tuple[int, int], xp: Any,
                    chunk_pixels: int) -> np.ndarray:
    """The BF-summed power spectrum (host array) of the mean-removed, Hann-apodised
    counts, zero-padded to ``shape``, a chunk of BF pixels at a time (bounded memory)."""
    h, w, n_bf = counts.shape
    window = xp.asarray(np.outer(hann(h), hann(w)))[:, :, None]
    power = xp.zeros(shape)
    for s in range(0, n_bf, chunk_pixels):
        block = counts[:, :, s:s + chunk_pixels].astype(np.float64)
        block = (block - block.mean(axis=(0, 1), keepdims=True)) * window
        power += xp.sum(xp.abs(fft2(block, xp, axes=(0, 1), shape=shape)) ** 2, axis=2)
    return np.asarray(to_host(power, "lattice.peak_basis"))


def _local_maxima(E: np.ndarray, oversample: int) -> tuple[np.ndarray, np.ndarray]:
    """Grid indices of the periodic spectrum's strict local maxima, the DC's own lobe
    left out."""
    around = [np.roll(E, (dr, dc), (0, 1)) for dr in (-1, 0, 1) for dc in (-1, 0, 1)]
    peak = (E >= np.max(around, axis=0)) & (E > np.min(around, axis=0))  # not a plateau
    near_dc = list(range(-oversample, oversample + 1))
    for dr in near_dc:
        peak[dr, near_dc] = False
    rows, cols = np.nonzero(peak)
    return rows, cols


def _peak_positions(E: np.ndarray, rows: np.ndarray, cols: np.ndarray,
                    step: tuple[float, float]) -> np.ndarray:
    """(n, 2) frequencies (1/Å) of the peaks at grid ``rows``/``cols`` of the periodic
    power spectrum ``E``, each refined by a parabola through log E and its two neighbours
    per axis (the grid quantises a peak to a quarter bin or worse)."""
    n_r, n_c = E.shape
    log_e = np.log(np.maximum(E, 1e-300))
    out = np.zeros((rows.size, 2))
    for axis, (n, idx) in enumerate(((n_r, rows), (n_c, cols))):
        ahead = (rows + (axis == 0)) % n_r, (cols + (axis == 1)) % n_c
        behind = (rows - (axis == 0)) % n_r, (cols - (axis == 1)) % n_c
        up, mid, down = log_e[ahead], log_e[rows, cols], log_e[behind]
        curve = up - 2 * mid + down
        shift = np.where(curve < 0, 0.5 * (down - up) / np.where(curve < 0, curve, -1), 0.0)
        index = idx + np.clip(shift, -0.5, 0.5)
        index = (index + n / 2) % n - n / 2  # fftfreq's order: the upper half negative
        out[:, axis] = index / (n * step[axis])
    return out


class _Window:
    """The scan window's sampling: frequencies repeat with period ``period`` (1/step per
    axis), only those within ``band`` carry signal, and the Hann window spreads each peak
    over a main lobe of half width ``lobe`` (2/extent per axis)."""

    def __init__(self, period: np.ndarray, band: float, lobe: np.ndarray) -> None:
        self.period, self.band, self.lobe = period, band, lobe
        self.shifts = [np.array([a, b]) for a in (-1, 0, 1) for b in (-1, 0, 1)]
        self.shortest = float(lobe.max())  # two periods across the window: what it resolves
        self.refine_within = REFINE_WITHIN_LOBE * float(lobe.min())

    def miss(self, basis: np.ndarray, p: np.ndarray) -> float:
        """Distance (1/Å) of peak ``p`` from the lattice's nearest nonzero point, over
        ``p`` itself and its unfoldings within the band."""
        inv = np.linalg.inv(basis)
        best = math.inf
        for m in self.shifts:
            q = p + m * self.period
            if np.any(m) and math.hypot(*q) > self.band:
                continue
            hk = np.round(q @ inv)
            if np.any(hk):
                best = min(best, math.hypot(*(q - hk @ basis)))
        return best

    def near_edge(self, p: np.ndarray) -> bool:
        """Within a lobe of the Nyquist frequency: folded images merge there."""
        return bool(np.any(np.abs(p) > self.period / 2 - self.lobe))


def _difference_basis(P: np.ndarray, shortest: float) -> np.ndarray | None:
    """The shortest two non-collinear of the peaks and their differences no shorter than
    ``shortest`` (1/Å), or None where all lie on one line."""
    D = np.concatenate([P, (P[:, None, :] - P[None, :, :]).reshape(-1, 2)])
    D = D[np.hypot(D[:, 0], D[:, 1]) >= shortest]
    D = D[np.argsort(np.hypot(D[:, 0], D[:, 1]), kind="stable")]
    if not len(D):
        return None
    b1 = D[0]
    for v in D[1:]:
        if _non_collinear(b1, v):
            return np.array([b1, v])
    return None


def _strongest_first_basis(P: np.ndarray, window: _Window) -> np.ndarray | None:
    """The lattice of the two strongest non-collinear peaks (``P`` in power order) no
    shorter than the window resolves, refined by each further peak it does not explain
    while its vectors stay that long (module docstring)."""
    P = P[np.hypot(P[:, 0], P[:, 1]) >= window.shortest]
    if not len(P):
        return None
    second = next((p for p in P[1:] if _non_collinear(P[0], p)), None)
    if second is None:
        return None
    basis = _reduced(np.array([P[0], second]))
    for _ in range(MAX_REFINEMENT):  # passes until none refines: a later peak's refinement
        # can bring an earlier peak within MAX_REFINEMENT
        refined = _refined_by_peaks(basis, P, window)
        if refined is basis:
            return basis
        basis = refined
    return basis


def _refined_by_peaks(basis: np.ndarray, P: np.ndarray, window: _Window) -> np.ndarray:
    """One pass of the peaks in power order, each refining ``basis`` (reduced) where it
    can."""
    for p in P:
        tol = _explained_within(basis)
        if window.miss(basis, p) < tol or window.near_edge(p):
            continue
        refined = _refinement(basis, p, min(window.refine_within, tol))
        if refined is None:
            continue
        finer, n = refined
        if math.hypot(*finer[0]) < window.shortest:
            continue  # finer than the window resolves
        finer_tol = min(window.refine_within, _explained_within(finer))
        if n >= 3 and not any(
                window.miss(basis, q) >= tol and window.miss(finer, q) < finer_tol
                for q in P if min(math.hypot(*(q - p)), math.hypot(*(q + p))) > 1e-12
                and not window.near_edge(q)):
            continue  # no second peak on the refined lattice
        basis = finer
    return basis


def _refinement(basis: np.ndarray, p: np.ndarray,
                within: float) -> tuple[np.ndarray, int] | None:
    """The lattice spanned by ``basis`` and a point of basis/n (n ≤ MAX_REFINEMENT)
    within ``within`` of ``p``, reduced, with n; None where there is none."""
    f = p @ np.linalg.inv(basis)
    for n in range(2, MAX_REFINEMENT + 1):
        a = np.round(n * f)
        if math.hypot(*((a / n) @ basis - p)) < within:
            spanned = _integer_span(np.array([[n, 0], [0, n], [a[0], a[1]]]))
            return _reduced((spanned / n) @ basis), n
    return None


def _integer_span(rows: np.ndarray) -> np.ndarray:
    """A (2, 2) basis of the integer lattice the rows of ``rows`` span (rank 2): Euclid
    on the first column, the gcd of what is left in the second."""
    vecs = [[int(r[0]), int(r[1])] for r in rows]
    while sum(v[0] != 0 for v in vecs) > 1:
        vecs.sort(key=lambda v: (v[0] == 0, abs(v[0])))
        pivot = vecs[0]
        vecs = [pivot] + [[v[0] - (v[0] // pivot[0]) * pivot[0],
                           v[1] - (v[0] // pivot[0]) * pivot[1]] for v in vecs[1:]]
    vecs.sort(key=lambda v: (v[0] == 0, abs(v[0])))
    return np.array([vecs[0], [0, math.gcd(*(abs(v[1]) for v in vecs[1:]))]], dtype=float)


def _reduced(basis: np.ndarray) -> np.ndarray:
    """The Lagrange-Gauss reduced basis: the lattice's two shortest independent vectors."""
    u, v = basis[0].astype(float), basis[1].astype(float)
    if u @ u > v @ v:
        u, v = v, u
    while True:
        v = v - round(float(u @ v) / float(u @ u)) * u
        if v @ v >= u @ u - 1e-15:
            return np.array([u, v])
        u, v = v, u


def _explained_within(basis: np.ndarray) -> float:
    """How near (1/Å) a peak sits to a point of ``basis``'s lattice to be explained by it:
    EXPLAINED_WITHIN of its shorter vector."""
    return EXPLAINED_WITHIN * min(math.hypot(*basis[0]), math.hypot(*basis[1]))


def _non_collinear(u: np.ndarray, v: np.ndarray) -> bool:
    return abs(u[0] * v[1] - u[1] * v[0]) > 0.3 * math.hypot(*u) * math.hypot(*v)


def _fitted_to_peaks(basis: np.ndarray, P: np.ndarray) -> np.ndarray:
    """``basis`` refitted by least squares to every peak that sits on its lattice (its
    nearest lattice point within a quarter of the shorter vector: aliases of higher
    orders and spurious maxima fall out), twice."""
    for _ in range(2):
        hk = np.round(P @ np.linalg.inv(basis))
        miss = np.hypot(*(P - hk @ basis).T)
        on = (miss < _explained_within(basis)) & np.any(hk, 1)
        if np.linalg.matrix_rank(hk[on]) < 2:
            return basis
        basis = np.linalg.lstsq(hk[on], P[on], rcond=None)[0]
    return basis


def _coarsest_explaining(readings: list[np.ndarray], P: np.ndarray, power: np.ndarray,
                         window: _Window) -> np.ndarray:
    """Of the readings that explain (as themselves or aliases) within EXPLAINED_SLACK
    of the best fraction of the peaks' power, the coarsest (largest reciprocal cell): a
    spurious short vector makes a finer lattice that explains no more."""
    def explained(basis: np.ndarray) -> float:
        tol = _explained_within(basis)
        on = np.array([window.miss(basis, p) < tol for p in P])
        return float(power[on].sum() / power.sum())
    scores = [explained(b) for b in readings]
    best = max(scores)
    kept = [b for b, s in zip(readings, scores, strict=True) if s >= best - EXPLAINED_SLACK]
    return max(kept, key=lambda b: abs(float(np.linalg.det(b))))
