from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from helpers import disk_counts
from livessb import Dataset4D, DatasetError

CAL: dict[str, Any] = {"voltage_kV": 200, "semiangle_mrad": 20, "scan_step_A": 0.5}


@pytest.mark.parametrize("dtype", [np.uint8, np.uint16, np.uint32, np.float32])
def test_supported_dtypes_kept_native(dtype: type) -> None:
    ds = Dataset4D(disk_counts(dtype=dtype), **CAL)
    assert ds.counts.dtype == dtype
    assert ds.detector_sampling_derived
    assert ds.bright_field.radius_px == pytest.approx(6.0, abs=0.6)
    assert ds.detector_sampling_mrad == pytest.approx(20 / ds.bright_field.radius_px)


def test_three_d_counts_need_scan_shape() -> None:
    c = disk_counts().reshape(144, 24, 24)
    with pytest.raises(DatasetError, match="scan_shape"):
        Dataset4D(c, **CAL)
    assert Dataset4D(c, scan_shape=(12, 12), **CAL).scan_shape == (12, 12)
    with pytest.raises(DatasetError, match="holds 150 positions"):
        Dataset4D(c, scan_shape=(10, 15), **CAL)


@pytest.mark.parametrize(("mutate", "message"), [
    (lambda c: c[0, 0], "must be 4D"),
    (lambda c: c.astype(np.float64), "dtype float64 is not supported"),
    (lambda c: np.where(np.arange(24) == 3, np.nan, c.astype(np.float32)).astype(np.float32),
     "NaN or inf"),
    (lambda c: c.astype(np.float32) - 1000, "negative"),
])
def test_bad_counts_raise_clear_errors(
        mutate: Callable[[np.ndarray], np.ndarray], message: str) -> None:
    with pytest.raises(DatasetError, match=message):
        Dataset4D(mutate(disk_counts()), **CAL)


@pytest.mark.parametrize(("key", "value", "message"), [
    ("voltage_kV", None, "voltage_kV is missing"),
    ("semiangle_mrad", -3, "semiangle_mrad must be positive"),
    ("scan_step_A", None, "scan_step_A is missing"),
    ("scan_step_A", (0.5, 0.0), "positive"),
    ("scan_step_A", (1, 2, 3), "scalar or"),
])
def test_missing_or_bad_calibration_raises(key: str, value: object, message: str) -> None:
    cal = dict(CAL, **{key: value})
    with pytest.raises(DatasetError, match=message):
        Dataset4D(disk_counts(), **cal)  # type: ignore[arg-type]


def test_disk_must_fit_on_detector() -> None:
    with pytest.raises(DatasetError, match="does not fit"):
        Dataset4D(disk_counts(), detector_sampling_mrad=1.0, **CAL)
    with pytest.raises(DatasetError, match="empty"):
        Dataset4D(np.zeros((8, 8, 16, 16), np.uint16), **CAL)


def test_signature_changes_with_content() -> None:
    a = Dataset4D(disk_counts(seed=0), **CAL).signature()
    b = Dataset4D(disk_counts(seed=1), **CAL).signature()
    assert a["shape"] == b["shape"] and a["content_sha256"] != b["content_sha256"]


def test_detector_pixels_say_how_the_detector_samples(tmp_path: Any) -> None:
    from livessb import load
    from livessb.simulate import simulate_4dstem

    assert Dataset4D(disk_counts(), **CAL).detector_pixels == "integrating"  # a camera
    with pytest.raises(DatasetError, match=r"integrating.*points"):
        Dataset4D(disk_counts(), detector_pixels="point", **CAL)
    path = tmp_path / "sim.npy"
    np.save(path, disk_counts())
    assert load(path, progress=False, detector_pixels="points", **CAL).detector_pixels \
        == "points"
    # binned pixels sum their bin's area, whatever the file's were
    assert load(path, progress=False, detector_pixels="points", bin_detector=2,
                **CAL).detector_pixels == "integrating"
    with pytest.raises(DatasetError, match="detector_pixels='pixel'"):
        load(path, progress=False, detector_pixels="pixel", **CAL)
    ds, _ = simulate_4dstem(scan_shape=(4, 4), detector_shape=(24, 24), seed=0)
    assert ds.detector_pixels == "points"  # the simulator reads each pixel's centre
