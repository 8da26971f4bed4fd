"""NumPy/SciPy engine: float64 on the host (tests, CI, laptops)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..dataset import Dataset4D
from .array_engine import ArrayEngine


class CPUEngine(ArrayEngine):
    name = "cpu"

    def __init__(self, dataset: Dataset4D, **options: Any) -> None:
        super().__init__(dataset, np, real_dtype=np.float64, **options)
