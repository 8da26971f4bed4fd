"""Crystal mode (physics.lattice, fit.lattice; docs/bias-matrix.md §14): the window's
kernel, the loss's exact gradient, the lattice found from the data, and fits of the
simulator's crystal against its truth."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import pytest

from livessb import Session
from livessb.cli_text import fit_lines
from livessb.fit import lattice as fit_lattice
from livessb.fit.lattice import check_object_model, first_lattice, lattice_problem
from livessb.fit.lattice_errors import noise_errors, pair_systematic, systematic_parts
from livessb.fit.lattice_problem import (
    LatticeProblem,
    basis_loss_gradient,
    lattice_newton,
    refined_basis,
)
from livessb.fit.progress import Cancelled
from livessb.physics.lattice import (
    lattice_points,
    lattice_solve,
    window_kernel,
    window_kernel_gradient,
)
from livessb.physics.lattice_columns import (
    LatticeGeometry,
    lattice_columns,
    lattice_columns_by_g,
)
from livessb.physics.lattice_peaks import LatticeNotFoundError, peak_basis
from livessb.simulate.demo import demo_dataset
from test_lattice_profiles import TRUTH, _case, _rotated


def test_the_window_kernel_is_the_sum_over_the_positions() -> None:
    rng = np.random.default_rng(0)
    shape, step = (7, 5), (0.5, 0.3)
    x = np.concatenate([rng.normal(0, 2, (40, 2)),
                        [[0, 0], [2.0, 0], [0, 1 / 0.3], [1 / 7, 1 / 1.5]]])  # bins, aliases
    r = [np.arange(n) * s for n, s in zip(shape, step, strict=True)]
    direct = (np.exp(2j * np.pi * x[:, 0, None] * r[0]).sum(1)
              * np.exp(2j * np.pi * x[:, 1, None] * r[1]).sum(1))
    assert np.abs(window_kernel(x, shape, step) - direct).max() < 1e-11 * 35


def _geometry(case: dict[str, Any]) -> LatticeGeometry:
    return LatticeGeometry(k=case["k"], wavelength=case["lam"], k_alpha=case["k_alpha"],
                           edge_width=case["px"])


def _model_counts(basis: np.ndarray, n: int, step_A: float, seed: int,
                  double_c10_shift: float = 0.0,
                  truth: dict[str, float] | None = None) -> dict[str, Any]:
    """Counts crystal mode's model makes on n × n positions: each lattice point g of a
    half plane carries its two lobes' terms (the "discs" columns) with random objects,
    and −g their conjugate (real counts); an undersampled scan aliases them. With
    ``double_c10_shift`` the pixels both discs cover see C10 shifted by it: data the
    model does not describe. ``truth``: the parameters (TRUTH's thin crystal if None)."""
    truth = TRUTH if truth is None else truth
    rng = np.random.default_rng(seed)
    empty = _case(np.zeros((n, n, 1)), step_A)
    g = lattice_points(basis, empty["k_alpha"])
    half = g[(g[:, 0] > 1e-12) | ((np.abs(g[:, 0]) <= 1e-12) & (g[:, 1] > 0))]
    geo = _geometry(empty)
    A = lattice_columns(geo, half, truth, ())[0]  # (B, 2 n_half)
    if double_c10_shift:  # the single-overlap terms at the truth, the rest at C10 shifted
        shifted = {**truth, "C10": truth["C10"] + double_c10_shift}
        A = (lattice_columns(geo, half, truth, (), pixels="single")[0]
             + lattice_columns(geo, half, shifted, ())[0]
             - lattice_columns(geo, half, shifted, (), pixels="single")[0])
    objects = rng.normal(size=A.shape[1]) + 1j * rng.normal(size=A.shape[1])
    c = (A * objects).reshape(len(A), 2, len(half)).sum(axis=1)  # (B, n_half)
    R = np.arange(n) * step_A
    phase = np.exp(2j * np.pi * (half[:, 0, None, None] * R[:, None]
                                 + half[:, 1, None, None] * R[None, :]))  # (n_g, n, n)
    return _case(100.0 + 2 * np.real(np.einsum("grc,bg->rcb", phase, c)), step_A)


def _problem(seed: int, double_c10_shift: float = 0.0,
             truth: dict[str, float] | None = None) -> LatticeProblem:
    case = _model_counts(_rotated(3.905, 0.3), 20, 0.5, seed, double_c10_shift, truth)
    geo = _geometry(case)
    noisy = np.random.default_rng(seed).poisson(case["I"]).astype(float)
    problem = LatticeProblem(counts=noisy, geo=geo, step=(0.5, 0.5), xp=np)
    return problem.at_basis(_rotated(3.905, 0.3))


@pytest.mark.parametrize("lobe", [None, 0, 1])
def test_the_gradient_is_the_losss_derivative(lobe: int | None) -> None:
    problem = _problem(1)
    if lobe is not None:
        problem = problem.lobe_of(lobe, {**TRUTH, "C10": TRUTH["C10"] - 1})
    names = ("C10", "C12", "phi12", "tilt_row_mrad", "depth")
    at = {**TRUTH, "C10": TRUTH["C10"] + 3, "tilt_row_mrad": 0.7, "tilt_col_mrad": -0.4,
          "depth": 20.0}
    _, grad = problem.gradient(at, names)
    for i, name in enumerate(names):
        h = 1e-4 * (1 if name != "phi12" else 0.01)
        fd = (problem.loss({**at, name: at[name] + h})
              - problem.loss({**at, name: at[name] - h})) / (2 * h)
        assert grad[i] == pytest.approx(fd, rel=2e-4, abs=1e-6 * abs(grad).max()), name


@pytest.mark.parametrize("variant", ["discs", "lobe", "single", "rings", "trotter", "C30"])
def test_the_hessian_is_the_gradients_derivative(variant: str) -> None:
    # The exact Hessian (lattice_hessian: the columns' second derivatives and the objects'
    # own derivatives) against central differences of the exact gradient, on every kind
    # of problem crystal mode solves: the joint one, a lobe's (the other held), the
    # single-overlap pixels, a ring's weighted rows, the per-bin model's pixel sets, and a
    # coefficient beyond the six (the general Γ's path).
    problem = _problem(1)
    names: tuple[str, ...] = ("C10", "C12", "phi12", "tilt_row_mrad", "depth")
    at = {**TRUTH, "C10": TRUTH["C10"] + 3, "tilt_row_mrad": 0.7, "tilt_col_mrad": -0.4,
          "depth": 20.0}
    if variant == "lobe":
        problem = problem.lobe_of(1, {**TRUTH, "C10": TRUTH["C10"] - 1})
    elif variant in ("single", "trotter"):
        problem = replace(problem, pixels=variant)
    elif variant == "rings":
        radius = np.hypot(problem.geo.k[:, 0:1], problem.geo.k[:, 1:2])
        problem = replace(problem, rows=(radius <= np.median(radius)).astype(float))
    elif variant == "C30":
        names, at = ("C10", "C30", "phi12", "depth"), {**at, "C30": 2e4}
    loss, grad, hess = problem.derivatives(at, names)
    assert (loss, list(grad)) == (problem.gradient(at, names)[0],
                                  list(problem.gradient(at, names)[1]))
    for i, name in enumerate(names):
        h = 1e-4 * {"phi12": 0.01, "C30": 100.0}.get(name, 1.0)
        fd = (problem.gradient({**at, name: at[name] + h}, names)[1]
              - problem.gradient({**at, name: at[name] - h}, names)[1]) / (2 * h)
        # measured: within 3·10⁻⁹ … 6·10⁻⁸ of the largest, the differences' own error
        assert np.abs(hess[i] - fd).max() <= 1e-6 * np.abs(fd).max(), (name, hess[i], fd)


@pytest.mark.parametrize("at", [dict(TRUTH), {**TRUTH, "C12": 30.0, "phi12": 0.7,
                                                 "tilt_row_mrad": 2.0, "tilt_col_mrad": -1.5,
                                                 "depth": 60.0}])
def test_the_columns_derivative_by_g_is_exact(at: dict[str, float]) -> None:
    # Each "discs" column's derivative by its own g (the aperture's soft edge, the phase
    # and the depth factor) against central differences of the columns, at points whose
    # discs cut the BF disc's edge.
    problem = _problem(2)
    g = problem._data().g + 1e-3  # off the lattice's symmetric points
    exact = lattice_columns_by_g(problem.geo, g, at)
    assert exact is not None
    A, dA = exact
    assert np.array_equal(A, lattice_columns(problem.geo, g, at, ())[0])
    for axis in (0, 1):
        shift = np.zeros(2)
        shift[axis] = 1e-7
        fd = (lattice_columns(problem.geo, g + shift, at, ())[0]
              - lattice_columns(problem.geo, g - shift, at, ())[0]) / 2e-7
        # measured: within 1.2·10⁻⁹ … 1.6·10⁻⁹ of the largest (the differences' own error)
        assert np.abs(dA[axis] - fd).max() < 3e-8 * np.abs(fd).max()
    assert lattice_columns_by_g(problem.geo, g, {**at, "C30": 1e4}) is None


def test_the_window_kernels_gradient_is_its_derivative() -> None:
    rng = np.random.default_rng(4)
    shape, step = (7, 5), (0.5, 0.3)
    x = rng.normal(0, 2, (30, 2))
    grad = window_kernel_gradient(x, shape, step)
    for axis in (0, 1):
        dx = np.zeros(2)
        dx[axis] = 1e-6
        fd = (window_kernel(x + dx, shape, step) - window_kernel(x - dx, shape, step)) / 2e-6
        assert np.abs(grad[:, axis] - fd).max() < 1e-6 * np.abs(fd).max()


def _loss_along_scale(problem: LatticeProblem, basis: np.ndarray, pixels: str,
                      rel: np.ndarray) -> np.ndarray:
    indices = np.round(lattice_points(basis, problem.geo.k_alpha) @ np.linalg.inv(basis))
    out = []
    for r in rel:
        at = problem.at_basis(basis * (1 + r), indices)
        A = lattice_columns(problem.geo, at._data().g, TRUTH, (), pixels=pixels)[0]
        out.append(lattice_solve(at._data(), A).loss)
    return np.array(out)


def test_the_loss_is_smooth_in_the_basis_and_its_gradient_exact() -> None:
    # "discs" (each lobe's term over its whole disc, to the aperture's soft edge): through
    # 41 scales within ±0.2 % the loss is convex (every second difference > 0) and a
    # quartic leaves 10⁻³ of its range (measured 7·10⁻⁵, the linear edge's kinks); the
    # per-bin model's single-overlap sets ("trotter") jump as BF pixels cross a hard disc
    # edge (measured 6 %, second differences of both signs: the steps that held
    # Nelder–Mead off).
    problem = _problem(6)
    basis = _rotated(3.905, 0.3)
    rel = np.linspace(-2e-3, 2e-3, 41)
    for pixels, smooth in (("discs", True), ("trotter", False)):
        L = _loss_along_scale(problem, basis, pixels, rel)
        misfit = np.std(L - np.polyval(np.polyfit(rel, L, 4), rel)) / np.ptp(L)
        assert (misfit < 1e-3 and np.diff(L, 2).min() > 0) == smooth, (pixels, misfit)
        assert smooth or misfit > 1e-2, (pixels, misfit)
    indices = np.round(lattice_points(basis, problem.geo.k_alpha) @ np.linalg.inv(basis))
    at = basis + np.array([[2e-4, -1e-4], [3e-4, 1e-4]])
    _, grad = basis_loss_gradient(problem, at, indices, TRUTH)
    for a, c in np.ndindex(2, 2):
        h = np.zeros((2, 2))
        h[a, c] = 1e-6
        fd = (problem.at_basis(at + h, indices).loss(TRUTH)
              - problem.at_basis(at - h, indices).loss(TRUTH)) / 2e-6
        assert grad[a, c] == pytest.approx(fd, rel=1e-5, abs=1e-7 * np.abs(grad).max())


def test_a_lobe_varies_its_columns_and_holds_the_others_at_the_joint_fit() -> None:
    whole = _problem(2)
    joint = dict(TRUTH)
    moved = {**TRUTH, "C10": TRUTH["C10"] + 5}
    halves = [whole.lobe_of(i, joint) for i in (0, 1)]
    varied = [np.asarray(h.varied) for h in halves]
    assert not np.any(varied[0] & varied[1]) and np.all(varied[0] | varied[1])
    for h in halves:  # at the joint fit a lobe's problem is the whole; elsewhere not
        assert h.loss(joint) == pytest.approx(whole.loss(joint), rel=1e-12)
        assert h.loss(moved) != pytest.approx(whole.loss(moved), rel=1e-6)


def test_on_data_it_describes_newton_finds_the_truth() -> None:
    # Counts the model makes (a turned lattice on an aliased 20² scan, 2.56 periods),
    # Poisson noise at ~100 counts: Newton from 4 Å and 2 Å off lands within its errors.
    problem = _problem(3)
    box = {"C10": (-200.0, 200.0), "C12": (0.0, 50.0), "phi12": (-np.pi / 2, np.pi / 2)}
    start = {**TRUTH, "C10": TRUTH["C10"] + 4, "C12": TRUTH["C12"] + 2}
    fit = lattice_newton(problem, start, list(box), box)
    for name, tol in (("C10", 0.3), ("C12", 0.2), ("phi12", 0.03)):
        assert abs(fit.params[name] - TRUTH[name]) < tol, (name, fit.params[name])


def test_on_data_it_describes_the_estimates_that_should_agree_do() -> None:
    # The two lobes, and the single-overlap pixels against every pixel: on counts the
    # model makes their estimates agree within their noise, so no systematic part is added
    # (the errors are the noise errors). Where the pixels both discs cover see another C10
    # (+3 Å), the single-overlap pixels' estimate parts from the joint fit's and C10's
    # systematic part covers the joint fit's deviation (measured: +0.72 Å off at noise
    # errors of ±0.25, the systematic part 0.55).
    box = {"C10": (-200.0, 200.0), "C12": (0.0, 50.0), "phi12": (-np.pi / 2, np.pi / 2)}
    for seed, shift in ((8, 0.0), (9, 0.0), (8, 3.0)):
        problem = _problem(seed, shift)
        fit = lattice_newton(problem, dict(TRUTH), list(box), box)
        noise, sigma2, _ = noise_errors(problem, fit, list(box), box)
        for name, (pair, nested) in systematic_parts(problem, fit.params).items():
            systematic, *_ = pair_systematic(pair, nested, fit, noise, list(box), box,
                                            sigma2)
            if shift and name == "pixel_sets":
                off = abs(fit.params["C10"] - TRUTH["C10"])
                assert off > 2 * noise["C10"], (off, noise)  # the noise errors miss it
                assert off < 2 * np.hypot(noise["C10"], systematic["C10"]), (off, systematic)
            else:
                assert all(v == 0 for v in systematic.values()), (seed, name, systematic)


@pytest.mark.parametrize(("angle_rad", "n", "step_A", "peaks_within"),
                         [(0.3, 24, 0.5, 0.01), (0.0, 16, 0.6, 0.08)])
def test_the_lattice_is_found_from_the_data(
        angle_rad: float, n: int, step_A: float, peaks_within: float) -> None:
    # The peaks' lattice is a first guess (on 16² of 0.6 Å steps, 2.46 aliased periods,
    # measured 5 % off); the loss refines it to the lattice.
    basis = _rotated(3.905, angle_rad)
    case = _model_counts(basis, n, step_A, seed=5)
    first = peak_basis(case["I"], (step_A, step_A))
    problem = LatticeProblem(counts=case["I"], step=(step_A, step_A), xp=np,
                             geo=_geometry(case))
    found = refined_basis(problem, first, TRUTH)
    for guess, within in ((first, peaks_within), (found, 1e-4)):
        hk = guess @ np.linalg.inv(basis)  # lattice vectors: integer in the true basis
        assert np.abs(hk - np.round(hk)).max() < within, hk
        assert abs(np.linalg.det(np.round(hk))) >= 1


def test_no_lattice_in_flat_counts_is_said() -> None:
    with pytest.raises(LatticeNotFoundError, match="peaks"):
        peak_basis(np.ones((8, 8, 5)), (0.5, 0.5))
    with pytest.raises(ValueError, match=r"object_model='crystal'.*lattice"):
        check_object_model("crystal")


def test_the_scans_first_lattice_is_read_once_per_scan(monkeypatch: pytest.MonkeyPatch
                                                       ) -> None:
    # Every crystal-mode fit starts from the scan's peaks (its central window): read once
    # per scan, kept in the engine's scan_memo with the reason where none is found, and
    # dropped with the counts.
    calls: list[int] = []
    real = fit_lattice.peak_basis

    def counted(*args: Any, **kwargs: Any) -> np.ndarray:
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(fit_lattice, "peak_basis", counted)
    ds, truth = demo_dataset(with_truth=True)
    with Session(ds, device="cpu") as s:
        problem = lattice_problem(s._engine, (40, 56, 40, 56), 0.0, False, "points")
        first = first_lattice(s._engine, problem)
        again = first_lattice(s._engine, problem)
        assert len(calls) == 1 and np.array_equal(first, again) and again is not first
        periods = sorted(1 / np.hypot(*b) for b in first)
        assert periods == pytest.approx([truth.lattice_A] * 2, rel=0.01), periods
        s.load_scan(ds)  # the next scan (the same counts here): read afresh
        assert np.array_equal(first_lattice(s._engine, problem), first) and len(calls) == 2

        def flat(*args: Any, **kwargs: Any) -> np.ndarray:
            calls.append(1)
            raise LatticeNotFoundError("the power spectrum has fewer than two peaks")

        monkeypatch.setattr(fit_lattice, "peak_basis", flat)
        s.load_scan(ds)
        for _ in range(2):
            with pytest.raises(LatticeNotFoundError, match="fewer than two peaks"):
                first_lattice(s._engine, problem)
        assert len(calls) == 3


def test_a_region_of_too_few_periods_keeps_the_per_bin_fit_and_says_to_draw_a_larger_one(
        ) -> None:
    # 8² positions of 0.6 Å: 1.2 periods of the demo's 3.905 Å lattice, where turned and
    # scaled lattices explain the spectra about as well (measured 1.7x); 16² (2.5 periods)
    # is fitted with the lattice (the test below).
    with Session(demo_dataset(), device="cpu") as s:
        s.fit(trials=50, seed=1, progress=False)
        fit = s.fit_region((0, 8, 0, 8), trials=50, seed=1, object_model="lattice").fit
        per_bin = s.fit_region((0, 8, 0, 8), trials=50, seed=1).fit
    assert fit.params == per_bin.params and fit.errors == per_bin.errors
    reason = fit.lattice["reason"]
    assert fit.lattice["model"] == "per_bin" and reason.startswith("no crystal lattice"), reason
    assert "the 8×8-position window spans 1.2 periods of the 3.9 Å lattice" in reason, reason
    assert "draw a larger region" in reason and reason.endswith("the per-bin fit is kept")


def test_crystal_mode_on_small_regions_of_the_simulators_crystal() -> None:
    # The demo (our simulator: 0.6 Å steps, aliased; detector turned 12°; C10 −82 … −18 Å
    # across the scan) at 5·10⁴ e⁻: three 16² regions (2.5 lattice periods) where the
    # per-bin model reads |C10| low by up to 2.5 Å.
    ds, truth = demo_dataset(with_truth=True)
    with Session(ds, device="cpu") as s:
        s.fit(trials=200, seed=1, progress=False)
        events: list[tuple[str, int, int]] = []
        for bounds in [(0, 16, 0, 16), (40, 56, 40, 56), (80, 96, 80, 96)]:
            fit = s.fit_region(bounds, trials=200, seed=1, object_model="lattice",
                               progress=lambda *e: events.append(e)).fit
            # its steps reported after the per-bin fit's (the terminal's bar, a callback)
            steps = [e for e in events if e[0] == "lattice"]
            assert steps == [("lattice", k, 5) for k in range(6)], events
            assert events.index(steps[0]) > max(i for i, e in enumerate(events)
                                                if e[0] in ("search", "newton"))
            events.clear()
            true = truth.local_params(bounds)
            assert fit.lattice["model"] == "lattice"
            assert fit.lattice["per_bin"]["params"]["C10"] != fit.params["C10"]
            dc10 = fit.params["C10"] - true["C10"]
            # measured +0.59 ± 0.48, +0.54 ± 0.45 (the weak crystal's second-order terms not
            # seen there: χ²₁ statistic 0.8, 1.7), +0.29 ± 0.39 (seen, 19.1: the first-order
            # fit +0.49); the per-bin fits +2.0 … +2.9
            thin = fit.lattice["thin_object"]
            seen = thin["statistic"] > thin["threshold"]
            assert ("reason" not in thin) == seen, thin
            assert (fit.params["C10"] == fit.lattice["first_order"]["C10"]) != seen
            assert abs(dc10) <= 2 * fit.errors["C10"], (bounds, dc10, fit.errors["C10"])
            assert abs(dc10) < 1.0, (bounds, dc10)
            summary = "\n".join(fit_lines("region", fit))  # what the CLI prints
            assert "crystal mode: lattice model, periods" in summary, summary

        def cancel(stage: str, done: int, total: int) -> None:
            if stage == "lattice" and done == 1:
                raise Cancelled

        kept = dict(s.regions)
        with pytest.raises(Cancelled):  # stopped within crystal mode's steps
            s.fit_region((20, 36, 20, 36), object_model="lattice", progress=cancel)
        assert s.regions == kept
