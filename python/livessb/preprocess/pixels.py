"""Dead and hot detector pixels: found on the mean pattern, repaired from good neighbours."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

_RING1 = [(dr, dc) for dr in (-1, 0, 1) for dc in (-1, 0, 1) if (dr, dc) != (0, 0)]
_RING2 = [(dr, dc) for dr in range(-2, 3) for dc in range(-2, 3) if max(abs(dr), abs(dc)) == 2]


def _neighbours(pattern: np.ndarray, fill: float) -> np.ndarray:
    """The 8 neighbours of every pixel, (8, kr, kc); outside the detector ``fill``."""
    kr, kc = pattern.shape
    padded = np.full((kr + 2, kc + 2), fill)
    padded[1:-1, 1:-1] = pattern
    return np.stack([padded[1 + dr:1 + dr + kr, 1 + dc:1 + dc + kc] for dr, dc in _RING1])


def find_bad_pixels(mean_pattern: np.ndarray, n_frames: int, hot_factor: float = 2.0,
                    dead_counts: float = 30.0) -> np.ndarray:
    """Bad pixels of the mean pattern (counts per frame), True = bad.

    Hot: above ``hot_factor`` × its second-brightest neighbour plus five standard errors
    of a Poisson mean over ``n_frames`` (a real pattern is smooth on the pixel scale: at
    the disk edge a pixel always has brighter or similar neighbours; a pair of adjacent
    hot pixels is still caught). Dead: exactly zero over the scan where the median
    neighbour expects at least ``dead_counts`` counts in all (chance e^-dead_counts).
    Non-finite means are bad too.
    """
    m = np.asarray(mean_pattern, dtype=np.float64)
    finite = np.isfinite(m)
    clean = np.where(finite, m, 0.0)
    nb = np.sort(_neighbours(clean, -np.inf), axis=0)
    second = np.maximum(nb[-2], 0.0)
    noise = np.sqrt(np.maximum(second, 1.0 / n_frames) / n_frames)
    hot = clean > hot_factor * second + 5.0 * noise
    median = np.nanmedian(_neighbours(clean, np.nan), axis=0)
    dead = (clean == 0) & (median * n_frames >= dead_counts)
    out: np.ndarray = hot | dead | ~finite
    return out


@dataclass(frozen=True, eq=False)
class RepairPlan:
    """Each bad pixel (flat index) as a weighted mean of good neighbours' flat indices."""

    bad: np.ndarray  # (n,) int64
    neighbours: np.ndarray  # (n, K) int64, padded with 0
    weights: np.ndarray  # (n, K) float32, 0 for padding (no good neighbour: value 0)

    @property
    def count(self) -> int:
        return int(self.bad.size)


def repair_plan(bad: np.ndarray) -> RepairPlan:
    """Good 8-neighbours of every bad pixel (the 5×5 ring where none is good)."""
    kr, kc = bad.shape
    rows, cols = np.nonzero(bad)
    lists: list[list[int]] = []
    for r, c in zip(rows.tolist(), cols.tolist(), strict=True):
        good: list[int] = []
        for ring in (_RING1, _RING2):
            good = [(r + dr) * kc + (c + dc) for dr, dc in ring
                    if 0 <= r + dr < kr and 0 <= c + dc < kc and not bad[r + dr, c + dc]]
            if good:
                break
        lists.append(good)
    width = max([len(g) for g in lists], default=1) or 1
    nbr = np.zeros((len(lists), width), dtype=np.int64)
    w = np.zeros((len(lists), width), dtype=np.float32)
    for i, g in enumerate(lists):
        nbr[i, :len(g)] = g
        if g:
            w[i, :len(g)] = 1.0 / len(g)
    return RepairPlan(bad=(rows * kc + cols).astype(np.int64), neighbours=nbr, weights=w)


def repair(xp: Any, flat: Any, plan: RepairPlan, arrays: dict[str, Any] | None = None) -> Any:
    """Replace the bad pixels of ``flat`` (F, kr·kc) float32 in place, any array module;
    ``arrays`` caches the plan's arrays in that module."""
    if plan.count == 0:
        return flat
    a = arrays if arrays is not None else {}
    if "bad" not in a:
        a.update(bad=xp.asarray(plan.bad), nbr=xp.asarray(plan.neighbours.ravel()),
                 w=xp.asarray(plan.weights))
    vals = xp.take(flat, a["nbr"], axis=1).reshape(flat.shape[0], *plan.weights.shape)
    flat[:, a["bad"]] = (vals * a["w"][None]).sum(axis=2)
    return flat
