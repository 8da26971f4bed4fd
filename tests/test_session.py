"""Session behaviour: regions, determinism, lifetime, bad input (CPU engine)."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest

import livessb
from livessb.params import from_vector
from livessb.session import FitRequiredError, RegionError, SessionClosedError
from livessb.simulate import simulate_4dstem

if TYPE_CHECKING:
    from livessb import Dataset4D
    from livessb.simulate import SimulationTruth


@pytest.fixture(scope="module")
def small() -> tuple[Dataset4D, SimulationTruth]:
    ds, truth = simulate_4dstem(scan_shape=(32, 32), detector_shape=(32, 32), dose=1e5, seed=5,
                                aberrations={"C10": 25.0, "C12": 6.0, "phi12": 0.2})
    return ds, truth


@pytest.fixture(scope="module")
def fitted(small: tuple[Dataset4D, SimulationTruth]) -> Iterator[livessb.Session]:
    s = livessb.Session(small[0], device="cpu")
    s.fit(progress=False, trials=60)
    yield s
    s.close()


def test_same_seed_gives_identical_records_and_hashes(
        small: tuple[Dataset4D, SimulationTruth]) -> None:
    runs = []
    for _ in range(2):
        with livessb.Session(small[0], device="cpu") as s:
            full = s.fit(trials=40, seed=7, progress=False)
            reg = s.fit_region((0, 31, 0, 32), trials=40, seed=7)
            runs.append((full, reg, s.reconstruct().phase_hash()))
    (f1, r1, h1), (f2, r2, h2) = runs
    assert f1.trials == f2.trials and f1.newton == f2.newton and f1.params == f2.params
    assert r1.fit.trials == r2.fit.trials and r1.params == r2.params
    assert h1 == h2 and r1.crop.phase_hash() == r2.crop.phase_hash()
    with livessb.Session(small[0], device="cpu") as s:
        other = s.fit(trials=40, seed=8, progress=False)
    assert other.trials != f1.trials


def test_odd_region_keeps_every_position_and_pads_with_mean(fitted: livessb.Session) -> None:
    engine = fitted.diagnostics.engine
    spectra = engine.prepare((0, 31, 0, 32))
    try:
        assert spectra.shape == (32, 32) and spectra.bounds == (0, 31, 0, 32)
        # The padded row holds the region's mean pattern: the spectra equal the FFT of that.
        window = np.asarray(fitted.diagnostics.bf_counts[0:31, 0:32], dtype=np.float64)
        padded = np.concatenate([window, window.mean(axis=(0, 1), keepdims=True)
                                 .repeat(32, axis=1)], axis=0)
        expected = np.fft.rfft2(padded, axes=(0, 1))
        np.testing.assert_allclose(spectra.G.reshape(-1, 32, 17),
                                   np.moveaxis(expected, 2, 0), rtol=1e-10, atol=1e-6)
    finally:
        engine.release(spectra)
    reg = fitted.fit_region((0, 31, 0, 32), trials=30)
    f = fitted.upsample_factor
    assert reg.crop.shape == (31 * f, 32 * f)
    assert len(reg.fit.trials) == 30


def test_regions_touching_the_scan_edge_work(fitted: livessb.Session) -> None:
    reg = fitted.fit_region((20, 32, 0, 12), trials=20, region_id="corner")
    assert reg.bounds == (20, 32, 0, 12) and np.isfinite(reg.phase).all()
    assert fitted.regions["corner"] is reg


@pytest.mark.parametrize(("bounds", "message"), [
    ((5, 5, 0, 10), "empty"), ((10, 4, 0, 10), "empty"), ((0, 33, 0, 10), "outside"),
    ((-1, 10, 0, 10), "outside"), ((0, 2, 0, 10), "too small"), ((0, 10, 0), "four integers"),
    ((0.5, 10, 0, 10), "four integers"),
])
def test_bad_regions_raise(
        fitted: livessb.Session, bounds: Any, message: str) -> None:  # bounds: malformed on purpose
    before = dict(fitted.regions)
    with pytest.raises(RegionError, match=message):
        fitted.fit_region(bounds)
    assert fitted.regions == before  # nothing computed is lost


def test_region_needs_full_field_rotation(small: tuple[Dataset4D, SimulationTruth]) -> None:
    with livessb.Session(small[0], device="cpu") as s, pytest.raises(FitRequiredError):
        s.fit_region((0, 16, 0, 16))


def test_editing_one_region_leaves_others_and_full_fit(fitted: livessb.Session) -> None:
    a = fitted.fit_region((0, 16, 0, 16), trials=20, region_id="a")
    assert fitted.full_fit is not None
    full = dict(fitted.full_fit.params)
    a_hash = a.crop.phase_hash()
    fitted.fit_region((10, 26, 10, 26), trials=20, region_id="b")
    fitted.fit_region((12, 28, 10, 26), trials=20, region_id="b")  # moved
    assert fitted.regions["a"].crop.phase_hash() == a_hash
    assert fitted.full_fit.params == full


def test_reconstruct_options_and_errors(fitted: livessb.Session) -> None:
    rec = fitted.reconstruct()
    assert rec.upsample == fitted.upsample_factor == 2  # 0.6 Å step, 20 mrad at 200 kV
    assert rec.shape == (64, 64) and rec.object.dtype == np.complex64
    native = fitted.reconstruct(upsample=1)
    wiener = fitted.reconstruct(upsample=1, method="wiener")
    assert native.shape == (32, 32) and np.isfinite(wiener.phase).all()
    assert np.corrcoef(native.phase.ravel(), wiener.phase.ravel())[0, 1] > 0.5
    assert fitted.full_fit is not None
    higher = fitted.reconstruct({**fitted.full_fit.params, "C30": 1e4, "C23": 50.0})
    assert higher.phase_hash() != rec.phase_hash()
    with pytest.raises(ValueError, match="unknown parameter"):
        fitted.reconstruct({"C10": 1.0, "defocus": 3.0})
    with pytest.raises(ValueError, match=r"\{'C10': nan\} are not finite"):
        fitted.reconstruct({"C10": float("nan"), "C12": 2.0})  # not a silent NaN image
    with pytest.raises(ValueError, match="upsample"):
        fitted.reconstruct(upsample=0)
    with pytest.raises(ValueError, match="method"):
        fitted.reconstruct(method="magic")


def test_reconstruct_crop_is_the_crop_of_the_full_reconstruction(
        fitted: livessb.Session) -> None:
    """``crop=`` cuts inside the engine (on a GPU only the crop crosses): the same object,
    origin and metadata as ``reconstruct(...).crop(bounds)``, for the fast path and the
    reference path (higher orders); bad bounds are refused as a region's are."""
    assert fitted.full_fit is not None
    for params, f in ((fitted.full_fit.params, "auto"), ({"C10": -30.0, "C30": 1e4}, 1)):
        full = fitted.reconstruct(params, upsample=f).crop((3, 20, 5, 31))
        part = fitted.reconstruct(params, upsample=f, crop=(3, 20, 5, 31))
        np.testing.assert_array_equal(part.object, full.object)
        assert part.object.flags.c_contiguous and part.origin_px == full.origin_px
        assert (part.upsample, part.sampling_A, part.params) == \
            (full.upsample, full.sampling_A, full.params)
    with pytest.raises(livessb.session.RegionError):
        fitted.reconstruct(crop=(3, 40, 5, 31))


def test_reconstruction_phase_matches_true_object(
        small: tuple[Dataset4D, SimulationTruth], fitted: livessb.Session) -> None:
    _, truth = small
    rec = fitted.reconstruct(truth.params, upsample=1)
    rows, cols = np.meshgrid(np.arange(32) * 0.6, np.arange(32) * 0.6, indexing="ij")
    true_phase = truth.phase(rows, cols)
    corr = np.corrcoef(rec.phase.ravel(), true_phase.ravel())[0, 1]
    assert corr > 0.8  # atoms where the simulator put them, with the right sign


def test_comparison_objectives_prefer_the_truth(
        small: tuple[Dataset4D, SimulationTruth], fitted: livessb.Session) -> None:
    _, truth = small
    model = fitted.diagnostics.full_model
    assert model is not None
    good = np.array([[truth.params[k] for k in livessb.params.JOINT]])
    bad = good + np.array([[120.0, 0, 0, 0, 0, 0]])
    for objective in ("vp", "coherence", "phase_variance"):
        lg, lb = model.evaluate(np.vstack([good, bad]), objective)
        assert lg < lb, objective
    assert from_vector(good[0])["C10"] == truth.params["C10"]


def test_close_breaks_cycle_releases_and_keeps_results(
        small: tuple[Dataset4D, SimulationTruth]) -> None:
    s = livessb.Session(small[0], device="cpu")
    fit = s.fit(trials=20, progress=False)
    rec = s.reconstruct()
    engine_ref, model_ref = weakref.ref(s.diagnostics.engine), weakref.ref(s.diagnostics.full_model)
    gc.disable()  # prove the cycle is broken explicitly, not by the collector
    try:
        s.close()
        assert engine_ref() is None and model_ref() is None
    finally:
        gc.enable()
    assert s.closed and s.last_close_s is not None
    assert np.isfinite(rec.phase).all() and fit.params["C10"] == fit.params["C10"]
    with pytest.raises(SessionClosedError, match="closed"):
        s.reconstruct()
    with pytest.raises(SessionClosedError):
        s.fit_region((0, 8, 0, 8))
    s.close()  # idempotent


def test_device_choices(small: tuple[Dataset4D, SimulationTruth]) -> None:
    from livessb.engine import DeviceUnavailableError, cuda_available

    with pytest.raises(ValueError, match="device"):
        livessb.Session(small[0], device="tpu")
    if not cuda_available():
        with pytest.raises(DeviceUnavailableError, match="device='cpu'"):
            livessb.Session(small[0], device="cuda")
        with livessb.Session(small[0], device="auto") as s:
            assert s.device == "cpu"
    with pytest.raises(TypeError, match="Dataset4D"):
        livessb.Session(np.zeros((4, 4, 8, 8)))  # type: ignore[arg-type]


def test_box_is_validated_and_edges_reported(small: tuple[Dataset4D, SimulationTruth]) -> None:
    with livessb.Session(small[0], device="cpu") as s:
        with pytest.raises(ValueError, match="unknown fit parameter"):
            s.fit(box={"C99": (0, 1)}, progress=False)
        fit = s.fit(trials=30, box={"C10": (60.0, 300.0)}, progress=False)  # truth ±25 Å
        assert "C10" in fit.on_box_edge
        # An asymmetric C10 box is not its own mirror: both branches run their search.
        assert fit.provenance["branches_searched"] == 2 and len(fit.trials) == 60
        assert all(b["derived"] is None for b in fit.branches)
    assert fit.study().best_value == pytest.approx(min(t["loss"] for t in fit.trials))


def test_optuna_sampler_option_is_seeded_and_recovers_truth(
        small: tuple[Dataset4D, SimulationTruth]) -> None:
    ds, truth = small
    with livessb.Session(ds, device="cpu") as s:
        a = s.fit(trials=80, seed=3, sampler="optuna", progress=False)
        b = s.fit(trials=80, seed=3, sampler="optuna", progress=False)
        with pytest.raises(ValueError, match="sampler"):
            s.fit(trials=10, sampler="grid", progress=False)
    assert a.trials == b.trials and a.provenance["sampler"] == "optuna"
    assert a.params["C10"] == pytest.approx(truth.params["C10"], abs=3.0)


def test_diagnostic_plots_from_a_fit(fitted: livessb.Session) -> None:
    import matplotlib

    matplotlib.use("Agg")
    figs = fitted.plot_diagnostics()
    assert len(figs) == 3 and all(len(f.axes) >= 1 for f in figs)
    assert fitted.full_fit is not None
    loss = fitted.loss_evaluator()(np.array([[fitted.full_fit.params[k]
                                              for k in livessb.params.JOINT]]))
    assert loss[0] == pytest.approx(fitted.full_fit.loss, rel=1e-9)


@pytest.mark.parametrize("objective", ["coherence", "phase_variance"])
def test_comparison_objectives_run_a_full_fit_without_newton(
        small: tuple[Dataset4D, SimulationTruth], objective: str) -> None:
    ds, _ = small
    with livessb.Session(ds, device="cpu") as s:
        fit = s.fit(trials=60, objective=objective, progress=False)
    assert fit.newton == [] and fit.provenance["objective"] == objective
    assert fit.loss == pytest.approx(min(t["loss"] for t in fit.trials
                                         if t["branch"] == [b["chosen"] for b in
                                                            fit.branches].index(True)))


def test_region_diagnostics_release_their_spectra(fitted: livessb.Session) -> None:
    import matplotlib

    matplotlib.use("Agg")
    reg = fitted.fit_region((0, 16, 0, 16), trials=20, region_id="diag")
    models_before = len(fitted.diagnostics.models)
    figs = fitted.plot_diagnostics(reg.fit)
    assert len(figs) == 3
    assert len(fitted.diagnostics.models) == models_before


def test_region_covering_the_whole_scan_releases_its_spectra(fitted: livessb.Session) -> None:
    """A region equal to the full field has spectra whose fields equal the full field's:
    releasing it must release that buffer (identity), not compare the arrays."""
    models_before = len(fitted.diagnostics.models)
    spectra_before = len(fitted.diagnostics.prepared_spectra)
    reg = fitted.fit_region((0, 32, 0, 32), trials=12, region_id="whole")
    assert np.isfinite(reg.fit.loss)
    assert len(fitted.diagnostics.models) == models_before
    assert len(fitted.diagnostics.prepared_spectra) == spectra_before
    diag = fitted.diagnostics
    assert diag.full_spectra in diag.prepared_spectra  # the full field's stays
