"""Aberration maps: the joint fit (rotation held) on every tile of a grid over the scan.

Each tile is one ``fit.region.fit_window`` call with the same box, fixed values and
seed, so a tile's record equals ``Session.fit_region`` on its bounds. The session stays
resident between tiles: the BF counts never move, the rotation geometry is cached by the
engine, and a released window's spectra buffer is reused by the next tile of its shape.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tqdm.auto import tqdm

from ..engine.protocol import Engine
from ..maps import MapResult
from ..regions import MIN_REGION_PX
from ..results import Bounds, FitResult
from .progress import Progress, callback_of
from .region import WindowSpec, fit_window


class MapGridError(ValueError):
    """A tile or step that gives no valid grid of tiles over the scan."""


@dataclass(frozen=True)
class TileGrid:
    """Tile starts along each axis; every tile is ``tile`` positions, the last row and
    column of tiles aligned to the scan edge so every position is covered."""

    tile: tuple[int, int]
    step: tuple[int, int]
    row_starts: tuple[int, ...]
    col_starts: tuple[int, ...]

    @property
    def shape(self) -> tuple[int, int]:
        return (len(self.row_starts), len(self.col_starts))

    def bounds(self) -> list[list[Bounds]]:
        th, tw = self.tile
        return [[(r, r + th, c, c + tw) for c in self.col_starts] for r in self.row_starts]


def _pair(value: Any, name: str) -> tuple[int, int]:
    vals = [value, value] if not isinstance(value, Sequence) or isinstance(value, str) \
        else list(value)
    if len(vals) != 2:
        raise MapGridError(f"{name} must be an integer or a (rows, cols) pair, got {value!r}")
    out = []
    for v in vals:
        try:
            iv = int(v)
            ok = iv == v
        except (TypeError, ValueError):
            ok = False
        if not ok or isinstance(v, bool):
            raise MapGridError(f"{name} must be whole scan positions, got {value!r}")
        if iv <= 0:
            raise MapGridError(f"{name} must be positive, got {value!r}")
        out.append(iv)
    return (out[0], out[1])


def _starts(n: int, tile: int, step: int) -> tuple[int, ...]:
    starts = list(range(0, n - tile + 1, step))
    if starts[-1] != n - tile:
        starts.append(n - tile)  # the last tile ends on the scan edge
    return tuple(starts)


def tile_grid(scan_shape: tuple[int, int], tile: Any = (64, 64), step: Any = None) -> TileGrid:
    """The grid of ``tile`` (rows, cols) tiles every ``step`` positions (None: the tile,
    i.e. adjacent tiles; smaller: overlapping tiles), or a MapGridError naming the fix."""
    t = _pair(tile, "tile")
    s = t if step is None else _pair(step, "step")
    rows, cols = scan_shape
    if t[0] > rows or t[1] > cols:
        raise MapGridError(f"tile {t} is larger than the {rows}x{cols} scan: use tiles of at "
                           f"most ({rows}, {cols}) positions (or fit() for the full field)")
    if min(t) < MIN_REGION_PX:
        raise MapGridError(f"tile {t} is smaller than the {MIN_REGION_PX}x{MIN_REGION_PX} "
                           "positions a fit needs: use larger tiles")
    if s[0] > t[0] or s[1] > t[1]:
        raise MapGridError(f"step {s} exceeds the tile {t}, which would leave scan positions "
                           "outside every tile: use step ≤ tile (or step=None)")
    return TileGrid(t, s, _starts(rows, t[0], s[0]), _starts(cols, t[1], s[1]))


def fit_map(
    engine: Engine, grid: TileGrid, theta: float, rotation_deg: float, transpose: bool,
    spec: WindowSpec, provenance: dict[str, Any], progress: Progress = True,
) -> MapResult:
    """Fit every tile of ``grid`` (row-major) with ``spec`` at the held rotation."""
    report = callback_of(progress)
    bounds = grid.bounds()
    total = grid.shape[0] * grid.shape[1]
    fits: list[list[FitResult]] = []
    t0 = time.perf_counter()
    done = 0
    if report is not None:
        report("map", 0, total)
    with tqdm(total=total, desc="map", disable=progress is not True, leave=False) as bar:
        for row in bounds:
            fits.append([])
            for b in row:
                tile_provenance = {**provenance, "mode": "map_tile"}
                fits[-1].append(fit_window(engine, b, theta, rotation_deg, transpose, spec,
                                           tile_provenance, label=f"tile {b}"))
                done += 1
                bar.update(1)
                if report is not None:
                    report("map", done, total)
    fit_s = time.perf_counter() - t0
    tile_s = [f.timings["prepare_s"] + f.timings["fit_s"] for row in fits for f in row]
    timings = {"fit_s": fit_s, "tiles": float(total), "tile_mean_s": fit_s / total,
               "tile_max_s": max(tile_s),
               "prepare_s": sum(f.timings["prepare_s"] for row in fits for f in row),
               "search_s": sum(f.timings.get("search_s", 0.0) for row in fits for f in row),
               "newton_s": sum(f.timings.get("newton_s", 0.0) for row in fits for f in row)}
    return MapResult.from_fits(
        fits, tile=grid.tile, step=grid.step, fixed=spec.held, rotation_deg=rotation_deg,
        transpose=transpose, timings=timings,
        provenance={**provenance, "mode": "map", "tile": list(grid.tile),
                    "step": list(grid.step)})
