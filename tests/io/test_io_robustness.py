"""Bad inputs of every kind: each gives a clear error or a documented, tested handling."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pytest

from livessb import DatasetError
from livessb.io import load


def _h5(path: Path, counts: np.ndarray) -> Path:
    with h5py.File(path, "w") as f:
        f.create_dataset("counts", data=counts, chunks=(1, 1, *counts.shape[2:]))
    return path


@pytest.mark.parametrize("suffix", [".npy", ".h5"])
def test_zero_count_frames_are_allowed_silently(tmp_path: Path, make_counts: Any,
                                                cal: dict[str, Any], suffix: str) -> None:
    counts = make_counts()
    counts[2, 3] = 0
    counts[5, 0] = 0
    path = tmp_path / f"c{suffix}"
    np.save(path, counts) if suffix == ".npy" else _h5(path, counts)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ds = load(path, progress=False, **cal)
    np.testing.assert_array_equal(np.asarray(ds.counts), counts)


@pytest.mark.parametrize("suffix", [".npy", ".h5"])
def test_dead_row_loads_with_a_warning(tmp_path: Path, make_counts: Any, cal: dict[str, Any],
                                       suffix: str) -> None:
    counts = make_counts()
    counts[4] = 0
    path = tmp_path / f"c{suffix}"
    np.save(path, counts) if suffix == ".npy" else _h5(path, counts)
    with pytest.warns(UserWarning, match=r"scan row\(s\) \[4\].*dead rows") as rec:
        ds = load(path, progress=False, **cal)
    assert len([w for w in rec if "dead" in str(w.message)]) == 1
    np.testing.assert_array_equal(np.asarray(ds.counts), counts)
    with pytest.warns(UserWarning, match=r"scan row\(s\) \[4\]"):  # file coordinates
        load(path, scan_region=(2, 8, 0, 8), progress=False, **cal)


def test_dead_column_warns(tmp_path: Path, make_counts: Any, cal: dict[str, Any]) -> None:
    counts = make_counts()
    counts[:, 6] = 0
    np.save(tmp_path / "c.npy", counts)
    with pytest.warns(UserWarning, match=r"scan column\(s\) \[6\]"):
        load(tmp_path / "c.npy", progress=False, **cal)


@pytest.mark.parametrize("dtype", [np.uint8, np.uint16])
def test_saturation_warns_once_with_fraction(tmp_path: Path, make_counts: Any,
                                             cal: dict[str, Any], dtype: Any) -> None:
    counts = make_counts(dtype=dtype)
    if dtype == np.uint16:
        counts *= 300  # a bright disk, so two hot pixels do not dominate the mean pattern
    top = np.iinfo(dtype).max
    counts[1, 1, 7, 7] = top
    counts[6, 2, 8, 8] = top
    _h5(tmp_path / "c.h5", counts)
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        ds = load(tmp_path / "c.h5", progress=False, **cal)
    sat = [w for w in rec if "saturated" in str(w.message)]
    assert len(sat) == 1
    frac = 2 / counts.size
    assert f"{frac:.3%}" in str(sat[0].message)
    assert f"2 of {counts.size}" in str(sat[0].message)
    np.testing.assert_array_equal(ds.counts, counts)


@pytest.mark.parametrize("suffix", [".npy", ".h5"])
def test_all_nan_frame_names_the_frame(tmp_path: Path, make_counts: Any, cal: dict[str, Any],
                                       suffix: str) -> None:
    counts = make_counts(dtype=np.float32)
    counts[3, 5] = np.nan
    path = tmp_path / f"c{suffix}"
    np.save(path, counts) if suffix == ".npy" else _h5(path, counts)
    with pytest.raises(DatasetError, match=r"frame \(scan row 3, col 5\) is all NaN"):
        load(path, progress=False, **cal)
    # Excluding it with a scan region works.
    ds = load(path, scan_region=(4, 8, 0, 8), progress=False, **cal)
    assert np.isfinite(ds.counts).all()


def test_partial_nan_and_inf(tmp_path: Path, make_counts: Any, cal: dict[str, Any]) -> None:
    counts = make_counts(dtype=np.float32)
    counts[0, 1, 2, 2] = np.inf
    counts[0, 1, 3, 3] = np.nan
    np.save(tmp_path / "c.npy", counts)
    with pytest.raises(DatasetError, match=r"frame \(scan row 0, col 1\) has 2 NaN/inf"):
        load(tmp_path / "c.npy", progress=False, **cal)


def test_everything_zero_is_a_clear_error(tmp_path: Path, cal: dict[str, Any]) -> None:
    np.save(tmp_path / "z.npy", np.zeros((8, 8, 16, 16), np.uint16))
    with pytest.raises(DatasetError, match="empty"):
        load(tmp_path / "z.npy", progress=False, **cal)


def test_wrong_dimensionality(tmp_path: Path, cal: dict[str, Any]) -> None:
    np.save(tmp_path / "c.npy", np.ones((16, 16), np.uint16))
    with pytest.raises(DatasetError, match="2D"):
        load(tmp_path / "c.npy", progress=False, **cal)


def test_binning_is_explicit_and_updates_sampling(tmp_path: Path, make_counts: Any,
                                                  cal: dict[str, Any]) -> None:
    counts = make_counts(det=(32, 32), radius=8)
    np.save(tmp_path / "c.npy", counts)
    plain = load(tmp_path / "c.npy", progress=False, **cal)
    assert plain.detector_shape == (32, 32)
    binned = load(tmp_path / "c.npy", bin_detector=2, progress=False, **cal)
    assert binned.detector_shape == (16, 16) and binned.counts.dtype == np.uint32
    np.testing.assert_array_equal(
        binned.counts, counts.reshape(8, 8, 16, 2, 16, 2).sum(axis=(3, 5)))
    assert binned.detector_sampling_mrad == pytest.approx(
        2 * plain.detector_sampling_mrad, rel=0.1)  # derived from the binned disk
    explicit = load(tmp_path / "c.npy", bin_detector=2, detector_sampling_mrad=2.5,
                    progress=False, **cal)
    assert explicit.detector_sampling_mrad == 5.0
    with pytest.warns(UserWarning, match="not a multiple of 3"):
        odd = load(tmp_path / "c.npy", bin_detector=3, progress=False, **cal)
    assert odd.detector_shape == (10, 10)
    for bad in (0, -1, 1.5, True):
        with pytest.raises(DatasetError, match="bin_detector"):
            load(tmp_path / "c.npy", bin_detector=bad, progress=False, **cal)  # type: ignore[arg-type]


def test_crop_to_bf_keeps_disk_and_sampling(tmp_path: Path, make_counts: Any,
                                            cal: dict[str, Any]) -> None:
    counts = make_counts(det=(48, 48), radius=6)
    _h5(tmp_path / "c.h5", counts)
    full = load(tmp_path / "c.h5", detector_sampling_mrad=3.3, progress=False, **cal)
    crop = load(tmp_path / "c.h5", crop_to_bf=True, detector_sampling_mrad=3.3,
                progress=False, **cal)
    assert crop.detector_shape[0] < 48 and crop.detector_shape[1] < 48
    assert crop.detector_sampling_mrad == 3.3
    assert crop.counts.dtype == counts.dtype
    assert crop.counts.sum(dtype=np.int64) == counts.sum(dtype=np.int64)  # disk kept whole
    assert crop.bright_field.radius_px == pytest.approx(full.bright_field.radius_px)
    margin = crop.bright_field.center_row - crop.bright_field.radius_px
    assert margin >= 4 - 1
    small = load(tmp_path / "c.h5", crop_to_bf=0, progress=False, **cal)
    assert small.detector_shape[0] < crop.detector_shape[0]
    both = load(tmp_path / "c.h5", crop_to_bf=True, bin_detector=2, progress=False, **cal)
    assert both.detector_shape[0] < 24
    with pytest.raises(DatasetError, match="crop_to_bf"):
        load(tmp_path / "c.h5", crop_to_bf=-3, progress=False, **cal)
