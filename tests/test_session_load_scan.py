"""Session.load_scan: the next scan on one open session gives the bits a new Session on
that scan gives (full fit, refine on a calibration, a region, reconstructions), keeps the
engine where the counts' shape allows, rebuilds it where not, and refuses bad input
before the last scan's state is touched."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from livessb import Dataset4D, Session
from livessb.calibration import CalibrationError
from livessb.session import SessionClosedError
from livessb.simulate import simulate_4dstem

TRIALS = 60
REGION = (4, 20, 6, 22)
START = {"C10": -50.0, "tilt_row_mrad": 0.0, "tilt_col_mrad": 0.0, "depth": 0.0}


def scan(k: int, shape: tuple[int, int] = (24, 24)) -> Dataset4D:
    ds, _ = simulate_4dstem(
        scan_shape=shape, detector_shape=(32, 32), scan_step_A=0.6, voltage_kV=200,
        semiangle_mrad=20, aberrations={"C10": -45.0 + 3.0 * k, "C12": 8.0, "phi12": 0.4},
        rotation_deg=10.0, dose=1e5, seed=200 + k)
    return ds


def outcome(s: Session, calibration: Path | None = None) -> dict[str, Any]:
    """What a series scan computes: a full fit (or, on a calibration, a refine), a region
    and the full-field reconstruction, as comparable values."""
    fit = (s.fit(trials=TRIALS, seed=7, progress=False) if calibration is None
           else s.refine(START, fixed={"C12": 8.0, "phi12": 0.4}))
    region = s.fit_region(REGION, trials=TRIALS, seed=7)
    return {"params": fit.params, "errors": fit.errors, "loss": fit.loss,
            "trials": fit.trials,
            "region": region.fit.params, "crop": region.crop.phase_hash(),
            "image": s.reconstruct(fit.params).phase_hash()}


def fresh(ds: Dataset4D, calibration: Path | None = None) -> dict[str, Any]:
    with Session(ds, device="cpu", calibration=calibration, force=True) as s:
        return outcome(s, calibration)


@pytest.fixture(scope="module")
def scans() -> list[Dataset4D]:
    return [scan(k) for k in range(3)]


def test_next_scans_give_the_bits_of_new_sessions(scans: list[Dataset4D]) -> None:
    with Session(scans[0], device="cpu") as s:
        engine = s._engine
        got = [outcome(s)]
        for ds in scans[1:]:
            assert s.load_scan(ds) is s
            assert s.full_fit is None and not s.regions  # the last scan's results left
            got.append(outcome(s))
        assert s._engine is engine  # one engine for the whole series
        assert s.scans_loaded == 3
    for ds, result in zip(scans, got, strict=True):
        assert result == fresh(ds)
    assert got[0]["params"]["C10"] != got[2]["params"]["C10"]  # three different scans


def test_next_scan_on_a_calibration_restores_it(scans: list[Dataset4D],
                                                tmp_path: Path) -> None:
    cal = tmp_path / "reference.json"
    with Session(scans[0], device="cpu") as s:
        s.fit(trials=TRIALS, seed=7, progress=False)
        s.fit_region(REGION, trials=TRIALS, seed=7)
        s.save_calibration(cal)
        rotation = s.rotation_deg
        s.load_scan(scans[1], calibration=cal, force=True)
        assert s.rotation_deg == rotation and set(s.regions) == {"r1"}  # restored
        assert outcome(s, cal) == fresh(scans[1], cal)


def test_another_shape_opens_a_new_engine(scans: list[Dataset4D]) -> None:
    bigger = scan(5, shape=(28, 26))
    with Session(scans[0], device="cpu") as s:
        engine = s._engine
        s.load_scan(bigger)
        assert s._engine is not engine and engine is not None and engine.closed
        assert s.dataset.scan_shape == (28, 26)
        assert outcome(s) == fresh(bigger)


def test_bad_input_leaves_the_last_scan_in_place(scans: list[Dataset4D],
                                                 tmp_path: Path) -> None:
    corrupt = tmp_path / "corrupt.json"
    corrupt.write_text('{"livessb_calibration": 1, "rotation_deg": ', encoding="utf-8")
    with Session(scans[0], device="cpu") as s:
        fit = s.fit(trials=TRIALS, seed=7, progress=False)
        region = s.fit_region(REGION, trials=TRIALS, seed=7)
        crop = region.crop.object.copy()
        with pytest.raises(TypeError, match="Dataset4D"):
            s.load_scan(np.zeros((24, 24, 32, 32)))  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="scan_frequencies"):
            s.load_scan(scans[1], scan_frequencies="efective")
        with pytest.raises(CalibrationError, match="corrupt"):
            s.load_scan(scans[1], calibration=corrupt)
        assert s.full_fit is fit and s.regions[region.id] is region
        np.testing.assert_array_equal(region.crop.object, crop)
        assert s.reconstruct().phase_hash() == s.reconstruct(fit.params).phase_hash()
    with pytest.raises(SessionClosedError):
        s.load_scan(scans[1])


def test_the_replaced_scans_memory_counts_as_free(scans: list[Dataset4D],
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """The preflight of the next scan counts what the session already holds (it is
    replaced, not added to): refused as a new Session, accepted as the next scan."""
    from livessb import InsufficientMemoryError, memory

    need = max(e.total for e in memory.session_estimates(scans[1], "cpu"))
    with Session(scans[0], device="cpu") as s:
        s.fit(trials=8, progress=False)
        held = int(s.memory_info()["live_bytes"])
        assert held > 0
        free = need - held // 2  # enough only with the held half counted
        monkeypatch.setattr(memory, "host_free_bytes", lambda: (free, "available RAM"))
        with pytest.raises(InsufficientMemoryError, match="not enough memory"):
            Session(scans[1], device="cpu")
        s.load_scan(scans[1])
        assert s.dataset is scans[1] or s.dataset.counts is scans[1].counts


def test_the_last_scans_map_does_not_reconstruct_the_next_scan(scans: list[Dataset4D]) -> None:
    """A map reconstructs through its session; once the session holds another scan the
    map would reconstruct that scan with its tiles' fits: it says so instead."""
    from livessb.maps import MapSessionError

    with Session(scans[0], device="cpu") as s:
        s.fit(trials=TRIALS, seed=7, progress=False)
        m = s.fit_map(tile=(12, 12), trials=TRIALS, seed=7, progress=False)
        before = m.reconstruct().phase_hash()
        s.load_scan(scans[1])
        assert not s.maps
        with pytest.raises(MapSessionError, match="load_scan"):
            m.reconstruct()
        s.fit(trials=TRIALS, seed=7, progress=False)
        assert s.reconstruct_map(m).phase_hash() != before  # asked for: the new scan's
