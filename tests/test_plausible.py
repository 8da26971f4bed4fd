"""Calibration values outside plausible ranges are refused with the likely unit mistake;
allow_unusual (or the context manager) accepts unusual set-ups."""

from __future__ import annotations

import warnings
from typing import Any

import pytest

import livessb
from helpers import disk_counts
from livessb.dataset import Dataset4D, DatasetError, ImplausibleCalibrationError
from livessb.physics.geometry import MAX_AUTO_UPSAMPLE, UpsampleCapWarning, auto_upsample
from livessb.physics.optics import wavelength_A

GOOD: dict[str, Any] = {"voltage_kV": 200, "semiangle_mrad": 20, "scan_step_A": 0.6}


@pytest.mark.parametrize(("key", "value", "words"), [
    ("scan_step_A", 60, ["scan_step_A=60 Å", "pm", "0.6 Å", "scan_step_A=0.6"]),
    ("scan_step_A", 6e-11, ["metres", "0.6 Å"]),
    ("scan_step_A", 0.06e-3, ["outside the plausible scan step range"]),
    ("scan_step_A", (0.6, 60), ["scan_step_A=60", "pm"]),
    ("voltage_kV", 200000, ["voltage_kV=200000 kV", "volts", "200 kV"]),
    ("voltage_kV", 0.3, ["MV", "300 kV"]),
    ("semiangle_mrad", 0.025, ["rad", "25 mrad"]),
    ("semiangle_mrad", 20000, ["µrad", "20 mrad"]),
    ("detector_sampling_mrad", 0.0005, ["rad/px", "0.5 mrad/px"]),
])
def test_implausible_values_name_the_unit_mistake(key: str, value: object,
                                                  words: list[str]) -> None:
    with pytest.raises(ImplausibleCalibrationError) as err:
        Dataset4D(disk_counts(), **{**GOOD, key: value})  # type: ignore[arg-type]
    assert isinstance(err.value, DatasetError)
    for w in words:
        assert w in str(err.value), str(err.value)
    assert "allow_unusual=True" in str(err.value)


def test_unusual_values_pass_when_allowed() -> None:
    ds = Dataset4D(disk_counts(), voltage_kV=2000, semiangle_mrad=20, scan_step_A=0.6,
                   allow_unusual=True)
    assert ds.voltage_kV == 2000 and ds.allow_unusual
    with livessb.unusual_values_allowed():
        assert Dataset4D(disk_counts(), **{**GOOD, "scan_step_A": 25}).scan_step_A == (25, 25)
    with pytest.raises(ImplausibleCalibrationError):  # the context ended
        Dataset4D(disk_counts(), **{**GOOD, "scan_step_A": 25})


def test_plausible_edges_pass() -> None:
    for voltage in (5, 30, 60, 80, 120, 200, 300, 1250):
        assert Dataset4D(disk_counts(), **{**GOOD, "voltage_kV": voltage}).voltage_kV == voltage
    for step in (0.01, 0.1, 2.5, 10):
        assert Dataset4D(disk_counts(), **{**GOOD, "scan_step_A": step}).scan_step_A[0] == step


def test_auto_upsample_capped_with_a_message() -> None:
    k_alpha = 20e-3 / wavelength_A(200)
    assert auto_upsample((0.6, 0.6), k_alpha) == 2  # Nyquist of 2 k_α: the usual case
    with pytest.warns(UpsampleCapWarning, match=r"would be 192x.*capped at 8x.*upsample=N"):
        assert auto_upsample((60.0, 60.0), k_alpha) == MAX_AUTO_UPSAMPLE
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert auto_upsample((2.0, 2.0), k_alpha) <= MAX_AUTO_UPSAMPLE
