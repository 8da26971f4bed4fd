from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from livessb import Dataset4D, DatasetError
from livessb.io import CorruptFileError, FileFormatError, load


@pytest.mark.parametrize("dtype", [np.uint8, np.uint16, np.uint32, np.float32])
def test_npy_roundtrip_memmap(tmp_path: Path, make_counts: Any, cal: dict[str, Any],
                              dtype: Any) -> None:
    counts = make_counts(dtype=dtype)
    np.save(tmp_path / "c.npy", counts)
    ds = load(tmp_path / "c.npy", progress=False, **cal)
    assert isinstance(ds, Dataset4D)
    assert isinstance(ds.counts, np.memmap)
    assert ds.counts.dtype == dtype
    np.testing.assert_array_equal(np.asarray(ds.counts), counts)
    assert ds.voltage_kV == 200 and ds.scan_step_A == (0.5, 0.5)


def test_npy_3d_needs_scan_shape(tmp_path: Path, make_counts: Any, cal: dict[str, Any]) -> None:
    counts = make_counts()
    np.save(tmp_path / "c.npy", counts.reshape(64, 16, 16))
    with pytest.raises(DatasetError, match="scan_shape"):
        load(tmp_path / "c.npy", progress=False, **cal)
    ds = load(tmp_path / "c.npy", scan_shape=(8, 8), progress=False, **cal)
    np.testing.assert_array_equal(np.asarray(ds.counts), counts)
    with pytest.raises(DatasetError, match=r"needs 63 frames but the file has 64.*\(8, 8\)"):
        load(tmp_path / "c.npy", scan_shape=(9, 7), progress=False, **cal)
    with pytest.raises(DatasetError, match="does not match"):
        np.save(tmp_path / "d.npy", counts)
        load(tmp_path / "d.npy", scan_shape=(4, 16), progress=False, **cal)


def test_npy_scan_region_is_a_view(tmp_path: Path, make_counts: Any, cal: dict[str, Any]) -> None:
    counts = make_counts(scan=(12, 10))
    np.save(tmp_path / "c.npy", counts.reshape(120, 16, 16))
    ds = load(tmp_path / "c.npy", scan_shape=(12, 10), scan_region=(2, 8, 3, 9),
              progress=False, **cal)
    assert isinstance(ds.counts, np.memmap)
    np.testing.assert_array_equal(np.asarray(ds.counts), counts[2:8, 3:9])
    for bad in [(0, 13, 0, 4), (5, 5, 0, 4), (0, 4), "abc"]:
        with pytest.raises(DatasetError, match="scan_region"):
            load(tmp_path / "c.npy", scan_shape=(12, 10), scan_region=bad,  # type: ignore[arg-type]
                 progress=False, **cal)


def test_npz_metadata_and_user_wins(tmp_path: Path, make_counts: Any) -> None:
    counts = make_counts()
    np.savez(tmp_path / "c.npz", counts=counts, voltage_kV=300.0, semiangle_mrad=25.0,
             scan_step_A=np.array([0.4, 0.6]), detector_sampling_mrad=6.0)
    ds = load(tmp_path / "c.npz", progress=False)
    np.testing.assert_array_equal(ds.counts, counts)
    assert ds.counts.dtype == counts.dtype
    assert (ds.voltage_kV, ds.semiangle_mrad, ds.scan_step_A) == (300.0, 25.0, (0.4, 0.6))
    assert ds.detector_sampling_mrad == 6.0 and not ds.detector_sampling_derived
    ds = load(tmp_path / "c.npz", voltage_kV=80, scan_step_A=1.0, progress=False)
    assert ds.voltage_kV == 80 and ds.scan_step_A == (1.0, 1.0) and ds.semiangle_mrad == 25.0


def test_npz_json_metadata_member(tmp_path: Path, make_counts: Any) -> None:
    meta = ('{"accelerating_voltage": "60 kV", "convergence_semiangle": "0.03 rad", '
            '"step_size": "0.05 nm"}')
    np.savez_compressed(tmp_path / "c.npz", data=make_counts(), metadata=np.array(meta))
    ds = load(tmp_path / "c.npz", progress=False)
    assert ds.voltage_kV == 60
    assert ds.semiangle_mrad == pytest.approx(30)
    assert ds.scan_step_A == pytest.approx((0.5, 0.5))


def test_npz_ambiguous_and_dataset_path(tmp_path: Path, make_counts: Any,
                                        cal: dict[str, Any]) -> None:
    a, b = make_counts(seed=1), make_counts(seed=2)
    np.savez(tmp_path / "c.npz", a=a, b=b)
    with pytest.raises(FileFormatError, match=r"dataset_path.*") as err:
        load(tmp_path / "c.npz", progress=False, **cal)
    assert "'a'" in str(err.value) and "'b'" in str(err.value)
    ds = load(tmp_path / "c.npz", dataset_path="b", progress=False, **cal)
    np.testing.assert_array_equal(ds.counts, b)
    with pytest.raises(FileFormatError, match="no member 'x'"):
        load(tmp_path / "c.npz", dataset_path="x", progress=False, **cal)


def test_missing_calibration_raises_dataset_error(tmp_path: Path, make_counts: Any) -> None:
    np.save(tmp_path / "c.npy", make_counts())
    with pytest.raises(DatasetError, match="voltage_kV is missing"):
        load(tmp_path / "c.npy", semiangle_mrad=20, scan_step_A=0.5, progress=False)
    with pytest.raises(DatasetError, match="unknown keyword"):
        load(tmp_path / "c.npy", voltage=200, progress=False)


def test_bad_files(tmp_path: Path, make_counts: Any, cal: dict[str, Any]) -> None:
    np.save(tmp_path / "c.npy", make_counts())
    raw = (tmp_path / "c.npy").read_bytes()
    (tmp_path / "t.npy").write_bytes(raw[: len(raw) // 2])
    with pytest.raises(CorruptFileError, match="truncated"):
        load(tmp_path / "t.npy", progress=False, **cal)
    (tmp_path / "g.npz").write_bytes(b"PK\x03\x04 not really a zip")
    with pytest.raises(OSError, match="npz"):
        load(tmp_path / "g.npz", progress=False, **cal)
    (tmp_path / "x.dm4").write_bytes(b"xxxx")
    # Unsupported without rosettasciio, unreadable with it: both name the file and the tool.
    with pytest.raises(FileFormatError, match=r"\.dm4.*rosettasciio"):
        load(tmp_path / "x.dm4", **cal)
    with pytest.raises(FileNotFoundError):
        load(tmp_path / "missing.npy", **cal)


def test_unsupported_dtypes_are_converted(tmp_path: Path, make_counts: Any,
                                         cal: dict[str, Any]) -> None:
    counts = make_counts()
    np.save(tmp_path / "i.npy", counts.astype(np.int32))
    ds = load(tmp_path / "i.npy", progress=False, **cal)
    assert ds.counts.dtype == np.uint32
    np.testing.assert_array_equal(ds.counts, counts)
    np.save(tmp_path / "f.npy", counts.astype(np.float64))
    assert load(tmp_path / "f.npy", progress=False, **cal).counts.dtype == np.float32
    neg = counts.astype(np.int16)
    neg[3, 4, 0, 0] = -5
    np.save(tmp_path / "n.npy", neg)
    with pytest.raises(DatasetError, match=r"negative counts in frame \(row 3, col 4\)"):
        load(tmp_path / "n.npy", progress=False, **cal)
