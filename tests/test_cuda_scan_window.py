"""CPU ↔ CUDA parity of ``scan_window="hann"`` (skipped without a CUDA GPU): the CUDA
staging multiplies the staged (mean-removed, zero-padded) counts by the scan-window Hann
and measures each bin's frequency with the apodised table, as the CPU engine does
(physics.apodisation): the same spectra, frequencies, losses, derivatives and fits, and
the session's reconstructions stay unapodised; "auto" reports what the CPU reports.

Each test writes what it measured to ``$LIVESSB_PARITY_LOG`` (JSON lines) when set.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import pytest

import cuda_helpers as ch
import livessb
from cuda_helpers import record
from cuda_skip import cp, pytestmark  # noqa: F401  (skips without a GPU)
from helpers import ABTEM_FIXTURES, abtem_fixture
from livessb.engine.cpu import CPUEngine
from livessb.engine.cuda import CUDAEngine

if TYPE_CHECKING:
    from livessb import Dataset4D

LOSS_RTOL = 1e-5  # as test_cuda_parity.py's: float32 spectra against float64


@pytest.fixture(scope="module")
def thick() -> Dataset4D:
    return ch.thick_slab()[0]


def test_the_gpu_stages_the_cpus_apodised_spectra_frequencies_and_losses(
        thick: Dataset4D) -> None:
    cpu = CPUEngine(thick, scan_window="hann")
    gpu = CUDAEngine(thick, scan_window="hann")
    try:
        for bounds in (None, (3, 29, 2, 30)):  # the region is padded (26 × 28 → 27 × 30)
            _, sc = ch.prepared(cpu, thick, bounds)
            rg, sg = ch.prepared(gpu, thick, bounds)
            plain = gpu.prepare(bounds, apodise=False)
            gpu.set_rotation(plain, rg.theta, rg.transpose)
            assert sc.apodised and sg.apodised and not plain.apodised
            Gc, Gg = np.asarray(sc.G), cp.asnumpy(sg.G)
            g_err = float(np.max(np.abs(Gg - Gc)) / np.max(np.abs(Gc)))
            g = sc.part.geometry
            nu_err = float(np.max(np.hypot(cp.asnumpy(sg.part.nu_r) - g.nu_r,
                                           cp.asnumpy(sg.part.nu_c) - g.nu_c)))
            bin_width = 1.0 / (sc.shape[0] * thick.scan_step_A[0])
            cand = ch.candidates(13)
            lc, lg = cpu.evaluate(sc, cand), gpu.evaluate(sg, cand)
            dc, dg = cpu.derivatives(sc, cand[:3]), gpu.derivatives(sg, cand[:3])
            record("scan_window_engine", bounds=str(bounds), G_max_rel=g_err,
                   nu_max_bins=nu_err / bin_width, energy_rel=sg.energy / sc.energy - 1,
                   loss_max_rel=float(np.max(np.abs(lg / lc - 1))))
            assert g_err < 1e-5  # float32 staging and FFT
            assert nu_err <= 1e-5 * bin_width
            assert sg.energy == pytest.approx(sc.energy, rel=1e-5)
            np.testing.assert_allclose(lg, lc, rtol=LOSS_RTOL)
            assert np.max(np.abs(gpu.evaluate(plain, cand) / lg - 1)) > 100 * LOSS_RTOL
            np.testing.assert_allclose(dg[0], dc[0], rtol=LOSS_RTOL)
            for k in range(3):
                assert np.linalg.norm(dg[1][k] - dc[1][k]) <= 1e-3 * np.linalg.norm(dc[1][k])
            gpu.release(plain)
    finally:
        cpu.close()
        gpu.close()


def test_a_hann_fit_on_cuda_equals_the_cpu_one_and_reconstructs_unapodised() -> None:
    ds = abtem_fixture("sto1_C10p80_noisefree")
    truth = float(np.load(ABTEM_FIXTURES / "sto1_C10p80_noisefree.npz")["truth_C10"])
    fits: dict[str, Any] = {}
    images: dict[str, Any] = {}
    for device, window in (("cpu", "hann"), ("cuda", "hann"), ("cuda", "none")):
        with livessb.Session(ds, device=device, scan_window=window) as s:
            if window == "hann":
                fits[device] = s.fit(trials=200, seed=1, progress=False)
            s.rotation_deg, s.transpose = 0.0, False
            images[f"{device}-{window}"] = s.reconstruct({"C10": 80.0, "C12": 5.0,
                                                         "phi12": 0.3}, upsample=1).phase
    a, b = fits["cpu"], fits["cuda"]
    phase = float(np.max(np.abs(images["cuda-hann"] - images["cuda-none"])))
    record("scan_window_fit", cpu_C10=a.params["C10"], cuda_C10=b.params["C10"],
           truth_C10=truth, d_C12=abs(b.params["C12"] - a.params["C12"]),
           err_C10_rel=b.errors["C10"] / a.errors["C10"] - 1, loss_rel=b.loss / a.loss - 1,
           phase_hann_vs_none=phase)
    assert b.provenance["scan_window"] == "hann"
    assert b.provenance["noise"]["design"] == pytest.approx(a.provenance["noise"]["design"])
    # As test_cuda_effective.py's effective-frequency fit (ΔC10 1e-6 Å measured there).
    assert abs(b.params["C10"] - a.params["C10"]) < 2e-4
    assert abs(b.params["C12"] - a.params["C12"]) < 3e-4
    assert b.errors["C10"] == pytest.approx(a.errors["C10"], rel=1e-3)
    assert phase == 0.0  # the session reconstructs from the unapodised spectra
    # The window check (the unapodised fit refined from the apodised one) as on the CPU.
    ca, cb = a.provenance["window_check"], b.provenance["window_check"]
    record("window_check", cpu_C10=ca["unapodised"]["C10"], cuda_C10=cb["unapodised"]["C10"],
           cpu_z=ca["z"]["C10"], cuda_z=cb["z"]["C10"])
    assert abs(cb["unapodised"]["C10"] - ca["unapodised"]["C10"]) < 2e-4
    assert cb["z"]["C10"] == pytest.approx(ca["z"]["C10"], rel=1e-3)
    assert cb["recommended"] == ca["recommended"] == "hann"


def test_an_auto_fit_on_cuda_reports_the_window_the_cpu_reports() -> None:
    ds = abtem_fixture("sto1_C10p80_noisefree")
    fits = {}
    for device in ("cpu", "cuda"):
        with livessb.Session(ds, device=device, scan_window="auto") as s:
            fits[device] = s.fit(trials=200, seed=1, progress=False)
    a, b = fits["cpu"], fits["cuda"]
    record("scan_window_auto", cpu_C10=a.params["C10"], cuda_C10=b.params["C10"],
           reported=b.provenance["window_check"]["reported"])
    assert b.provenance["scan_window"] == a.provenance["scan_window"] == "auto"
    assert b.provenance["window_check"]["reported"] == a.provenance["window_check"]["reported"]
    assert abs(b.params["C10"] - a.params["C10"]) < 2e-4
    assert b.errors["C10"] == pytest.approx(a.errors["C10"], rel=1e-3)


def test_an_auto_map_on_cuda_reports_the_cpus_window_per_tile() -> None:
    # (the tiles' window checks run inside the lockstep's turns on the GPU)
    from livessb.simulate import simulate_4dstem

    ds, _ = simulate_4dstem(scan_shape=(32, 32), detector_shape=(32, 32), scan_step_A=0.25,
                            aberrations={"C10": -60.0, "C12": 8.0, "phi12": 0.4}, dose=2e4,
                            seed=5)
    maps = {}
    for device in ("cpu", "cuda"):
        with livessb.Session(ds, device=device, scan_window="auto") as s:
            s.fit(trials=60, seed=1, progress=False)
            maps[device] = s.fit_map(tile=(16, 16), trials=100, seed=3, progress=False)
    a, b = maps["cpu"], maps["cuda"]
    tiles = list(zip([f for r in a.fits for f in r], [f for r in b.fits for f in r],
                     strict=True))
    worst = max(abs(fb.params["C10"] - fa.params["C10"]) for fa, fb in tiles)
    record("scan_window_auto_map", dC10_max=worst,
           reported=[fb.provenance["window_check"]["reported"] for _, fb in tiles])
    assert b.provenance["window_check"] == a.provenance["window_check"]
    for fa, fb in tiles:
        ca, cb = fa.provenance["window_check"], fb.provenance["window_check"]
        assert cb["reported"] == ca["reported"]
    assert worst < 1e-3
