"""Single-frame spikes in the BF counts: an X-ray or cosmic-ray hit, a saturated read.

One such count (65535 in one frame of one BF pixel, ~500× that pixel's level) dominates its
pixel's spectrum at every scan frequency and its frame's centre of mass: on the demo it
turned the fitted rotation by 3°. The bad-pixel search cannot see it, since it reads the
mean pattern (where such a count is a few % of one pixel's total). A pixel's counts never
swing that far otherwise: Poisson noise and specimen contrast stay within a few times the
pixel's mean over the scan. So every count above ``SPIKE_FACTOR`` × (its BF pixel's mean
+ 1) is replaced by that mean (rounded for integer counts), in the engines' resident BF
counts, where they live. The means are the dataset's mean pattern at the BF pixels (the
same host numbers for every engine); one reduction finds each pixel's largest count (one
download), and only pixels over their limit are read again.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..xp import to_host

SPIKE_FACTOR = 20.0


def repair_spikes(xp: Any, bf: Any, pixel_axis: int, means: np.ndarray) -> int:
    """Replace, in place, the counts of ``bf`` (the BF counts: BF pixels along
    ``pixel_axis``, scan positions along the others) above SPIKE_FACTOR × (``means`` + 1),
    ``means`` (B,) each pixel's mean count; returns how many were replaced."""
    scan_axes = tuple(a for a in range(bf.ndim) if a != pixel_axis)
    limit = SPIKE_FACTOR * (np.asarray(means, dtype=np.float64) + 1.0)
    peaks = to_host(bf.max(axis=scan_axes), "spikes").astype(np.float64)
    flagged = np.flatnonzero(peaks > limit)
    if flagged.size == 0:
        return 0
    integer = np.dtype(bf.dtype).kind in "iu"
    fills = np.rint(means[flagged]) if integer else np.asarray(means[flagged])
    moved = xp.moveaxis(bf, pixel_axis, 0)  # a view: (B, scan...)
    index = xp.asarray(flagged)
    columns = moved[index]  # a copy of the flagged pixels' counts
    shape = (-1,) + (1,) * (bf.ndim - 1)
    over = columns > xp.asarray(limit[flagged]).reshape(shape)
    count = int(to_host(over.sum(), "spikes"))
    fill = xp.asarray(fills.astype(bf.dtype)).reshape(shape)
    moved[index] = xp.where(over, fill, columns)
    return count
