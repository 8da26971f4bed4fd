"""The map workload (issue 15, "Speed"): a map of N×N tiles over the scan (8×8 tiles of 64²
on the 512² reference) and its reconstruction, through the public Session API.

Target on one H200: fit + reconstruction ≤ 3 s. Recorded per run: the map fit, the
reconstruction at the default density and at density 1 (one reconstruction per tile),
the engine's stage deltas, the map's own timings, and the C10 gradient it recovers
against the simulator's.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from .report import delta

MAP_TARGETS_S = {"map_total": 1.5}  # fit + blended reconstruction (issue 19)
MAP_OPERATIONS = ("map_fit", "map_reconstruct", "map_reconstruct_density1", "map_total")


def map_tile(scan: tuple[int, int], tiles: int) -> tuple[int, int]:
    """Tile shape giving ``tiles`` × ``tiles`` adjacent tiles (64² for 8 on 512²)."""
    return (scan[0] // tiles, scan[1] // tiles)


def run_map(session: Any, diag: Any, scan: tuple[int, int], tiles: int, trials: int,
            seed: int, truth: Any) -> tuple[dict[str, float], dict[str, Any], dict[str, Any]]:
    """One map run: (times per operation, stages, fit record)."""
    tile = map_tile(scan, tiles)
    snap = diag.stats
    t0 = time.perf_counter()
    m = session.fit_map(tile=tile, trials=trials, seed=seed, progress=False)
    t_fit = time.perf_counter()
    engine_fit = delta(snap, diag.stats)
    snap = diag.stats
    t1 = time.perf_counter()
    rec = m.reconstruct()
    t_rec = time.perf_counter()
    engine_rec = delta(snap, diag.stats)
    t2 = time.perf_counter()
    m.reconstruct(density=1)
    t_rec1 = time.perf_counter()
    times = {"map_fit": t_fit - t0, "map_reconstruct": t_rec - t1,
             "map_reconstruct_density1": t_rec1 - t2, "map_total": t_rec - t0}
    centres = m.centers_px.reshape(-1, 2)
    design = np.column_stack([np.ones(len(centres)), centres])
    plane = np.linalg.lstsq(design, m.params["C10"].ravel(), rcond=None)[0]
    true_c10 = np.array([truth.local_C10(b) for b in m.tile_bounds()])
    stages = {"map": m.timings, "map_fit_engine": engine_fit,
              "map_reconstruct_engine": engine_rec, "map_grid": list(m.shape),
              "map_tile": list(tile), "map_reconstruction_shape": list(rec.shape),
              "map_newton_steps": int(sum(len(f.newton) for row in m.fits for f in row))}
    record = {"C10_gradient_row_col": [float(plane[1]), float(plane[2])],
              "C10_rms_vs_truth": float(np.sqrt(np.mean(
                  (m.params["C10"].ravel() - true_c10) ** 2))),
              "losses_sum": float(m.losses.sum())}
    return times, stages, record
