"""Budgets of the preprocessing pass (issue 19 item 2), counted on the CPU: its host round
trips (what a GPU would wait for: ``livessb.xp.counting``) and its NumPy calls (what
CuPy would launch as kernels) must not grow with the scan rows or the blocks.

Before this item the pass went a scan row at a time and downloaded every row's totals
and block row's sums (1024 ``.get()`` calls and 23 s on a 512 × 512 resident scan).
"""

from __future__ import annotations

import cProfile
import os
import pstats
from collections.abc import Callable
from typing import Any

import pytest

import livessb.simulate as sim
from helpers import with_counts
from livessb import Dataset4D, Preprocessing
from livessb.preprocess import corrections, prepare_corrections
from livessb.xp import counting

DESCAN = (0.02, 0.05, -0.04, 0.03)
CASES = {"block 1": (2e4, False), "block > 1": (800.0, False), "hot pixel": (2e4, True)}
OPTIONS = Preprocessing(descan="plane", dose_normalise=True)


def _dataset(scan: int, dose: float, hot: bool) -> Dataset4D:
    ds, _ = sim.simulate_4dstem(scan_shape=(scan, scan), detector_shape=(32, 32),
                                scan_step_A=0.6, aberrations={"C10": -30.0}, dose=dose,
                                seed=5, descan_px_per_px=DESCAN)
    if not hot:
        return ds
    counts = ds.counts.copy()
    counts[:, :, 10, 12] = 3000  # found on the mean pattern: the pass repairs every frame
    return with_counts(ds, counts)


def _is_numpy(file: str, name: str) -> bool:
    """A profile entry of NumPy's: a function in its modules or one of its built-ins
    (``<built-in method numpy.zeros>``, ``<method 'sum' of 'numpy.ndarray' objects>``)."""
    return f"{os.sep}numpy{os.sep}" in file or "numpy." in name


def _numpy_calls(monkeypatch: pytest.MonkeyPatch, ds: Dataset4D) -> int:
    """NumPy calls of ``_measure`` on ``ds`` in chunks covering the whole scan, without
    the disk estimate and the fit (iterative on the host: data-dependent counts)."""
    prof = cProfile.Profile()

    def unprofiled(fn: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any, **kw: Any) -> Any:
            prof.disable()
            try:
                return fn(*args, **kw)
            finally:
                prof.enable()
        return call

    measure = corrections._measure

    def profiled(*args: Any) -> Any:
        prof.enable()
        try:
            return measure(*args)
        finally:
            prof.disable()

    with monkeypatch.context() as m:
        m.setattr(corrections, "HOST_CHUNK_BYTES", 2**30)
        m.setattr(corrections, "_disk_level", unprofiled(corrections._disk_level))
        m.setattr(corrections, "fit_descan", unprofiled(corrections.fit_descan))
        m.setattr(corrections, "_measure", profiled)
        prepare_corrections(ds, OPTIONS)
    stats: dict[tuple[str, int, str], tuple[Any, ...]] = pstats.Stats(prof).stats  # type: ignore[attr-defined]
    return sum(int(v[1]) for (file, _, name), v in stats.items() if _is_numpy(file, name))


@pytest.mark.parametrize("case", list(CASES))
def test_preprocessing_round_trips_and_numpy_calls_do_not_grow_with_the_scan(
        case: str, monkeypatch: pytest.MonkeyPatch) -> None:
    dose, hot = CASES[case]
    small, large = _dataset(16, dose, hot), _dataset(48, dose, hot)
    trips = []
    for ds in (small, large):
        with counting() as count:
            corr = prepare_corrections(ds, OPTIONS)
        assert corr.descan is not None and corr.descan.significant
        assert corr.bad_pixels.any() == hot and corr.dose_factors is not None
        assert (corr.descan.block > 1) == (case == "block > 1")  # the case is as named
        trips.append(count)
    # The totals downloaded once; the descan fit where the centres are: the number kept,
    # one check per refit (at most three) and the fit with its measurements, once; for 16
    # or 48 scan rows alike.
    for count in trips:
        assert count.round_trips == count["site:preprocess.descan"] + 1, dict(count)
        assert count["site:preprocess.totals"] == 1
        assert 3 <= count["site:preprocess.descan"] <= 5, dict(count)
    calls = [_numpy_calls(monkeypatch, ds) for ds in (small, large)]
    assert calls[0] == calls[1], f"NumPy calls of the pass: {calls} for 16 and 48 scan rows"


def test_the_host_pass_goes_in_bounded_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    """A budget of one row's working set: the pass goes row by row (a memory-mapped file
    read and released a row at a time) and measures the same totals and fit."""
    ds = _dataset(16, 2e4, True)
    whole = prepare_corrections(ds, OPTIONS)
    chunks: list[int] = []
    measure_chunk = corrections._measure_chunk

    def counted(xp: Any, chunk: Any, *args: Any) -> Any:
        chunks.append(int(chunk.shape[0]))
        return measure_chunk(xp, chunk, *args)

    monkeypatch.setattr(corrections, "HOST_CHUNK_BYTES", 1)
    monkeypatch.setattr(corrections, "_measure_chunk", counted)
    rows = prepare_corrections(ds, OPTIONS)
    assert chunks == [1] * 16
    assert whole.descan is not None and rows.descan is not None
    assert abs(rows.descan.coefficients - whole.descan.coefficients).max() < 1e-12
    assert whole.dose_factors is not None and rows.dose_factors is not None
    assert (rows.dose_factors == whole.dose_factors).all()
