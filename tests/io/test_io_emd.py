"""py4DSTEM / EMD 1.0 layout, written by hand (no py4DSTEM needed)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import h5py
import hdf5plugin
import numpy as np
import pytest

from livessb.io import FileFormatError, load, read_metadata
from livessb.physics.optics import wavelength_A


def _write_emd(path: Path, counts: np.ndarray, *, step: float = 0.05, step_units: str = "nm",
               q: float = 5.0, q_units: str = "mrad", zero_based: bool = False,
               linear_pairs: bool = False, group: str = "datacube",
               root_attrs: dict[str, Any] | None = None,
               metadata: dict[str, Any] | None = None) -> None:
    with h5py.File(path, "w") as f:
        f.attrs["emd_group_type"] = "root"
        f.attrs["version_major"] = 1
        f.attrs["version_minor"] = 0
        for k, v in (root_attrs or {}).items():
            f.attrs[k] = v
        g = f.create_group(f"experiment/data/{group}")
        g.attrs["emd_group_type"] = 1
        d = g.create_dataset("data", data=counts, chunks=(1, 1, *counts.shape[2:]),
                             **hdf5plugin.Bitshuffle(cname="lz4"))
        d.attrs["units"] = "counts"
        names = ("R_x", "R_y", "Q_x", "Q_y")
        for i in range(4):
            n = counts.shape[i]
            if i < 2:
                vec, units = np.arange(n) * step, step_units
            else:
                vec, units = (np.arange(n) - n // 2) * q, q_units
            if linear_pairs:
                vec = vec[:2]
            dim = g.create_dataset(f"dim{i if zero_based else i + 1}", data=vec)
            dim.attrs["name"] = names[i]
            dim.attrs["units"] = units
        if metadata:
            m = f.create_group("experiment/metadatabundle/microscope")
            m.attrs["emd_group_type"] = "metadata"
            for k, v in metadata.items():
                m.attrs[k] = v


def test_emd_roundtrip_calibration_from_dims_and_metadata(tmp_path: Path,
                                                          make_counts: Any) -> None:
    counts = make_counts()
    _write_emd(tmp_path / "c.emd", counts,
               metadata={"beam_energy": 300000.0, "convergence_semiangle_mrad": 22.0})
    ds = load(tmp_path / "c.emd", progress=False)
    np.testing.assert_array_equal(ds.counts, counts)
    assert ds.counts.dtype == counts.dtype
    assert ds.scan_step_A == pytest.approx((0.5, 0.5))  # 0.05 nm spacing
    assert ds.detector_sampling_mrad == pytest.approx(5.0) and not ds.detector_sampling_derived
    assert ds.voltage_kV == pytest.approx(300.0)
    assert ds.semiangle_mrad == 22.0
    # user-passed wins over both dims and metadata
    ds = load(tmp_path / "c.emd", progress=False, scan_step_A=0.7, voltage_kV=200,
              detector_sampling_mrad=4.9)
    assert ds.scan_step_A == (0.7, 0.7) and ds.voltage_kV == 200
    assert ds.detector_sampling_mrad == 4.9


def test_emd_root_attrs_zero_based_linear_dims(tmp_path: Path, make_counts: Any) -> None:
    counts = make_counts(dtype=np.float32)
    _write_emd(tmp_path / "c.h5", counts, step=0.6, step_units="A", zero_based=True,
               linear_pairs=True, root_attrs={"voltage_kV": 80.0, "semiangle_mrad": 21.0})
    ds = load(tmp_path / "c.h5", progress=False)
    np.testing.assert_array_equal(ds.counts, counts)
    assert ds.counts.dtype == np.float32
    assert ds.scan_step_A == pytest.approx((0.6, 0.6))
    assert (ds.voltage_kV, ds.semiangle_mrad) == (80.0, 21.0)


def test_emd_reciprocal_dims_need_voltage(tmp_path: Path, make_counts: Any) -> None:
    counts = make_counts()
    q_inv_a = 5e-3 / wavelength_A(200.0)  # 5 mrad per pixel at 200 kV
    _write_emd(tmp_path / "c.emd", counts, q=q_inv_a, q_units="A^-1")
    ds = load(tmp_path / "c.emd", progress=False, voltage_kV=200, semiangle_mrad=20)
    assert ds.detector_sampling_mrad == pytest.approx(5.0)
    meta = read_metadata(tmp_path / "c.emd")
    assert meta["detector_sampling_inv_A"] == pytest.approx(q_inv_a)
    assert meta["scan_step_A"] == pytest.approx([0.5, 0.5])


def test_emd_pixel_dims_give_no_calibration(tmp_path: Path, make_counts: Any) -> None:
    _write_emd(tmp_path / "c.emd", make_counts(), step=1, step_units="pixels", q=1,
               q_units="pixels")
    with pytest.raises(ValueError, match="scan_step_A is missing"):
        load(tmp_path / "c.emd", progress=False, voltage_kV=200, semiangle_mrad=20)
    ds = load(tmp_path / "c.emd", progress=False, voltage_kV=200, semiangle_mrad=20,
              scan_step_A=0.5)
    assert ds.detector_sampling_derived


def test_emd_two_groups_need_dataset_path(tmp_path: Path, make_counts: Any) -> None:
    a = make_counts(seed=1)
    _write_emd(tmp_path / "c.emd", a, root_attrs={"voltage_kV": 200.0, "semiangle_mrad": 20.0})
    with h5py.File(tmp_path / "c.emd", "a") as f:
        g = f.create_group("experiment/data/other")
        g.attrs["emd_group_type"] = 1
        g["data"] = a + 1
    with pytest.raises(FileFormatError, match=r"datacube.*other.*dataset_path"):
        load(tmp_path / "c.emd", progress=False)
    ds = load(tmp_path / "c.emd", dataset_path="/experiment/data/other", progress=False,
              scan_step_A=0.5)
    np.testing.assert_array_equal(ds.counts, a + 1)
    with pytest.raises(FileFormatError, match="nothing at dataset_path"):
        load(tmp_path / "c.emd", dataset_path="/experiment/nope", progress=False)
