"""The CUDA engine (CuPy), split by concern:

* ``engine``: ``CUDAEngine``, the protocol's operations over the fused kernels;
* ``launch``: launch geometry and the kernels' argument records (signature order);
* ``memory``: pools, cuFFT plans, out-of-memory messages, the BF upload, buffers;
* ``records``: the engine's typed part of a prepared-spectra record;
* ``timing``: the stage-timing decorator.

Importing this package does not import CuPy; constructing a ``CUDAEngine`` does.
"""

from __future__ import annotations

from .engine import CUDAEngine
from .memory import device_array_of, plan_pool_bytes

__all__ = ["CUDAEngine", "device_array_of", "plan_pool_bytes"]
