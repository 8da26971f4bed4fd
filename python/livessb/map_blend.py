"""A map's reconstruction: the full field once per tile with that tile's parameters,
blended with a partition of unity of hat functions on the tile-centre grid.

Why hats, and why complex objects:

* The SSB object is linear in the per-frequency correction, so Σ_t w_t(r) O(r; θ_t)
  equals, to first order in the parameter differences, the reconstruction with the
  parameters Σ_t w_t(r) θ_t: with bilinear hats that is the bilinear interpolation of
  the tile fits between tile centres — exact for a linear defocus gradient to first
  order, and continuous everywhere, so no seam can form at a tile border.
* The weights are evaluated at the output sampling (pixel u of an f-times upsampled
  grid sits at scan position u / f), separable, clamped to 1 outside the outermost
  centres, and sum to 1 everywhere.
* Every tile's object has the same real DC (the data mean, not a fitted quantity) and
  zero-mean imaginary part, so the blended complex objects share their phase offset:
  blending them creates no step from a per-tile constant.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np


def hat_weights(centers_px: np.ndarray, n_out: int, upsample: int) -> np.ndarray:
    """(len(centers), n_out) weights of the output pixels along one axis: piecewise-linear
    hats on the strictly increasing ``centers_px`` (scan px), clamped at the ends."""
    c = np.asarray(centers_px, dtype=np.float64)
    w = np.zeros((len(c), n_out), dtype=np.float64)
    if len(c) == 1:
        w[0] = 1.0
        return w
    x = np.clip(np.arange(n_out) / upsample, c[0], c[-1])
    k = np.clip(np.searchsorted(c, x, side="right") - 1, 0, len(c) - 2)
    t = (x - c[k]) / (c[k + 1] - c[k])
    cols = np.arange(n_out)
    w[k, cols] = 1.0 - t
    w[k + 1, cols] += t
    return w


def _support(w: np.ndarray) -> slice:
    nz = np.flatnonzero(w > 0)
    return slice(int(nz[0]), int(nz[-1]) + 1) if nz.size else slice(0, 0)


def blend_tiles(
    reconstruct: Callable[[Mapping[str, float]], np.ndarray],
    tile_params: list[list[dict[str, float]]], row_centers: np.ndarray,
    col_centers: np.ndarray, out_shape: tuple[int, int], upsample: int,
) -> np.ndarray:
    """Σ_t w_t · O_t over the tiles (row-major), O_t = ``reconstruct(params of t)``: a
    complex64 image of ``out_shape``. Each tile adds only where its weight is non-zero."""
    w_rows = hat_weights(row_centers, out_shape[0], upsample).astype(np.float32)
    w_cols = hat_weights(col_centers, out_shape[1], upsample).astype(np.float32)
    out = np.zeros(out_shape, dtype=np.complex64)
    for i, row in enumerate(tile_params):
        rs = _support(w_rows[i])
        for j, params in enumerate(row):
            cs = _support(w_cols[j])
            obj = reconstruct(params)
            out[rs, cs] += (w_rows[i, rs, None] * w_cols[j, None, cs]) * obj[rs, cs]
    return out
