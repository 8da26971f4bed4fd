"""The abTEM fixtures load into Dataset4D with their stored calibration and truth."""

from __future__ import annotations

import math
from pathlib import Path
from typing import cast

import numpy as np
import pytest

from livessb import Dataset4D
from livessb.physics.optics import wavelength_A

FIXTURES = Path(__file__).parent / "fixtures" / "abtem"
NAMES = ["srtio3_thin", "srtio3_39A", "weak_slab_148A_tilt"]
TRUTH_KEYS = ("C10", "C12", "phi12", "tilt_row_mrad", "tilt_col_mrad", "depth")


def load_fixture(name: str) -> tuple[Dataset4D, dict]:
    """(Dataset4D, truth) of one fixture; truth in livessb's convention (SPEC §2)."""
    with np.load(FIXTURES / f"{name}.npz") as d:
        ds = Dataset4D(
            d["counts"],
            voltage_kV=float(d["voltage_kV"]),
            semiangle_mrad=float(d["semiangle_mrad"]),
            scan_step_A=cast(tuple[float, float], tuple(float(s) for s in d["scan_step_A"])),
            detector_sampling_mrad=float(d["detector_sampling_mrad"]),
        )
        truth = {k: float(d[f"truth_{k}"]) for k in TRUTH_KEYS}
        truth["rotation_deg"] = float(d["truth_rotation_deg"])
        truth["transpose"] = bool(d["truth_transpose"])
        meta = {k: d[k] for k in d.files if k != "counts"}
    return ds, {**truth, "meta": meta}


@pytest.mark.parametrize("name", NAMES)
def test_fixture_loads_with_truth(name: str) -> None:
    path = FIXTURES / f"{name}.npz"
    assert path.stat().st_size <= 2_000_000
    ds, truth = load_fixture(name)
    meta = truth["meta"]
    noiseless = float(meta["dose"]) == 0
    assert ds.counts.dtype == (np.float32 if noiseless else np.uint16)
    assert ds.scan_shape == (24, 24) and ds.detector_shape == (40, 40)
    assert ds.voltage_kV == 200 and ds.semiangle_mrad == 20
    assert ds.scan_step_A == (0.6, 0.6)
    assert not ds.detector_sampling_derived
    assert str(meta["abtem_version"]).startswith("1.0")

    # Stored sampling = λ / (periodic cell extent 4a), i.e. abTEM's angular sampling.
    lam = wavelength_A(200)
    assert abs(ds.detector_sampling_mrad - lam / (4 * 3.905) * 1e3) < 1e-4
    # The BF disk sits on the stored centre with the radius that the sampling implies.
    bf = ds.bright_field
    c = meta["bf_center_px"]
    assert abs(bf.center_row - c[0]) < 0.3 and abs(bf.center_col - c[1]) < 0.3
    assert abs(bf.radius_px - 20.0 / ds.detector_sampling_mrad) < 0.75

    # Counts per position ≈ dose (the crop loses a little high-angle scattering);
    # noiseless intensities sum to <= 1 per pattern.
    totals = ds.counts.reshape(24 * 24, -1).sum(axis=1, dtype=np.float64)
    if noiseless:
        assert np.all(totals <= 1 + 1e-3) and totals.min() > 0.98
    else:
        dose = float(meta["dose"])
        assert 0.98 < totals.mean() / dose <= 1.0 + 5 / math.sqrt(dose)

    # Truth follows SPEC §2's mapping from abTEM's entrance-surface parameters.
    t = float(meta["thickness_A"])
    assert truth["depth"] == pytest.approx(t)
    assert truth["C10"] == pytest.approx(float(meta["abtem_C10"]) + t / 2)
    assert truth["C12"] == pytest.approx(float(meta["abtem_C12"]))
    assert truth["phi12"] == pytest.approx(float(meta["abtem_phi12"]))
    tilt = meta["abtem_tilt_mrad"]
    assert truth["tilt_row_mrad"] == pytest.approx(-float(tilt[0]))
    assert truth["tilt_col_mrad"] == pytest.approx(-float(tilt[1]))
    assert truth["rotation_deg"] == 0.0 and truth["transpose"] is False
