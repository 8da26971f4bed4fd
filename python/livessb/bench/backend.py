"""What the runner needs of a device: its name, memory-pool figures, a synthetic dataset.

``cuda``: CuPy's default pool and the device-side generator (``device_data``), the
reference workload. ``cpu``: no pool, the host simulator (``livessb.simulate``): a
small end-to-end run of the same runner (tests, machines without a GPU).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..dataset import Dataset4D
from .device_data import DeviceTruth
from .workload import ABERRATIONS, DEFOCUS_GRADIENT, ROTATION_DEG, SCAN_STEP_A


@dataclass(frozen=True)
class Backend:
    device_name: str
    pool_figures: Callable[[], dict[str, int]]  # {"used_bytes", "total_bytes"}
    free_pool: Callable[[], None]
    generate: Callable[..., tuple[Dataset4D, DeviceTruth]]  # (scan, detector, dtype, seed)


def cuda_backend() -> Backend:
    import cupy as cp

    from ..engine.cuda.memory import wait_for_release
    from .device_data import generate_dataset

    pool = cp.get_default_memory_pool()

    def figures() -> dict[str, int]:  # once a closed session's memory is back
        wait_for_release()
        return {"used_bytes": int(pool.used_bytes()), "total_bytes": int(pool.total_bytes())}

    def generate(scan: tuple[int, int], detector: tuple[int, int], dtype: str,
                 seed: int) -> tuple[Dataset4D, DeviceTruth]:
        return generate_dataset(scan=scan, detector=detector, dtype=dtype, seed=seed)

    return Backend(device_name=cp.cuda.runtime.getDeviceProperties(0)["name"].decode(),
                   pool_figures=figures, free_pool=pool.free_all_blocks, generate=generate)


def cpu_backend() -> Backend:
    import platform

    def generate(scan: tuple[int, int], detector: tuple[int, int], dtype: str,
                 seed: int) -> tuple[Dataset4D, DeviceTruth]:
        from ..simulate import simulate_4dstem

        t0 = time.perf_counter()
        dt = np.dtype(dtype)
        dose = None if dt == np.float32 else 2e4
        ds, truth = simulate_4dstem(
            scan_shape=scan, detector_shape=detector, scan_step_A=SCAN_STEP_A,
            aberrations=ABERRATIONS, defocus_gradient=DEFOCUS_GRADIENT,
            rotation_deg=ROTATION_DEG, dose=dose, dtype=dt, seed=seed)
        record = DeviceTruth(
            params=dict(truth.params), rotation_deg=truth.rotation_deg,
            defocus_gradient=truth.defocus_gradient, scan_shape=truth.scan_shape,
            detector_shape=truth.detector_shape, scan_step_A=truth.scan_step_A,
            bf_radius_px=float(ds.bright_field.radius_px), dose=float(dose or 0.0), seed=seed,
            generate_s=time.perf_counter() - t0, extra={"dtype": str(dt)})
        return ds, record

    def no_pool() -> dict[str, int]:
        return {"used_bytes": 0, "total_bytes": 0}

    return Backend(device_name=platform.processor() or platform.machine(),
                   pool_figures=no_pool, free_pool=lambda: None, generate=generate)


def backend_for(device: str) -> Backend:
    if device == "cpu":
        return cpu_backend()
    from ..engine import DeviceUnavailableError, cuda_available

    if not cuda_available():
        raise DeviceUnavailableError(
            "the benchmark runs on a CUDA GPU by default and none is usable here (CuPy "
            "missing or no device): install livessb[cuda] on a GPU machine, or pass "
            "--device cpu for the same workload on the CPU engine")
    return cuda_backend()
