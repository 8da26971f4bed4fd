"""Aberration maps: the joint fit (rotation held) on every tile of a grid over the scan.

Each tile is one ``fit.region.fit_window`` call with the same box, fixed values and
seed, so a tile's record equals ``Session.fit_region`` on its bounds. The tiles run in
lockstep (``fit.lockstep``), up to MAX_LOCKSTEP at once as the engine's memory allows:
they share one download per round instead of waiting for the device one by one, and
give the same records as tiles fitted one after another. The BF counts never move and
the rotation geometry is cached by the engine.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tqdm.auto import tqdm

from ..engine.protocol import Engine
from ..maps import MapResult
from ..memory import cuda_free_bytes, host_free_bytes
from ..physics.geometry import fft_friendly_size
from ..regions import MIN_REGION_PX
from ..results import Bounds, FitResult
from .lockstep import Lockstep
from .progress import Progress, callback_of
from .region import WindowSpec, fit_window
from .window_check import tiles_summary

# Tiles in flight at most. H200, 8x8 map of 64² tiles (SPEC §4): 2.23-2.78 s one after
# another, 1.84 s 8 at once, 1.72 s 16, 1.71 s 32, 1.80-2.01 s 64 (the host's turns,
# 1.35 s, bound it from 16 on; 64 held a 50 GB pool).
MAX_LOCKSTEP = 16
LOCKSTEP_MEMORY_FRACTION = 0.25  # of the free memory, for the tiles in flight
LOCKSTEP_GROUPS = 2  # on the GPU: one group's download in flight while the other runs
# Per spectrum (BF pixel × padded half-plane frequency) of a tile in flight: its complex64
# spectra and the loss kernels' split partials (measured 780 MB per 64² tile on the H200).
WINDOW_BYTES_PER_SPECTRUM = 48


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


def lockstep_width(engine: Engine, tile: tuple[int, int], tiles: int) -> int:
    """How many tiles run in lockstep: 1 on the CPU engine, whose results need no
    download, so lockstep would only delay every tile (and its progress tick and
    cancel check) to the end of the map; on the GPU ``memory_lockstep_width``."""
    return 1 if engine.name == "cpu" else memory_lockstep_width(engine, tile, tiles)


def lockstep_groups(engine: Engine) -> int:
    """Groups of the tiles in flight whose downloads alternate (``fit.lockstep``): on the
    GPU two, so the device runs one group's launches while the host takes the other's
    turns instead of waiting for every tile at each round; on the CPU one (no device)."""
    return 1 if engine.name == "cpu" else LOCKSTEP_GROUPS


def memory_lockstep_width(engine: Engine, tile: tuple[int, int], tiles: int) -> int:
    """How many tiles fit at once: their spectra (BF pixels × padded half plane, with the
    derivative partials) within a quarter of the engine's free memory, at most
    MAX_LOCKSTEP and the tiles there are; 1 where the free memory is unknown."""
    rows, cols = fft_friendly_size(tile[0]), fft_friendly_size(tile[1])
    window = engine.n_bf * rows * (cols // 2 + 1) * WINDOW_BYTES_PER_SPECTRUM
    free = cuda_free_bytes() if engine.name == "cuda" else host_free_bytes()[0]
    if free is None:
        return 1
    return max(1, min(MAX_LOCKSTEP, tiles, int(LOCKSTEP_MEMORY_FRACTION * free) // window))


def fit_map(
    engine: Engine, grid: TileGrid, theta: float, rotation_deg: float, transpose: bool,
    spec: WindowSpec, provenance: dict[str, Any], progress: Progress = True,
    width: int | None = None,
) -> MapResult:
    """Fit every tile of ``grid`` (row-major) with ``spec`` at the held rotation,
    ``width`` tiles in lockstep (None: ``lockstep_width``; 1: one after another)."""
    report = callback_of(progress)
    flat = [b for row in grid.bounds() for b in row]
    total = len(flat)
    t0 = time.perf_counter()
    if report is not None:
        report("map", 0, total)
    def tile_fit(b: Bounds) -> Any:  # each tile its own provenance dict, as before
        return lambda: fit_window(engine, b, theta, rotation_deg, transpose, spec,
                                  {**provenance, "mode": "map_tile"}, label=f"tile {b}")

    lanes = lockstep_width(engine, grid.tile, total) if width is None else width
    lockstep: Lockstep[FitResult] = Lockstep(lanes, lockstep_groups(engine))
    with tqdm(total=total, desc="map", disable=progress is not True, leave=False) as bar:
        finished = [0]

        def on_round() -> None:  # a cancel is seen within a round, not only per tile
            if report is not None:
                report("map", finished[0], total)

        def on_done(index: int, fit: FitResult) -> None:
            finished[0] += 1
            bar.update(1)
            on_round()

        flat_fits = lockstep.run([tile_fit(b) for b in flat], on_done, on_round)
    cols = grid.shape[1]
    fits = [flat_fits[r * cols:(r + 1) * cols] for r in range(grid.shape[0])]
    fit_s = time.perf_counter() - t0
    tile_s = [f.timings["prepare_s"] + f.timings["fit_s"] for row in fits for f in row]
    timings = {"fit_s": fit_s, "tiles": float(total), "tile_mean_s": fit_s / total,
               "tile_max_s": max(tile_s),
               "prepare_s": sum(f.timings["prepare_s"] for row in fits for f in row),
               "search_s": sum(f.timings.get("search_s", 0.0) for row in fits for f in row),
               "newton_s": sum(f.timings.get("newton_s", 0.0) for row in fits for f in row),
               "lockstep_width": float(lanes), "lockstep_groups": float(lockstep.groups),
               "lockstep_rounds": float(lockstep.rounds),
               "lockstep_host_s": lockstep.host_s, "lockstep_download_s": lockstep.download_s}
    checks = tiles_summary(flat_fits)  # the tiles of a "hann" or "auto" session
    return MapResult.from_fits(
        fits, tile=grid.tile, step=grid.step, fixed=spec.held, rotation_deg=rotation_deg,
        transpose=transpose, timings=timings,
        provenance={**provenance, "mode": "map", "tile": list(grid.tile),
                    "step": list(grid.step), **({"window_check": checks} if checks else {})})
