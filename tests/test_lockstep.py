"""Window fits in lockstep (fit.lockstep): one download per round for every live fit,
results and records equal to fits run one after another, failures and stops that
abandon the others cleanly."""

from __future__ import annotations

from functools import partial
from typing import Any

import numpy as np
import pytest

import livessb
import livessb.session as session_module
from livessb.fit import maps
from livessb.fit.lockstep import Lockstep
from livessb.fit.progress import Cancelled
from livessb.simulate import simulate_4dstem
from livessb.xp import counting, to_host


def _downloads(n: int, tag: int, log: list[tuple[int, int]]) -> Any:
    def fit() -> int:
        total = 0
        for step in range(n):
            log.append((tag, step))
            total += int(to_host(np.array([tag * 100 + step]), "test")[0])
        return total
    return fit


def test_fits_share_one_download_per_round_and_keep_their_order() -> None:
    log: list[tuple[int, int]] = []
    lock: Lockstep[int] = Lockstep(width=3)
    done: list[int] = []
    with counting() as count:
        results = lock.run([_downloads(n, i, log) for i, n in enumerate((2, 5, 3))],
                           on_done=lambda i, _r: done.append(i))
    assert results == [sum(i * 100 + s for s in range(n)) for i, n in enumerate((2, 5, 3))]
    assert count.round_trips == count["site:lockstep"] == lock.rounds == 5  # the longest
    assert log[:3] == [(0, 0), (1, 0), (2, 0)]  # every fit takes its turn in order
    assert done == [0, 2, 1]


def test_width_bounds_the_fits_in_flight() -> None:
    log: list[tuple[int, int]] = []
    lock: Lockstep[int] = Lockstep(width=2)
    lock.run([_downloads(2, i, log) for i in range(4)])
    assert lock.rounds == 4  # two waves of two fits, two downloads each
    assert log.index((2, 0)) > log.index((0, 1))  # fit 2 starts once fit 0 is done


def test_two_groups_alternate_their_downloads_and_give_the_same_results() -> None:
    """groups=2 (the GPU's maps): one group's download in flight while the other group
    takes its turns, so the device never waits for the whole width at once."""
    log: list[tuple[int, int]] = []
    lock: Lockstep[int] = Lockstep(width=4, groups=2)
    lengths = (3, 3, 3, 3, 2)
    with counting() as count:
        results = lock.run([_downloads(n, i, log) for i, n in enumerate(lengths)])
    assert results == [sum(i * 100 + s for s in range(n)) for i, n in enumerate(lengths)]
    assert log[:6] == [(0, 0), (1, 0), (2, 0), (3, 0), (0, 1), (1, 1)]  # A, B, then A again
    assert count.round_trips == count["site:lockstep"] == lock.rounds
    assert lock.rounds == 8  # two groups × three downloads, then fit 4's two alone
    assert Lockstep[int](width=1, groups=2).groups == 1


def test_a_failing_fit_abandons_the_others_and_its_error_is_raised() -> None:
    released: list[int] = []

    def holding(tag: int) -> Any:
        def fit() -> int:
            try:
                for step in range(10):
                    to_host(np.zeros(1), "test")
                    if tag == 1 and step == 2:
                        raise ValueError("tile 1 broke")
                return tag
            finally:
                released.append(tag)
        return fit

    with pytest.raises(ValueError, match="tile 1 broke"):
        Lockstep[int](width=3).run([holding(i) for i in range(3)])
    assert sorted(released) == [0, 1, 2]  # every fit unwound and released what it held


def test_a_stop_from_the_callback_abandons_the_rest() -> None:
    def stop(index: int, _result: int) -> None:
        raise Cancelled("map")

    log: list[tuple[int, int]] = []
    with pytest.raises(Cancelled):
        Lockstep[int](width=2).run([_downloads(n, i, log) for i, n in enumerate((1, 6, 6))],
                                   on_done=stop)
    assert (2, 0) not in log  # never started


def test_a_stop_between_rounds_skips_the_round_and_unwinds_every_fit() -> None:
    rounds: list[int] = []
    lock: Lockstep[int] = Lockstep(width=3)

    def stop_at_the_third_round() -> None:
        rounds.append(lock.rounds)
        if lock.rounds == 2:
            raise Cancelled("map")

    log: list[tuple[int, int]] = []
    with pytest.raises(Cancelled):
        lock.run([_downloads(6, i, log) for i in range(3)], on_round=stop_at_the_third_round)
    assert rounds == [0, 1, 2] and lock.rounds == 2  # the third download never made
    assert max(step for _, step in log) == 2  # no fit went past its third step


def test_the_cpu_engine_fits_map_tiles_one_after_another_so_each_tile_reports() -> None:
    """Lockstep only saves downloads; on the CPU it would hold every tile's progress tick
    and cancel check to the end of the map (seen as a cancel test that timed out)."""
    ds, _ = simulate_4dstem(scan_shape=(24, 24), detector_shape=(24, 24), dose=1e5,
                            aberrations={"C10": 20.0})
    seen: list[tuple[str, int, int]] = []
    with livessb.Session(ds, device="cpu") as s:
        s.fit(trials=20, seed=3, progress=False)
        m = s.fit_map(tile=(12, 12), trials=12, seed=3,
                      progress=lambda stage, done, total: seen.append((stage, done, total)))
    ticks = [d for stage, d, _ in seen if stage == "map"]
    assert m.timings["lockstep_width"] == 1
    assert sorted(set(ticks)) == [0, 1, 2, 3, 4]  # each tile ticks on its own
    assert ticks.index(1) < len(ticks) - 3  # the first tile's tick comes early


def test_a_map_cancelled_in_lockstep_keeps_the_session_as_before(
        monkeypatch: pytest.MonkeyPatch) -> None:
    ds, _ = simulate_4dstem(scan_shape=(24, 24), detector_shape=(24, 24), dose=1e5,
                            aberrations={"C10": 20.0})
    monkeypatch.setattr(session_module, "fit_map", partial(maps.fit_map, width=4))
    calls = [0]

    def cancel_on_the_fifth_report(stage: str, done: int, total: int) -> None:
        calls[0] += 1
        if calls[0] == 5:
            raise Cancelled("map cancelled")

    with livessb.Session(ds, device="cpu") as s:
        s.fit(trials=20, seed=3, progress=False)
        with pytest.raises(Cancelled):
            s.fit_map(tile=(12, 12), trials=12, seed=3, progress=cancel_on_the_fifth_report)
        assert len(s.maps) == 0 and calls[0] == 5  # stopped within the first round(s)


def test_a_map_in_lockstep_equals_tiles_fitted_one_after_another(
        monkeypatch: pytest.MonkeyPatch) -> None:
    ds, _ = simulate_4dstem(scan_shape=(32, 32), detector_shape=(32, 32), depth_A=40.0,
                            tilt_mrad=(1.0, -1.0), rotation_deg=8.0, dose=1e5,
                            aberrations={"C10": 20.0, "C12": 4.0, "phi12": 0.3})
    with livessb.Session(ds, device="cpu") as s:
        s.fit(trials=30, seed=3, progress=False)
        alone = s.fit_map(tile=(16, 16), trials=24, seed=3, progress=False)  # CPU: width 1
        as_on_the_gpu = partial(maps.fit_map, width=4)
        monkeypatch.setattr(session_module, "fit_map", as_on_the_gpu)
        together = s.fit_map(tile=(16, 16), trials=24, seed=3, progress=False)
        monkeypatch.setattr(maps, "lockstep_groups", lambda engine: 2)  # as on the GPU
        grouped = s.fit_map(tile=(16, 16), trials=24, seed=3, progress=False)
    assert grouped.timings["lockstep_groups"] == 2 and together.timings["lockstep_groups"] == 1
    assert all(a.trials == b.trials and a.newton == b.newton and a.errors == b.errors
               for ra, rb in zip(grouped.fits, alone.fits, strict=True)
               for a, b in zip(ra, rb, strict=True))
    assert together.shape == alone.shape == (2, 2)
    assert together.timings["lockstep_width"] == 4 and alone.timings["lockstep_width"] == 1
    for name in together.params:
        assert np.array_equal(together.params[name], alone.params[name]), name
        assert np.array_equal(together.errors[name], alone.errors[name], equal_nan=True), name
    assert np.array_equal(together.losses, alone.losses)
    tiles = [(a, b) for ra, rb in zip(together.fits, alone.fits, strict=True)
             for a, b in zip(ra, rb, strict=True)]
    for a, b in tiles:
        assert a.trials == b.trials and a.newton == b.newton
        assert a.provenance == b.provenance
