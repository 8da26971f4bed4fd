"""Calibration instruments write: Dectris photon_energy, Arina/JSON/TOML sidecars, EMD
bracketed units, and scans of any size (the fit alone needs 4x4)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pytest

from livessb import Dataset4D, DatasetError, Session
from livessb.io import load, read_metadata
from livessb.io.metadata import parse_attrs
from livessb.io.sidecar import find_sidecar
from livessb.regions import RegionError

_HC_KEV_A = 12.398419843320026  # photon wavelength (Å) x energy (keV)


def _write_arina(tmp_path: Path, frames: np.ndarray, *, energy_eV: float | None = 300e3,
                 photon_wavelength: bool = True) -> Path:
    with h5py.File(tmp_path / "scan_data_000001.h5", "w") as f:
        f.create_dataset("entry/data/data", data=frames, chunks=(1, *frames.shape[1:]))
    master = tmp_path / "scan_master.h5"
    with h5py.File(master, "w") as f:
        f["entry/data/data_000001"] = h5py.ExternalLink("scan_data_000001.h5", "entry/data/data")
        spec = f.create_group("entry/instrument/detector/detectorSpecific")
        if energy_eV is not None:
            spec.create_dataset("photon_energy", data=energy_eV).attrs["units"] = "eV"
            if photon_wavelength:  # what the firmware derives: the X-ray relation
                wl = f.create_dataset("entry/instrument/beam/incident_wavelength",
                                      data=_HC_KEV_A / (energy_eV / 1e3))
                wl.attrs["units"] = "angstrom"
    return master


def test_dectris_photon_energy_is_the_beam_energy(tmp_path: Path, make_counts: Any) -> None:
    master = _write_arina(tmp_path, make_counts(dtype=np.uint32).reshape(64, 16, 16))
    ds = load(master, scan_shape=(8, 8), semiangle_mrad=20, scan_step_A=0.5, progress=False)
    # 300 keV from photon_energy, not the 37 kV an electron reading of λ = hc/E would give.
    assert ds.voltage_kV == pytest.approx(300.0)
    meta = read_metadata(master)
    assert meta["voltage_kV"] == pytest.approx(300.0)
    assert "photon_energy" in meta["sources"]["voltage_kV"]
    # Without a units attribute the Dectris value is still eV.
    assert parse_attrs({"photon_energy": 200000.0}).voltage_kV == pytest.approx(200.0)


def test_arina_metadata_file_gives_the_scan_step(tmp_path: Path, make_counts: Any) -> None:
    master = _write_arina(tmp_path, make_counts().reshape(64, 16, 16))
    with h5py.File(tmp_path / "scan.h5", "w") as f:  # newer Arina firmware
        g = f.create_group("STEM Metadata")
        g.attrs["Pixel Size"] = np.array([0.042])  # nm
        g.attrs["Scan Width"] = 8
        g.attrs["Scan Height"] = 8
    ds = load(master, semiangle_mrad=20, progress=False)
    assert ds.scan_shape == (8, 8)
    assert ds.scan_step_A == pytest.approx((0.42, 0.42))
    assert ds.voltage_kV == pytest.approx(300.0)
    # The user's values win over the sidecar's.
    ds = load(master, semiangle_mrad=20, scan_step_A=0.3, progress=False)
    assert ds.scan_step_A == (0.3, 0.3)


def test_arina_files_match_rosettasciio(tmp_path: Path, make_counts: Any, tool: Any) -> None:
    arina = tool("rsciio.arina")
    counts = make_counts()
    master = _write_arina(tmp_path, counts.reshape(64, 16, 16))
    with h5py.File(tmp_path / "scan.h5", "w") as f:
        f.create_group("STEM Metadata").attrs["Pixel Size"] = np.array([0.042])
    theirs = arina.file_reader(str(master), navigation_shape=(8, 8))[0]
    ours = load(master, scan_shape=(8, 8), semiangle_mrad=20, progress=False)
    np.testing.assert_array_equal(ours.counts, theirs["data"])
    assert ours.scan_step_A == pytest.approx((theirs["axes"][0]["scale"],) * 2)  # Å both


@pytest.mark.parametrize("kind", ["json", "toml"])
def test_json_and_toml_sidecars(tmp_path: Path, make_counts: Any, kind: str) -> None:
    counts = make_counts(scan=(4, 6))
    np.save(tmp_path / "frames.npy", counts.reshape(24, 16, 16))
    if kind == "json":
        (tmp_path / "frames.json").write_text(json.dumps(
            {"scan": {"scan_shape": [4, 6], "scan_step": [0.05, "nm"]},
             "microscope": {"high_tension": "200 kV", "convergence_semiangle_mrad": 20}}))
    else:
        (tmp_path / "frames.toml").write_text(
            'scan_rows = 4\nscan_cols = 6\nscan_step_A = 0.5\n[optics]\nvoltage_kV = 200\n'
            'semiangle_mrad = 20\n')
    ds = load(tmp_path / "frames.npy", progress=False)
    np.testing.assert_array_equal(ds.counts, counts)
    assert ds.scan_step_A == pytest.approx((0.5, 0.5))
    assert (ds.voltage_kV, ds.semiangle_mrad) == (200.0, 20.0)


def test_sidecar_errors_and_what_is_not_a_sidecar(tmp_path: Path, make_counts: Any,
                                                  cal: dict[str, Any]) -> None:
    np.save(tmp_path / "frames.npy", make_counts(scan=(4, 4)).reshape(16, 16, 16))
    # Our own calibration file next to the data is not a sidecar.
    (tmp_path / "frames.json").write_text(json.dumps(
        {"schema": "livessb.calibration", "scan_shape": [2, 8]}))
    assert find_sidecar(tmp_path / "frames.npy", None) is None
    # A broken sidecar found automatically: warned about and ignored.
    (tmp_path / "frames.json").write_text("{not json")
    with pytest.warns(UserWarning, match="ignoring the sidecar frames.json"):
        ds = load(tmp_path / "frames.npy", scan_shape=(4, 4), progress=False, **cal)
    assert ds.scan_shape == (4, 4)
    # Passed explicitly, it raises with the reason.
    with pytest.raises(DatasetError, match="not valid JSON"):
        load(tmp_path / "frames.npy", sidecar=tmp_path / "frames.json", **cal)
    (tmp_path / "half.json").write_text(json.dumps({"scan_width": 4}))
    with pytest.raises(DatasetError, match="only one side of the scan"):
        load(tmp_path / "frames.npy", sidecar=tmp_path / "half.json", **cal)
    (tmp_path / "odd.json").write_text(json.dumps({"scan_shape": [4, 2.5]}))
    with pytest.raises(DatasetError, match="not a scan shape"):
        load(tmp_path / "frames.npy", sidecar=tmp_path / "odd.json", **cal)
    with pytest.raises(FileNotFoundError, match="sidecar="):
        load(tmp_path / "frames.npy", sidecar=tmp_path / "missing.json", **cal)


def test_emd_bracketed_units(tmp_path: Path, make_counts: Any) -> None:
    counts = make_counts()
    with h5py.File(tmp_path / "x.emd", "w") as f:
        g = f.create_group("data/datacube")
        g.attrs["emd_group_type"] = 1
        g.create_dataset("data", data=counts)
        for i, (step, units) in enumerate([(0.05, "[n_m]"), (0.05, "[n_m]"),
                                           (5.0, "[m_r_a_d]"), (5.0, "[m_r_a_d]")]):
            dim = g.create_dataset(f"dim{i + 1}", data=np.arange(counts.shape[i]) * step)
            dim.attrs["units"] = units
    ds = load(tmp_path / "x.emd", voltage_kV=200, semiangle_mrad=20, progress=False)
    assert ds.scan_step_A == pytest.approx((0.5, 0.5))
    assert ds.detector_sampling_mrad == pytest.approx(5.0)
    assert parse_attrs({"q_pixel_size": (0.1, "[1_/_n_m]")}).detector_sampling_inv_A == \
        pytest.approx(0.01)


@pytest.mark.parametrize("scan", [(1, 1), (2, 3), (3, 8)])
def test_any_scan_loads_only_the_fit_needs_4x4(tmp_path: Path, make_counts: Any,
                                               cal: dict[str, Any], scan: tuple[int, int]) -> None:
    counts = make_counts(scan=scan)
    np.save(tmp_path / "small.npy", counts)
    ds = load(tmp_path / "small.npy", progress=False, **cal)
    assert ds.scan_shape == scan
    np.testing.assert_array_equal(ds.counts, counts)
    with Session(ds, device="cpu") as s, pytest.raises(
            RegionError, match=rf"{scan[0]}x{scan[1]} scan is too small to fit.*4x4"):
        s.fit(trials=2, progress=False)
    with pytest.raises(DatasetError, match="empty"):
        Dataset4D(np.zeros((0, 4, 16, 16), np.uint16), **cal)
