"""CPU ↔ CUDA parity of ``alias_pixels="excluded"`` (skipped without a CUDA GPU): the
alias module of the kernels (``cuda_kernels.module(alias=True)``, ``-DALIAS_PIXELS=1``)
leaves out the BF pixels an alias of an undersampled scan shares, as the CPU engine's
pair finder does (physics.aliases): the same pairs, energy, losses, derivatives, θ grid,
reconstructions and session fit; on a scan that samples the band nothing changes.

Each test writes what it measured to ``$LIVESSB_PARITY_LOG`` (JSON lines) when set.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np
import pytest

import cuda_helpers as ch
from cuda_helpers import record
from cuda_skip import cp, pytestmark  # noqa: F401  (skips without a GPU)
from livessb import Session
from livessb.engine.cpu import CPUEngine
from livessb.engine.cuda import CUDAEngine
from livessb.params import JOINT
from livessb.physics.aliases import alias_spacing, in_alias_support
from livessb.physics.geometry import trotter_support
from livessb.simulate import simulate_4dstem

if TYPE_CHECKING:
    from livessb import Dataset4D

# As test_cuda_parity.py's (the same float32 spectra and kernels, fewer pairs).
LOSS_RTOL = 1e-5
PARAM_RTOL = 1e-3
PHASE_ATOL = 2e-4
OBJECT_RTOL = 1e-4  # a reconstruction's complex object, of its largest value


@pytest.fixture(scope="module")
def thick() -> Dataset4D:
    return ch.thick_slab()[0]  # 0.6 Å steps at 200 kV, 20 mrad: one alias order per axis


def test_the_gpu_keeps_the_cpus_pairs_energy_losses_and_derivatives(thick: Dataset4D) -> None:
    cpu = CPUEngine(thick, alias_pixels="excluded")
    gpu = CUDAEngine(thick, alias_pixels="excluded")
    gpu_kept = CUDAEngine(thick)
    try:
        assert gpu._kgeo.aliased and not gpu_kept._kgeo.aliased
        for bounds in (None, (3, 29, 2, 30)):
            rc, sc = ch.prepared(cpu, thick, bounds)
            rg, sg = ch.prepared(gpu, thick, bounds)
            _, sk = ch.prepared(gpu_kept, thick, bounds)
            assert abs(rc.theta - rg.theta) < 1e-9 and rc.transpose == rg.transpose
            pairs_c = cpu.spectra_info(sc)["trotter_pairs"]
            pairs_g = gpu.spectra_info(sg)["trotter_pairs"]
            pairs_kept = gpu_kept.spectra_info(sk)["trotter_pairs"]
            cand = ch.candidates(13)
            lc, lg = cpu.evaluate(sc, cand), gpu.evaluate(sg, cand)
            dc, dg = cpu.derivatives(sc, cand[:3]), gpu.derivatives(sg, cand[:3])
            record("alias_engine", bounds=str(bounds), pairs_cpu=pairs_c, pairs_gpu=pairs_g,
                   pairs_kept=pairs_kept, energy_rel=sg.energy / sc.energy - 1,
                   loss_max_rel=float(np.max(np.abs(lg / lc - 1))))
            # The same pairs (float64 tests on both sides), fewer than every trotter pair.
            assert pairs_g == pairs_c and pairs_g < 0.8 * pairs_kept
            assert sg.energy == pytest.approx(sc.energy, rel=1e-5)
            np.testing.assert_allclose(lg, lc, rtol=LOSS_RTOL)
            lk = gpu_kept.evaluate(sk, cand)
            assert np.max(np.abs(lk / lg - 1)) > 100 * LOSS_RTOL  # the option does something
            np.testing.assert_allclose(dg[0], dc[0], rtol=LOSS_RTOL)
            for k in range(3):
                assert np.linalg.norm(dg[1][k] - dc[1][k]) <= 1e-3 * np.linalg.norm(dc[1][k])
                assert np.linalg.norm(dg[2][k] - dc[2][k]) <= 1e-3 * np.linalg.norm(dc[2][k])
            np.testing.assert_allclose(gpu.evaluate(sg, cand[:3]), dg[0], rtol=1e-6)
    finally:
        for e in (cpu, gpu, gpu_kept):
            e.close()


def test_the_exclusion_table_marks_the_pairs_an_alias_shares(thick: Dataset4D) -> None:
    # alias_exclusion's table (a bit per (bin, BF pixel), once per window and rotation):
    # on every trotter pair (float64, the CPU's test) set exactly where an alias shares the
    # pixel; clear elsewhere only within its 1e-3 k_α margin of a disc's edge.
    gpu = CUDAEngine(thick, alias_pixels="excluded")
    try:
        _, sg = ch.prepared(gpu, thick)
        g = sg.part.geometry
        words = cp.asnumpy(sg.part.alias_tables[g]).reshape(sg.part.M, -1)
        bits = np.unpackbits(words.view(np.uint8), axis=1, bitorder="little")[:, :sg.n_bf].T
        k = cp.asnumpy(g.k64)
        nu_r, nu_c = cp.asnumpy(sg.part.nu_r), cp.asnumpy(sg.part.nu_c)
        k_alpha = gpu.geo.k_alpha
        trotter = trotter_support(k, nu_r, nu_c, k_alpha)
        shared = in_alias_support(k, nu_r, nu_c, k_alpha,
                                  alias_spacing(gpu.geo.step, k_alpha, "excluded"))
        clear_off = int(np.count_nonzero(~trotter & (bits == 0)))
        record("alias_table", trotter_pairs=int(trotter.sum()), shared=int(shared[trotter].sum()),
               clear_outside_trotter=clear_off)
        assert shared[trotter].any() and not shared[trotter].all()
        np.testing.assert_array_equal(bits[trotter] == 1, shared[trotter])
        assert clear_off <= 0.01 * trotter.sum()
    finally:
        gpu.close()


def test_the_theta_grid_and_the_reconstructions_leave_out_the_same_pixels(
        thick: Dataset4D) -> None:
    cpu = CPUEngine(thick, alias_pixels="excluded")
    gpu = CUDAEngine(thick, alias_pixels="excluded")
    vec = np.array([[-40.0, 12.0, 0.4, 4.0, -3.0, 60.0]])
    params = dict(zip(JOINT, vec[0], strict=True))
    try:
        rot, sc = ch.prepared(cpu, thick)
        _, sg = ch.prepared(gpu, thick)
        grid = rot.theta + np.radians(np.linspace(-3, 3, 7))
        fused = gpu.evaluate_rotations(sg, grid, rot.transpose, vec)
        on_cpu = cpu.evaluate_rotations(sc, grid, rot.transpose, vec)
        assert fused[3] == pytest.approx(gpu.evaluate(sg, np.repeat(vec, 4, axis=0))[0],
                                         rel=1e-12)  # (the recurrent form, in a group)
        worst = {}
        for f in (1, 2):  # the scan's grid leaves them out, the finer grid keeps every pair
            a = gpu.reconstruct(sg, params, f, "ssb")
            b = cpu.reconstruct(sc, params, f, "ssb")
            worst[f] = float(np.abs(a - b).max() / np.abs(b).max())
        record("alias_rotations_reconstruct",
               rotations_max_rel=float(np.max(np.abs(fused / on_cpu - 1))),
               object_rel_f1=worst[1], object_rel_f2=worst[2])
        np.testing.assert_allclose(fused, on_cpu, rtol=LOSS_RTOL)
        assert max(worst.values()) < OBJECT_RTOL
    finally:
        cpu.close()
        gpu.close()


def test_a_session_fits_on_the_gpu_as_on_the_cpu_and_records_the_option(
        thick: Dataset4D) -> None:
    fits = {}
    for device in ("cpu", "cuda"):
        with Session(thick, device=device, alias_pixels="excluded") as s:
            fits[device] = (s.fit(trials=60, seed=5, progress=False), s.reconstruct().phase)
    (fc, pc), (fg, pg) = fits["cpu"], fits["cuda"]
    record("alias_session", dC10=fg.params["C10"] - fc.params["C10"],
           dloss_rel=fg.loss / fc.loss - 1)
    assert fg.provenance["alias_pixels"] == fc.provenance["alias_pixels"] == "excluded"
    assert fg.rotation_deg == pytest.approx(fc.rotation_deg, abs=1e-3)
    assert fg.loss == pytest.approx(fc.loss, rel=LOSS_RTOL)
    for key in JOINT:
        a, b = fg.params[key], fc.params[key]
        scale = {"phi12": math.pi, "tilt_row_mrad": 15, "tilt_col_mrad": 15}.get(key, 0)
        assert abs(a - b) <= PARAM_RTOL * max(abs(b), scale, 1.0), (key, a, b)
    for key in ("C10", "C12"):
        assert fg.errors[key] == pytest.approx(fc.errors[key], rel=1e-3)
    assert np.abs(np.angle(np.exp(1j * (pg - pc)))).max() < PHASE_ATOL


def test_a_scan_that_samples_the_band_runs_the_default_kernels_bit_for_bit() -> None:
    ds, _ = simulate_4dstem(scan_shape=(24, 24), detector_shape=(32, 32), scan_step_A=0.25,
                            aberrations={"C10": -30.0}, dose=2e4, seed=3)
    engines = [CUDAEngine(ds, alias_pixels=mode) for mode in ("kept", "excluded")]
    try:
        assert not any(e._kgeo.aliased for e in engines)
        cand = ch.candidates(5)
        losses = [e.evaluate(ch.prepared(e, ds)[1], cand) for e in engines]
        np.testing.assert_array_equal(losses[0], losses[1])
    finally:
        for e in engines:
            e.close()
