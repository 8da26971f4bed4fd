from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import h5py
import hdf5plugin
import numpy as np
import pytest

from livessb import DatasetError
from livessb.io import CorruptFileError, FileFormatError, load, read_metadata
from livessb.io.metadata import voltage_from_wavelength
from livessb.physics.optics import wavelength_A

LZ4 = hdf5plugin.Bitshuffle(cname="lz4")


def test_generic_hdf5_roundtrip_compressed(tmp_path: Path, make_counts: Any,
                                           cal: dict[str, Any]) -> None:
    counts = make_counts()
    with h5py.File(tmp_path / "c.h5", "w") as f:
        f.create_dataset("meta/small", data=np.zeros((2, 2, 2)))  # a smaller 3D decoy
        f.create_dataset("scan/counts", data=counts, chunks=(1, 1, 16, 16), **LZ4)
    ds = load(tmp_path / "c.h5", progress=False, **cal)
    assert ds.counts.dtype == np.uint16
    np.testing.assert_array_equal(ds.counts, counts)


def test_hdf5_3d_frames_with_metadata_attrs(tmp_path: Path, make_counts: Any) -> None:
    counts = make_counts(dtype=np.uint32)
    with h5py.File(tmp_path / "c.hdf5", "w") as f:
        d = f.create_dataset("frames", data=counts.reshape(64, 16, 16), chunks=(4, 16, 16),
                             compression="gzip")
        d.attrs["scan_step"] = 0.05
        d.attrs["scan_step_units"] = "nm"
        f.attrs["accelerating_voltage"] = 300000.0  # bare number > 1000: volts
        f.attrs["convergence_semiangle"] = b"25 mrad"
    ds = load(tmp_path / "c.hdf5", scan_shape=(8, 8), progress=False)
    np.testing.assert_array_equal(ds.counts, counts)
    assert ds.counts.dtype == np.uint32
    assert ds.voltage_kV == pytest.approx(300)
    assert ds.semiangle_mrad == 25
    assert ds.scan_step_A == pytest.approx((0.5, 0.5))
    ds = load(tmp_path / "c.hdf5", scan_shape=(8, 8), progress=False, semiangle_mrad=18,
              scan_step_A=(1.0, 2.0))
    assert ds.semiangle_mrad == 18 and ds.scan_step_A == (1.0, 2.0)  # user wins
    with pytest.raises(DatasetError, match=r"needs 60 frames but the file has 64"):
        load(tmp_path / "c.hdf5", scan_shape=(6, 10), progress=False)


def test_ambiguous_and_wrong_dataset_path(tmp_path: Path, make_counts: Any,
                                          cal: dict[str, Any]) -> None:
    counts = make_counts()
    with h5py.File(tmp_path / "c.h5", "w") as f:
        f["a/counts"] = counts
        f["b/counts"] = counts + 1
        f["b/label"] = np.arange(3)
    with pytest.raises(FileFormatError, match=r"/a/counts.*/b/counts.*dataset_path"):
        load(tmp_path / "c.h5", progress=False, **cal)
    with pytest.raises(FileFormatError, match=r"no dataset at dataset_path='/nope'.*/a/counts"):
        load(tmp_path / "c.h5", dataset_path="/nope", progress=False, **cal)
    with pytest.raises(FileFormatError, match="not 3D/4D"):
        load(tmp_path / "c.h5", dataset_path="/b/label", progress=False, **cal)
    ds = load(tmp_path / "c.h5", dataset_path="/b/counts", progress=False, **cal)
    np.testing.assert_array_equal(ds.counts, counts + 1)
    ds = load(tmp_path / "c.h5", dataset_path="/a", progress=False, **cal)  # a group
    np.testing.assert_array_equal(ds.counts, counts)
    with h5py.File(tmp_path / "e.h5", "w") as f:
        f["x"] = np.zeros(5)
    with pytest.raises(FileFormatError, match="no numeric 3D or 4D dataset"):
        load(tmp_path / "e.h5", progress=False, **cal)


def _write_dectris(tmp_path: Path, frames: np.ndarray, per_file: int,
                   distance_m: float = 0.02) -> Path:
    names = []
    for i, start in enumerate(range(0, frames.shape[0], per_file)):
        name = f"scan_data_{i + 1:06d}.h5"
        with h5py.File(tmp_path / name, "w") as f:
            f.create_dataset("entry/data/data", data=frames[start:start + per_file],
                             chunks=(1, *frames.shape[1:]), **LZ4)
        names.append(name)
    master = tmp_path / "scan_master.h5"
    with h5py.File(master, "w") as f:
        f.create_group("entry/data")
        for i, name in enumerate(names):
            f[f"entry/data/data_{i + 1:06d}"] = h5py.ExternalLink(name, "entry/data/data")
        beam = f.create_group("entry/instrument/beam")
        wl = beam.create_dataset("incident_wavelength", data=wavelength_A(300.0))
        wl.attrs["units"] = "angstrom"
        det = f.create_group("entry/instrument/detector")
        det.create_dataset("x_pixel_size", data=100e-6).attrs["units"] = "m"
        det.create_dataset("detector_distance", data=distance_m).attrs["units"] = "m"
    return master


def test_dectris_master_with_external_links(tmp_path: Path, make_counts: Any) -> None:
    counts = make_counts(dtype=np.uint32)
    master = _write_dectris(tmp_path, counts.reshape(64, 16, 16), per_file=24)
    ds = load(master, scan_shape=(8, 8), semiangle_mrad=20, scan_step_A=0.5, progress=False)
    np.testing.assert_array_equal(ds.counts, counts)
    assert ds.counts.dtype == np.uint32
    assert ds.voltage_kV == pytest.approx(300.0, rel=1e-9)  # from the wavelength
    assert ds.detector_sampling_mrad == pytest.approx(5.0)  # 100 µm / 20 mm
    meta = read_metadata(master)
    assert meta["wavelength_A"] == pytest.approx(wavelength_A(300.0))
    # A region spanning two data files
    ds = load(master, scan_shape=(8, 8), scan_region=(2, 6, 1, 7), semiangle_mrad=20,
              scan_step_A=0.5, progress=False)
    np.testing.assert_array_equal(ds.counts, counts[2:6, 1:7])
    (tmp_path / "scan_data_000002.h5").unlink()
    with pytest.raises(CorruptFileError, match=r"scan_data_000002\.h5.*missing"):
        load(master, scan_shape=(8, 8), semiangle_mrad=20, scan_step_A=0.5, progress=False)


def test_dectris_sampling_disagreeing_with_the_disk(tmp_path: Path, make_counts: Any) -> None:
    frames = make_counts(dtype=np.uint32).reshape(64, 16, 16)
    master = _write_dectris(tmp_path, frames, per_file=64, distance_m=0.025)
    with pytest.warns(UserWarning, match=r"4 mrad/px.*5.0 px.*measures 4\.\d px"):
        ds = load(master, scan_shape=(8, 8), semiangle_mrad=20, scan_step_A=0.5,
                  progress=False)
    assert ds.detector_sampling_mrad == pytest.approx(4.0)
    master = _write_dectris(tmp_path, frames, per_file=64, distance_m=0.05)
    with pytest.raises(DatasetError, match=r"does not fit.*metadata.*detector_sampling_mrad=2"):
        load(master, scan_shape=(8, 8), semiangle_mrad=20, scan_step_A=0.5, progress=False)
    ds = load(master, scan_shape=(8, 8), semiangle_mrad=20, scan_step_A=0.5, progress=False,
              detector_sampling_mrad=5.0)
    assert ds.detector_sampling_mrad == 5.0


def test_voltage_from_wavelength_inverts() -> None:
    for kv in (60.0, 200.0, 300.0):
        assert voltage_from_wavelength(wavelength_A(kv)) == pytest.approx(kv, rel=1e-10)


class CountingFile(io.RawIOBase):
    """A binary file that counts the bytes HDF5 reads through it."""

    def __init__(self, path: Path) -> None:
        self._f = open(path, "rb")
        self.bytes_read = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        n = self._f.readinto(b)
        self.bytes_read += n or 0
        return n  # type: ignore[no-any-return]

    def seek(self, offset: int, whence: int = 0) -> int:
        return self._f.seek(offset, whence)

    def tell(self) -> int:
        return self._f.tell()

    def close(self) -> None:
        self._f.close()
        super().close()


def test_scan_region_reads_only_needed_chunks(tmp_path: Path, make_counts: Any,
                                              cal: dict[str, Any]) -> None:
    counts = make_counts(scan=(32, 32), det=(32, 32), radius=6)
    with h5py.File(tmp_path / "c.h5", "w") as f:
        f.create_dataset("counts", data=counts, chunks=(1, 1, 32, 32))
    full_bytes = counts.nbytes
    fh = CountingFile(tmp_path / "c.h5")
    ds = load(fh, scan_region=(8, 16, 4, 12), progress=False, **cal)
    np.testing.assert_array_equal(ds.counts, counts[8:16, 4:12])
    region_bytes = counts[8:16, 4:12].nbytes
    assert fh.bytes_read >= region_bytes
    assert fh.bytes_read < 0.15 * full_bytes, (fh.bytes_read, full_bytes)
    fh.close()
    # Same through the chunk index: a region touches exactly its own chunks.
    with h5py.File(tmp_path / "c.h5", "r") as f:
        assert f["counts"].id.get_num_chunks() == 32 * 32


def test_progress_bar_and_silence(tmp_path: Path, make_counts: Any, cal: dict[str, Any],
                                  capsys: Any) -> None:
    with h5py.File(tmp_path / "c.h5", "w") as f:
        f["counts"] = make_counts()
    load(tmp_path / "c.h5", progress=False, **cal)
    assert capsys.readouterr().err == ""
    load(tmp_path / "c.h5", progress=True, **cal)
    assert "loading c.h5" in capsys.readouterr().err


def test_truncated_and_corrupt_hdf5(tmp_path: Path, make_counts: Any,
                                    cal: dict[str, Any]) -> None:
    counts = make_counts()
    path = tmp_path / "c.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset("counts", data=counts, chunks=(1, 1, 16, 16), compression="gzip")
    raw = path.read_bytes()
    (tmp_path / "t.h5").write_bytes(raw[: len(raw) // 2])
    with pytest.raises(CorruptFileError, match="truncated") as err:
        load(tmp_path / "t.h5", progress=False, **cal)
    assert isinstance(err.value, OSError) and isinstance(err.value, DatasetError)
    (tmp_path / "g.h5").write_bytes(b"\x00" * 4096)
    with pytest.raises(CorruptFileError, match="cannot open it as HDF5"):
        load(tmp_path / "g.h5", progress=False, **cal)
    # Overwrite one compressed chunk with garbage: reading it fails with a clear error.
    with h5py.File(path, "r") as f:
        info = f["counts"].id.get_chunk_info_by_coord((5, 3, 0, 0))
    data = bytearray(raw)
    data[info.byte_offset:info.byte_offset + info.size] = b"\xff" * info.size
    (tmp_path / "bad.h5").write_bytes(bytes(data))
    with pytest.raises(CorruptFileError, match=r"scan rows .*truncated or corrupt"):
        load(tmp_path / "bad.h5", progress=False, **cal)
    # ...and a region that avoids the damaged chunk still loads.
    ds = load(tmp_path / "bad.h5", scan_region=(0, 4, 0, 8), progress=False, **cal)
    np.testing.assert_array_equal(ds.counts, counts[:4])
