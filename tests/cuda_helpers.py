"""Engine set-ups the CUDA parity tests share (imported after their cupy skip)."""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import numpy as np

from cuda_skip import cp  # skips the importing module without CuPy
from livessb import Dataset4D
from livessb.engine.cpu import CPUEngine
from livessb.engine.cuda import CUDAEngine
from livessb.physics.geometry import estimate_rotation
from livessb.simulate import simulate_4dstem

if TYPE_CHECKING:
    from livessb.engine.cpu import HostSpectra
    from livessb.engine.cuda.engine import DeviceSpectra
    from livessb.physics.geometry import RotationEstimate
    from livessb.results import Bounds
    from livessb.simulate import SimulationTruth


def record(name: str, **values: Any) -> None:
    """What a parity test measured, appended to ``$LIVESSB_PARITY_LOG`` (JSON lines) when
    set: a device run keeps the deviations its tolerances were set from."""
    path = os.environ.get("LIVESSB_PARITY_LOG")
    if path:
        with open(path, "a") as f:
            f.write(json.dumps({"test": name, **values}, default=float) + "\n")


@contextlib.contextmanager
def cuda_prepared(ds: Dataset4D) -> Iterator[tuple[CUDAEngine, RotationEstimate, DeviceSpectra]]:
    """A CUDA engine with the full field prepared at its COM rotation; closed after."""
    eng = CUDAEngine(ds)
    try:
        yield eng, *prepared(eng, ds)
    finally:
        eng.close()


@contextlib.contextmanager
def both_prepared(ds: Dataset4D) -> Iterator[
        tuple[CPUEngine, CUDAEngine, RotationEstimate, HostSpectra, DeviceSpectra]]:
    """CPU and CUDA engines with the full field prepared at their COM rotation:
    (cpu, gpu, the device's rotation, cpu spectra, gpu spectra); closed after."""
    cpu, gpu = CPUEngine(ds), CUDAEngine(ds)
    try:
        _, sc = prepared(cpu, ds)
        rot, sg = prepared(gpu, ds)
        yield cpu, gpu, rot, sc, sg
    finally:
        cpu.close()
        gpu.close()


def every_pixel_mask(tiles: int, n_bf: int) -> Any:
    """One support-mask row listing every BF pixel (with mask stride 0: for all warps)."""
    every = np.zeros((tiles, 128), dtype=np.uint64)
    every.reshape(-1)[:n_bf] = 1
    row = (every.reshape(tiles, 4, 32) << np.arange(32, dtype=np.uint64)).sum(axis=-1)
    return cp.asarray(row.astype(np.uint32).ravel())


def prepared(
        engine: CPUEngine | CUDAEngine, ds: Dataset4D,
        bounds: Bounds | None = None) -> tuple[RotationEstimate, Any]:
    rot = estimate_rotation(engine.bf_center_of_mass(), ds.scan_step_A)
    sp = engine.prepare(bounds)
    engine.set_rotation(sp, rot.theta, rot.transpose)
    return rot, sp


def thick_slab() -> tuple[Dataset4D, SimulationTruth]:
    """The parity tests' thick, tilted slab: every one of the six parameters identified."""
    return simulate_4dstem(
        scan_shape=(32, 32), detector_shape=(32, 32), scan_step_A=0.6,
        aberrations={"C10": -40.0, "C12": 12.0, "phi12": 0.4}, depth_A=60.0,
        tilt_mrad=(4.0, -3.0), slice_A=20.0, rotation_deg=10.0, dose=2e4, seed=7)


def candidates(n: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    c = np.column_stack([rng.uniform(-200, 200, n), rng.uniform(0, 50, n),
                         rng.uniform(-1.5, 1.5, n), rng.uniform(-12, 12, n),
                         rng.uniform(-12, 12, n), rng.uniform(0, 300, n)])
    c[0, 5] = 0.0
    c[1] = [-40, 12, 0.4, 4, -3, 60]
    return c
