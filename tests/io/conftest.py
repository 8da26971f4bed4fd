"""Small synthetic 4D-STEM counts (a bright-field disk) for the loader tests."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

CAL: dict[str, Any] = {"voltage_kV": 200.0, "semiangle_mrad": 20.0, "scan_step_A": 0.5}


def disk_counts(scan: tuple[int, int] = (8, 8), det: tuple[int, int] = (16, 16),
                radius: float = 4.0, dtype: Any = np.uint16, seed: int = 0) -> np.ndarray:
    """Poisson counts inside a centred disk, zero outside (no simulator needed)."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[:det[0], :det[1]]
    cy, cx = (det[0] - 1) / 2, (det[1] - 1) / 2
    disk = (y - cy) ** 2 + (x - cx) ** 2 <= radius**2
    counts = disk[None, None] * rng.poisson(100, (*scan, *det))
    return counts.astype(dtype)


@pytest.fixture
def make_counts() -> Callable[..., np.ndarray]:
    return disk_counts


@pytest.fixture
def cal() -> dict[str, Any]:
    return dict(CAL)


def need(module: str) -> Any:
    """Import an optional tool the dev extra installs; skip without it, except where CI
    demands every tool (LIVESSB_REQUIRE_ALL: then a missing one fails)."""
    import importlib

    from helpers import importable, require

    require(importable(module.split(".")[0]), f"could not import {module} (the dev extra "
            "installs it: pip install -e '.[dev]')")
    return importlib.import_module(module)


@pytest.fixture
def py4dstem() -> Any:
    return need("py4DSTEM")


@pytest.fixture
def hyperspy() -> Any:
    return need("hyperspy.api")


@pytest.fixture
def tool() -> Callable[[str], Any]:
    """``tool("rsciio.arina")``: the module, as ``need`` imports it."""
    return need
