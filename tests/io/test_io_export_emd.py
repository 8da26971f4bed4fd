"""EMD 1.0 exports opened by py4DSTEM, HyperSpy and livessb (round trips on files
written here), and the pixel size ImageJ reads from ``Reconstruction.save("x.tif")``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from livessb import Dataset4D
from livessb.export_hdf5 import EMDExportError, save_dataset_emd, save_reconstruction_emd
from livessb.io import load
from livessb.results import Reconstruction

CAL: dict[str, Any] = {"voltage_kV": 300.0, "semiangle_mrad": 20.0, "scan_step_A": 0.5,
       "detector_sampling_mrad": 5.0}


@pytest.fixture
def dataset(make_counts: Any) -> Dataset4D:
    return Dataset4D(make_counts(scan=(4, 6)), **CAL)


@pytest.fixture
def rec() -> Reconstruction:
    rng = np.random.default_rng(1)
    obj = np.exp(1j * rng.normal(0, 0.3, (8, 12))) * rng.uniform(0.8, 1.0, (8, 12))
    return Reconstruction(object=obj.astype(np.complex64), params={"C10": -50.0, "C12": 3.0},
                          upsample=2, sampling_A=(0.25, 0.25), origin_px=(2, 4))


def _assert_same_calibration(a: Dataset4D, b: Dataset4D) -> None:
    """Equal calibration values (scalars and pairs) to float rounding."""
    ca, cb = a.calibration(), b.calibration()
    assert ca.keys() == cb.keys()
    for key, value in cb.items():
        expected = list(value) if isinstance(value, list | tuple) else value
        got = list(ca[key]) if isinstance(ca[key], list | tuple) else ca[key]
        assert got == pytest.approx(expected), key


def test_dataset_emd_round_trip_livessb(tmp_path: Path, dataset: Dataset4D) -> None:
    path = save_dataset_emd(dataset, tmp_path / "counts.emd")
    back = load(path, progress=False)
    np.testing.assert_array_equal(back.counts, dataset.counts)
    _assert_same_calibration(back, dataset)


def test_dataset_emd_opens_in_py4dstem(tmp_path: Path, dataset: Dataset4D,
                                       py4dstem: Any) -> None:
    dc = py4dstem.read(str(save_dataset_emd(dataset, tmp_path / "counts.emd")))
    assert type(dc).__name__ == "DataCube"
    np.testing.assert_array_equal(dc.data, dataset.counts)
    cal = dc.calibration
    assert (cal.get_R_pixel_size(), cal.get_R_pixel_units()) == (0.5, "A")
    assert (cal.get_Q_pixel_size(), cal.get_Q_pixel_units()) == (5.0, "mrad")
    assert cal.get_convergence_semiangle_mrad() == 20.0
    assert cal["voltage_kV"] == 300.0
    # ...and back through livessb's adapter.
    again = Dataset4D.from_py4dstem(dc)
    _assert_same_calibration(again, dataset)


def test_dataset_emd_opens_in_hyperspy(tmp_path: Path, dataset: Dataset4D,
                                       hyperspy: Any) -> None:
    s = hyperspy.load(save_dataset_emd(dataset, tmp_path / "counts.emd"))
    np.testing.assert_array_equal(s.data, dataset.counts)
    by_index = sorted(s.axes_manager._axes, key=lambda a: a.index_in_array)
    assert [a.scale for a in by_index] == pytest.approx([0.5, 0.5, 5.0, 5.0])
    assert [str(a.units) for a in by_index] == ["Å", "Å", "mrad", "mrad"]
    stem = s.transpose(signal_axes=2)  # HyperSpy's 4D-STEM view: scan navigates
    back = Dataset4D.from_hyperspy(stem, voltage_kV=300, semiangle_mrad=20)
    np.testing.assert_array_equal(back.counts, dataset.counts)
    _assert_same_calibration(back, dataset)


@pytest.mark.parametrize("what", ["phase", "object", "amplitude"])
def test_reconstruction_emd_in_py4dstem_and_hyperspy(tmp_path: Path, rec: Reconstruction,
                                                     what: str, py4dstem: Any,
                                                     hyperspy: Any) -> None:
    path = save_reconstruction_emd(rec, tmp_path / f"{what}.emd", what=what)
    expected = {"phase": rec.phase, "object": rec.object, "amplitude": np.abs(rec.object)}[what]
    arr = py4dstem.read(str(path))
    np.testing.assert_allclose(arr.data, expected, rtol=1e-6)
    assert [float(d[1] - d[0]) for d in arr.dims] == [0.25, 0.25]
    assert [str(u) for u in arr.dim_units] == ["A", "A"]
    s = hyperspy.load(path)
    np.testing.assert_allclose(s.data, expected, rtol=1e-6)
    assert [a.scale for a in s.axes_manager.signal_axes] == [0.25, 0.25]
    assert [str(a.units) for a in s.axes_manager.signal_axes] == ["Å", "Å"]


def test_reconstruction_emd_metadata(tmp_path: Path, rec: Reconstruction) -> None:
    import h5py

    path = save_reconstruction_emd(rec, tmp_path / "phase.h5")
    with h5py.File(path) as f:
        assert f.attrs["emd_group_type"] == "file" and f.attrs["version_major"] == 1
        md = f["phase_root/metadatabundle/livessb"]
        assert md["params/C10"][()] == -50.0 and md["upsample"][()] == 2
        assert list(md["origin_px"][()]) == [2, 4]
        np.testing.assert_array_equal(f["phase_root/phase/data"][()], rec.phase)


def test_emd_export_errors(tmp_path: Path, rec: Reconstruction, make_counts: Any) -> None:
    with pytest.raises(EMDExportError, match="suffix"):
        save_reconstruction_emd(rec, tmp_path / "x.tif")
    with pytest.raises(EMDExportError, match="what="):
        save_reconstruction_emd(rec, tmp_path / "x.emd", what="real")
    ds = Dataset4D(make_counts(), **{**CAL, "scan_step_A": (0.5, 0.6)})
    with pytest.raises(EMDExportError, match="differs between rows and cols"):
        save_dataset_emd(ds, tmp_path / "x.emd")
    assert not list(tmp_path.iterdir())  # nothing written, no temporary files


def test_tiff_carries_the_pixel_size_imagej_reads(tmp_path: Path, rec: Reconstruction) -> None:
    import tifffile

    path = rec.save(tmp_path / "phase.tif")
    with tifffile.TiffFile(path) as tif:
        ij = tif.imagej_metadata
        assert ij is not None, "no ImageJ metadata: ImageJ shows pixels, not Å"
        page = tif.pages[0]
        assert isinstance(page, tifffile.TiffPage)  # the first page is never a TiffFrame
        x_res = page.tags["XResolution"].value  # pixels per unit, a rational
        y_res = page.tags["YResolution"].value
        unit = ij.get("unit")
    scale = {"angstrom": 1.0, "Å": 1.0, "\\u00c5": 1.0, "nm": 10.0, "micron": 1e4, "um": 1e4}
    assert unit in scale, f"ImageJ unit {unit!r}"
    assert scale[unit] * x_res[1] / x_res[0] == pytest.approx(0.25)
    assert scale[unit] * y_res[1] / y_res[0] == pytest.approx(0.25)


@pytest.mark.parametrize("suffix", [".emd", ".h5", ".HDF5"])
def test_rec_save_writes_emd_by_suffix(tmp_path: Path, rec: Reconstruction, suffix: str,
                                       hyperspy: Any) -> None:
    """``rec.save("x.emd")`` is the EMD export: HyperSpy shows the pixel size, h5py the
    calibration; a failed write leaves no temporary file."""
    import h5py

    path = rec.save(tmp_path / f"phase{suffix}")
    assert path == tmp_path / f"phase{suffix}"
    with h5py.File(path) as f:
        assert f.attrs["emd_group_type"] == "file"
        np.testing.assert_array_equal(f["phase_root/phase/data"][()], rec.phase)
        dims = [f[f"phase_root/phase/dim{i}"] for i in (0, 1)]
        assert [float(d[1] - d[0]) for d in dims] == [0.25, 0.25]
        assert [d.attrs["units"] for d in dims] == ["A", "A"]
        md = f["phase_root/metadatabundle/livessb"]
        assert list(md["pixel_size_A"][()]) == [0.25, 0.25]
        assert md["params/C10"][()] == -50.0 and md["upsample"][()] == 2
    if suffix == ".emd":  # HyperSpy picks its EMD reader by the suffix
        s = hyperspy.load(path)
        np.testing.assert_array_equal(s.data, rec.phase)
        assert [a.scale for a in s.axes_manager.signal_axes] == [0.25, 0.25]
        assert [str(a.units) for a in s.axes_manager.signal_axes] == ["Å", "Å"]
    obj = rec.save(tmp_path / "object.emd", what="object", name="psi", compression="gzip")
    with h5py.File(obj) as f:
        np.testing.assert_array_equal(f["psi_root/psi/data"][()], rec.object)
        assert f["psi_root/psi/data"].compression == "gzip"
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [f"phase{suffix}", "object.emd"])


def test_rec_save_unknown_suffix_lists_the_supported_ones(tmp_path: Path,
                                                          rec: Reconstruction) -> None:
    from livessb.export import ExportError

    with pytest.raises(ExportError) as info:
        rec.save(tmp_path / "phase.hdf")
    for suffix in (".npy", ".tif", ".tiff", ".png", ".emd", ".h5", ".hdf5"):
        assert suffix in str(info.value), suffix
    assert not list(tmp_path.iterdir())
