"""Metadata parsing: unit handling, precedence, and a hypothesis fuzz of the parser."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from livessb import DatasetError
from livessb.io.metadata import (
    SAMPLING_KEYS,
    SCAN_STEP_KEYS,
    SEMIANGLE_KEYS,
    VOLTAGE_KEYS,
    WAVELENGTH_KEYS,
    numbers_and_unit,
    parse_attrs,
    resolve_calibration,
    voltage_from_wavelength,
)


@pytest.mark.parametrize("attrs,key,expected", [
    ({"voltage": "200 kV"}, "voltage_kV", 200),
    ({"beam_energy": 300000}, "voltage_kV", 300),
    ({"HT": b"80"}, "voltage_kV", 80),
    ({"Accelerating Voltage": np.array([60e3]), "Accelerating Voltage_units": "V"},
     "voltage_kV", 60),
    ({"convergence_semiangle": "1.5 deg"}, "semiangle_mrad", 1.5e3 * math.pi / 180),
    ({"alpha": 0.021, "alpha_units": "rad"}, "semiangle_mrad", 21),
    ({"R_pixel_size": 0.04, "R_pixel_units": "nm"}, "scan_step_A", (0.4, 0.4)),
    ({"scan_step": [0.3, 0.5]}, "scan_step_A", (0.3, 0.5)),
    ({"Q_pixel_size": 0.8, "Q_pixel_units": "mrad"}, "detector_sampling_mrad", 0.8),
])
def test_parse_known_forms(attrs: dict[str, Any], key: str, expected: Any) -> None:
    cal = resolve_calibration(parse_attrs(attrs))
    assert cal[key] == pytest.approx(expected)


def test_pixels_are_not_a_calibration() -> None:
    fc = parse_attrs({"R_pixel_size": 1, "R_pixel_units": "pixels",
                      "Q_pixel_size": 1, "Q_pixel_units": "pixels"})
    assert fc.scan_step_A is None and fc.detector_sampling_mrad is None and not fc.problems


def test_unusable_file_value_raises_unless_user_passes_it() -> None:
    fc = parse_attrs({"voltage": "fast electrons", "semiangle_mrad": -3})
    with pytest.raises(DatasetError, match=r"voltage_kV.*'fast electrons'.*pass voltage_kV="):
        resolve_calibration(fc)
    out = resolve_calibration(fc, {"voltage_kV": 200, "semiangle_mrad": 20})
    assert out["voltage_kV"] == 200 and out["semiangle_mrad"] == 20


def test_user_wins_and_unknown_keys() -> None:
    fc = parse_attrs({"voltage": 300, "semiangle": 25, "step_size": 0.5})
    out = resolve_calibration(fc, {"voltage_kV": 200})
    assert out == {"voltage_kV": 200, "semiangle_mrad": 25.0, "scan_step_A": (0.5, 0.5),
                   "detector_sampling_mrad": None}
    with pytest.raises(DatasetError, match="unknown calibration keyword"):
        resolve_calibration(fc, {"kV": 200})


_known = st.sampled_from(
    VOLTAGE_KEYS + WAVELENGTH_KEYS + SEMIANGLE_KEYS + SCAN_STEP_KEYS + SAMPLING_KEYS
    + ("x_pixel_size", "detector_distance", "R_pixel_units", "Q_pixel_units",
       "voltage_units", "scan_step_units"))
_units = st.sampled_from(
    ["kV", "V", "eV", "mrad", "rad", "deg", "Å", "A", "nm", "m", "pm", "1/Å", "A^-1",
     "pixels", "", "furlongs", "µm"]) | st.text(max_size=8)
_number = (st.floats(allow_nan=True, allow_infinity=True) | st.integers()
           | st.integers(min_value=-(10**400), max_value=10**400))
_value = st.one_of(
    _number, st.text(max_size=20), st.binary(max_size=20), st.none(), st.booleans(),
    st.builds(lambda n, u: f"{n} {u}", _number, _units),
    st.tuples(_number, _units),
    st.lists(_number, max_size=4),
    st.lists(st.text(max_size=3), max_size=3),
    st.builds(np.array, st.lists(st.floats(), max_size=3)),
    st.dictionaries(st.text(max_size=3), _number, max_size=2),
)


@settings(max_examples=300, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(attrs=st.dictionaries(_known | st.text(max_size=12), _value, max_size=8),
       user=st.dictionaries(st.sampled_from(["voltage_kV", "semiangle_mrad", "scan_step_A",
                                             "detector_sampling_mrad"]),
                            _number | st.none(), max_size=2))
def test_fuzz_metadata_parsing(attrs: dict[Any, Any], user: dict[str, Any]) -> None:
    try:
        fc = parse_attrs(attrs, "fuzz")
        out = resolve_calibration(fc, {k: v for k, v in user.items() if v is not None})
    except ValueError:  # DatasetError is a ValueError: a clean, explained refusal
        return
    for key in ("voltage_kV", "semiangle_mrad", "detector_sampling_mrad"):
        v = out[key]
        if v is not None and key not in user:
            assert math.isfinite(v) and v > 0
    if out["scan_step_A"] is not None and "scan_step_A" not in user:
        assert all(math.isfinite(s) and s > 0 for s in out["scan_step_A"])


@settings(max_examples=200, deadline=None, database=None)
@given(st.text(max_size=30) | st.binary(max_size=30))
def test_fuzz_numbers_and_unit(text: Any) -> None:
    try:
        nums, unit = numbers_and_unit(text)
    except ValueError:
        return
    assert len(nums) == 1 and (unit is None or isinstance(unit, str))


def test_absurd_wavelength_is_a_clear_refusal() -> None:
    """A wavelength so small that the momentum overflows (found by the fuzz test above)
    is refused with the key and the fix named, not an OverflowError."""
    with pytest.raises(ValueError, match="no finite, positive beam energy"):
        voltage_from_wavelength(1.9011120387353382e-302)
    with pytest.raises(ValueError, match="no finite, positive beam energy"):
        voltage_from_wavelength(5e-324)  # λ·1e-10 underflows to 0
    fc = parse_attrs({"wavelength": 1.9011120387353382e-302}, "fuzz")
    with pytest.raises(DatasetError, match=r"voltage_kV.*wavelength.*pass voltage_kV="):
        resolve_calibration(fc, {})
    assert resolve_calibration(fc, {"voltage_kV": 200.0})["voltage_kV"] == 200.0


def test_reciprocal_units_written_with_a_leading_one() -> None:
    """"0.01 1/A" is 0.01 per Å (a unit in the table), not 0 with the unit ".011/a"."""
    assert numbers_and_unit("0.01 1/A") == ([0.01], "1/a")
    assert numbers_and_unit("0.5 1/nm") == ([0.5], "1/nm")
    fc = parse_attrs({"k_sampling": "0.01 1/A"}, "file")
    assert fc.detector_sampling_inv_A == pytest.approx(0.01) and not fc.problems
    out = resolve_calibration(fc, {"voltage_kV": 200.0})
    # 0.01 Å⁻¹ × λ(200 kV) = 0.01 × 0.025079 Å = 0.25079 mrad
    assert out["detector_sampling_mrad"] == pytest.approx(0.25079, rel=1e-4)
    with pytest.raises(ValueError, match="too small"):  # never a ZeroDivisionError
        resolve_calibration(fc, {"voltage_kV": 1e-300})
