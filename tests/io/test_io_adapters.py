"""HyperSpy signals, py4DSTEM DataCubes and rosettasciio formats, written by those
libraries in the test (each test skips when its library is not installed, and fails
instead under LIVESSB_REQUIRE_ALL, as in CI)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from livessb import Dataset4D, DatasetError
from livessb.io import UnsupportedFormatError, load, read_metadata
from livessb.physics.optics import wavelength_A

# Truth: 0.5 Å scan step, 5 mrad/px at 300 kV (a 4-px BF disk of 20 mrad).
STEP_A, SAMPLING_MRAD, KV, ALPHA = 0.5, 5.0, 300.0, 20.0
K_PER_PX = SAMPLING_MRAD * 1e-3 / wavelength_A(KV)  # 1/Å per detector pixel


def _signal(hs: Any, counts: np.ndarray, *, nav_units: str = "nm", nav_scale: float = 0.05,
            sig_units: str = "1/nm", sig_scale: float = 10 * K_PER_PX,
            tem: bool = True) -> Any:
    s = hs.signals.Signal2D(counts)
    for a in s.axes_manager.navigation_axes:
        a.scale, a.units = nav_scale, nav_units
    for a in s.axes_manager.signal_axes:
        a.scale, a.units = sig_scale, sig_units
    if tem:
        s.metadata.set_item("Acquisition_instrument.TEM.beam_energy", KV)
        s.metadata.set_item("Acquisition_instrument.TEM.convergence_angle", ALPHA)
    return s


def test_from_hyperspy_reads_axes_and_tem_metadata(make_counts: Any, hyperspy: Any) -> None:
    hs = hyperspy
    counts = make_counts(scan=(4, 6))
    ds = Dataset4D.from_hyperspy(_signal(hs, counts))
    np.testing.assert_array_equal(ds.counts, counts)
    assert ds.scan_step_A == pytest.approx((STEP_A, STEP_A))
    assert ds.detector_sampling_mrad == pytest.approx(SAMPLING_MRAD)
    assert (ds.voltage_kV, ds.semiangle_mrad) == (KV, ALPHA)
    # Angles on the detector axes, a lazy float64 signal, keywords that win.
    s = _signal(hs, counts.astype(np.float64), nav_units="Å", nav_scale=0.4,
                sig_units="mrad", sig_scale=SAMPLING_MRAD).as_lazy()
    ds = Dataset4D.from_hyperspy(s, semiangle_mrad=19.0)
    assert ds.counts.dtype == np.float32
    assert ds.scan_step_A == pytest.approx((0.4, 0.4))
    assert ds.detector_sampling_mrad == pytest.approx(SAMPLING_MRAD)
    assert ds.semiangle_mrad == 19.0


def test_from_hyperspy_errors(make_counts: Any, hyperspy: Any) -> None:
    hs = hyperspy
    counts = make_counts(scan=(4, 4))
    with pytest.raises(DatasetError, match="voltage_kV is missing"):
        Dataset4D.from_hyperspy(_signal(hs, counts, tem=False))
    with pytest.raises(DatasetError, match=r"unknown unit 'furlong'.*pass scan_step_A="):
        Dataset4D.from_hyperspy(_signal(hs, counts, nav_units="furlong"))
    # Uncalibrated axes say nothing: the scan step must be passed, the sampling is derived.
    ds = Dataset4D.from_hyperspy(_signal(hs, counts, nav_units="", sig_units=""),
                                 scan_step_A=0.5)
    assert ds.detector_sampling_derived
    with pytest.raises(DatasetError, match="needs a HyperSpy signal"):
        Dataset4D.from_hyperspy(counts)
    with pytest.raises(DatasetError, match="3D"):
        Dataset4D.from_hyperspy(hs.signals.Signal2D(counts.reshape(16, 16, 16)))
    ds = Dataset4D.from_hyperspy(hs.signals.Signal2D(counts.reshape(16, 16, 16)),
                                 scan_shape=(4, 4), voltage_kV=KV, semiangle_mrad=ALPHA,
                                 scan_step_A=0.5)
    np.testing.assert_array_equal(ds.counts, counts)


def _datacube(py4dstem: Any, counts: np.ndarray, q_units: str = "A^-1",
              voltage: float | None = 300e3) -> Any:
    dc = py4dstem.DataCube(counts)
    dc.calibration.set_R_pixel_size(STEP_A)
    dc.calibration.set_R_pixel_units("A")
    if q_units == "mrad":
        dc.calibration.set_Q_pixel_size(SAMPLING_MRAD)
    else:
        dc.calibration.set_Q_pixel_size(K_PER_PX)
    dc.calibration.set_Q_pixel_units(q_units)
    dc.calibration.set_convergence_semiangle_mrad(ALPHA)
    if voltage is not None:
        dc.calibration["voltage"] = voltage  # eV, as py4DSTEM's phase-retrieval classes take it
    return dc


def test_from_py4dstem_reads_its_calibration(make_counts: Any, py4dstem: Any) -> None:
    counts = make_counts(scan=(4, 6))
    ds = Dataset4D.from_py4dstem(_datacube(py4dstem, counts))
    np.testing.assert_array_equal(ds.counts, counts)
    assert ds.voltage_kV == pytest.approx(KV)
    assert ds.scan_step_A == pytest.approx((STEP_A, STEP_A))
    assert ds.detector_sampling_mrad == pytest.approx(SAMPLING_MRAD)
    assert ds.semiangle_mrad == ALPHA
    ds = Dataset4D.from_py4dstem(_datacube(py4dstem, counts, q_units="mrad", voltage=None),
                                 voltage_kV=KV)
    assert ds.detector_sampling_mrad == pytest.approx(SAMPLING_MRAD)
    with pytest.raises(DatasetError, match="voltage_kV is missing"):
        Dataset4D.from_py4dstem(_datacube(py4dstem, counts, voltage=None))
    with pytest.raises(DatasetError, match="needs a py4DSTEM DataCube"):
        Dataset4D.from_py4dstem(counts)


def test_py4dstem_file_loads_with_its_calibration(tmp_path: Path, make_counts: Any,
                                                  py4dstem: Any) -> None:
    counts = make_counts(scan=(4, 6))
    py4dstem.save(str(tmp_path / "dc.h5"), _datacube(py4dstem, counts), mode="o")
    ds = load(tmp_path / "dc.h5", progress=False)
    np.testing.assert_array_equal(ds.counts, counts)
    assert ds.voltage_kV == pytest.approx(KV)
    assert ds.scan_step_A == pytest.approx((STEP_A, STEP_A))
    assert ds.detector_sampling_mrad == pytest.approx(SAMPLING_MRAD)
    assert ds.semiangle_mrad == ALPHA


@pytest.mark.parametrize("suffix", [".hspy", ".emd", ".blo"])
def test_files_hyperspy_writes(tmp_path: Path, make_counts: Any, suffix: str,
                               hyperspy: Any) -> None:
    hs = hyperspy
    counts = make_counts(scan=(4, 6), det=(16, 16), dtype=np.uint8)
    s = _signal(hs, counts)
    if suffix == ".blo":  # blockfile: nm scan axes, signal axes in cm on the screen
        s.axes_manager.signal_axes[0].units = s.axes_manager.signal_axes[1].units = "cm"
    path = tmp_path / f"x{suffix}"
    s.save(path)
    theirs = hs.load(path)
    ours = load(path, progress=False, voltage_kV=KV, semiangle_mrad=ALPHA)
    np.testing.assert_array_equal(ours.counts, np.asarray(theirs.data))
    np.testing.assert_array_equal(ours.counts, counts)
    assert ours.scan_step_A == pytest.approx((STEP_A, STEP_A))
    if suffix == ".blo":
        assert ours.detector_sampling_derived  # a length on the screen, no camera length
    else:
        assert ours.detector_sampling_mrad == pytest.approx(SAMPLING_MRAD)
    if suffix == ".hspy":  # the only one of the three that keeps the TEM metadata
        meta = read_metadata(path)
        assert (meta["voltage_kV"], meta["semiangle_mrad"]) == (KV, ALPHA)
        region = load(path, scan_region=(1, 3, 2, 5), progress=False)
        np.testing.assert_array_equal(region.counts, counts[1:3, 2:5])


def test_rosettasciio_formats_without_rosettasciio(tmp_path: Path, monkeypatch: Any,
                                                   cal: dict[str, Any]) -> None:
    import livessb.io.dispatch as dispatch
    import livessb.io.rsciio_reader as reader

    monkeypatch.setattr(reader, "rsciio_readers", lambda suffix: [])
    monkeypatch.setattr(dispatch, "rsciio_readers", lambda suffix: [])
    (tmp_path / "x.dm4").write_bytes(b"\0" * 64)
    with pytest.raises(UnsupportedFormatError, match=r"pip install 'livessb\[formats\]'"):
        load(tmp_path / "x.dm4", **cal)
    (tmp_path / "x.weird").write_bytes(b"\0" * 64)
    with pytest.raises(UnsupportedFormatError, match="unknown file type"):
        load(tmp_path / "x.weird", **cal)
