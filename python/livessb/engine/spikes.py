"""Single-frame spikes in the BF counts: an X-ray or cosmic-ray hit, a saturated read.

One such count (65535 in one frame of one BF pixel, ~500× that pixel's level) dominates its
pixel's spectrum at every scan frequency and its frame's centre of mass: on the demo it
turned the fitted rotation by 3°. The bad-pixel search cannot see it, since it reads the
mean pattern (where such a count is a few % of one pixel's total). A pixel's counts never
swing that far otherwise: Poisson noise and specimen contrast stay within a few times the
pixel's mean over the scan. So every count above ``SPIKE_FACTOR`` × (its BF pixel's mean
+ 1) is replaced by that mean (rounded to the counts' dtype), in the engines' resident BF
counts, on the device where they live (one counted read: how many).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..xp import host_float

SPIKE_FACTOR = 20.0
PIXEL_BLOCK = 1024  # BF pixels per step: bounds the comparison's temporary (bool) array


def repair_spikes(xp: Any, bf: Any, pixel_axis: int) -> int:
    """Replace, in place, the counts of ``bf`` (the BF counts, BF pixels along
    ``pixel_axis``, scan positions along the others) above SPIKE_FACTOR × (their pixel's
    mean + 1) by that mean; returns how many."""
    n_pixels = bf.shape[pixel_axis]
    scan_axes = tuple(a for a in range(bf.ndim) if a != pixel_axis)
    total = xp.zeros((), dtype=xp.int64)
    for start in range(0, n_pixels, PIXEL_BLOCK):
        index = [slice(None)] * bf.ndim
        index[pixel_axis] = slice(start, min(start + PIXEL_BLOCK, n_pixels))
        block = bf[tuple(index)]
        mean = block.mean(axis=scan_axes, dtype=xp.float64)
        shape = [1] * bf.ndim
        shape[pixel_axis] = -1
        over = block > (SPIKE_FACTOR * (mean + 1.0)).reshape(shape)
        total += over.sum()
        fill = xp.rint(mean) if np.dtype(bf.dtype).kind in "iu" else mean
        xp.copyto(block, xp.broadcast_to(fill.astype(bf.dtype).reshape(shape), block.shape),
                  where=over)
    return int(host_float(total, "spikes"))
