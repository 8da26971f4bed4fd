"""Crystal mode's own thin-or-thick choice (fit.lattice_choice): a per-bin fit that kept
the thick model is asked again on the lattice model, which reads each pixel's area."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import livessb
from livessb import session as session_module
from livessb.cli_text import crystal_mode_text, fit_lines
from livessb.fit.lattice_choice import lattice_model_choice
from livessb.fit.lattice_problem import lattice_newton
from livessb.fit.model_choice import CHI2_3_P001, THICK_ONLY
from livessb.io.binning import bin_dataset
from livessb.results import FitResult
from livessb.widget.records import trust_record
from test_lattice_fit import _problem
from test_lattice_profiles import TRUTH

BOX = {"C10": (-200.0, 200.0), "C12": (0.0, 50.0), "phi12": (-np.pi / 2, np.pi / 2),
       "tilt_row_mrad": (-15.0, 15.0), "tilt_col_mrad": (-15.0, 15.0), "depth": (0.0, 300.0)}
ABERRATIONS = ["C10", "C12", "phi12"]
# what a per-bin fit on a coarse integrating camera kept for a thin crystal (§18: depth
# 4–20 Å, tilts 10–15 mrad)
WRONG_THICK = {"tilt_row_mrad": 8.0, "tilt_col_mrad": -5.0, "depth": 20.0}
THICK_TRUTH = {**TRUTH, "depth": 60.0, "tilt_row_mrad": 4.0, "tilt_col_mrad": -2.0}


@pytest.mark.parametrize("seed", [3, 4, 5])
def test_a_thin_crystal_is_read_thin_and_a_thick_one_thick(seed: int) -> None:
    # Counts the lattice model makes (20² positions, 2.56 periods, ~100 counts a pixel).
    # Thin crystal, the per-bin fit's depth and tilt held (they were not determined) or
    # freed: the thin model explains as much (measured T 0.0 held, 0.0–2.3 freed), so it
    # is kept with depth and tilt at 0. A 60 Å crystal tilted (4, −2) mrad: T 140–390.
    thin_data = _problem(seed)
    for free in (ABERRATIONS, list(BOX)):
        thick = lattice_newton(thin_data, {**TRUTH, **WRONG_THICK}, free, BOX)
        fit, kept_free, choice = lattice_model_choice(thin_data, thick, free, BOX)
        assert choice.kept == "thin" and choice.statistic <= CHI2_3_P001, choice
        assert all(fit.params[n] == 0.0 for n in THICK_ONLY)
        assert kept_free == ABERRATIONS
        assert abs(fit.params["C10"] - TRUTH["C10"]) < 0.5, fit.params  # measured ≤ 0.33
    thick_data = _problem(seed, truth=THICK_TRUTH)
    thick = lattice_newton(thick_data, {**TRUTH, **WRONG_THICK}, list(BOX), BOX)
    fit, kept_free, choice = lattice_model_choice(thick_data, thick, list(BOX), BOX)
    assert choice.kept == "thick" and choice.statistic > 5 * CHI2_3_P001, choice
    assert fit is thick and kept_free == list(BOX)


FIXTURE = Path(__file__).parent / "fixtures" / "abtem" / "sto1_C10m150.npz"


def _binned_fixture() -> tuple[livessb.Dataset4D, float]:
    d = np.load(FIXTURE)
    ds = bin_dataset(livessb.Dataset4D(
        d["counts"], voltage_kV=float(d["voltage_kV"]),
        semiangle_mrad=float(d["semiangle_mrad"]), scan_step_A=tuple(d["scan_step_A"]),
        detector_sampling_mrad=float(d["detector_sampling_mrad"]), detector_pixels="points"),
        2)
    return ds, float(d["truth_C10"])


def test_crystal_mode_reads_a_binned_thin_crystal_thin_where_the_per_bin_fit_kept_thick(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # abTEM's one-cell SrTiO3 at C10 −150 Å summed 2 × 2 on the detector (an integrating
    # camera, 6.3 px across the BF radius). The per-bin fit is made to have kept the thick
    # model with a depth and tilt the crystal does not have (as it did on the matrix's
    # binned +40 and +150 Å cases, docs/bias-matrix.md §18): crystal mode, which models
    # each pixel's area, reads it thin and goes on to the thin object's terms.
    ds, truth_c10 = _binned_fixture()
    assert ds.detector_pixels == "integrating"
    real = session_module.with_lattice

    def as_if_thick(result: FitResult, *args: Any, **kwargs: Any) -> FitResult:
        choice = {**result.provenance["model_choice"], "kept": "thick"}
        result = replace(result, params={**result.params, **WRONG_THICK},
                         errors={**result.errors, "depth": 30.0, "tilt_row_mrad": 12.0,
                                 "tilt_col_mrad": 12.0},
                         provenance={**result.provenance, "model_choice": choice})
        return real(result, *args, **kwargs)

    monkeypatch.setattr(session_module, "with_lattice", as_if_thick)
    with livessb.Session(ds, device="cpu") as s:
        fit = s.fit(progress=False, object_model="lattice")
    lattice = fit.lattice
    assert lattice["model"] == "lattice" and lattice["model_choice"]["kept"] == "thin"
    assert lattice["model_choice"]["thick_params"] == WRONG_THICK
    assert all(fit.params[n] == 0.0 and fit.errors[n] == 0.0 for n in THICK_ONLY)
    assert set(THICK_ONLY) <= set(fit.undetermined)
    assert "statistic" in lattice["thin_object"], lattice["thin_object"]  # the stage ran
    assert trust_record(fit)["model"] == "thin"  # the widget's model row: crystal mode's
    assert any(line.startswith("  model: thin (the thick model (depth 20")
               for line in fit_lines("full", fit)), fit_lines("full", fit)
    said = crystal_mode_text(lattice)
    assert "read thin (the per-bin fit's depth 20 Å, tilt (8, -5) mrad" in said, said
    # measured: ΔC10 −0.39 ± 0.95 Å (as without the wrong start), target 1.5 Å
    off = fit.params["C10"] - truth_c10
    assert abs(off) <= max(0.01 * abs(truth_c10), 0.5) and abs(off) <= 2 * fit.errors["C10"]
    assert math.isfinite(fit.errors["C10"]) and fit.errors["C10"] > 0


def test_a_depth_the_caller_holds_is_kept_and_the_thin_stage_left_out() -> None:
    # fixed={"depth": 30}: no thin-or-thick choice (the per-bin fit made none), crystal mode
    # keeps the held depth, and the thin object's terms (which have no depth) are not fitted.
    ds, _ = _binned_fixture()
    with livessb.Session(ds, device="cpu") as s:
        fit = s.fit(progress=False, object_model="lattice", fixed={"depth": 30.0})
    assert fit.lattice["model"] == "lattice" and fit.lattice["model_choice"] is None
    assert fit.params["depth"] == 30.0
    assert fit.lattice["thin_object"]["reason"].startswith("the thick model is kept")

