"""Host BLAS on one thread where livessb's host linear algebra is many small calls
(engine.blas_threads): inside crystal mode's host stages OpenBLAS runs one thread, and the
count found comes back when the last of any nested or overlapping extents (a widget's
worker thread beside the notebook's) has left."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from threadpoolctl import threadpool_info

from livessb import Session
from livessb.engine.blas_threads import one_blas_thread
from livessb.fit import lattice as fit_lattice
from livessb.simulate.demo import demo_dataset


def _blas_threads() -> list[int]:
    """The thread count of every loaded OpenBLAS (NumPy's, SciPy's)."""
    return [int(i["num_threads"]) for i in threadpool_info() if i["internal_api"] == "openblas"]


def test_nested_extents_hold_one_thread_and_give_the_count_back() -> None:
    before = _blas_threads()
    assert before, "NumPy's and SciPy's wheels bring OpenBLAS"
    with one_blas_thread():
        assert set(_blas_threads()) == {1}
        with one_blas_thread():
            assert set(_blas_threads()) == {1}
        assert set(_blas_threads()) == {1}
    assert _blas_threads() == before


@pytest.mark.parametrize("last", ["worker", "main"])
def test_overlapping_extents_of_two_threads_give_the_count_back_when_both_left(
        last: str) -> None:
    entered, main_left, worker_left = threading.Event(), threading.Event(), threading.Event()
    seen: list[list[int]] = []

    def worker() -> None:  # a widget's worker thread fitting while the notebook fits too
        with one_blas_thread():
            seen.append(_blas_threads())
            entered.set()
            if last == "worker":
                main_left.wait(10)
        worker_left.set()

    before = _blas_threads()
    with one_blas_thread():
        t = threading.Thread(target=worker)
        t.start()
        assert entered.wait(10)
        if last == "main":
            assert worker_left.wait(10)
            assert set(_blas_threads()) == {1}  # the main thread's extent still runs
    if last == "worker":
        assert set(_blas_threads()) == {1}  # the worker's extent still runs
    main_left.set()
    t.join(10)
    assert set(seen[0]) == {1}
    assert _blas_threads() == before


def test_crystal_modes_host_stages_run_blas_on_one_thread(
        monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[list[int]] = []
    real = fit_lattice.refined_basis

    def recording(*args: Any, **kwargs: Any) -> Any:
        seen.append(_blas_threads())
        return real(*args, **kwargs)

    monkeypatch.setattr(fit_lattice, "refined_basis", recording)
    with Session(demo_dataset(), device="cpu") as s:
        s.fit(trials=50, seed=1, progress=False)
        before = _blas_threads()
        s.fit_region((0, 8, 0, 8), trials=50, seed=1, object_model="lattice")
        assert seen and all(set(counts) == {1} for counts in seen), seen
        assert _blas_threads() == before
