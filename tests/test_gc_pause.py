"""The cyclic collector is paused inside fits (livessb.gc_pause) and restored after."""

from __future__ import annotations

import gc
import threading

import pytest

import livessb
from livessb.engine.cpu import CPUEngine
from livessb.gc_pause import collection_paused
from livessb.simulate import simulate_4dstem


def test_paused_inside_restored_after_even_on_error() -> None:
    assert gc.isenabled()
    with collection_paused():
        assert not gc.isenabled()
        with collection_paused():  # nested: still paused, and not re-enabled by the inner
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()
    with pytest.raises(ZeroDivisionError), collection_paused():
        _ = 1 / 0
    assert gc.isenabled()


def test_a_collector_the_caller_disabled_stays_disabled() -> None:
    gc.disable()
    try:
        with collection_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_overlapping_operations_in_two_threads_restore_once_both_end() -> None:
    inside, release = threading.Event(), threading.Event()

    def other() -> None:
        with collection_paused():
            inside.set()
            release.wait(5)

    t = threading.Thread(target=other)
    with collection_paused():
        t.start()
        assert inside.wait(5)
    assert not gc.isenabled()  # the other operation still runs
    release.set()
    t.join(5)
    assert gc.isenabled()


def test_fits_regions_and_maps_run_without_collections_and_give_it_back(
        monkeypatch: pytest.MonkeyPatch) -> None:
    ds, _ = simulate_4dstem(scan_shape=(24, 24), detector_shape=(24, 24), dose=1e5,
                            aberrations={"C10": 20.0, "C12": 5.0, "phi12": 0.3})
    seen: list[bool] = []
    evaluate = CPUEngine.evaluate

    def spy(self: CPUEngine, *args: object, **kwargs: object) -> object:
        seen.append(gc.isenabled())
        return evaluate(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(CPUEngine, "evaluate", spy)
    with livessb.Session(ds, device="cpu") as s:
        s.fit(trials=20, seed=1, progress=False)
        assert gc.isenabled()
        s.fit_region((2, 22, 3, 21), trials=20, seed=1)
        assert gc.isenabled()
        s.fit_map(tile=(12, 12), trials=12, seed=1, progress=False)
        assert gc.isenabled()
    assert seen and not any(seen)
