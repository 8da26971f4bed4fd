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

import itertools
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from .params import PERIODS
from .physics.optics import chi
from .xp import to_host

# density="auto": neighbouring (virtual) tiles differ by at most this much aberration
# phase inside the aperture, so blending their objects neither attenuates nor bends the
# corrected sidebands much; capped to bound the reconstruction count (density² per tile).
MAX_PHASE_STEP_RAD = np.pi / 4
MAX_DENSITY = 4


# Tiles reconstructed per engine call: the CUDA engine's largest launch (four candidates
# per thread share the walk and the spectra loads); their images are held until added.
TILES_PER_BATCH = 4


def hat_weights_at(centers_px: np.ndarray, x_px: np.ndarray) -> np.ndarray:
    """(len(centers), len(x)) weights at positions ``x_px``: piecewise-linear hats on the
    strictly increasing ``centers_px`` (scan px), clamped at the ends, summing to 1."""
    c = np.asarray(centers_px, dtype=np.float64)
    n = len(x_px)
    w = np.zeros((len(c), n), dtype=np.float64)
    if len(c) == 1:
        w[0] = 1.0
        return w
    x = np.clip(np.asarray(x_px, dtype=np.float64), c[0], c[-1])
    k = np.clip(np.searchsorted(c, x, side="right") - 1, 0, len(c) - 2)
    t = (x - c[k]) / (c[k + 1] - c[k])
    w[k, np.arange(n)] = 1.0 - t
    w[k + 1, np.arange(n)] += t
    return w


def hat_weights(centers_px: np.ndarray, n_out: int, upsample: int) -> np.ndarray:
    """Hat weights of the output pixels along one axis (pixel u at scan px u / f)."""
    return hat_weights_at(centers_px, np.arange(n_out) / upsample)


def _linear_components(params: Mapping[str, float]) -> dict[str, float]:
    """Parameters in which χ is linear: each angle phi_nm with its magnitude C_nm becomes
    (C_nm cos mφ, C_nm sin mφ), so interpolating them interpolates χ itself."""
    out = dict(params)
    for name, period in PERIODS.items():
        mag = "C" + name[3:]
        if name in out and mag in out:
            m = 2 * np.pi / period
            c, phi = out.pop(mag), out.pop(name)
            out[mag + ":cos"], out[mag + ":sin"] = c * np.cos(m * phi), c * np.sin(m * phi)
    return out


def _from_components(comp: Mapping[str, float]) -> dict[str, float]:
    out = {k: float(v) for k, v in comp.items() if ":" not in k}
    for name, period in PERIODS.items():
        mag = "C" + name[3:]
        if mag + ":cos" in comp:
            m = 2 * np.pi / period
            x, y = comp[mag + ":cos"], comp[mag + ":sin"]
            out[mag], out[name] = float(np.hypot(x, y)), float(np.arctan2(y, x) / m)
    return out


def _refined_axis(centers: np.ndarray, density: int) -> tuple[np.ndarray, np.ndarray]:
    """Centres with ``density - 1`` evenly spaced ones inserted between neighbours, and
    their hat weights on the original centres (interpolation of the tile parameters)."""
    c = np.asarray(centers, dtype=np.float64)
    if len(c) == 1 or density == 1:
        return c, np.eye(len(c))
    fine = np.concatenate([np.linspace(a, b, density, endpoint=False)
                           for a, b in itertools.pairwise(c)] + [c[-1:]])
    return fine, hat_weights_at(c, fine).T


def refine_tiles(
    tile_params: list[list[dict[str, float]]], row_centers: np.ndarray,
    col_centers: np.ndarray, density: int,
) -> tuple[list[list[dict[str, float]]], np.ndarray, np.ndarray]:
    """Virtual tiles ``density`` times denser: their parameters the bilinear interpolation
    of the tiles' (in χ-linear components), their centres in between the tiles'."""
    rows, wr = _refined_axis(row_centers, density)
    cols, wc = _refined_axis(col_centers, density)
    if density == 1:
        return tile_params, rows, cols
    comps = [[_linear_components(p) for p in row] for row in tile_params]
    keys = list(comps[0][0])
    grid = np.array([[[c[k] for k in keys] for c in row] for row in comps])  # (R, C, P)
    fine = np.einsum("ir,jc,rcp->ijp", wr, wc, grid)
    out = [[_from_components(dict(zip(keys, fine[i, j], strict=True)))
            for j in range(len(cols))] for i in range(len(rows))]
    return out, rows, cols


def phase_step_rad(a: Mapping[str, float], b: Mapping[str, float], wavelength_A: float,
                   k_alpha: float) -> float:
    """Largest |χ_a(q) − χ_b(q)| over the aperture (rings at k_α and k_α/2, 64 angles)."""
    angle = np.linspace(0.0, 2 * np.pi, 64, endpoint=False)
    radius = np.array([0.5, 1.0])[:, None] * k_alpha
    q_row, q_col = radius * np.cos(angle), radius * np.sin(angle)
    diff = chi(q_row, q_col, wavelength_A, a) - chi(q_row, q_col, wavelength_A, b)
    return float(np.abs(diff).max())


def auto_density(tile_params: list[list[dict[str, float]]], wavelength_A: float,
                 k_alpha: float) -> int:
    """The density at which neighbouring virtual tiles differ by ≤ MAX_PHASE_STEP_RAD."""
    step = 0.0
    for i, row in enumerate(tile_params):
        for j, p in enumerate(row):
            if j + 1 < len(row):
                step = max(step, phase_step_rad(p, row[j + 1], wavelength_A, k_alpha))
            if i + 1 < len(tile_params):
                step = max(step, phase_step_rad(p, tile_params[i + 1][j], wavelength_A,
                                                k_alpha))
    return int(min(MAX_DENSITY, max(1, np.ceil(step / MAX_PHASE_STEP_RAD))))


def _support(w: np.ndarray) -> slice:
    nz = np.flatnonzero(w > 0)
    return slice(int(nz[0]), int(nz[-1]) + 1) if nz.size else slice(0, 0)


def blend_tiles(
    reconstruct_many: Callable[[list[dict[str, float]]], list[Any]],
    tile_params: list[list[dict[str, float]]], row_centers: np.ndarray,
    col_centers: np.ndarray, out_shape: tuple[int, int], upsample: int, xp: Any = np,
    batch: int = TILES_PER_BATCH,
) -> np.ndarray:
    """Σ_t w_t · O_t over the tiles (row-major), O_t = ``reconstruct_many``'s image of
    tile t (arrays of ``xp``, at least ``out_shape``; ``batch`` tiles per call): a
    complex64 host image of ``out_shape``.

    The sum stays in ``xp`` (on the device for CuPy: the weights go up once, each tile
    adds only where its weight is non-zero, with slices known on the host) and comes back
    in one download, so a map's reconstruction waits for the device once, not per tile.
    """
    w_rows = hat_weights(row_centers, out_shape[0], upsample).astype(np.float32)
    w_cols = hat_weights(col_centers, out_shape[1], upsample).astype(np.float32)
    wr, wc = xp.asarray(w_rows), xp.asarray(w_cols)
    out = xp.zeros(out_shape, dtype=np.complex64)
    tiles = [(i, j, params) for i, row in enumerate(tile_params)
             for j, params in enumerate(row)]
    for start in range(0, len(tiles), batch):
        chunk = tiles[start:start + batch]
        images = reconstruct_many([dict(params) for _, _, params in chunk])
        for (i, j, _), obj in zip(chunk, images, strict=True):
            rs, cs = _support(w_rows[i]), _support(w_cols[j])
            out[rs, cs] += (wr[i, rs, None] * wc[j, None, cs]) * obj[rs, cs]
    return to_host(out, "map_blend")
