"""The embedded demo dataset (what ``livessb demo`` shows) and its settings."""

from __future__ import annotations

import functools
import typing
from typing import Any

from ..dataset import Dataset4D
from .forward import simulate_4dstem
from .truth import SimulationTruth

DEMO_SETTINGS: dict[str, Any] = {
    "scan_shape": (96, 96),
    "detector_shape": (48, 48),
    "scan_step_A": 0.6,
    "voltage_kV": 200,
    "semiangle_mrad": 20,
    "aberrations": {"C10": -50.0, "C12": 15.0, "phi12": 0.5},
    "depth_A": 0.0,
    "tilt_mrad": (0.0, 0.0),
    "defocus_gradient": (0.0, 0.8),
    "rotation_deg": 12.0,
    "transpose": False,
    "dose": 5e4,
    "phase_peak_rad": 0.2,
    "seed": 2026,
}


@functools.lru_cache(maxsize=1)
def _demo() -> tuple[Dataset4D, SimulationTruth]:
    return simulate_4dstem(**DEMO_SETTINGS)


@typing.overload
def demo_dataset(with_truth: typing.Literal[False] = False) -> Dataset4D: ...
@typing.overload
def demo_dataset(with_truth: typing.Literal[True]) -> tuple[Dataset4D, SimulationTruth]: ...
def demo_dataset(with_truth: bool = False) -> Dataset4D | tuple[Dataset4D, SimulationTruth]:
    """The embedded default dataset (what ``livessb demo`` shows), with known truth.

    96×96 scan (0.6 Å step) × 48×48 detector, uint16 Poisson counts at 5·10⁴
    e⁻/position, 200 kV, 20 mrad, SrTiO3-like weak-phase crystal (0.2 rad peak),
    C10 = -50 Å at the scan centre with a defocus gradient of 0.8 Å per scan
    column (C10 from -88 Å on the left to -12 Å on the right), C12 = 15 Å,
    phi12 = 0.5 rad, depth 0, scan/detector rotation 12°, no transpose.
    Deterministic. Cached in-process: every call returns the *same* objects
    (do not modify their counts in place).
    """
    ds, truth = _demo()
    return (ds, truth) if with_truth else ds
