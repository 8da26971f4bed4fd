"""The CUDA test modules' skip: ``from cuda_skip import cp, pytestmark`` first thing in a
module skips it without CuPy (importorskip) or without a CUDA device (the marks)."""

from __future__ import annotations

import pytest

cp = pytest.importorskip("cupy")
try:
    _N_DEV = cp.cuda.runtime.getDeviceCount()
except Exception:  # CUDARuntimeError: driver without a device
    _N_DEV = 0
pytestmark = [pytest.mark.cuda, pytest.mark.skipif(_N_DEV < 1, reason="needs a CUDA GPU")]
