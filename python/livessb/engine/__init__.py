"""Compute backends behind one protocol: NumPy on the host, CuPy on CUDA."""

from __future__ import annotations

import os
import sys
from typing import Any

from ..dataset import Dataset4D

# Libraries whose import may already have initialised CUDA in this process.
_CUDA_LIBRARIES = ("cupy", "torch", "jax", "numba.cuda", "pycuda")


class DeviceUnavailableError(RuntimeError):
    """device='cuda' was asked for but no usable CUDA GPU/CuPy is present."""


def prefer_eager_module_loading() -> bool:
    """Ask CUDA to load kernels when a library loads, not at their first launch.

    With CUDA's default lazy loading, cuFFT loads the kernels of a transform size the
    first time it runs: 30–110 ms whenever a region of a new size is prepared (measured
    on the H200), more than the rest of that region's workflow. Eager loading showed no
    start-up cost for CuPy and cuFFT. The setting applies process-wide from the driver's
    initialisation, so it is made only where the user has not chosen one and no CUDA
    library has been imported yet; other CUDA libraries then load eagerly too (Torch's
    start-up took 1.5 s longer): set CUDA_MODULE_LOADING=LAZY to keep CUDA's default.
    Returns whether it was set here.
    """
    if "CUDA_MODULE_LOADING" in os.environ or any(m in sys.modules for m in _CUDA_LIBRARIES):
        return False
    os.environ["CUDA_MODULE_LOADING"] = "EAGER"
    return True


def cuda_available() -> bool:
    prefer_eager_module_loading()
    try:
        import cupy

        return bool(cupy.cuda.runtime.getDeviceCount() > 0)
    except Exception:  # ImportError, CUDARuntimeError: no usable GPU either way
        return False


def make_engine(dataset: Dataset4D, device: str = "auto", **options: Any) -> Any:
    """The engine for ``device``: "cpu", "cuda" (never a silent fallback) or "auto"."""
    if device not in ("auto", "cpu", "cuda"):
        raise ValueError(f"device must be 'auto', 'cpu' or 'cuda', got {device!r}")
    if device == "cuda" and not cuda_available():
        raise DeviceUnavailableError(
            "device='cuda' needs CuPy and a CUDA GPU, and none is usable here: install "
            "livessb[cuda] on a GPU machine, or pass device='cpu' (or 'auto')")
    if device == "cuda" or (device == "auto" and cuda_available()):
        from .cuda import CUDAEngine

        return CUDAEngine(dataset, **options)
    from .cpu import CPUEngine

    return CPUEngine(dataset, **options)
