"""Small synthetic inputs for unit tests that need counts but not physics truth."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from livessb import Dataset4D

ABTEM_FIXTURES = Path(__file__).parent / "fixtures" / "abtem"


def disk_counts(
    scan: tuple[int, int] = (12, 12), det: int = 24, radius: float = 6.0, seed: int = 0,
    dtype: type = np.uint16,
) -> np.ndarray:
    """Poisson counts of a BF disk whose intensity varies randomly over the scan."""
    rng = np.random.default_rng(seed)
    kr, kc = np.meshgrid(np.arange(det), np.arange(det), indexing="ij")
    c = (det - 1) / 2 + 0.3
    disk = ((kr - c) ** 2 + (kc - c + 0.5) ** 2 <= radius**2).astype(float)
    mod = 1 + 0.2 * rng.standard_normal((*scan, det, det)) * disk
    lam = 200 * disk * mod + 0.5
    return rng.poisson(np.clip(lam, 0, None)).astype(dtype)


def disk_dataset(**kw: object) -> Dataset4D:
    return Dataset4D(disk_counts(**kw), voltage_kV=200, semiangle_mrad=20, scan_step_A=0.5)  # type: ignore[arg-type]


def with_counts(ds: Dataset4D, counts: np.ndarray) -> Dataset4D:
    """A dataset of other ``counts`` with ``ds``'s calibration (e.g. a hot pixel added)."""
    return Dataset4D(counts, voltage_kV=ds.voltage_kV, semiangle_mrad=ds.semiangle_mrad,
                     scan_step_A=ds.scan_step_A, detector_sampling_mrad=ds.detector_sampling_mrad)


def require(available: bool, reason: str) -> None:
    """Skip a module whose tools are missing, except where CI demands them (then fail)."""
    import os

    import pytest

    if available:
        return
    if os.environ.get("LIVESSB_REQUIRE_ALL"):
        raise RuntimeError(f"required for this run but missing: {reason}")
    pytest.skip(reason, allow_module_level=True)


def importable(name: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(name) is not None


def check_installed_location(module_file: str) -> None:
    """With LIVESSB_EXPECT_INSTALLED=1 (scripts/test.sh), livessb must come from the
    virtual environment's site-packages, never the checkout's python/ folder."""
    import os
    from pathlib import Path

    if not os.environ.get("LIVESSB_EXPECT_INSTALLED"):
        return
    path = Path(module_file).resolve()
    checkout = Path(__file__).resolve().parents[1] / "python"
    assert "site-packages" in path.parts, f"livessb imported from {path}, not site-packages"
    assert checkout not in path.parents, f"livessb imported from the checkout: {path}"


def abtem_fixture(name: str, scan: int | None = None) -> Dataset4D:
    """An abTEM fixture (tests/fixtures/abtem) as a dataset, its first ``scan`` × ``scan``
    positions when given."""
    d = np.load(ABTEM_FIXTURES / f"{name}.npz")
    counts = d["counts"] if scan is None else d["counts"][:scan, :scan]
    return Dataset4D(counts, voltage_kV=float(d["voltage_kV"]),
                     semiangle_mrad=float(d["semiangle_mrad"]),
                     scan_step_A=tuple(d["scan_step_A"]),
                     detector_sampling_mrad=float(d["detector_sampling_mrad"]),
                     detector_pixels="points")
