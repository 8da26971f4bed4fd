"""Compute backends behind one protocol: NumPy on the host, CuPy on CUDA."""

from __future__ import annotations

from typing import Any

from ..dataset import Dataset4D
from .protocol import Engine


class DeviceUnavailableError(RuntimeError):
    """device='cuda' was asked for but no usable CUDA GPU/CuPy is present."""


def cuda_available() -> bool:
    try:
        import cupy

        return bool(cupy.cuda.runtime.getDeviceCount() > 0)
    except Exception:  # ImportError, CUDARuntimeError: no usable GPU either way
        return False


def make_engine(dataset: Dataset4D, device: str = "auto", **options: Any) -> Engine:
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
