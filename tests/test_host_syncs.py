"""The host-round-trip guard (livessb.xp), on the CPU: what the GPU would wait for.

Every device→host transfer and host read on the engine's path goes through the counted
helpers of livessb.xp, and the CPU engine counts its hand-overs where a device engine
downloads. Each operation is held to a budget that does not grow with the problem
(frequencies, BF chunks, tiles), and so is the number of NumPy calls it makes (cProfile):
a loop over chunks or tiles that talks to the array module per step shows up as a count
that grows with them. (Preprocessing: tests/test_host_syncs_preprocess.py.)
"""

from __future__ import annotations

import cProfile
import math
import pstats
from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np
import pytest

import livessb
from livessb.engine import make_engine
from livessb.fit import maps
from livessb.fit.fixed import FreeView
from livessb.fit.model import ThickSampleModel
from livessb.fit.robust import frequency_terms
from livessb.fit.search import Box
from livessb.simulate import simulate_4dstem
from livessb.xp import SyncCount, counting


def numpy_calls(fn: Callable[[], Any]) -> int:
    """NumPy functions and ndarray methods called by ``fn`` (cProfile's records)."""
    profile = cProfile.Profile()
    profile.enable()
    fn()
    profile.disable()
    # {(file, line, name): (cc, nc, tt, ct, callers)}
    stats: dict[tuple[str, int, str], tuple[Any, ...]] = vars(pstats.Stats(profile))["stats"]
    total = 0
    for (file, _line, name), (_cc, nc, *_rest) in stats.items():
        if ("numpy" in file or "numpy" in name) and "numba" not in file:
            total += nc
    return total


def counted(fn: Callable[[], Any]) -> tuple[SyncCount, int]:
    with counting() as count:
        calls = numpy_calls(fn)
    return count, calls


def _dataset(scan: int) -> livessb.Dataset4D:
    ds, _ = simulate_4dstem(scan_shape=(scan, scan), detector_shape=(32, 32), depth_A=60.0,
                            tilt_mrad=(2.0, -1.0), rotation_deg=10.0, dose=1e5,
                            aberrations={"C10": 20.0, "C12": 5.0, "phi12": 0.3})
    return ds


def test_misfit_gradients_cost_one_round_trip_whatever_the_frequencies_and_chunks() -> None:
    """2fd8bb7 enumerated the pairs per BF chunk (nonzero, 2 + 4·6 bincounts each): its
    NumPy calls grew with the chunks and frequencies; now one engine call (the gradients
    and the Hessian), one download."""
    params = {"C10": 25.0, "C12": 4.0, "phi12": 0.2, "tilt_row_mrad": 2.0,
              "tilt_col_mrad": -1.0, "depth": 50.0}
    seen = []
    for scan, chunk in ((12, 1 << 18), (24, 2048)):  # one chunk; many chunks, 4x the ν
        engine = make_engine(_dataset(scan), "cpu", chunk_elements=chunk)
        try:
            model = ThickSampleModel(engine, None, math.radians(10.0), False)
            n_chunks = len(engine.reference.chunks(model.spectra.n_bf, model.spectra.G.shape[1]))
            for fixed in ({}, {"depth": 0.0, "tilt_row_mrad": 0.0, "tilt_col_mrad": 0.0}):
                view = FreeView(model, Box.from_mapping(None, tuple(
                    n for n in params if n not in fixed)), fixed)
                free = {n: params[n] for n in view.free}
                for _ in range(2):  # compiled, dispatch types resolved, before counting
                    frequency_terms(view, free)
                count, calls = counted(partial(frequency_terms, view, free))
                seen.append((n_chunks, count.round_trips, calls))
        finally:
            engine.close()
    assert seen[0][0] == 1 and seen[2][0] > 4  # the cases do differ in chunks
    assert all(total == 1 for _, total, _ in seen), seen
    assert seen[0][2] == seen[2][2] and seen[1][2] == seen[3][2], seen
    # The Hessian comes from the same sums (21 pair terms of NumPy each): 178 calls here.
    assert max(calls for _, _, calls in seen) < 250, seen


def test_a_map_reconstruction_downloads_once_whatever_the_tiles() -> None:
    """2fd8bb7 downloaded every tile's full-field reconstruction to blend it on the host
    (64 transfers for an 8x8 map); the blend now adds on the engine's array module."""
    ds = _dataset(24)
    seen = []
    with livessb.Session(ds, device="cpu") as s:
        s.fit(trials=20, seed=1, progress=False)
        for tile in (12, 8):  # 2x2 and 3x3 tiles
            m = s.fit_map(tile=(tile, tile), trials=12, seed=1, progress=False)
            m.reconstruct(upsample=1, density=1)
            count, _ = counted(partial(m.reconstruct, upsample=1, density=1))
            seen.append((m.params["C10"].size, count.transfers,
                         count["site:reconstruct"], count["site:map_blend"]))
    assert [n for n, *_ in seen] == [4, 9]
    assert all(t == 1 and per_tile == 0 and blend == 1 for _, t, per_tile, blend in seen), seen


def test_counting_sees_nested_blocks_and_sites() -> None:
    from livessb.xp import host_float, to_host

    with counting() as outer:
        to_host(np.zeros(3), "a")
        with counting() as inner:
            host_float(np.ones(1), "b")
    assert (outer.transfers, outer.scalars, outer.round_trips) == (1, 1, 2)
    assert (inner.transfers, inner.scalars, inner["site:b"], inner["site:a"]) == (0, 1, 1, 0)


def test_fits_and_maps_wait_for_the_engine_a_bounded_number_of_times(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A fit waits once per engine call (a search batch, a Newton round, the errors), not
    per frequency or BF pixel: the same budget on a 24² and a 40² scan (2.8x the
    frequencies). A map's tiles run in lockstep and share each round's one download, so
    a map of 4 tiles and one of 16 wait about as often as one tile does (fit.lockstep;
    at 0fa3291, tile after tile, 16 tiles waited 16x as often as one). (Measured on this
    code: fit 45 / 47, region 20 / 19; map 24 and 40 rounds for 4 and 16 tiles: as many
    as its longest tile's own waits, against 22 per tile one after another.)"""
    rounds = []
    # as on the GPU: the CPU engine runs tiles one by one (nothing to download)
    monkeypatch.setattr(maps, "lockstep_width", maps.memory_lockstep_width)
    for scan in (24, 40):
        with livessb.Session(_dataset(scan), device="cpu") as s:
            with counting() as fit:
                s.fit(trials=40, seed=1, progress=False)
            with counting() as region:
                s.fit_region((2, scan - 2, 3, scan - 3), trials=40, seed=1)
            with counting() as tiles:
                m = s.fit_map(tile=(12, 12), trials=20, seed=1, progress=False)
        assert fit.round_trips <= 60 and fit["site:frequency_gradients"] == 1, dict(fit)
        assert region.round_trips <= 30, dict(region)
        assert m.timings["lockstep_width"] == m.params["C10"].size  # all tiles at once (≤ 16)
        assert tiles.round_trips == tiles["site:lockstep"] == m.timings["lockstep_rounds"]
        rounds.append((m.params["C10"].size, tiles.round_trips))
    assert [n for n, _ in rounds] == [4, 16], rounds
    assert all(r <= 45 for _, r in rounds), rounds  # one tile's budget, whatever the tiles
