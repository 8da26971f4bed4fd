"""CPU ↔ CUDA parity of crystal mode (fit.lattice; skipped without a CUDA GPU): the lattice
model's pure functions on CuPy give NumPy's loss, gradient, basis and Newton result, and a
session's region fit in crystal mode lands where the CPU session's does.

Each test writes what it measured to ``$LIVESSB_PARITY_LOG`` (JSON lines) when set.
"""

from __future__ import annotations

import numpy as np
import pytest

from cuda_helpers import record
from cuda_skip import cp, pytestmark  # noqa: F401  (skips without a GPU)
from livessb import Session
from livessb.fit.lattice_problem import (
    LatticeProblem,
    basis_loss_gradient,
    lattice_newton,
    refined_basis,
)
from livessb.physics.geometry import subpixel_offsets
from livessb.physics.lattice import lattice_points
from livessb.physics.lattice_columns import LatticeGeometry, lattice_columns_by_g
from livessb.physics.lattice_peaks import peak_basis
from livessb.simulate.demo import demo_dataset
from test_lattice_profiles import TRUTH, _model_counts, _rotated


def _problems(samples: int = 1) -> tuple[LatticeProblem, LatticeProblem, np.ndarray]:
    """The same window on both engines; ``samples`` per axis of each pixel (1: its centre)."""
    basis = _rotated(3.905, 0.3)
    case = _model_counts(basis, 20, 0.5, seed=4)
    counts = np.random.default_rng(4).poisson(case["I"]).astype(np.uint16)
    offsets = None if samples == 1 else subpixel_offsets(case["px"], samples, 0.3, False)
    out = []
    for xp in (np, cp):
        geo = LatticeGeometry(k=xp.asarray(case["k"]), wavelength=case["lam"],
                              k_alpha=case["k_alpha"], edge_width=case["px"],
                              pixel_offsets=None if offsets is None else xp.asarray(offsets))
        out.append(LatticeProblem(counts=xp.asarray(counts), geo=geo, step=(0.5, 0.5), xp=xp))
    return out[0], out[1], basis


@pytest.mark.parametrize("samples", [1, 2])  # pixels read at their centres; integrating
def test_the_gpu_computes_the_cpus_lattice_loss_gradient_and_fit(samples: int) -> None:
    cpu, gpu, basis = _problems(samples)
    first = [peak_basis(p.counts, p.step, p.xp) for p in (cpu, gpu)]
    assert np.abs(first[0] - first[1]).max() < 1e-9
    cpu, gpu = cpu.at_basis(basis), gpu.at_basis(basis)
    names = ("C10", "C12", "phi12")
    at = {**TRUTH, "C10": TRUTH["C10"] + 2}
    (lc, gc), (lg, gg) = cpu.gradient(at, names), gpu.gradient(at, names)
    hc, hg = (p.derivatives(at, names)[2] for p in (cpu, gpu))
    on_cpu = lattice_columns_by_g(cpu.geo, cpu._data().g, at, np)
    on_gpu = lattice_columns_by_g(gpu.geo, gpu._data().g, at, cp)
    assert on_cpu is not None and on_gpu is not None
    (Ac, dAc), (Ag, dAg) = on_cpu, on_gpu
    box = {"C10": (-200.0, 200.0), "C12": (0.0, 50.0), "phi12": (-np.pi / 2, np.pi / 2)}
    fc, fg = (lattice_newton(p, at, list(names), box) for p in (cpu, gpu))
    bc, bg = (refined_basis(p, first[0], TRUTH) for p in (cpu, gpu))
    indices = np.round(lattice_points(basis, cpu.geo.k_alpha) @ np.linalg.inv(basis))
    (_, dbc), (_, dbg) = (basis_loss_gradient(p, basis * 1.001, indices, at) for p in (cpu, gpu))
    record(f"lattice_functions samples {samples}", loss_rel=abs(lg / lc - 1),
           gradient_rel=float(np.abs(gg - gc).max() / np.abs(gc).max()),
           basis_gradient_rel=float(np.abs(dbg - dbc).max() / np.abs(dbc).max()),
           newton_c10_diff=abs(fg.params["C10"] - fc.params["C10"]),
           basis_diff=float(np.abs(bg - bc).max()),
           hessian_rel=float(np.abs(hg - hc).max() / np.abs(hc).max()),
           columns_by_g_rel=max(float(cp.abs(cp.asarray(c) - g).max() / cp.abs(g).max())
                                for c, g in zip([Ac, *dAc], [Ag, *dAg], strict=True)))
    assert abs(lg / lc - 1) < 1e-10  # both float64
    assert np.abs(gg - gc).max() < 1e-8 * np.abs(gc).max()
    assert np.abs(hg - hc).max() < 1e-8 * np.abs(hc).max()  # the exact Hessian
    for c, g in zip([Ac, *dAc], [Ag, *dAg], strict=True):  # the columns' g-derivatives
        assert float(cp.abs(cp.asarray(c) - g).max()) < 1e-10 * float(cp.abs(g).max())
    for n in names:
        assert fg.params[n] == pytest.approx(fc.params[n], abs=1e-6), n
    assert np.abs(dbg - dbc).max() < 1e-7 * np.abs(dbc).max()
    # L-BFGS on the smooth loss: both reach its minimum (on the CPU two starts 10⁻⁷ apart
    # reach the same basis within 2·10⁻¹⁴)
    assert np.abs(bg - bc).max() < 1e-6 * np.abs(bc).max()


def test_a_crystal_mode_region_fit_on_the_gpu_lands_where_the_cpus_does() -> None:
    ds = demo_dataset()
    bounds = (40, 56, 40, 56)
    fits = []
    for device in ("cpu", "cuda"):
        with Session(ds, device=device) as s:
            s.fit(trials=200, seed=1, progress=False)
            fits.append(s.fit_region(bounds, trials=200, seed=1, object_model="lattice").fit)
    cpu, gpu = fits
    record("lattice_region", c10_cpu=cpu.params["C10"], c10_gpu=gpu.params["C10"],
           error_cpu=cpu.errors["C10"], error_gpu=gpu.errors["C10"],
           seconds_gpu=gpu.lattice["seconds"], seconds_cpu=cpu.lattice["seconds"])
    assert gpu.lattice["model"] == cpu.lattice["model"] == "lattice"
    # the per-bin starts differ by the float32 spectra; the lattice fit is float64 on both
    assert abs(gpu.params["C10"] - cpu.params["C10"]) < 0.1 * cpu.errors["C10"]
    assert gpu.errors["C10"] == pytest.approx(cpu.errors["C10"], rel=0.05)


@pytest.mark.parametrize("samples", [1, 3])  # pixels read at their centres; integrating
def test_the_gpu_computes_the_cpus_thin_object_loss_and_fit(samples: int) -> None:
    from livessb.fit.thin_object import fit_thin_object, start_beams
    from livessb.physics.thin_object import beam_grid, thin_object_loss

    cpu, gpu, basis = _problems(samples)
    cpu, gpu = cpu.at_basis(basis), gpu.at_basis(basis)
    names = ["C10", "C12", "phi12"]
    at = {**TRUTH, "C10": TRUTH["C10"] + 2}
    box = {"C10": (-200.0, 200.0), "C12": (0.0, 50.0), "phi12": (-np.pi / 2, np.pi / 2)}
    grid = beam_grid(cpu._data().g, basis)
    out, fits = [], []
    for p in (cpu, gpu):
        T = start_beams(p.counts, p.solve(at).x, len(p._data().g), p.xp)
        out.append(thin_object_loss(p._data(), p.geo, grid, T, at, p.xp))
        fits.append(fit_thin_object(p._data(), p.geo, grid, at, names, T, box, p.xp))
    (c, g), (fc, fg) = out, fits
    by_T_rel = float(np.abs(c.by_T - g.by_T).max() / np.abs(c.by_T).max())
    record(f"thin_object samples {samples}", loss_rel=abs(g.loss / c.loss - 1), by_T_rel=by_T_rel,
           c10_diff=abs(fg.params["C10"] - fc.params["C10"]),
           iterations=[fc.iterations, fg.iterations])
    assert abs(g.loss / c.loss - 1) < 1e-10 and by_T_rel < 1e-8
    assert np.allclose(g.by_params, c.by_params, rtol=1e-8)
    # L-BFGS from the same start on losses equal to ~10⁻¹⁶ reaches the same minimum (on
    # the CPU the fit stops ~10⁻⁷ Å from it, tests/test_thin_object.py)
    for n in names:
        assert fg.params[n] == pytest.approx(fc.params[n], abs=1e-4), n
