"""The window check of a scan_window="hann" fit (fit.window_check): a Hausman test against
the unapodised fit refined from it, and the advice which window to keep."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

import livessb
from helpers import ABTEM_FIXTURES, abtem_fixture
from livessb.fit.window_check import (
    MIN_VARIANCE_FRACTION,
    SIGNIFICANCE,
    compare_windows,
    compared_quantities,
)
from livessb.simulate import simulate_4dstem

P = {"C10": -40.0, "C12": 5.0, "phi12": 0.4}
NOISE = {"C10": 1.0, "C12": 0.5, "phi12": 0.05}  # the unapodised fit's statistical errors
HANN = {k: 1.9 * v for k, v in NOISE.items()}  # the Hann's design factor on a 2-D window


def test_the_same_values_are_no_leakage_and_the_smaller_errors_win() -> None:
    check = compare_windows(P, HANN, P, NOISE, (HANN, NOISE))
    assert check.z == {"C10": 0.0, "C12_cos": 0.0, "C12_sin": 0.0}
    assert check.p_value == 1.0 and not check.leakage and check.recommended == "none"
    assert "scan_window='none' suits" in check.advice()
    # Where the unapodised fit's bands disagree (a systematic part), 'hann' reports less.
    check = compare_windows(P, HANN, P, NOISE, (HANN, {**NOISE, "C10": 5.0}))
    assert not check.leakage and check.recommended == "hann"
    assert "keep 'hann'" in check.advice() and "±5 Å unapodised" in check.advice()


def test_a_shift_beyond_the_difference_noise_is_leakage() -> None:
    sd = math.sqrt(HANN["C10"] ** 2 - NOISE["C10"] ** 2)  # Hausman: var(d) = σ_h² − σ_n²
    for k, leaks in ((2.0, False), (3.5, True)):
        check = compare_windows(P, HANN, {**P, "C10": P["C10"] + k * sd}, NOISE, (HANN, NOISE))
        assert check.z["C10"] == pytest.approx(k)
        # Bonferroni over C10 and the C12 vector's two components
        assert check.p_value == pytest.approx(3 * math.erfc(k / math.sqrt(2)))
        assert check.leakage is leaks and (check.p_value < SIGNIFICANCE) is leaks
    assert check.recommended == "hann" and "moved C10 by +3.5" in check.advice()


def test_c12_is_compared_as_a_vector_and_the_variance_has_a_floor() -> None:
    turned = {**P, "phi12": P["phi12"] + math.pi}  # the same astigmatism
    assert compare_windows(P, HANN, turned, NOISE, (HANN, NOISE)).z["C12_cos"] == pytest.approx(
        0.0, abs=1e-12)
    values = compared_quantities({"C10": 0.0, "C12": 0.0, "phi12": 1.0}, NOISE)
    assert values["C12_cos"][1] > 0 and values["C12_sin"][1] > 0  # defined at C12 = 0
    # An apodised error no larger than the unapodised one (a noisy estimate): the
    # difference's variance is a fraction of σ_h², never 0 or negative.
    check = compare_windows(P, NOISE, {**P, "C10": P["C10"] + 1.0}, HANN, (NOISE, HANN))
    assert check.z["C10"] == pytest.approx(1.0 / math.sqrt(MIN_VARIANCE_FRACTION))
    with pytest.raises(ValueError, match="C10 or C12 free"):
        compare_windows({}, {}, {}, {}, ({}, {}))


def test_the_leakage_of_a_crystal_window_is_seen_and_hann_kept() -> None:
    """abTEM SrTiO3, 3.07 lattice periods, C10 +80 noise-free (docs/bias-matrix.md §9: the
    unapodised fit −0.77 Å off, the apodised −0.05)."""
    ds = abtem_fixture("sto1_C10p80_noisefree")
    truth = float(np.load(ABTEM_FIXTURES / "sto1_C10p80_noisefree.npz")["truth_C10"])
    with livessb.Session(ds, device="cpu", scan_window="hann") as s:
        fit = s.fit(trials=200, seed=1, progress=False)
        held = len(s.diagnostics.prepared_spectra)  # the full field's two sets
        region = s.fit_region((0, 20, 0, 20), trials=100, seed=1)
        assert len(s.diagnostics.prepared_spectra) == held == 2  # both regions' released
    check = fit.provenance["window_check"]
    assert abs(fit.params["C10"] - truth) < 0.15
    assert check["unapodised"]["C10"] - truth == pytest.approx(-0.72, abs=0.15)
    assert check["leakage"] and check["recommended"] == "hann" and check["z"]["C10"] < -3
    assert fit.timings["window_check_s"] > 0
    assert not any("scan_window" in w for w in fit.provenance["warnings"])
    assert region.fit.provenance["window_check"]["unapodised"]["C10"] != region.params["C10"]
    assert region.fit.timings["window_check_s"] > 0


def test_without_leakage_at_low_dose_the_check_advises_the_unapodised_window() -> None:
    ds, _ = simulate_4dstem(scan_shape=(32, 32), detector_shape=(32, 32), scan_step_A=0.25,
                            aberrations=P, dose=2e4, seed=5)
    with livessb.Session(ds, device="cpu", scan_window="hann") as s:
        fit = s.fit(trials=200, seed=1, progress=False)
    check = fit.provenance["window_check"]
    assert not check["leakage"] and check["recommended"] == "none"
    ratio = check["errors_apodised"]["C10"] / check["errors_unapodised"]["C10"]
    assert 1.5 < ratio < 2.5  # the Hann's noise cost (×1.94 on a 2-D window)
    assert abs(check["unapodised"]["C10"] - fit.params["C10"]) < 2 * fit.errors["C10"]
    assert any("scan_window='none' suits" in w for w in fit.provenance["warnings"])
    with livessb.Session(ds, device="cpu") as s:  # nothing to check without the window
        assert "window_check" not in s.fit(trials=50, seed=1, progress=False).provenance


def test_the_auto_window_reports_the_fit_the_check_advises(tmp_path: Path) -> None:
    ds, _ = simulate_4dstem(scan_shape=(32, 32), detector_shape=(32, 32), scan_step_A=0.25,
                            aberrations=P, dose=2e4, seed=5)
    with livessb.Session(ds, device="cpu", scan_window="hann") as s:
        hann = s.fit(trials=200, seed=1, progress=False)
    with livessb.Session(ds, device="cpu", scan_window="auto") as s:
        auto = s.fit(trials=200, seed=1, progress=False)
        region = s.fit_region((0, 24, 0, 24), trials=100, seed=1)
        s.save_calibration(tmp_path / "cal.json")
    with livessb.Session(ds, device="cpu", calibration=tmp_path / "cal.json") as s:
        assert s.scan_window == "auto"  # restored with the calibration
    check = auto.provenance["window_check"]
    assert check["reported"] == "none" and auto.provenance["scan_window"] == "auto"
    assert auto.params == check["unapodised"] == hann.provenance["window_check"]["unapodised"]
    assert auto.errors["C10"] == pytest.approx(check["errors_unapodised"]["C10"])
    assert auto.errors["C10"] < hann.errors["C10"] / 1.5
    assert "design" not in auto.provenance["noise"]  # the unapodised fit's own noise level
    assert auto.provenance["model_choice"] == hann.provenance["model_choice"]
    assert "it is the one reported (scan_window='auto')" in check["advice"]
    assert not any("suits" in w for w in auto.provenance["warnings"])
    assert region.fit.provenance["window_check"]["reported"] in ("none", "hann")
    from livessb.cli_text import non_default_settings

    assert non_default_settings(auto.provenance) == "scan window auto (reported none)"
    # Where the window removed leakage, "auto" reports the "hann" fit itself.
    sto = abtem_fixture("sto1_C10p80_noisefree")
    fits = {}
    for window in ("hann", "auto"):
        with livessb.Session(sto, device="cpu", scan_window=window) as s:
            fits[window] = s.fit(trials=200, seed=1, progress=False)
    assert fits["auto"].provenance["window_check"]["reported"] == "hann"
    assert fits["auto"].params == fits["hann"].params
    assert fits["auto"].errors == fits["hann"].errors


@pytest.mark.parametrize("window", ["none", "auto"])
def test_a_fit_with_c10_and_c12_held_has_nothing_to_check(window: str) -> None:
    # (with the aberrations held, the thin model has no free parameter left: its "Newton"
    # is the loss at the held point, no longer an IndexError)
    ds, _ = simulate_4dstem(scan_shape=(24, 24), detector_shape=(32, 32), scan_step_A=0.25,
                            aberrations=P, dose=2e4, seed=5)
    with livessb.Session(ds, device="cpu", scan_window=window) as s:
        fit = s.fit(trials=30, seed=1, progress=False, fixed=P)
    assert "window_check" not in fit.provenance and fit.params["C10"] == P["C10"]
    assert fit.provenance["model_choice"]["kept"] == "thin"
    assert fit.params["depth"] == 0.0 and fit.errors["C10"] == 0.0
