"""The CPU engine's reconstruction kernel (phase tables per detector row and column)
against the NumPy reference path, float64, before the image is cast to complex64."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pytest

from helpers import disk_dataset
from livessb.engine.cpu import CPUEngine
from livessb.params import JOINT

if TYPE_CHECKING:
    from livessb.engine.cpu import HostSpectra


@pytest.fixture(scope="module")
def engines() -> tuple[CPUEngine, HostSpectra, CPUEngine, HostSpectra]:
    ds = disk_dataset(scan=(12, 14), det=24, radius=6)
    fast, ref = CPUEngine(ds), CPUEngine(ds, kernels=False)
    return fast, fast.prepare(), ref, ref.prepare()


@pytest.mark.parametrize("theta,transpose", [(0.4, True), (3.5, False)])
@pytest.mark.parametrize("vector", [
    [-40.0, 15.0, -1.1, 0.0, 0.0, 0.0],
    [-40.0, 15.0, -1.1, 4.0, -7.0, 120.0],
    [5.0, 0.5, 1.4, -12.0, 3.0, -400.0],
])
@pytest.mark.parametrize("upsample", [1, 2, 3])
@pytest.mark.parametrize("method", ["ssb", "wiener"])
def test_kernel_reconstruction_matches_numpy_reference(
        engines: tuple[CPUEngine, HostSpectra, CPUEngine, HostSpectra], theta: float,
        transpose: bool, vector: list[float], upsample: int, method: str) -> None:
    fast, sp_fast, ref, sp_ref = engines
    params = dict(zip(JOINT, vector, strict=True))
    fast.set_rotation(sp_fast, theta, transpose)
    ref.set_rotation(sp_ref, theta, transpose)
    O = fast.object_spectrum(sp_fast, params, upsample, method)
    grids, index, conj = ref.reference.fine_grids(sp_ref, sp_ref.part.geometry, upsample)
    if method == "ssb":
        O_ref = ref.reference.ssb_spectrum(sp_ref, params, grids, index, conj)
    else:
        O_ref = ref.reference._wiener_spectrum(sp_ref, params, grids, index, conj)
    assert np.abs(O_ref).max() > 0
    np.testing.assert_allclose(O, O_ref, rtol=0, atol=1e-10 * np.abs(O_ref).max())
    image = fast.reconstruct(sp_fast, params, upsample, method)
    image_ref = ref.reconstruct(sp_ref, params, upsample, method)
    assert image.dtype == image_ref.dtype == np.complex64
    np.testing.assert_allclose(image, image_ref, rtol=0, atol=1e-6 * np.abs(image_ref).max())


def test_returning_to_a_rotation_reuses_its_geometry_with_the_same_results(
        engines: tuple[CPUEngine, HostSpectra, CPUEngine, HostSpectra]) -> None:
    fast, sp, _, _ = engines
    params = dict(zip(JOINT, [-40.0, 15.0, -1.1, 4.0, -7.0, 120.0], strict=True))
    cand = np.array([list(params.values())])
    fast.set_rotation(sp, 0.4, True)
    before = (fast.evaluate(sp, cand), fast.reconstruct(sp, params, 2), sp.energy)
    grids = sp.part.geometry.grids
    fast.set_rotation(sp, 1.1, False)
    other = fast.evaluate(sp, cand)
    fast.set_rotation(sp, 0.4, True)
    assert sp.part.geometry.grids is grids  # kept, not rebuilt
    after = (fast.evaluate(sp, cand), fast.reconstruct(sp, params, 2), sp.energy)
    assert other[0] != before[0][0]
    np.testing.assert_array_equal(after[0], before[0])
    np.testing.assert_array_equal(after[1], before[1])
    assert after[2] == before[2]
    fresh = CPUEngine(disk_dataset(scan=(12, 14), det=24, radius=6))
    sp_fresh = fresh.prepare()
    fresh.set_rotation(sp_fresh, 0.4, True)
    np.testing.assert_array_equal(fresh.evaluate(sp_fresh, cand), before[0])
