"""The misfit (sandwich) errors of fit.robust: per-frequency gradients, clusters, the
estimator on a linear model with coherent errors, and a noiseless simulation whose
model misfit the noise errors alone do not cover (against the simulator's truth)."""

from __future__ import annotations

import math

import numpy as np
import pytest

import livessb
from livessb.engine import make_engine
from livessb.fit.errors import covariance, misfit_errors, sandwich_covariance
from livessb.fit.fixed import FreeView
from livessb.fit.model import ThickSampleModel
from livessb.fit.robust import cluster_gradients, cluster_index, frequency_terms, misfit_meat
from livessb.fit.search import Box
from livessb.fit.systematic import band_sums
from livessb.params import JOINT, fit_names
from livessb.simulate import simulate_4dstem


def _thick_tilted() -> livessb.Dataset4D:
    ds, _ = simulate_4dstem(scan_shape=(20, 18), detector_shape=(32, 32), depth_A=80.0,
                            tilt_mrad=(3.0, -2.0), rotation_deg=10.0, dose=1e5,
                            aberrations={"C10": 20.0, "C12": 5.0, "phi12": 0.3})
    return ds


@pytest.mark.parametrize("fixed", [{}, {"depth": 60.0, "tilt_row_mrad": 2.0}])
@pytest.mark.parametrize("extra", [(), ("C30",)])
def test_frequency_gradients_sum_to_the_engine_gradient(fixed: dict[str, float],
                                                        extra: tuple[str, ...]) -> None:
    engine = make_engine(_thick_tilted(), "cpu")
    try:
        model = ThickSampleModel(engine, None, math.radians(10.0), False)
        names = fit_names(extra)
        view = FreeView(model, Box.from_mapping(None, tuple(n for n in names if n not in fixed)),
                        fixed)
        # Away from the optimum, so every component of the gradient is far from zero.
        params = {"C10": 25.0, "C12": 4.0, "phi12": 0.2, "tilt_row_mrad": 2.0,
                  "tilt_col_mrad": -1.0, "depth": 60.0, "C30": 5e3}
        free = {n: params[n] for n in view.free}
        terms = frequency_terms(view, free)
        per_nu = terms.per_nu
        loss, grad, _ = view.derivatives(np.array([[free[n] for n in view.free]]))
        assert per_nu.shape == (len(view.free), int(np.prod(model.spectra.shape[:1]))
                                * (model.spectra.shape[1] // 2 + 1))
        np.testing.assert_allclose(per_nu.sum(axis=1), grad[0], rtol=1e-9)
        explained = model.spectra.energy * (1.0 - loss[0])  # L = 1 − Σ w|N|²/D / E
        np.testing.assert_allclose(terms.explained.sum(), explained, rtol=1e-9)
        # the two frequency bands partition the frequencies: their sums are the whole
        sums = band_sums(terms, model.spectra.shape, (0.5, 0.5))
        np.testing.assert_allclose(sums.gradients.sum(axis=0), grad[0], rtol=1e-9)
        np.testing.assert_allclose(sums.explained.sum(), explained, rtol=1e-9)
        assert np.all(sums.entries > 0) and np.all(np.abs(sums.gradients) > 0)
        if "C10" in view.free:  # the C10 curvature sums to the Hessian's
            i = view.free.index("C10")
            np.testing.assert_allclose(terms.curvature.sum(), terms.hessian[i, i], rtol=1e-9)
        assert view.names == ((*JOINT, "C30") if extra else JOINT)
    finally:
        engine.close()


def test_kernel_frequency_gradients_equal_the_reference_per_frequency() -> None:
    """The Numba kernels' per-frequency gradients (what the errors use) against the NumPy
    reference path's, frequency by frequency, at a thick tilted point (every term live)."""
    engine = make_engine(_thick_tilted(), "cpu")
    try:
        model = ThickSampleModel(engine, None, math.radians(10.0), False)
        vector = np.array([25.0, 4.0, 0.2, 2.0, -1.0, 60.0])
        fast_terms = engine.misfit_terms(model.spectra, vector)
        fast, fast_hessian = fast_terms.per_nu, fast_terms.hessian
        sp = model.spectra
        ref_terms = engine.reference.misfit_terms(sp, sp.part.geometry, vector)
        ref, ref_hessian = ref_terms.per_nu, ref_terms.hessian
        for band in ("explained", "curvature"):
            a, b = getattr(fast_terms, band), getattr(ref_terms, band)
            np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12 * np.abs(b).max())
        # One call gives the errors their Hessian too: derivatives' own bits.
        np.testing.assert_array_equal(fast_hessian, engine.derivatives(sp, vector[None])[2][0])
        np.testing.assert_allclose(fast_hessian, ref_hessian, rtol=1e-9,
                                   atol=1e-12 * np.abs(ref_hessian).max())
        assert fast.shape == ref.shape == (6, sp.G.shape[1])
        scale = np.abs(ref).max(axis=1, keepdims=True)
        assert np.all(scale > 0)
        np.testing.assert_allclose(fast / scale, ref / scale, rtol=0, atol=1e-9)
        assert np.count_nonzero(np.abs(ref) > 1e-6 * scale) > sp.G.shape[1] // 4
    finally:
        engine.close()


@pytest.mark.parametrize("shape", [(6, 8), (7, 7)])
def test_plus_and_minus_nu_stored_twice_form_one_cluster(shape: tuple[int, int]) -> None:
    rows, cols = shape[0], shape[1] // 2 + 1
    index = cluster_index(shape).reshape(rows, cols)
    twice = [0] + ([cols - 1] if shape[1] % 2 == 0 else [])  # the weight-1 columns
    for j in range(cols):
        for i in range(rows):
            partner = (-i) % rows
            if j in twice:
                assert index[i, j] == index[partner, j]
            elif partner != i:
                assert index[i, j] != index[partner, j]
    n_clusters = len(np.unique(index))
    per_twice_column = len({min(i, (-i) % rows) for i in range(rows)})  # 0, ±1, ±2, …
    assert n_clusters == rows * (cols - len(twice)) + len(twice) * per_twice_column
    g = np.ones((2, rows * cols))
    clustered = cluster_gradients(g, shape)
    assert clustered.shape == (2, n_clusters)
    assert clustered.sum() == pytest.approx(g.sum())


@pytest.mark.parametrize("shape", [(16, 16), (15, 17), (32, 12), (9, 9)])
def test_cluster_sums_are_the_bincount_over_the_cluster_index_bit_for_bit(
        shape: tuple[int, int]) -> None:
    # The definition: a sum per cluster id in index order, the clusters with a gradient.
    rng = np.random.default_rng(sum(shape))
    M = shape[0] * (shape[1] // 2 + 1)
    g = rng.normal(size=(3, M)) * np.exp(rng.normal(scale=8.0, size=M))
    g[:, rng.random(M) < 0.3] = 0.0
    g[:, 0] = 0.0  # the dc's cluster carries nothing
    index = cluster_index(shape)
    sums = np.stack([np.bincount(index, weights=row, minlength=M) for row in g])
    want = sums[:, np.any(sums != 0.0, axis=0)]
    got = cluster_gradients(g, shape)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(misfit_meat(got), misfit_meat(want))


def test_sandwich_gives_the_scatter_of_a_fit_with_errors_coherent_within_clusters() -> None:
    # y_c = A_c θ + e_c over C clusters of n values; e_c = a common offset per cluster
    # (a misfit coherent within it) + white noise. L = Σ|y - Aθ|²/E, θ̂ least squares.
    rng = np.random.default_rng(3)
    n_clusters, n, energy = 120, 30, 7.0
    A = rng.normal(size=(n_clusters, n, 2)) + np.array([1.0, 0.0])
    A_flat = A.reshape(-1, 2)
    hessian = 2 * A_flat.T @ A_flat / energy
    estimates, sandwich, naive = [], [], []
    for _ in range(300):
        e = (rng.normal(scale=0.5, size=(n_clusters, 1))
             + rng.normal(scale=0.2, size=(n_clusters, n)))
        y = (A @ np.array([1.0, -2.0])) + e
        theta = np.linalg.lstsq(A_flat, y.ravel(), rcond=None)[0]
        r = y - A @ theta
        g = np.stack([-2 * A[c].T @ r[c] / energy for c in range(n_clusters)], axis=1)
        estimates.append(theta)
        sandwich.append(np.diag(sandwich_covariance(hessian, misfit_meat(g), np.ones(2))))
        s2 = float(np.sum(r**2)) / (r.size - 2)
        naive.append(np.diag(covariance(hessian, s2, energy, np.ones(2) * 1e6)))
    scatter = np.var(np.array(estimates), axis=0)
    np.testing.assert_allclose(np.mean(sandwich, axis=0), scatter, rtol=0.2)
    # White-noise errors: far too small where the regressor has a mean within a cluster
    # (the first parameter) and the offsets add up; right where it averages out.
    assert np.mean(naive, axis=0)[0] < scatter[0] / 3
    assert np.mean(naive, axis=0)[1] == pytest.approx(scatter[1], rel=0.2)


def test_misfit_errors_need_more_clusters_than_parameters() -> None:
    box = {"C10": (-500.0, 500.0), "C12": (0.0, 100.0)}
    assert misfit_errors(np.eye(2), ("C10", "C12"), misfit_meat(np.ones((2, 2))), box) == {}
    err = misfit_errors(np.eye(2), ("C10", "C12"), misfit_meat(np.ones((2, 5))), box)
    assert err["C10"] == pytest.approx(math.sqrt(5 * 5 / 3))


def test_noiseless_thin_simulation_misfit_errors_cover_what_noise_errors_miss() -> None:
    # Noiseless: the residual is model misfit only (scan-window leakage, the simulator's
    # bilinear detector, a 7.7 px BF radius), coherent over the BF pixels of each
    # frequency. Measured: C10 30.31 ± 0.35 (noise 0.053), C12 7.735 ± 0.25 (0.034).
    ds, truth = simulate_4dstem(scan_shape=(24, 24), detector_shape=(32, 32),
                                phase_peak_rad=0.05, seed=100,
                                aberrations={"C10": 30.0, "C12": 8.0, "phi12": 0.3})
    with livessb.Session(ds, device="cpu") as s:
        s.rotation_deg, s.transpose = truth.rotation_deg, truth.transpose
        fit = s.fit_region((0, 24, 0, 24), trials=100, seed=0,
                           box={"C10": (-150.0, 150.0), "C12": (0.0, 40.0)}).fit
    parts = fit.provenance["errors_components"]
    assert fit.provenance["model_choice"]["kept"] == "thin"
    assert parts["misfit_clusters"] > 100
    for name in ("C10", "C12", "phi12"):
        dev = fit.params[name] - truth.params[name]
        assert abs(dev) <= 2 * fit.errors[name], (name, dev, fit.errors[name])
        assert fit.errors[name] == pytest.approx(math.hypot(
            max(parts["noise"][name], parts["misfit"][name]), parts["systematic"][name]),
            rel=1e-12)
    for name in ("C10", "C12"):
        assert abs(fit.params[name] - truth.params[name]) > 4 * parts["noise"][name]


def test_a_fits_errors_reuse_newtons_hessian_at_its_optimum() -> None:
    """joint_fit hands the errors Newton's exact Hessian at the returned point (one
    derivatives call fewer per region or map tile): the same bits as a fresh call."""
    from livessb.fit.joint import joint_fit

    engine = make_engine(_thick_tilted(), "cpu")
    try:
        model = ThickSampleModel(engine, None, math.radians(10.0), False)
        box = Box.from_mapping(None, JOINT)
        view = FreeView(model, box)
        fit = joint_fit(view, 40, 3, box)
        assert fit.hessian is not None and fit.params["depth"] > 0
        _, _, fresh = view.derivatives(np.array([[fit.params[n] for n in JOINT]]))
        np.testing.assert_array_equal(fit.hessian, fresh[0])
    finally:
        engine.close()
