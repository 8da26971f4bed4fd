"""The thin object's every term (physics.thin_object, fit.thin_object): its spectra against
the intensity computed position by position, its first order against the lattice model's
columns, its gradient against differences, and its fit against a known truth."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from livessb.fit.lattice import pixel_samples
from livessb.fit.thin_object import fit_thin_object, start_beams, thin_names
from livessb.physics.geometry import subpixel_offsets
from livessb.physics.lattice import lattice_data, lattice_points
from livessb.physics.lattice_columns import (
    LatticeGeometry,
    lattice_column_derivatives,
    lattice_columns,
    lattice_columns_by_g,
)
from livessb.physics.thin_object import (
    BeamGrid,
    beam_grid,
    beam_terms,
    first_order_objects,
    probe_at_beams,
    thin_object_loss,
    thin_object_spectra,
)

K_ALPHA = 0.5  # 1/Å
STEP = 0.25  # Å: Nyquist 2/Å, above the BF band 2k_α (no aliases)
PERIOD = 2.0  # Å: 8 positions a period
PARAMS = {"C10": -40.0, "C12": 6.0, "phi12": 0.4}


def _geometry() -> LatticeGeometry:
    axis = np.linspace(-K_ALPHA, K_ALPHA, 15)
    kr, kc = np.meshgrid(axis, axis, indexing="ij")
    inside = np.hypot(kr, kc) <= K_ALPHA
    k = np.stack([kr[inside], kc[inside]], axis=1)
    return LatticeGeometry(k=k, wavelength=0.0251, k_alpha=K_ALPHA, edge_width=0.02)


def _case(seed: int = 0, strength: float = 0.35
          ) -> tuple[LatticeGeometry, np.ndarray, np.ndarray, BeamGrid, np.ndarray]:
    geo = _geometry()
    basis = np.array([[1 / PERIOD, 0.0], [0.25 / PERIOD, 1 / PERIOD]])  # skewed
    g = lattice_points(basis, K_ALPHA)
    grid = beam_grid(g, basis)
    rng = np.random.default_rng(seed)
    T = strength * (rng.normal(size=len(g) + 1) + 1j * rng.normal(size=len(g) + 1))
    T[0] = 3.0
    return geo, basis, g, grid, T


def _intensity(geo: LatticeGeometry, grid: BeamGrid, T: np.ndarray,
               params: dict[str, float], shape: tuple[int, int]) -> np.ndarray:
    """I(R, k) = |Σ_b T(b) P(k − b) e^{2πi b·R}|², position by position."""
    P, _ = probe_at_beams(beam_terms(geo, grid), params)
    rows = np.arange(shape[0]) * STEP
    cols = np.arange(shape[1]) * STEP
    R = np.stack(np.meshgrid(rows, cols, indexing="ij"), -1)  # (h, w, 2)
    phase = np.exp(2j * math.pi * R @ grid.beams.T)  # (h, w, n_b)
    wave = np.einsum("hwb,bk->hwk", phase * T, P)
    return np.abs(wave) ** 2


def _whole_periods(basis: np.ndarray) -> tuple[int, int]:
    # every g·L an integer for the window's sides L = 32·STEP = 8 Å (g_r = h/2 + k/8)
    assert np.allclose(np.round(basis * 8.0), basis * 8.0)
    return 32, 32


def test_spectra_are_the_intensity_position_by_position() -> None:
    geo, basis, g, grid, T = _case()
    I = _intensity(geo, grid, T, PARAMS, _whole_periods(basis))
    n = I.shape[0] * I.shape[1]
    rows = np.arange(I.shape[0]) * STEP
    cols = np.arange(I.shape[1]) * STEP
    R = np.stack(np.meshgrid(rows, cols, indexing="ij"), -1)
    direct = np.einsum("hwk,hwg->gk", I, np.exp(-2j * math.pi * R @ g.T)) / n
    c = thin_object_spectra(geo, grid, T, PARAMS)
    assert np.abs(c - direct).max() < 1e-9 * np.abs(direct).max()


def test_first_order_terms_are_the_lattice_models_columns() -> None:
    # One diffracted beam besides the zero beam: no second-order term, so the spectra are
    # exactly the lobes' columns times the objects T(g)T*(0), −T(0)T*(−g).
    geo, _, g, grid, T = _case()
    one = np.zeros_like(T)
    one[0], one[3] = T[0], T[3]
    A = lattice_columns(geo, g, PARAMS, ())[0]
    c = thin_object_spectra(geo, grid, one, PARAMS)
    x = first_order_objects(one, grid)
    model = (A * x[None, :]).reshape(len(geo.k), 2, len(g)).sum(axis=1).T
    assert np.abs(c - model).max() < 1e-12 * np.abs(model).max()
    assert np.abs(model).max() > 0


def test_the_strong_objects_second_order_terms_are_there() -> None:
    geo, _, g, grid, T = _case(strength=0.5)
    A = lattice_columns(geo, g, PARAMS, ())[0]
    first = (A * first_order_objects(T, grid)[None, :]).reshape(len(geo.k), 2, len(g))
    second = thin_object_spectra(geo, grid, T, PARAMS) - first.sum(axis=1).T
    assert np.abs(second).max() > 0.05 * np.abs(first).max()


def test_gradient_matches_central_differences() -> None:
    geo, _, g, grid, T = _case(seed=1)
    I = _intensity(geo, grid, T * 1.02, {**PARAMS, "C10": -38.0}, (24, 24))
    data = lattice_data(I, g, (STEP, STEP))
    out = thin_object_loss(data, geo, grid, T, PARAMS)
    h = 1e-6
    for b in (0, 2, 7):
        for unit, part in ((1.0, out.by_T[b].real), (1j, out.by_T[b].imag)):
            dT = np.zeros_like(T)
            dT[b] = unit * h
            fd = (thin_object_loss(data, geo, grid, T + dT, PARAMS).loss
                  - thin_object_loss(data, geo, grid, T - dT, PARAMS).loss) / (2 * h)
            assert part == pytest.approx(fd, rel=1e-5, abs=1e-9 * abs(out.loss))
    for i, name in enumerate(("C10", "C12", "phi12")):
        step = 1e-5
        up = thin_object_loss(data, geo, grid, T, {**PARAMS, name: PARAMS[name] + step}).loss
        down = thin_object_loss(data, geo, grid, T, {**PARAMS, name: PARAMS[name] - step}).loss
        assert out.by_params[i] == pytest.approx((up - down) / (2 * step), rel=1e-5)


def test_at_the_truth_the_model_explains_every_bit_and_the_fit_returns_there() -> None:
    geo, basis, g, grid, T = _case(seed=2)
    I = _intensity(geo, grid, T, PARAMS, _whole_periods(basis))
    data = lattice_data(I, g, (STEP, STEP))
    at_truth = thin_object_loss(data, geo, grid, T, PARAMS)
    # all but the 4·10⁻⁷ that the soft aperture edge puts at (±2, 0)·b₁, just beyond the
    # lattice points' 2k_α
    assert at_truth.loss == pytest.approx(-data.energy, rel=1e-6)
    assert np.abs(at_truth.by_T).max() < 1e-8 * data.energy
    # From the first-order objects at C10 3 Å off, C12 1 Å off: the truth again.
    start = {**PARAMS, "C10": PARAMS["C10"] + 3.0, "C12": PARAMS["C12"] - 1.0}
    objects = first_order_objects(T * 1.05, grid)
    beams = start_beams(I, objects, len(g), np)
    box = {"C10": (-80.0, 0.0), "C12": (0.0, 20.0), "phi12": (-math.pi / 2, math.pi / 2)}
    fit = fit_thin_object(data, geo, grid, start, ["C10", "C12", "phi12"], beams, box, np)
    # measured 1.2·10⁻⁷ Å, 1.7·10⁻⁷ Å and 4.6·10⁻⁹ rad off (L-BFGS's stop, THIN_FTOL)
    assert fit.params["C10"] == pytest.approx(PARAMS["C10"], abs=1e-5)
    assert fit.params["C12"] == pytest.approx(PARAMS["C12"], abs=1e-5)
    assert fit.params["phi12"] == pytest.approx(PARAMS["phi12"], abs=1e-6)
    assert fit.loss == pytest.approx(at_truth.loss, rel=1e-12)


def test_the_stage_applies_to_thin_fits_only() -> None:
    assert thin_names(["C10", "C12", "phi12"]) == (["C10", "C12", "phi12"], None)
    names, why = thin_names(["C10", "C12", "phi12", "tilt_row_mrad", "depth"])
    assert names == [] and why is not None and "thick" in why
    names, why = thin_names(["C10", "C30"])
    assert names == [] and why is not None and "C30" in why


def test_the_crystal_line_says_which_model_the_fit_kept() -> None:
    from livessb.cli_text import crystal_mode_text

    base = {"model": "lattice", "basis_inv_A": [[0.256, 0.0], [0.0, 0.256]], "points": 120,
            "contrast": 4.4, "per_bin": {"params": {"C10": -47.07}},
            "first_order": {"C10": -49.46}}
    seen = crystal_mode_text({**base, "thin_object": {"params": {}, "statistic": 19.0,
                                                      "threshold": 10.83}})
    assert "thin object's every term (first order: C10 -49.46 Å)" in seen
    weak = crystal_mode_text({**base, "thin_object": {"reason": "…", "statistic": 1.7,
                                                      "threshold": 10.83}})
    assert "first order (second-order terms not seen: χ²₁ 1.7 < 10.83)" in weak
    thick = crystal_mode_text({**base, "thin_object": {"reason": "the thick model is kept"}})
    assert "first order (thick model kept)" in thick
    assert "thin" not in crystal_mode_text(base) and "first order" not in crystal_mode_text(base)
    assert "integrated" not in seen  # a record without pixel_samples: read at the centres
    integrating = crystal_mode_text({**base, "pixel_samples": 3, "thin_object": {}})
    assert "pixels integrated over 3x3 samples" in integrating and "points" in integrating


def _integrating(geo: LatticeGeometry, samples: int, theta: float = 0.3
                 ) -> tuple[LatticeGeometry, list[LatticeGeometry]]:
    """``geo`` whose pixels (one pitch = its edge width) integrate over samples² parts, and
    each part's point geometry (the part's centre, its edge as soft as the part)."""
    offsets = subpixel_offsets(geo.edge_width, samples, theta, False)
    parts = [replace(geo, k=geo.k + o, edge_width=geo.edge_width / samples) for o in offsets]
    return replace(geo, pixel_offsets=offsets), parts


def test_integrating_pixels_read_the_mean_of_their_parts_spectra() -> None:
    geo, _, _, grid, T = _case()
    wide = replace(geo, edge_width=1 / 7)  # a coarse detector: 3.5 px across the radius
    integrating, parts = _integrating(wide, 3)
    mean = sum(thin_object_spectra(p, grid, T, PARAMS) for p in parts) / len(parts)
    c = thin_object_spectra(integrating, grid, T, PARAMS)
    assert np.abs(c - mean).max() < 1e-12 * np.abs(mean).max()
    # and it is not the centre's reading
    centre = thin_object_spectra(wide, grid, T, PARAMS)
    assert np.abs(c - centre).max() > 0.05 * np.abs(mean).max()


def test_integrating_gradient_matches_central_differences() -> None:
    geo, _, g, grid, T = _case(seed=3)
    integrating, parts = _integrating(replace(geo, edge_width=1 / 7), 2)
    I = sum(_intensity(p, grid, T * 1.03, {**PARAMS, "C10": -37.0}, (24, 24))
            for p in parts) / len(parts)
    data = lattice_data(I, g, (STEP, STEP))
    out = thin_object_loss(data, integrating, grid, T, PARAMS)
    h = 1e-6
    for b in (0, 4):
        dT = np.zeros_like(T)
        dT[b] = h
        fd = (thin_object_loss(data, integrating, grid, T + dT, PARAMS).loss
              - thin_object_loss(data, integrating, grid, T - dT, PARAMS).loss) / (2 * h)
        assert out.by_T[b].real == pytest.approx(fd, rel=1e-5, abs=1e-9 * abs(out.loss))
    step = 1e-5
    up = thin_object_loss(data, integrating, grid, T, {**PARAMS, "C10": -39.99999}).loss
    down = thin_object_loss(data, integrating, grid, T, {**PARAMS, "C10": -40.00001}).loss
    assert out.by_params[0] == pytest.approx((up - down) / (2 * step), rel=1e-5)


def test_an_integrating_detector_read_as_points_biases_c10_and_the_samples_remove_it() -> None:
    # Counts integrated over 8 × 8 parts of each pixel of a 7 px-radius detector; the thin
    # fit with the pixels' centres against the fit with lattice.pixel_samples' 4 × 4.
    geo, basis, g, grid, T = _case(seed=2)
    coarse = replace(geo, edge_width=K_ALPHA / 7)
    _, truth_parts = _integrating(coarse, 8, 0.0)
    I = sum(_intensity(p, grid, T, PARAMS, _whole_periods(basis))
            for p in truth_parts) / len(truth_parts)
    data = lattice_data(I, g, (STEP, STEP))
    box = {"C10": (-80.0, 0.0), "C12": (0.0, 20.0), "phi12": (-math.pi / 2, math.pi / 2)}
    beams = start_beams(I, first_order_objects(T, grid), len(g), np)
    names = ["C10", "C12", "phi12"]
    samples = pixel_samples("integrating", 7.0)
    assert samples == 4 and pixel_samples("points", 7.0) == 1
    model, _ = _integrating(coarse, samples, 0.0)
    off = {n: fit_thin_object(data, coarse, grid, PARAMS, names, beams, box, np).params[n]
           - PARAMS[n] for n in names}
    on = {n: fit_thin_object(data, model, grid, PARAMS, names, beams, box, np).params[n]
          - PARAMS[n] for n in names}
    # measured +0.70 Å read as points, +0.025 Å with the samples
    assert abs(off["C10"]) > 0.5
    assert abs(on["C10"]) < 0.05 and abs(on["C12"]) < 0.01


@pytest.mark.parametrize("pixels", ["discs", "single", "trotter"])
def test_integrating_pixels_lattice_columns_are_the_mean_of_their_parts(pixels: str) -> None:
    geo, _, g, _, _ = _case()
    integrating, parts = _integrating(replace(geo, edge_width=1 / 7), 3)
    names = ("C10", "C12")
    gam, grads, hess = lattice_column_derivatives(integrating, g, PARAMS, names, np, 2, pixels)
    each = [lattice_column_derivatives(p, g, PARAMS, names, np, 2, pixels) for p in parts]
    scale = np.abs(gam).max()
    assert np.abs(gam - sum(e[0] for e in each) / len(each)).max() < 1e-12 * scale
    for i, d in enumerate(grads):
        mean = sum(e[1][i] for e in each) / len(each)
        assert np.abs(d - mean).max() < 1e-12 * np.abs(mean).max()
    assert np.abs(hess[0] - sum(e[2][0] for e in each) / len(each)).max() \
        < 1e-12 * np.abs(hess[0]).max()
    if pixels == "discs":
        by_g = lattice_columns_by_g(integrating, g, PARAMS)
        each_g = [lattice_columns_by_g(p, g, PARAMS) for p in parts]
        assert by_g is not None and all(e is not None for e in each_g)
        mean = sum(e[1][0] for e in each_g if e is not None) / len(parts)
        assert np.abs(by_g[1][0] - mean).max() < 1e-12 * np.abs(mean).max()


def test_integrating_thin_objects_first_order_is_the_integrating_columns() -> None:
    geo, _, g, grid, T = _case()
    integrating, _ = _integrating(replace(geo, edge_width=1 / 7), 3)
    one = np.zeros_like(T)
    one[0], one[3] = T[0], T[3]
    A = lattice_columns(integrating, g, PARAMS, ())[0]
    c = thin_object_spectra(integrating, grid, one, PARAMS)
    model = (A * first_order_objects(one, grid)[None, :]).reshape(len(geo.k), 2, len(g))
    assert np.abs(c - model.sum(axis=1).T).max() < 1e-12 * np.abs(model).max()
