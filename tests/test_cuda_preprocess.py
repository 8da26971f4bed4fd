"""Preprocessing measured on counts resident on the GPU (issue 19 item 2) against the
host's: the same bad pixels, descan fit and dose factors, and a session that fits the
same (skipped without a CUDA GPU)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from cuda_skip import cp, pytestmark  # noqa: F401  (skips without a GPU)
from livessb import Dataset4D, Preprocessing, Session
from livessb.bench.device_data import DeviceDataset4D
from livessb.preprocess import prepare_corrections
from livessb.simulate import simulate_4dstem
from livessb.xp import counting

DESCAN = (0.0, 0.04, -0.03, 0.01)


def _host_and_device(dose: float, hot: bool) -> tuple[Dataset4D, DeviceDataset4D]:
    """One simulated acquisition (descan, beam current fluctuation, optionally a hot
    pixel in the disk) as host counts and as counts resident on the GPU, calibrated alike."""
    ds, _ = simulate_4dstem(scan_shape=(32, 32), detector_shape=(32, 32), scan_step_A=0.6,
                            aberrations={"C10": -40.0}, dose=dose, seed=3, rotation_deg=8.0,
                            descan_px_per_px=DESCAN, beam_current_fluctuation=0.1)
    counts = ds.counts.copy()
    if hot:
        counts[:, :, 14, 17] = 4000
    host = Dataset4D(counts, voltage_kV=ds.voltage_kV, semiangle_mrad=ds.semiangle_mrad,
                     scan_step_A=ds.scan_step_A,
                     detector_sampling_mrad=ds.detector_sampling_mrad)
    device = DeviceDataset4D(cp.asarray(counts), voltage_kV=ds.voltage_kV,
                             semiangle_mrad=ds.semiangle_mrad, scan_step_A=ds.scan_step_A,
                             detector_sampling_mrad=ds.detector_sampling_mrad)
    return host, device


@pytest.mark.parametrize(("dose", "hot"), [(2e4, False), (2e4, True), (800.0, True)])
def test_resident_counts_are_measured_like_host_counts(dose: float, hot: bool) -> None:
    host_ds, dev_ds = _host_and_device(dose, hot)
    opts = Preprocessing(dose_normalise=True)
    host = prepare_corrections(host_ds, opts)
    with counting() as count:
        dev = prepare_corrections(dev_ds, opts)
    # The totals once; the fit where the centres are: the number kept, a check per refit
    # (at most three) and the fit with its measurements once.
    assert count["site:preprocess.totals"] == 1, dict(count)
    assert count.round_trips == count["site:preprocess.descan"] + 1 <= 6, dict(count)
    assert np.array_equal(dev.bad_pixels, host.bad_pixels)
    assert host.bad_pixels.any() == hot
    assert host.descan is not None and dev.descan is not None and host.descan.significant
    assert dev.descan.block == host.descan.block and (host.descan.block > 1) == (dose < 1e3)
    c = host.descan.coefficients
    np.testing.assert_allclose(dev.descan.coefficients, c, rtol=1e-6,
                               atol=1e-6 * float(np.abs(c).max()))
    assert host.dose_factors is not None and dev.dose_factors is not None
    np.testing.assert_allclose(dev.dose_factors, host.dose_factors, rtol=1e-6)


def test_resident_session_fits_like_the_cpu_session() -> None:
    host_ds, dev_ds = _host_and_device(2e4, False)
    with Session(host_ds, device="cpu") as s_cpu, Session(dev_ds, device="cuda") as s_gpu:
        assert s_cpu.preprocessing.descan_applied and s_gpu.preprocessing.descan_applied
        fit_cpu = s_cpu.fit(trials=32, progress=False)
        fit_gpu = s_gpu.fit(trials=32, progress=False)
    # The same branch (no modulo 180°) and the same defocus.
    assert abs(fit_gpu.rotation_deg - fit_cpu.rotation_deg) < 0.05
    assert abs(fit_gpu.params["C10"] - fit_cpu.params["C10"]) < 0.5


@pytest.mark.parametrize(("dose", "scan"), [(2e4, (32, 32)), (800.0, (31, 29)),
                                            (120.0, (30, 31))])
def test_the_one_kernel_pass_equals_the_chunked_pass(dose: float, scan: tuple[int, int]) -> None:
    """descan_moments (no bad pixel: one launch) against the chunked CuPy pass on the same
    device counts and the host pass: totals bit for bit, centres to rounding, at block
    edges 1 and > 1 on scans that do not divide into blocks."""
    from livessb.preprocess import corrections

    ds, _ = simulate_4dstem(scan_shape=scan, detector_shape=(32, 32), scan_step_A=0.6,
                            aberrations={"C10": -40.0}, dose=dose, seed=5, rotation_deg=8.0,
                            descan_px_per_px=DESCAN, beam_current_fluctuation=0.1)
    plan = corrections.repair_plan(np.zeros((32, 32), dtype=bool))
    mean = np.asarray(ds.mean_pattern, dtype=np.float64)
    opts = Preprocessing(dose_normalise=True)
    dev = DeviceDataset4D(cp.asarray(ds.counts), voltage_kV=ds.voltage_kV,
                          semiangle_mrad=ds.semiangle_mrad, scan_step_A=ds.scan_step_A,
                          detector_sampling_mrad=ds.detector_sampling_mrad)
    host_totals, host_fit = corrections._measure(ds.counts, mean, plan, opts)
    fused: list[bool] = []
    real = corrections._fused_pass

    def spy(*args: object) -> object:
        out = real(*args)  # type: ignore[arg-type]
        fused.append(out is not None)
        return out

    corrections._fused_pass = spy  # type: ignore[assignment]
    try:
        dev_totals, dev_fit = corrections._measure(dev.counts, mean, plan, opts)
        corrections._fused_pass = lambda *a: None  # type: ignore[assignment]
        chunk_totals, chunk_fit = corrections._measure(dev.counts, mean, plan, opts)
    finally:
        corrections._fused_pass = real  # type: ignore[assignment]
    assert fused == [True]
    assert host_fit is not None and dev_fit is not None and chunk_fit is not None
    assert (dev_fit.block > 1) == (dose < 1e3)
    np.testing.assert_array_equal(dev_totals, host_totals)
    np.testing.assert_array_equal(chunk_totals, host_totals)
    assert dev_fit.measured is not None and host_fit.measured is not None
    np.testing.assert_allclose(dev_fit.measured, host_fit.measured, rtol=1e-12, atol=1e-12)
    assert np.array_equal(np.isnan(dev_fit.measured), np.isnan(host_fit.measured))
    np.testing.assert_allclose(dev_fit.coefficients, host_fit.coefficients, rtol=1e-10,
                               atol=1e-12)


def test_a_one_frame_spike_is_replaced_on_the_device_as_on_the_host() -> None:
    """One saturated count in one frame (engine.spikes): both engines replace it in their
    resident BF counts by the same value, and fit alike."""
    ds, _ = simulate_4dstem(scan_shape=(32, 32), detector_shape=(32, 32), scan_step_A=0.6,
                            aberrations={"C10": -40.0}, dose=2e4, seed=3, rotation_deg=8.0)
    counts = ds.counts.copy()
    counts[9, 21, 14, 17] = 65535
    calibration: dict[str, Any] = dict(voltage_kV=ds.voltage_kV,
                                       semiangle_mrad=ds.semiangle_mrad,
                                       scan_step_A=ds.scan_step_A,
                                       detector_sampling_mrad=ds.detector_sampling_mrad)
    host = Dataset4D(counts, **calibration)
    device = DeviceDataset4D(cp.asarray(counts), **calibration)
    with Session(host, device="cpu") as s_cpu, Session(device, device="cuda") as s_gpu:
        assert s_cpu.diagnostics.spikes_repaired == s_gpu.diagnostics.spikes_repaired == 1
        on_host = np.asarray(s_cpu.diagnostics.bf_counts)
        on_device = cp.asnumpy(s_gpu.diagnostics.bf_counts)
        if on_device.shape != on_host.shape:  # (B, Rr, Rc) on the device
            on_device = np.moveaxis(on_device, 0, 2)
        np.testing.assert_array_equal(on_device, on_host)
        fit_cpu = s_cpu.fit(trials=32, progress=False)
        fit_gpu = s_gpu.fit(trials=32, progress=False)
    assert abs(fit_gpu.rotation_deg - fit_cpu.rotation_deg) < 0.05
    assert abs(fit_gpu.params["C10"] - fit_cpu.params["C10"]) < 0.5
