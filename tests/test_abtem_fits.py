"""Fits against an independent multislice simulator (abTEM 1.0, fixtures in fixtures/abtem).

Issue 15, item 6: C10 within max(1 Å, 1 %) of the truth (mid-plane), C12 within 1 Å,
tilt within 1 mrad on the tilted slab, each also inside its ±2σ. These fixtures are
(nearly) noiseless: what the model leaves unexplained is model misfit, coherent over
the BF pixels of a frequency, so the errors that cover the truth are the misfit
(sandwich) errors of fit.robust; the noise errors alone are 5-30x smaller and miss it.
"""

import functools
import math
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

import livessb
from livessb.params import on_circle
from livessb.results import FitResult

FIXTURES = Path(__file__).parent / "fixtures" / "abtem"

# Exact detector transforms (no interpolation) and the geometry each implies, derived from
# SPEC §2 (k = R(θ)·T·k_det, R(θ) = [[cos, -sin], [sin, cos]] on (row, col)), not read off
# the code. The fixtures are stored at θ = 0, no transpose: k = δ·s for a pixel δ = (r, c)
# minus the BF centre.
#  - transposed, new[.., r, c] = old[.., c, r]: k = swap(δ') = T·δ', so θ = 0 with T.
#  - np.rot90 over (det_r, det_c), new[.., i, j] = old[.., j, N-1-i]: the centre moves to
#    (N-1-c_c, c_r) and δ' = (-δ_c, δ_r), so k = δ = (δ'_c, -δ'_r) = R(θ)·δ' with cos θ = 0,
#    sin θ = -1: θ = 270°. Its other branch, 90°, fits only with C10 → -C10 and
#    phi12 → phi12 + π/2 (SPEC's invariance), atoms dark: the branch rule keeps 270°.
#  - rot90 then transposed: δ'' = T·δ', so k = R(270°)·T·δ''.
# χ, the tilt and the depth act on the scan-frame k (φ = atan2(k_col, k_row)), so C10, C12,
# phi12, tilt and depth are the stored fixture's under every transform.
DETECTORS: dict[str, tuple[Callable[[np.ndarray], np.ndarray], float, bool]] = {
    "as stored": (lambda c: c, 0.0, False),
    "transposed": (lambda c: c.transpose(0, 1, 3, 2), 0.0, True),
    "rot90": (lambda c: np.rot90(c, 1, axes=(2, 3)), 270.0, False),
    "rot90 transposed": (lambda c: np.rot90(c, 1, axes=(2, 3)).transpose(0, 1, 3, 2),
                         270.0, True),
}


# One SrTiO3 cell in two abTEM slices scatters at the centroid of its slice planes,
# 0.846 Å below the entrance surface (docs/bias-matrix.md §1, §11: one slice against two
# moves both tools' C10 by that much; the bias matrix's fixtures store it as
# potential_plane_A), not at the t/2 (1.95 Å) this older fixture's truth_C10 keeps.
SCATTERING_PLANE_BELOW_ENTRANCE_A = {"srtio3_thin": 0.846}


@functools.cache  # a fit is shared by the tests that read it (read only)
def _fit(name: str, detector: str = "as stored", alias_pixels: str = "kept",
         object_model: str = "per_bin") -> tuple[FitResult, dict[str, float]]:
    d = np.load(FIXTURES / f"{name}.npz")
    ds = livessb.Dataset4D(
        DETECTORS[detector][0](d["counts"]), voltage_kV=float(d["voltage_kV"]),
        semiangle_mrad=float(d["semiangle_mrad"]), scan_step_A=tuple(d["scan_step_A"]),
        detector_sampling_mrad=float(d["detector_sampling_mrad"]),
        detector_pixels="points")
    truth = {k[len("truth_"):]: float(d[k]) for k in d.files if k.startswith("truth_")}
    if name in SCATTERING_PLANE_BELOW_ENTRANCE_A:  # not the t/2 the fixture stores
        truth["C10"] = float(d["abtem_C10"]) + SCATTERING_PLANE_BELOW_ENTRANCE_A[name]
    with livessb.Session(ds, device="cpu", alias_pixels=alias_pixels) as s:
        return s.fit(progress=False, object_model=object_model), truth


def _angle_diff_deg(a: float, b: float) -> float:
    return abs((a - b + 180.0) % 360.0 - 180.0)


def _deviation(name: str, value: float, truth: float) -> float:
    return on_circle(name, value - truth)  # phi12 on its circle of period π


def _assert_inside_two_errors(fit: FitResult, truth: dict[str, float],
                              names: tuple[str, ...]) -> None:
    z = {n: _deviation(n, fit.params[n], truth[n]) / fit.errors[n] for n in names}
    assert all(fit.errors[n] > 0 for n in names), fit.errors
    assert all(abs(v) <= 2.0 for v in z.values()), z
    noise = fit.provenance["errors_components"]["noise"]
    # The misfit term is what covers the truth: the noise errors alone do not.
    assert any(abs(_deviation(n, fit.params[n], truth[n])) > 2 * noise[n] for n in names)


def test_thin_srtio3_minimum_at_simulator_aberrations() -> None:
    fit, t = _fit("srtio3_thin")
    assert fit.params["C12"] == pytest.approx(t["C12"], abs=1.0)  # 19.52 for 20
    assert fit.params["phi12"] == pytest.approx(t["phi12"], abs=0.01)  # 0.0045 off
    assert abs((fit.rotation_deg + 180) % 360 - 180) < 1.0 and not fit.transpose
    # Measured: z = -0.52 (C12), -0.41 (phi12); noise errors alone: C12 z = -8.7, phi12 -3.7.
    _assert_inside_two_errors(fit, t, ("C12", "phi12"))


@pytest.mark.xfail(strict=True, reason=(
    "issue 20, docs/bias-matrix.md §7, §12: with the alias pixels kept (the default) the "
    "0.6 Å scan's aliases pull C10 1.31 Å from the scattering plane at errors of ±0.39 "
    "(z 3.4); alias_pixels='excluded' fits it (the next test)"))
def test_thin_srtio3_defocus_with_the_aliases_kept_is_within_its_errors() -> None:
    fit, t = _fit("srtio3_thin")
    assert abs(fit.params["C10"] - t["C10"]) <= 2 * fit.errors["C10"], (fit.params, t)


def test_an_undersampled_scan_with_its_alias_pixels_left_out_fits_the_scattering_plane(
        ) -> None:
    # 0.6 Å steps: the scan's Nyquist 0.83 1/Å is below the BF band 2k_α = 1.59 1/Å, and
    # half the trotter pairs also carry an alias. Kept (the default) they pull |C10|
    # 1.31 Å low and C12 0.48 Å low; left out, measured: ΔC10 +0.08 Å, ΔC12 -0.03 Å,
    # Δphi12 -0.001 rad (against the plane the crystal scatters from).
    fit, t = _fit("srtio3_thin", alias_pixels="excluded")
    assert fit.params["C10"] == pytest.approx(t["C10"], abs=0.3)
    assert fit.params["C12"] == pytest.approx(t["C12"], abs=0.15)
    assert abs(_deviation("phi12", fit.params["phi12"], t["phi12"])) < 0.005
    assert abs((fit.rotation_deg + 180) % 360 - 180) < 1.0 and not fit.transpose
    assert fit.provenance["alias_pixels"] == "excluded"
    kept, _ = _fit("srtio3_thin")
    assert abs(kept.params["C10"] - t["C10"]) > 1.0  # what the aliases do when kept
    # Within two errors; the model now describes the data: the noise errors alone cover it
    # too (with the aliases kept only the misfit errors did).
    noise = fit.provenance["errors_components"]["noise"]
    for n in ("C10", "C12", "phi12"):
        assert abs(_deviation(n, fit.params[n], t[n])) <= 2 * fit.errors[n], n
        assert abs(_deviation(n, fit.params[n], t[n])) <= 2 * noise[n], n


@pytest.mark.parametrize("name", ["srtio3_thin", "sto1_C10m150", "weak1_periodic_C10m80"])
def test_crystal_mode_fits_independent_multislice_crystals_within_target_and_errors(
        name: str) -> None:
    # Crystal mode (object_model="lattice") on abTEM's crystals, the aliases kept: within
    # issue 20's target (C10 max(1 %, 0.5 Å), C12 0.5 Å, φ12 0.01 rad) and within two of
    # its errors. Measured ΔC10 / error with the thin object's terms (first order): −0.004 /
    # 0.76 Å (−0.10) on the aliased 0.6 Å scan of thin SrTiO3 (where the default per-bin
    # fit is 1.31 Å off at z 3.4: the strict xfail above), −0.10 / 0.46 (−0.10) at C10
    # −150, −0.10 / 0.37 (−0.12) on a weak crystal over whole periods.
    fit, t = _fit(name, object_model="lattice")
    assert fit.lattice["model"] == "lattice", fit.lattice
    # every one a crystal whose second-order terms the data see (χ²₁ 18 … 5600)
    assert fit.lattice["thin_object"]["statistic"] > fit.lattice["thin_object"]["threshold"]
    d = {n: _deviation(n, fit.params[n], t[n]) for n in ("C10", "C12", "phi12")}
    assert abs(d["C10"]) <= max(0.01 * abs(t["C10"]), 0.5), d
    assert abs(d["C12"]) <= 0.5 and abs(d["phi12"]) <= 0.01, d
    for n in ("C10", "C12", "phi12"):
        assert abs(d[n]) <= 2 * fit.errors[n], (n, d[n], fit.errors[n])
    per_bin = fit.lattice["per_bin"]["params"]["C10"] - t["C10"]
    if name == "srtio3_thin":  # the aliases' pull the lattice model removes
        assert abs(per_bin) > 1.0 > 2 * abs(d["C10"]), (per_bin, d["C10"])


def test_weak_object_over_whole_lattice_periods_is_fitted_exactly() -> None:
    # Noise-free abTEM, one SrTiO3 cell at 0.05 rad, a scan of 2 whole lattice periods
    # that samples the BF disc's band: no aliasing, no window leakage, no second-order
    # terms, the three effects of docs/bias-matrix.md §6. Measured: ΔC10 -0.049 Å, ΔC12
    # +0.0008 Å, Δphi12 +0.0011 rad, rotation 0.0015°. Each effect switched back on
    # moves C10 by 0.25-1.4 Å: this holds the model itself (phases, the C10 plane, the
    # aperture, the k and scan scales) to a twentieth of an ångström.
    fit, t = _fit("weak1_periodic_C10m80")
    assert fit.params["C10"] == pytest.approx(t["C10"], abs=0.1)
    assert fit.params["C12"] == pytest.approx(t["C12"], abs=0.01)
    assert abs(_deviation("phi12", fit.params["phi12"], t["phi12"])) < 0.005
    assert abs((fit.rotation_deg + 180) % 360 - 180) < 0.05 and not fit.transpose


def test_tilted_weak_slab_recovers_depth_tilt_and_midplane_defocus() -> None:
    fit, t = _fit("weak_slab_148A_tilt")
    p = fit.params
    assert fit.provenance["model_choice"]["kept"] == "thick" and fit.undetermined == []
    # mid-plane = entrance + t/2; max(1 Å, 1 %)
    assert p["C10"] == pytest.approx(t["C10"], abs=max(1.0, 0.01 * abs(t["C10"])))
    assert p["depth"] == pytest.approx(t["depth"], rel=0.2)
    assert math.hypot(p["tilt_row_mrad"] - t["tilt_row_mrad"],
                      p["tilt_col_mrad"] - t["tilt_col_mrad"]) < 1.0  # τ = -tilt_abTEM
    assert p["C12"] == pytest.approx(t["C12"], abs=1.0)
    # Measured: z = -0.45 (C10), 0.55 (C12), 0.45 (phi12), -0.81 / 0.09 (tilt), -1.75
    # (depth, 4 % shallow: scan-window leakage, docs/uncertainty.md); the noise errors
    # alone give z = -4.0, 4.0, 4.0, -9.8, 0.9, -28. With the systematic part (the
    # bands read depth 149 and 141 Å: 5.6 %, below fit.systematic's 10 %, so depth stays
    # determined) depth is 144.6 ± 6.3 Å.
    _assert_inside_two_errors(fit, t, ("C10", "C12", "phi12", "tilt_row_mrad",
                                       "tilt_col_mrad", "depth"))


def test_dynamical_39A_srtio3_keeps_astigmatism_and_defocus_inside_the_slab() -> None:
    fit, t = _fit("srtio3_39A")
    entrance, exit_ = t["C10"] - t["depth"] / 2, t["C10"] + t["depth"] / 2
    assert entrance <= fit.params["C10"] <= exit_
    assert fit.params["C12"] == pytest.approx(t["C12"], abs=3.0)
    # Measured at 6a44b95: C12 2.91 Å high (the dynamical slab), phi12 0.010 rad off.
    assert fit.params["phi12"] == pytest.approx(t["phi12"], abs=0.02)


def test_a_strongly_dynamical_156A_crystal_says_its_depth_is_not_determined() -> None:
    # 40 SrTiO3 cells (42 rad of projected phase), 2·10⁵ e⁻: the thick model is kept but
    # its depth (118 for 156 Å) fits channelling, not a depth; the frequency bands read
    # 124 and 113 Å (within 10 %), so the misfit the model leaves decides: 137x the noise,
    # 8x what depth and tilt explain. The weak slab's stay (test above).
    fit, t = _fit("sto40_C10m80")
    assert fit.provenance["model_choice"]["kept"] == "thick"
    assert {"depth", "tilt_row_mrad", "tilt_col_mrad"} <= set(fit.undetermined)
    assert any(w.startswith("depth and tilt not determined: they explain")
               for w in fit.provenance["warnings"]), fit.provenance["warnings"]
    # C10 is 33 Å off (the dynamical crystal's own plane); its errors cover it.
    assert abs(fit.params["C10"] - t["C10"]) <= 2 * fit.errors["C10"]


@pytest.mark.parametrize(("name", "detector"), [("srtio3_thin", "transposed"),
                                                ("srtio3_thin", "rot90")])
def test_transformed_detector_gives_the_derived_geometry_and_the_same_aberrations(
        name: str, detector: str) -> None:
    fit, t = _fit(name, detector)
    _, rotation_deg, transpose = DETECTORS[detector]
    assert fit.transpose is transpose
    assert _angle_diff_deg(fit.rotation_deg, rotation_deg) < 1.0  # 0.03-0.06° off
    p = fit.params
    # the truth, with the stored fixtures' tolerances (phi12: 0.0045 / 0.0048 rad off; C10:
    # the stored fixture's own, which the aliases pull off its plane, is asserted below)
    assert p["C12"] == pytest.approx(t["C12"], abs=1.0)
    assert abs(_deviation("phi12", p["phi12"], t["phi12"])) < 0.01
    if t["depth"] > 10.0:  # the tilted slab: tilt is a scan-frame vector too
        assert math.hypot(p["tilt_row_mrad"] - t["tilt_row_mrad"],
                          p["tilt_col_mrad"] - t["tilt_col_mrad"]) < 1.0
        assert p["depth"] == pytest.approx(t["depth"], rel=0.2)
    # The transform is exact, so the fit is the stored fixture's, rotated. Measured at
    # 6a44b95: parameters equal to 1e-13 (thin) and 1.2e-5 (slab depth, Å), rotation to
    # 3e-6°.
    ref, _ = _fit(name)
    assert _angle_diff_deg(fit.rotation_deg, ref.rotation_deg + rotation_deg) < 1e-3
    assert p == pytest.approx(ref.params, abs=1e-3)
    assert fit.errors == pytest.approx(ref.errors, rel=1e-3)


def test_thick_slab_with_a_rotated_detector_reaches_the_thick_basin_on_most_seeds() -> None:
    """A known defect of the search, measured rather than hidden: with the slab's detector
    turned by 90° (and transposed) the thick model's search keeps the thin basin on some
    seeds (measured 2026-12-02, effective frequencies: seeds 0, 4, 5 of 0-7 thin, 5 of 8
    thick; the grid frequencies 4 of 8; as stored or transposed 7 of 8), where the thick
    optimum's loss is a third of the thin one's: the search's trials, not the model or
    the detector geometry, miss it. The geometry is right on every seed; every thick fit
    meets the truth; every thin one is the worse minimum."""
    d = np.load(FIXTURES / "weak_slab_148A_tilt.npz")
    t = {k[len("truth_"):]: float(d[k]) for k in d.files if k.startswith("truth_")}
    turn, rotation_deg, transpose = DETECTORS["rot90 transposed"]
    ds = livessb.Dataset4D(
        turn(d["counts"]), voltage_kV=float(d["voltage_kV"]),
        semiangle_mrad=float(d["semiangle_mrad"]), scan_step_A=tuple(d["scan_step_A"]),
        detector_sampling_mrad=float(d["detector_sampling_mrad"]),
        detector_pixels="points")
    thick: list[FitResult] = []
    thin: list[FitResult] = []
    with livessb.Session(ds, device="cpu") as s:
        for seed in range(8):
            fit = s.fit(seed=seed, progress=False)
            assert fit.transpose is transpose
            assert _angle_diff_deg(fit.rotation_deg, rotation_deg) < 1.0
            (thick if fit.params["depth"] > 10.0 else thin).append(fit)
    assert len(thick) >= 5, [f.params["depth"] for f in thin]
    for fit in thick:
        p = fit.params
        assert p["C10"] == pytest.approx(t["C10"], abs=max(1.0, 0.01 * abs(t["C10"])))
        assert p["C12"] == pytest.approx(t["C12"], abs=1.0)
        assert math.hypot(p["tilt_row_mrad"] - t["tilt_row_mrad"],
                          p["tilt_col_mrad"] - t["tilt_col_mrad"]) < 1.0
        assert p["depth"] == pytest.approx(t["depth"], rel=0.2)
    best = min(f.loss for f in thick)
    assert all(f.loss > 2 * best for f in thin)
