"""The CUDA engine's host path to the device (skipped without a CUDA GPU): launches
through the driver with packed parameters give CuPy's call's bits, and the small-table
upload rings hand every table over intact, also when they wrap.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest

import cuda_helpers as ch
from cuda_skip import cp, pytestmark  # noqa: F401  (skips without a GPU)
from livessb import Session
from livessb.engine.cuda import driver_launch, uploads

if TYPE_CHECKING:
    from livessb import Dataset4D


@pytest.fixture(scope="module")
def thick() -> Dataset4D:
    return ch.thick_slab()[0]


def _run(ds: Dataset4D) -> dict[str, Any]:
    with Session(ds, device="cuda") as s:
        fit = s.fit(trials=40, seed=3, progress=False)
        region = s.fit_region((0, 24, 0, 24), trials=40, seed=3)
        m = s.fit_map(tile=(16, 16), trials=40, seed=3, progress=False)
        image = s.reconstruct(upsample=2).object
        blended = m.reconstruct(upsample=1).object
    return {"fit": (fit.params, fit.loss, fit.trials, fit.newton, fit.errors),
            "region": (region.fit.params, region.fit.errors),
            "map": [(f.params, f.errors) for row in m.fits for f in row],
            "images": [hashlib.sha256(np.ascontiguousarray(a).tobytes()).hexdigest()
                       for a in (image, blended)]}


def test_driver_launches_give_cupys_bits(thick: Dataset4D,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    with Session(thick, device="cuda"):
        pass
    # A CUDA machine has the driver library and the kernels' handles.
    assert driver_launch.ACTIVE is not None, driver_launch.INACTIVE_REASON
    driver = _run(thick)
    monkeypatch.setattr(driver_launch, "ACTIVE", None)
    assert repr(_run(thick)) == repr(driver)  # repr: NaN errors compare equal, bits exact


def test_uploads_arrive_intact_across_the_rings_wrap() -> None:
    rng = np.random.default_rng(0)
    rings = uploads.TableUploads(cp)
    tables = [rng.random((25, 8)) for _ in range(120)]  # 120 × 1.6 kB: < a half each round
    for _ in range(12):  # 12 × 120 × 1792 B ≈ 2.6 MB: the 1 MiB ring wraps twice
        on_device = [rings.put(t) for t in tables]
        for t, d in zip(tables, on_device, strict=True):
            np.testing.assert_array_equal(d.get(), t)
        tables = [t + 1.0 for t in tables]
    big = rng.random((uploads.HALF_BYTES // 8 + 1,))  # over a half: an ordinary copy
    np.testing.assert_array_equal(rings.put(big).get(), big)
    turn = np.tile([1.0, 0.0], (5, 1))  # (R, 2): the rotation scan's other table
    np.testing.assert_array_equal(rings.put(turn).get(), turn)
